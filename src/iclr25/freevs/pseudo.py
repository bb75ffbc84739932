"""Pseudo-images: coloured LiDAR points rendered into a camera (FreeVS §3.1) and the viewpoint-translation
simulation used for training (§3.2).

1. Colour every LiDAR point with the pixel it falls on in the *same-frame* camera image; points outside the image
   are dropped. Points of labelled objects are stored in their box frame, the rest in the world frame.
2. To render camera pose P at frame t: background points of frames t−n … t+n (n = 2), object points of the same
   window placed with their box pose *at t* (moving objects stay sharp), projected with (K, P).
3. Occlusion: objects nearest-first, each z-buffered (the point closest to the camera wins a pixel) and written
   only into free pixels; then every pixel the object projects onto — written or already occupied by a nearer
   object — is dilated by r px (a (2r + 1)² square, r = 2) and marked occupied, so far points cannot leak through
   gaps between near object points; background last, into free pixels. Empty pixels stay black. The paper does
   not spell out which pixels are dilated; ``occupancy="projected"`` (the default) is the released
   preprocessing's rule, ``occupancy="written"`` dilates only the pixels the object actually wrote.
4. Viewpoint simulation: the point window is centred at t + k (k = ±3 frames here, ±4 LiDAR frames in the paper's
   code) while the camera is that of frame t — the sparsity and disocclusion holes of an unrecorded pose.

Pixel convention (``rounding``): with the default ``"floor"`` pixel (row, col) covers the continuous image
coordinates [col, col + 1) × [row, row + 1), i.e. its centre is at (col + ½, row + ½) — the convention of
ToyDrive's camera (``pixel_rays`` casts through ``arange(W) + 0.5``). ``"round"`` is the released code's
``np.round`` (ties to even), the exact pixel lookup for a K with pixel centres at integer coordinates (OpenCV's
convention). The two differ only by a half-pixel shift of the principal point: ``"round"`` with K equals
``"floor"`` with (cx, cy) + ½ (away from exact ties). Use the one your K was calibrated in; with ToyDrive's K,
``"round"`` shifts every point by half a pixel against the ground-truth renderer. The paper does not state a
convention; the default stays ``"floor"`` because ToyDrive's K and renderer are defined in it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from .world import KIND_CAR, Camera, ToyDriveScene, camera_pose, check_pose

OCCUPANCY_RULES = ("projected", "written")
ROUNDINGS = ("floor", "round")


def check_intrinsics(K: np.ndarray) -> np.ndarray:
    """``ValueError`` unless ``K`` is a finite pinhole matrix [[fx, s, cx], [0, fy, cy], [0, 0, 1]] with
    fx, fy > 0. A skew s is supported exactly (u = (fx·x + s·y)/z + cx)."""
    K = np.asarray(K, dtype=np.float64)
    if K.shape != (3, 3) or not np.isfinite(K).all():
        raise ValueError(f"K must be a finite 3x3 intrinsics matrix, got shape {K.shape} {K.tolist()}")
    if K[1, 0] != 0 or K[2, 0] != 0 or K[2, 1] != 0:
        raise ValueError(
            "K must be upper triangular [[fx, s, cx], [0, fy, cy], [0, 0, 1]], got "
            f"K[1, 0]={K[1, 0]}, K[2, 0]={K[2, 0]}, K[2, 1]={K[2, 1]}"
        )
    if K[2, 2] != 1:
        raise ValueError(f"K[2, 2] must be 1 (divide K by K[2, 2] first), got {K[2, 2]}")
    if K[0, 0] <= 0 or K[1, 1] <= 0:
        raise ValueError(f"K must have positive focal lengths, got fx={K[0, 0]}, fy={K[1, 1]}")
    return K


def _check_size(name: str, n) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"{name} must be an int >= 1, got {n!r}")


def _check_choice(name: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def _check_cloud(points, colours, pname: str, cname: str) -> tuple[np.ndarray, np.ndarray]:
    """``points`` (N, 3) xyz and ``colours`` (N, 3) rgb as finite float arrays; empty inputs become (0, 3)."""
    p = np.asarray(points, dtype=np.float64)
    c = np.asarray(colours, dtype=np.float64)
    if p.size == 0 and c.size == 0:
        return np.zeros((0, 3)), np.zeros((0, 3))
    if p.ndim != 2 or p.shape[1] != 3:
        hint = (
            " (an (N, 4) xyz + intensity array? pass points[:, :3])"
            if p.ndim == 2 and p.shape[1] == 4
            else ""
        )
        raise ValueError(f"{pname} must have shape (N, 3) (xyz), got shape {p.shape}{hint}")
    if c.shape != (len(p), 3):
        raise ValueError(
            f"{cname} must have shape ({len(p)}, 3) (one RGB per point of {pname}), got shape {c.shape}"
        )
    if not np.isfinite(p).all():
        raise ValueError(f"{pname} contain NaN or inf")
    if not np.isfinite(c).all():
        raise ValueError(f"{cname} contain NaN or inf")
    return p, c


def project(
    points: np.ndarray, K: np.ndarray, pose: np.ndarray, height: int, width: int, rounding: str = "floor"
):
    """Pixel indices (row, col), distance to the camera centre, and the mask of points in front and inside.

    ``rounding="floor"``: pixel centres at (col + ½, row + ½) (the default, ToyDrive's convention);
    ``"round"``: pixel centres at integer coordinates, the released code's rounding (see the module docstring)."""
    _check_choice("rounding", rounding, ROUNDINGS)
    _check_size("height", height)
    _check_size("width", width)
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"points must have shape (N, 3), got {pts.shape}")
    if not np.isfinite(pts).all():
        raise ValueError("points contain NaN or inf")
    K, pose = check_intrinsics(K), check_pose(pose)
    cam = (pts - pose[:3, 3]) @ pose[:3, :3]  # world → camera (OpenCV axes)
    z = cam[:, 2]
    front = z > 1e-6
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        u = (K[0, 0] * cam[:, 0] + K[0, 1] * cam[:, 1]) / z + K[0, 2]
        v = K[1, 1] * cam[:, 1] / z + K[1, 2]
    to_pixel = np.floor if rounding == "floor" else np.round
    ok = front & np.isfinite(u) & np.isfinite(v)
    # clip before the integer cast so far-off-image coordinates cannot overflow int64
    col = to_pixel(np.clip(np.where(ok, u, -1.0), -2.0, width + 1.0)).astype(np.int64)
    row = to_pixel(np.clip(np.where(ok, v, -1.0), -2.0, height + 1.0)).astype(np.int64)
    inside = ok & (col >= 0) & (col < width) & (row >= 0) & (row < height)
    return row, col, np.linalg.norm(cam, axis=1), inside


