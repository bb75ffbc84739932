"""Pseudo-images: coloured LiDAR points rendered into a camera (FreeVS §3.1) and the viewpoint-translation
simulation used for training (§3.2).

1. Colour every LiDAR point with the pixel it falls on in the *same-frame* camera image; points outside the image
   are dropped. Points of labelled objects are stored in their box frame, the rest in the world frame.
2. To render camera pose P at frame t: background points of frames t−n … t+n (n = 2), object points of the same
   window placed with their box pose *at t* (moving objects stay sharp), projected with (K, P).
3. Occlusion: objects nearest-first, each z-buffered (the point closest to the camera wins a pixel), written only
   into free pixels, then the written pixels dilated by r px (r = 2) are marked occupied, so far points cannot leak
   through gaps between near object points; background last, into free pixels. Empty pixels stay black.
4. Viewpoint simulation: the point window is centred at t + k (k = ±3 frames here, ±4 LiDAR frames in the paper's
   code) while the camera is that of frame t — the sparsity and disocclusion holes of an unrecorded pose.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import ndimage

from .world import KIND_CAR, Camera, ToyDriveScene, camera_pose, check_pose


def check_intrinsics(K: np.ndarray) -> np.ndarray:
    K = np.asarray(K, dtype=np.float64)
    if K.shape != (3, 3) or not np.isfinite(K).all():
        raise ValueError(f"K must be a finite 3x3 intrinsics matrix, got shape {K.shape}")
    if K[0, 0] <= 0 or K[1, 1] <= 0:
        raise ValueError(f"K must have positive focal lengths, got fx={K[0, 0]}, fy={K[1, 1]}")
    return K


def project(points: np.ndarray, K: np.ndarray, pose: np.ndarray, height: int, width: int):
    """Pixel indices (row, col), distance to the camera centre, and the mask of points in front and inside."""
    pts = np.asarray(points, dtype=np.float64)
    if pts.ndim != 2 or pts.shape[1] != 3:
        raise ValueError(f"points must have shape (N, 3), got {pts.shape}")
    if not np.isfinite(pts).all():
        raise ValueError("points contain NaN or inf")
    K, pose = check_intrinsics(K), check_pose(pose)
    cam = (pts - pose[:3, 3]) @ pose[:3, :3]  # world → camera (OpenCV axes)
    z = cam[:, 2]
    front = z > 1e-6
    with np.errstate(divide="ignore", invalid="ignore"):
        u = K[0, 0] * cam[:, 0] / z + K[0, 2]
        v = K[1, 1] * cam[:, 1] / z + K[1, 2]
    col, row = (
        np.floor(np.where(front, u, -1)).astype(np.int64),
        np.floor(np.where(front, v, -1)).astype(np.int64),
    )
    inside = front & (col >= 0) & (col < width) & (row >= 0) & (row < height)
    return row, col, np.linalg.norm(cam, axis=1), inside


def zbuffer(row: np.ndarray, col: np.ndarray, dist: np.ndarray, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the nearest point per pixel (vectorised ``filter_duplicates``) and their flat pixel ids."""
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
    objects: list[tuple[np.ndarray, np.ndarray]] | None = None,
    occupancy_radius: int = 2,
) -> tuple[np.ndarray, np.ndarray]:
    """Render coloured points into a pseudo-image (H, W, 3) and its filled-pixel mask (H, W).

    ``points``/``colours``: background (world frame). ``objects``: a list of (points, colours) per object, already
    placed in the world; they are drawn nearest-first with the dilated-occupancy rule (radius
    ``occupancy_radius`` px; 0 = plain z-buffer among objects), then the background fills the free pixels.
    """
    if height < 1 or width < 1:
        raise ValueError(f"height and width must be >= 1, got {height}x{width}")
    if occupancy_radius < 0:
        raise ValueError(f"occupancy_radius must be >= 0, got {occupancy_radius}")
    n_obj = sum(len(np.asarray(p).reshape(-1, 3)) for p, _ in (objects or []))
    if len(np.asarray(points).reshape(-1, 3)) == 0 and n_obj == 0:
        raise ValueError("the point cloud is empty: points and objects hold no points to render")
    img = np.zeros((height * width, 3))
    filled = np.zeros(height * width, dtype=bool)
    occupied = np.zeros((height, width), dtype=bool)
    cam_pos = check_pose(pose)[:3, 3]
    groups = []
    for p, c in objects or []:
        p, c = np.asarray(p, dtype=np.float64).reshape(-1, 3), np.asarray(c, dtype=np.float64).reshape(-1, 3)
        if len(p):
            groups.append((np.min(np.linalg.norm(p[:, :2] - cam_pos[:2], axis=1)), p, c))
    groups.sort(key=lambda g: g[0])  # nearest object first (planar distance to the camera)
    struct = np.ones((2 * occupancy_radius + 1,) * 2, dtype=bool)
    for _, p, c in groups:
        row, col, dist, inside = project(p, K, pose, height, width)
        idx = np.flatnonzero(inside)
        keep, pix = zbuffer(row[idx], col[idx], dist[idx], width)
        free = ~occupied.reshape(-1)[pix]
        img[pix[free]] = c[idx[keep[free]]]
        filled[pix[free]] = True
        written = np.zeros(height * width, dtype=bool)
        written[pix[free]] = True
        w2 = written.reshape(height, width)
        occupied |= ndimage.binary_dilation(w2, structure=struct) if occupancy_radius > 0 else w2
    points = np.asarray(points, dtype=np.float64).reshape(-1, 3)
    colours = np.asarray(colours, dtype=np.float64).reshape(-1, 3)
    if len(points) != len(colours):
        raise ValueError(
            f"points and colours must have the same length, got {len(points)} and {len(colours)}"
        )
    if len(points):
        row, col, dist, inside = project(points, K, pose, height, width)
        idx = np.flatnonzero(inside)
        keep, pix = zbuffer(row[idx], col[idx], dist[idx], width)
        free = ~occupied.reshape(-1)[pix]
        img[pix[free]] = colours[idx[keep[free]]]
        filled[pix[free]] = True
    return img.reshape(height, width, 3), filled.reshape(height, width)


