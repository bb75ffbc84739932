"""ToyDrive data of the FreeVS-tiny reproduction: recorded training drives (GT images, pseudo-images with the point
window centred at t and at t ± k, detection-probe frames) and test drives re-rendered on laterally shifted
trajectories, built once per configuration and cached (npz, no pickle).

The functions read their settings from ``cfg``, a :class:`iclr25.freevs.config.Config` (or any dataclass with the
fields they name: the camera, the scenes and clips, the LiDAR, the pseudo-image window and the ``offsets``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from ..common.io import atomic_write_with
from .pseudo import pseudo_image, record_drive
from .world import Camera, ToyDriveScene, camera_pose

__all__ = ["build_data", "data_key", "load_data", "valid_centres"]


def data_key(cfg) -> str:
    """A short hash of the configuration fields the data depends on (the cache file's name)."""
    d = {
        k: v
        for k, v in asdict(cfg).items()
        if k
        in (
            "width",
            "height",
            "hfov_deg",
            "n_frames",
            "n_train_scenes",
            "n_test_scenes",
            "test_starts",
            "clip_len",
            "beams",
            "azimuths",
            "window_n",
            "occupancy_radius",
            "occupancy",
            "shift_k",
            "offsets",
        )
    }
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:12]


def build_data(cfg) -> dict[str, np.ndarray]:
    """Train arrays (scene, frame, H, W, 3) and test arrays (offset, clip, frame, H, W, …)."""
    cam = Camera(cfg.width, cfg.height, cfg.hfov_deg)
    tr_gt, tr_p0, tr_pp, tr_pm, probe_img, probe_c = [], [], [], [], [], []
    for s in range(cfg.n_train_scenes):
        scene = ToyDriveScene(1000 + s, cfg.n_frames)
        imgs, log = record_drive(scene, cam, cfg.beams, cfg.azimuths)
        p0, pp, pm = [], [], []
        for t in range(cfg.n_frames):
            pose = camera_pose(float(t), 0.0)
            kw = dict(n=cfg.window_n, occupancy_radius=cfg.occupancy_radius, occupancy=cfg.occupancy)
            p0.append(pseudo_image(log, scene, cam, pose, t, **kw)[0])
            pp.append(pseudo_image(log, scene, cam, pose, t, centre=t + cfg.shift_k, **kw)[0])
            pm.append(pseudo_image(log, scene, cam, pose, t, centre=t - cfg.shift_k, **kw)[0])
            if t % 2 == 0:
                _, _, ids = scene.render(cam, pose, t)
                probe_img.append(imgs[t])
                probe_c.append(scene.car_centres_2d(cam, pose, t, ids))
        tr_gt.append(imgs)
        tr_p0.append(np.stack(p0))
        tr_pp.append(np.stack(pp))
        tr_pm.append(np.stack(pm))
    te = {k: [] for k in ("gt", "pseudo", "filled", "ref")}
    te_centres: list[np.ndarray] = []
    drives = []
    for s in range(cfg.n_test_scenes):
        scene = ToyDriveScene(5000 + s, cfg.n_frames)
        drives.append((scene, *record_drive(scene, cam, cfg.beams, cfg.azimuths)))
    for dy in cfg.offsets:
        rows = {k: [] for k in te}
        for scene, rec, log in drives:
            for t0 in cfg.test_starts:
                g, p, f = [], [], []
                for t in range(t0, t0 + cfg.clip_len):
                    pose = camera_pose(float(t), dy)
                    img, _, ids = scene.render(cam, pose, t)
                    pim, fil = pseudo_image(
                        log,
                        scene,
                        cam,
                        pose,
                        t,
                        n=cfg.window_n,
                        occupancy_radius=cfg.occupancy_radius,
                        occupancy=cfg.occupancy,
                    )
                    g.append(img)
                    p.append(pim)
                    f.append(fil)
                    te_centres.append(scene.car_centres_2d(cam, pose, t, ids))
                rows["gt"].append(np.stack(g))
                rows["pseudo"].append(np.stack(p))
                rows["filled"].append(np.stack(f))
                rows["ref"].append(
                    rec[t0]
                )  # the reference is the recorded-trajectory frame at the clip start
        for k in te:
            te[k].append(np.stack(rows[k]))
    n_c = max(len(c) for c in probe_c + te_centres) if probe_c + te_centres else 0
    pad = lambda cs: np.stack([np.pad(c, ((0, n_c - len(c)), (0, 0)), constant_values=np.nan) for c in cs])  # noqa: E731
    return {
        "train_gt": np.stack(tr_gt).astype(np.float32),
        "train_p0": np.stack(tr_p0).astype(np.float32),
        "train_pp": np.stack(tr_pp).astype(np.float32),
        "train_pm": np.stack(tr_pm).astype(np.float32),
        "probe_img": np.stack(probe_img).astype(np.float32),
        "probe_centres": pad(probe_c),
        "test_gt": np.stack(te["gt"]).astype(np.float32),
        "test_pseudo": np.stack(te["pseudo"]).astype(np.float32),
        "test_filled": np.stack(te["filled"]),
        "test_ref": np.stack(te["ref"]).astype(np.float32),
        "test_centres": pad(te_centres).reshape(len(cfg.offsets), -1, cfg.clip_len, n_c, 2),
    }


def load_data(cfg, out: Path) -> dict[str, np.ndarray]:
    """Build the data once per configuration and cache it in the run folder (npz, no pickle)."""
    path = Path(out) / "cache" / f"toydrive_{data_key(cfg)}.npz"
    if path.exists():
        try:
            with np.load(path, allow_pickle=False) as z:
                return {k: z[k] for k in z.files}
        except (OSError, ValueError):
            path.unlink()
    data = build_data(cfg)
    atomic_write_with(path, lambda tmp: np.savez(open(tmp, "wb"), **data))
    return data


def valid_centres(arr: np.ndarray) -> np.ndarray:
    """The rows of a NaN-padded (n, 2) array of car centres that are not padding."""
    return arr[~np.isnan(arr).any(1)]
