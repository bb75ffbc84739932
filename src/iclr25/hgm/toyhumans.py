"""ToyHumans: procedural clothed, textured capsule humans with ground-truth orbit renders (offline, seeded).

HGM trains on textured scans (THuman-family) rendered into 12 orbit views, with a fitted SMPL-X body as the
prior. Neither scans nor SMPL-X files are obtainable offline, so this module builds the documented fallback:

* a **capsule body model** (:class:`CapsuleBody`, 12 parts on a kinematic skeleton: torso ×2, neck, head, upper
  arms, forearms, thighs, shins) with pose/shape parameters (height, arm abduction, elbow bend, leg spread, knee
  bend, torso twist, girth). It implements the :class:`BodyModel` protocol — ``vertices(params) → (B, Nv, 3)`` —
  the same interface an SMPL-X or ``anny`` wrapper provides, so users can plug their own body model in.
* **clothing**: radial offsets (1–4 cm at the normalised scale) on the shirt and trouser regions, so the clothed
  surface differs from the naked body prior;
* **texture**: per-region colours, a striped shirt front and a plain, darker back; face skin at the front and
  hair at the back of the head (the back is only inferable through priors);
* **GT renders**: ~16k coloured surface points rasterised by a numpy z-buffer (2×2 supersampling) into orbit
  views, composited on white, with masks;
* the **body prior given to the model** is the *unclothed* body with noisy pose/shape (simulated HPS error).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from torch import Tensor

from .cameras import Camera, orbit_cameras, project_points

__all__ = ["BodyModel", "CapsuleBody", "ToyHumans", "make_toyhumans", "zbuffer_render"]

# Part table: (start joint, end joint, radius, depth factor, region); regions 0 skin, 1 shirt, 2 trousers, 3 head.
_JOINTS = [
    "pelvis", "belly", "neck_base", "neck_top", "head",
    "l_shoulder", "l_elbow", "l_wrist", "r_shoulder", "r_elbow", "r_wrist",
    "l_hip", "l_knee", "l_ankle", "r_hip", "r_knee", "r_ankle",
]  # fmt: skip
_J = {n: i for i, n in enumerate(_JOINTS)}
_PARTS = [
    ("pelvis", "belly", 0.15, 0.7, 2),
    ("belly", "neck_base", 0.16, 0.65, 1),
    ("neck_base", "neck_top", 0.055, 1.0, 0),
    ("head", "head", 0.11, 1.0, 3),
    ("l_shoulder", "l_elbow", 0.05, 1.0, 1),
    ("l_elbow", "l_wrist", 0.042, 1.0, 0),
    ("r_shoulder", "r_elbow", 0.05, 1.0, 1),
    ("r_elbow", "r_wrist", 0.042, 1.0, 0),
    ("l_hip", "l_knee", 0.075, 1.0, 2),
    ("l_knee", "l_ankle", 0.058, 1.0, 2),
    ("r_hip", "r_knee", 0.075, 1.0, 2),
    ("r_knee", "r_ankle", 0.058, 1.0, 2),
]
PARAM_NAMES = (
    "height",
    "l_arm",
    "r_arm",
    "l_elbow",
    "r_elbow",
    "l_leg",
    "r_leg",
    "l_knee",
    "r_knee",
    "twist",
    "girth",
)
_SCALE = 1.2 / 1.75  # a 1.75 m body spans 1.2 normalised units (fits the 49.1° view at radius 1.5)


class BodyModel(Protocol):
    """What HGM needs from a body model: a fixed vertex set (constant topology) posed by parameters."""

    num_vertices: int

    def vertices(self, params: Tensor) -> Tensor:  # (B, P) → (B, Nv, 3) in the normalised frame
        ...


def _joints(params: Tensor) -> Tensor:
    """Skeleton joints (B, 17, 3) for pose/shape parameters (B, 11) — see ``PARAM_NAMES`` (angles in radians)."""
    h, la, ra, le, re, ll, rl, lk, rk, tw, _ = params.unbind(-1)
    B = params.shape[0]
    z = torch.zeros_like(h)

    def v(x, y, zz=None):
        return torch.stack(
            [torch.as_tensor(x).expand_as(h), torch.as_tensor(y).expand_as(h), z if zz is None else zz], -1
        )

    J = [None] * len(_JOINTS)
    J[_J["pelvis"]] = v(0.0, 0.95)
    J[_J["belly"]] = v(0.0, 1.2)
    J[_J["neck_base"]] = v(0.0, 1.48)
    J[_J["neck_top"]] = v(0.0, 1.56)
    J[_J["head"]] = v(0.0, 1.66)
    for side, s, arm, elb in (("l", 1.0, la, le), ("r", -1.0, ra, re)):
        sh = v(s * 0.2, 1.44)
        d1 = torch.stack([s * torch.sin(arm), -torch.cos(arm), z], -1)
        el = sh + 0.29 * d1
        # Elbow bend rotates the forearm forward (+z) from the upper-arm direction.
        d2 = torch.stack(
            [s * torch.sin(arm) * torch.cos(elb), -torch.cos(arm) * torch.cos(elb), torch.sin(elb)], -1
        )
        J[_J[f"{side}_shoulder"]], J[_J[f"{side}_elbow"]], J[_J[f"{side}_wrist"]] = sh, el, el + 0.26 * d2
    for side, s, leg, knee in (("l", 1.0, ll, lk), ("r", -1.0, rl, rk)):
        hip = v(s * 0.095, 0.9)
        d1 = torch.stack([s * torch.sin(leg), -torch.cos(leg), z], -1)
        kn = hip + 0.43 * d1
        d2 = torch.stack(
            [s * torch.sin(leg) * torch.cos(knee), -torch.cos(leg) * torch.cos(knee), -torch.sin(knee)], -1
        )
        J[_J[f"{side}_hip"]], J[_J[f"{side}_knee"]], J[_J[f"{side}_ankle"]] = hip, kn, kn + 0.43 * d2
    J = torch.stack(J, 1)  # (B, 17, 3) metres, y up
    # Torso twist about the vertical axis through the pelvis, applied to the upper body.
    upper = torch.tensor(
        [
            n in ("belly", "neck_base", "neck_top", "head") or "shoulder" in n or "elbow" in n or "wrist" in n
            for n in _JOINTS
        ]
    )
    c, s_ = torch.cos(tw), torch.sin(tw)
    x, y, zz = J[..., 0], J[..., 1], J[..., 2]
    Jt = torch.stack([c[:, None] * x + s_[:, None] * zz, y, -s_[:, None] * x + c[:, None] * zz], -1)
    J = torch.where(upper.view(1, -1, 1), Jt, J)
    J = J - torch.tensor([0.0, 0.92, 0.0])  # centre the body vertically
    return J * (_SCALE * h).view(B, 1, 1)


def _surface(params: Tensor, part: Tensor, t: Tensor, theta: Tensor, offsets: Tensor | None = None):
    """Points and outward normals on the capsule surface at parameters (part, t, θ) — all (M,) — for each body.

    ``offsets`` (B, 4) adds a per-region radial clothing offset. Returns points (B, M, 3), normals (B, M, 3).
    """
    J = _joints(params)
    a_idx = torch.tensor([_J[p[0]] for p in _PARTS])[part]
    b_idx = torch.tensor([_J[p[1]] for p in _PARTS])[part]
    rad = torch.tensor([p[2] for p in _PARTS])[part] * _SCALE
    dfac = torch.tensor([p[3] for p in _PARTS])[part]
    region = torch.tensor([p[4] for p in _PARTS])[part]
    B = params.shape[0]
    h = params[:, 0:1]
    girth = params[:, 10:11]
    r = rad.unsqueeze(0) * h * girth  # (B, M)
    if offsets is not None:
        r = r + offsets[:, region] * _SCALE
    A, Bj = J[:, a_idx], J[:, b_idx]  # (B, M, 3)
    axis = Bj - A
    is_head = part == 3
    w = torch.nn.functional.normalize(
        torch.where(is_head.view(1, -1, 1), torch.tensor([0.0, 1.0, 0.0]).expand_as(axis), axis), dim=-1
    )
    zhat = torch.tensor([0.0, 0.0, 1.0]).expand_as(w)
    u = torch.nn.functional.normalize(torch.cross(w, zhat, dim=-1), dim=-1)
    vv = torch.cross(u, w, dim=-1)
    ct, st = torch.cos(theta), torch.sin(theta)
    # Cylinder (elliptic cross-section for the torso) for limbs; sphere (t = cos of polar angle) for the head.
    radial = ct.view(1, -1, 1) * u + (dfac * st).view(1, -1, 1) * vv
    normal_cyl = ct.view(1, -1, 1) * u + (st / dfac).view(1, -1, 1) * vv
    cyl = A + t.view(1, -1, 1) * axis + r.unsqueeze(-1) * radial
    yy = (2 * t - 1).view(1, -1, 1)
    ring = torch.sqrt((1 - yy**2).clamp_min(0))
    sph_dir = yy * w + ring * (ct.view(1, -1, 1) * u + st.view(1, -1, 1) * vv)
    sph = A + r.unsqueeze(-1) * sph_dir
    pts = torch.where(is_head.view(1, -1, 1), sph, cyl)
    nrm = torch.nn.functional.normalize(torch.where(is_head.view(1, -1, 1), sph_dir, normal_cyl), dim=-1)
    return pts, nrm, region.expand(B, -1)


def _part_weights() -> np.ndarray:
    w = np.array([p[2] * (1.0 if p[0] == p[1] else 3.0) for p in _PARTS])
    return w / w.sum()


def _sample_params(rng: np.random.Generator, n: int) -> np.ndarray:
    """Random pose/shape parameters (n, 11): arm abduction 10–60°, elbow 0–60°, legs 2–15°, knees 0–30°, twist ±30°."""
    d = np.deg2rad
    p = np.stack(
        [
            rng.uniform(0.92, 1.05, n), rng.uniform(d(10), d(60), n), rng.uniform(d(10), d(60), n),
            rng.uniform(0, d(60), n), rng.uniform(0, d(60), n), rng.uniform(d(2), d(15), n), rng.uniform(d(2), d(15), n),
            rng.uniform(0, d(30), n), rng.uniform(0, d(30), n), rng.uniform(-d(30), d(30), n), rng.uniform(0.85, 1.2, n),
        ],
        axis=1,
    )  # fmt: skip
    return p.astype(np.float32)


class CapsuleBody:
    """A :class:`BodyModel` with a fixed vertex set: ``t_steps × theta_steps`` vertices on each of the 12 parts."""

    def __init__(self, t_steps: int = 4, theta_steps: int = 6):
        for name, v in (("t_steps", t_steps), ("theta_steps", theta_steps)):
            if isinstance(v, bool) or not isinstance(v, int):
                raise ValueError(f"{name} must be an int; got {v!r}")
        if t_steps < 1 or theta_steps < 3:
            raise ValueError(f"t_steps must be ≥ 1 and theta_steps ≥ 3; got {t_steps}, {theta_steps}")
        tt = (torch.arange(t_steps) + 0.5) / t_steps
        th = torch.arange(theta_steps) * (2 * math.pi / theta_steps) + math.pi / theta_steps
        P, T, TH = torch.meshgrid(torch.arange(len(_PARTS), dtype=torch.float32), tt, th, indexing="ij")
        self.part, self.t, self.theta = P.reshape(-1).long(), T.reshape(-1), TH.reshape(-1)
        self.num_vertices = int(self.part.numel())
        self.num_params = len(PARAM_NAMES)

    def vertices(self, params: Tensor) -> Tensor:
        if params.dim() != 2 or params.shape[-1] != self.num_params:
            raise ValueError(
                f"params must have shape (B, {self.num_params}) ({', '.join(PARAM_NAMES)}); got {tuple(params.shape)}"
            )
        return _surface(params, self.part, self.t, self.theta)[0]


def _texture(
    region: np.ndarray, pts: np.ndarray, nrm: np.ndarray, pal: dict, rng_vals: np.ndarray
) -> np.ndarray:
    """Colours (M, 3): skin, striped shirt front / darker plain back, trousers, face front / hair back."""
    front = nrm[:, 2] > 0
    col = np.zeros((len(region), 3), dtype=np.float32)
    col[region == 0] = pal["skin"]
    stripes = (np.floor((pts[:, 1] + 1.0) * pal["freq"]) % 2 == 0)[:, None]
    shirt_front = np.where(stripes, pal["shirt"], pal["stripe"])
    shirt = np.where(front[:, None], shirt_front, pal["shirt"] * 0.6)
    col[region == 1] = shirt[region == 1]
    trousers = np.where(front[:, None], pal["trousers"], pal["trousers"] * 0.8)
    col[region == 2] = trousers[region == 2]
    head = np.where((nrm[:, 2] > -0.2)[:, None] & (nrm[:, 1] < 0.6)[:, None], pal["skin"], pal["hair"])
    col[region == 3] = head[region == 3]
    return np.clip(col + rng_vals, 0, 1)


def zbuffer_render(points: np.ndarray, colours: np.ndarray, camera: Camera, supersample: int = 2):
    """Rasterise coloured points (M, 3) into every view with a numpy z-buffer (nearest point per sub-pixel wins),
    then average ``supersample``² sub-pixels. Returns images (C, H, W, 3) on white and masks (C, H, W)."""
    if isinstance(supersample, bool) or not isinstance(supersample, int) or supersample < 1:
        raise ValueError(f"supersample must be a positive int; got {supersample!r}")
    points, colours = np.asarray(points), np.asarray(colours)
    if points.ndim != 2 or points.shape[1] != 3 or colours.ndim != 2 or len(colours) != len(points):
        raise ValueError(
            f"points must have shape (M, 3) and colours (M, channels); got {points.shape}, {colours.shape}"
        )
    H, W, s = camera.height, camera.width, supersample
    uv, z = project_points(torch.as_tensor(points, dtype=torch.float32), camera)
    uv, z = uv.numpy() * s, z.numpy()
    C = uv.shape[0]
    imgs, masks = np.ones((C, H * s, W * s, 3), np.float32), np.zeros((C, H * s, W * s), np.float32)
    for c in range(C):  # one vectorised scatter per view
        x, y = np.floor(uv[c, :, 0]).astype(int), np.floor(uv[c, :, 1]).astype(int)
        ok = (x >= 0) & (x < W * s) & (y >= 0) & (y < H * s) & (z[c] > 0)
        order = np.argsort(-z[c][ok], kind="stable")  # far → near: the nearest write wins
        xs, ys, cs = x[ok][order], y[ok][order], colours[ok][order]
        imgs[c, ys, xs] = cs
        masks[c, ys, xs] = 1.0
    imgs = imgs.reshape(C, H, s, W, s, 3).mean((2, 4))
    masks = masks.reshape(C, H, s, W, s).mean((2, 4))
    return imgs, masks


@dataclass
class ToyHumans:
    """Arrays for ``n`` subjects: ``images`` (n, V, H, W, 3) on white, ``masks`` (n, V, H, W), ``surface``
    (n, S, 3) clothed GT points, ``params`` (n, 11) true pose/shape, ``prior_params`` (n, 11) noisy (HPS-like)
    estimate, ``prior_vertices`` (n, Nv, 3) unclothed noisy body, ``camera`` the shared orbit rig."""

    images: Tensor
    masks: Tensor
    surface: Tensor
    params: Tensor
    prior_params: Tensor
    prior_vertices: Tensor
    camera: Camera

    def __len__(self) -> int:
        return int(self.images.shape[0])

    def subset(self, idx) -> ToyHumans:
        return ToyHumans(
            self.images[idx],
            self.masks[idx],
            self.surface[idx],
            self.params[idx],
            self.prior_params[idx],
            self.prior_vertices[idx],
            self.camera,
        )


def make_toyhumans(
    n: int,
    seed: int = 0,
    size: int = 32,
    num_views: int = 12,
    num_points: int = 16000,
    surface_points: int = 2000,
    pose_noise_deg: float = 7.0,
    shape_noise: float = 0.03,
    body: CapsuleBody | None = None,
    cache_dir: str | Path | None = None,
) -> ToyHumans:
    """Generate (or load from ``cache_dir``) ``n`` ToyHumans subjects with GT renders in ``num_views`` orbit views."""
    for name, v in (("n", n), ("size", size), ("num_points", num_points), ("surface_points", surface_points)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int; got {v!r}")
    if size < 8:
        raise ValueError(f"size must be ≥ 8 pixels; got {size}")
    if surface_points > num_points:
        raise ValueError(f"surface_points must be <= num_points = {num_points}; got {surface_points}")
    for name, v in (("pose_noise_deg", pose_noise_deg), ("shape_noise", shape_noise)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < float("inf"):
            raise ValueError(f"{name} must be a finite number >= 0; got {v!r}")
    body = body or CapsuleBody()
    cam = orbit_cameras(num_views, size, size)
    key = f"toyhumans_n{n}_s{seed}_{size}px_{num_views}v_{num_points}p_{pose_noise_deg}_{shape_noise}_{body.num_vertices}.npz"
    if cache_dir is not None and (Path(cache_dir) / key).exists():
        z = np.load(Path(cache_dir) / key, allow_pickle=False)
        return ToyHumans(
            *(
                torch.from_numpy(z[k])
                for k in ("images", "masks", "surface", "params", "prior_params", "prior_vertices")
            ),
            cam,
        )
    rng = np.random.default_rng(seed)
    params = _sample_params(rng, n)
    offsets = np.zeros((n, 4), np.float32)
    offsets[:, 1] = rng.uniform(0.01, 0.04, n)  # shirt
    offsets[:, 2] = rng.uniform(0.01, 0.04, n)  # trousers
    imgs, masks, surf = [], [], []
    w = _part_weights()
    for i in range(n):
        part = torch.from_numpy(rng.choice(len(_PARTS), num_points, p=w))
        t = torch.from_numpy(rng.uniform(0, 1, num_points).astype(np.float32))
        th = torch.from_numpy(rng.uniform(0, 2 * math.pi, num_points).astype(np.float32))
        pts, nrm, region = _surface(
            torch.from_numpy(params[i : i + 1]), part, t, th, torch.from_numpy(offsets[i : i + 1])
        )
        pts, nrm, region = pts[0].numpy(), nrm[0].numpy(), region[0].numpy()
        pal = {
            "skin": rng.uniform([0.55, 0.35, 0.25], [0.95, 0.75, 0.6]).astype(np.float32),
            "shirt": rng.uniform(0.1, 0.9, 3).astype(np.float32),
            "stripe": rng.uniform(0.1, 0.9, 3).astype(np.float32),
            "trousers": rng.uniform(0.05, 0.6, 3).astype(np.float32),
            "hair": rng.uniform(0.0, 0.3, 3).astype(np.float32),
            "freq": rng.uniform(4, 10),
        }
        col = _texture(region, pts, nrm, pal, rng.normal(0, 0.02, (num_points, 3)).astype(np.float32))
        im, mk = zbuffer_render(pts, col, cam)
        imgs.append(im)
        masks.append(mk)
        surf.append(pts[rng.choice(num_points, surface_points, replace=False)])
    noise = np.zeros_like(params)
    noise[:, 1:10] = rng.normal(0, np.deg2rad(pose_noise_deg), (n, 9))
    noise[:, [0, 10]] = rng.normal(0, shape_noise, (n, 2))
    prior = (params + noise).astype(np.float32)
    prior_v = body.vertices(torch.from_numpy(prior)).numpy()
    arrays = {
        "images": np.stack(imgs).astype(np.float32), "masks": np.stack(masks).astype(np.float32),
        "surface": np.stack(surf).astype(np.float32), "params": params, "prior_params": prior, "prior_vertices": prior_v,
    }  # fmt: skip
    if cache_dir is not None:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        tmp = Path(cache_dir) / (key + ".tmp.npz")
        np.savez_compressed(tmp, **arrays)
        tmp.replace(Path(cache_dir) / key)
    return ToyHumans(
        *(
            torch.from_numpy(arrays[k])
            for k in ("images", "masks", "surface", "params", "prior_params", "prior_vertices")
        ),
        cam,
    )