def colour_points(points: np.ndarray, image: np.ndarray, K: np.ndarray, pose: np.ndarray):
    """Colour of the same-frame camera pixel each point projects into, and which points the camera sees."""
    h, w = image.shape[:2]
    row, col, _, inside = project(points, K, pose, h, w)
    cols = np.zeros((len(points), 3))
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
    """Frames centre−n … centre+n, shifted inward at the sequence ends (as the official preprocessing)."""
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
) -> tuple[np.ndarray, np.ndarray]:
    """Pseudo-image of ``pose`` at frame ``t`` from the point window centred at ``centre`` (default t; t ± k for
    the viewpoint-translation simulation). Objects are placed with their box pose at t."""
    if not 0 <= t < log.n_frames:
        raise ValueError(f"t must be a frame index in [0, {log.n_frames}), got {t}")
    centre = t if centre is None else int(np.clip(centre, 0, log.n_frames - 1))
    frames = window(centre, n, log.n_frames)
    bg = np.concatenate([log.background[f] for f in frames]) if frames else np.zeros((0, 6))
    by_id = {b.id: b for b in scene.boxes if b.kind == KIND_CAR}
    objects = []
    for oid in sorted({i for f in frames for i in log.objects[f]}):
        pts = np.concatenate([log.objects[f][oid] for f in frames if oid in log.objects[f]])
        T = by_id[oid].pose_at(t)
        objects.append((pts[:, :3] @ T[:3, :3].T + T[:3, 3], pts[:, 3:]))
    return project_points(bg[:, :3], bg[:, 3:], cam.K, pose, cam.height, cam.width, objects, occupancy_radius)