def zbuffer(row: np.ndarray, col: np.ndarray, dist: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the nearest point per pixel (vectorised ``filter_duplicates``) and their flat pixel ids.

    ``row``, ``col`` (N,) int pixel indices with 0 <= col < width, ``dist`` (N,) finite distances."""
    _check_size("width", width)
    row, col, dist = np.asarray(row), np.asarray(col), np.asarray(dist, dtype=np.float64)
    if row.ndim != 1 or row.shape != col.shape or row.shape != dist.shape:
        raise ValueError(
            f"row, col and dist must be 1-D of one length, got {row.shape}, {col.shape}, {dist.shape}"
        )
    if row.size and (col.min() < 0 or col.max() >= width or row.min() < 0):
        raise ValueError(f"col must lie in [0, width={width}) and row be >= 0 (in-image pixels)")
    if not np.isfinite(dist).all():
        raise ValueError("dist must be finite (got NaN or inf)")
    pix = row * width + col
    order = np.lexsort((dist, pix))  # by pixel, then by distance
    first = np.ones(len(order), dtype=bool)
    first[1:] = pix[order][1:] != pix[order][:-1]
    keep = order[first]
    return keep, pix[keep]


def project_points(
    points: np.ndarray,
    colours: np.ndarray,
    K: np.ndarray,
    pose: np.ndarray,
    height: int,
    width: int,
    objects: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
    occupancy_radius: int = 2,
    occupancy: str = "projected",
    rounding: str = "floor",
) -> tuple[np.ndarray, np.ndarray]:
    """Render coloured points into a pseudo-image (H, W, 3) and its filled-pixel mask (H, W).

    ``points`` (N, 3) / ``colours`` (N, 3): background (world frame). ``objects``: a sequence of (points (M, 3),
    colours (M, 3)) per object, already placed in the world. Objects are drawn nearest-first (minimum planar
    distance of their points to the camera), each z-buffered and written into the still-free pixels; then a
    (2r + 1)² square around pixels of the object (r = ``occupancy_radius``; 0 = plain z-buffer among objects) is
    marked occupied — with ``occupancy="projected"`` (default, the released code) around every pixel the object
    projects onto, including pixels a nearer object already holds; with ``"written"`` only around the pixels it
    wrote. The background fills the free pixels last. ``rounding``: pixel convention of K (module docstring).
    """
    _check_choice("occupancy", occupancy, OCCUPANCY_RULES)
    _check_choice("rounding", rounding, ROUNDINGS)
    _check_size("height", height)
    _check_size("width", width)
    if isinstance(occupancy_radius, bool) or not isinstance(occupancy_radius, (int, np.integer)):
        raise ValueError(f"occupancy_radius must be an int >= 0, got {occupancy_radius!r}")
    if occupancy_radius < 0:
        raise ValueError(f"occupancy_radius must be >= 0, got {occupancy_radius}")
    K, cam_pos = check_intrinsics(K), check_pose(pose)[:3, 3]
    points, colours = _check_cloud(points, colours, "points", "colours")
    if objects is None:
        objects = []
    if isinstance(objects, np.ndarray) or not isinstance(objects, Sequence):
        raise ValueError(f"objects must be a list of (points, colours) pairs, got {type(objects).__name__}")
    groups = []
    for i, obj in enumerate(objects):
        if isinstance(obj, np.ndarray) or not isinstance(obj, Sequence) or len(obj) != 2:
            raise ValueError(
                f"objects[{i}] must be a (points (M, 3), colours (M, 3)) pair, got {type(obj).__name__}"
            )
        p, c = _check_cloud(obj[0], obj[1], f"objects[{i}] points", f"objects[{i}] colours")
        if len(p):
            groups.append((np.min(np.linalg.norm(p[:, :2] - cam_pos[:2], axis=1)), i, p, c))
    if len(points) == 0 and not groups:
        raise ValueError("the point cloud is empty: points and objects hold no points to render")
    groups.sort(key=lambda g: g[:2])  # nearest object first (planar distance to the camera), stable on ties
    img = np.zeros((height * width, 3))
    filled = np.zeros(height * width, dtype=bool)
    occupied = np.zeros((height, width), dtype=bool)
    struct = np.ones((2 * occupancy_radius + 1,) * 2, dtype=bool)
    for _, _, p, c in groups:
        row, col, dist, inside = project(p, K, pose, height, width, rounding)
        idx = np.flatnonzero(inside)
        keep, pix = zbuffer(row[idx], col[idx], dist[idx], width)  # one point per pixel the object hits
        free = ~occupied.reshape(-1)[pix]
        img[pix[free]] = c[idx[keep[free]]]
        filled[pix[free]] = True
        seeds = np.zeros(height * width, dtype=bool)
        seeds[pix if occupancy == "projected" else pix[free]] = True
        seeds = seeds.reshape(height, width)
        occupied |= ndimage.binary_dilation(seeds, structure=struct) if occupancy_radius > 0 else seeds
    if len(points):
        row, col, dist, inside = project(points, K, pose, height, width, rounding)
        idx = np.flatnonzero(inside)
        keep, pix = zbuffer(row[idx], col[idx], dist[idx], width)
        free = ~occupied.reshape(-1)[pix]
        img[pix[free]] = colours[idx[keep[free]]]
        filled[pix[free]] = True
    return img.reshape(height, width, 3), filled.reshape(height, width)


def colour_points(
    points: np.ndarray, image: np.ndarray, K: np.ndarray, pose: np.ndarray, rounding: str = "floor"
):
    """Colour of the same-frame camera pixel each point projects into, and which points the camera sees."""
    image = np.asarray(image)
    if image.ndim != 3 or image.shape[2] != 3 or min(image.shape[:2]) < 1:
        raise ValueError(f"image must have shape (H, W, 3), got shape {image.shape}")
    if not np.isfinite(image).all():
        raise ValueError("image must be finite (got NaN or inf)")
    h, w = image.shape[:2]
    row, col, _, inside = project(points, K, pose, h, w, rounding)
    cols = np.zeros((len(row), 3))
    cols[inside] = image[row[inside], col[inside]]
    return cols, inside


@dataclass
class LidarLog:
    """A drive's coloured LiDAR: background points per frame (world frame) and object points per frame and
    object (box frame), as the paper's preprocessing stores them."""

    background: list[np.ndarray] = field(default_factory=list)  # per frame (M, 6): xyz + rgb
    objects: list[dict[int, np.ndarray]] = field(
        default_factory=list
    )  # per frame: box id → (M, 6) in box frame

    @property
    def n_frames(self) -> int:
        return len(self.background)


def record_drive(scene: ToyDriveScene, cam: Camera, beams: int = 32, azimuths: int = 720, y: float = 0.0):
    """Drive the recorded trajectory: GT images, and the LiDAR sweeps coloured by the same-frame camera (only
    beams within the camera's horizontal field of view + 5° are cast; the others could not be coloured)."""
    _check_size("beams", beams)
    _check_size("azimuths", azimuths)
    images, log = [], LidarLog()
    K = cam.K
    for f in range(scene.n_frames):
        pose = camera_pose(float(f), y)
        img, _, _ = scene.render(cam, pose, f)
        pts, hid = scene.lidar(
            f, y=y, beams=beams, azimuths=azimuths, azimuth_range_deg=cam.hfov_deg / 2 + 5.0
        )
        cols, seen = colour_points(pts, img, K, pose)
        pts, hid, cols = pts[seen], hid[seen], cols[seen]
        car_ids = {b.id for b in scene.cars}
        is_obj = np.isin(hid, list(car_ids))
        log.background.append(np.concatenate([pts[~is_obj], cols[~is_obj]], 1))
        objs = {}
        for b in scene.cars:
            m = hid == b.id
            if m.any():
                T = b.pose_at(f)
                local = (pts[m] - T[:3, 3]) @ T[:3, :3]
                objs[b.id] = np.concatenate([local, cols[m]], 1)
        log.objects.append(objs)
        images.append(img)
    return np.stack(images), log


def window(centre: int, n: int, n_frames: int) -> range:
    """Frames centre−n … centre+n, shifted inward at the sequence ends to keep 2n + 1 frames (the released
    preprocessing also shifts inward but keeps fewer frames at the ends; see the method card)."""
    for name, v in (("centre", centre), ("n", n), ("n_frames", n_frames)):
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, np.integer))
            or v < (1 if name == "n_frames" else 0)
        ):
            raise ValueError(f"{name} must be an int >= {1 if name == 'n_frames' else 0}, got {v!r}")
    if centre >= n_frames:
        raise ValueError(f"centre must be a frame index < n_frames={n_frames}, got {centre}")
    lo = min(max(centre - n, 0), max(n_frames - 2 * n - 1, 0))
    return range(lo, min(lo + 2 * n + 1, n_frames))


def pseudo_image(
    log: LidarLog,
    scene: ToyDriveScene,
    cam: Camera,
    pose: np.ndarray,
    t: int,
    centre: int | None = None,
    n: int = 2,
    occupancy_radius: int = 2,
    occupancy: str = "projected",
    rounding: str = "floor",
) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-image of ``pose`` at frame ``t`` from the point window centred at ``centre`` (default t; t ± k for
    the viewpoint-translation simulation). Objects are placed with their box pose at t. ``occupancy_radius``,
    ``occupancy`` and ``rounding`` as in ``project_points``."""
    if isinstance(t, bool) or not isinstance(t, (int, np.integer)) or not 0 <= t < log.n_frames:
        raise ValueError(f"t must be an int frame index in [0, {log.n_frames}), got {t!r}")
    if centre is not None and (isinstance(centre, bool) or not isinstance(centre, (int, np.integer))):
        raise ValueError(f"centre must be None or an int frame index (clipped to the log), got {centre!r}")
    centre = t if centre is None else int(np.clip(centre, 0, log.n_frames - 1))
    frames = window(centre, n, log.n_frames)
    bg = np.concatenate([log.background[f] for f in frames]) if frames else np.zeros((0, 6))
    by_id = {b.id: b for b in scene.boxes if b.kind == KIND_CAR}
    objects = []
    for oid in sorted({i for f in frames for i in log.objects[f]}):
        pts = np.concatenate([log.objects[f][oid] for f in frames if oid in log.objects[f]])
        T = by_id[oid].pose_at(t)
        objects.append((pts[:, :3] @ T[:3, :3].T + T[:3, 3], pts[:, 3:]))
    return project_points(
        bg[:, :3],
        bg[:, 3:],
        cam.K,
        pose,
        cam.height,
        cam.width,
        objects,
        occupancy_radius,
        occupancy,
        rounding,
    )
