"""ToyDrive: a procedural street that can be rendered exactly from any camera pose.

A straight road along +x, lane markings, sidewalks, textured building blocks on both sides, parked and moving
cars (oriented boxes with a window band), poles, and a sky without geometry. Camera images and LiDAR sweeps are
produced by analytic ray casting (ray–plane and ray–box), so ground truth exists on trajectories the car never
drove — what the paper can only approximate with FID and detection proxies.

Conventions: world x forward along the road, y left, z up (metres). Cameras are pinhole with OpenCV axes
(x right, y down, z forward); poses are camera-to-world 4×4 rigid transforms. Images are float arrays in [0, 1].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..common.fields import bounded, check_fields

SUN = np.array([0.35, 0.45, 0.82]) / np.linalg.norm([0.35, 0.45, 0.82])
CAMERA_HEIGHT = 1.6
LIDAR_HEIGHT = 1.8
KIND_GROUND, KIND_BUILDING, KIND_CAR, KIND_POLE, KIND_SKY = 0, 1, 2, 3, -1


@dataclass(frozen=True)
class Camera:
    """Pinhole intrinsics of an image of ``width`` × ``height`` pixels with horizontal field of view ``hfov_deg``."""

    width: int = bounded(80, lo=2)  # pixels
    height: int = bounded(32, lo=2)
    hfov_deg: float = bounded(90.0, lo=1, hi=179, lo_open=True, hi_open=True)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above

    @property
    def K(self) -> np.ndarray:
        f = 0.5 * self.width / np.tan(np.deg2rad(self.hfov_deg) / 2)
        return np.array([[f, 0.0, self.width / 2], [0.0, f, self.height / 2], [0.0, 0.0, 1.0]])


def camera_pose(x: float, y: float, z: float = CAMERA_HEIGHT, yaw: float = 0.0) -> np.ndarray:
    """Camera-to-world pose of a forward-looking camera at (x, y, z) turned by ``yaw`` (radians, left positive)."""
    for name, v in (("x", x), ("y", y), ("z", z), ("yaw", yaw)):
        if (
            isinstance(v, bool)
            or not isinstance(v, (int, float, np.integer, np.floating))
            or not np.isfinite(v)
        ):
            raise ValueError(f"{name} must be a finite number, got {v!r}")
    c, s = np.cos(yaw), np.sin(yaw)
    fwd, left = np.array([c, s, 0.0]), np.array([-s, c, 0.0])
    R = np.stack(
        [-left, np.array([0.0, 0.0, -1.0]), fwd], axis=1
    )  # columns: camera x (right), y (down), z (fwd)
    T = np.eye(4)
    T[:3, :3], T[:3, 3] = R, (x, y, z)
    return T


def pixel_rays(cam: Camera, pose: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """World-space origins and unit directions through every pixel centre, row-major (H·W, 3)."""
    if not isinstance(cam, Camera):
        raise ValueError(f"cam must be an iclr25.freevs.Camera, got {type(cam).__name__}")
    pose = check_pose(pose)
    u, v = np.meshgrid(np.arange(cam.width) + 0.5, np.arange(cam.height) + 0.5)
    K = cam.K
    d_cam = np.stack([(u - K[0, 2]) / K[0, 0], (v - K[1, 2]) / K[1, 1], np.ones_like(u)], -1).reshape(-1, 3)
    d = d_cam @ pose[:3, :3].T
    d /= np.linalg.norm(d, axis=1, keepdims=True)
    return np.broadcast_to(pose[:3, 3], d.shape).copy(), d


@dataclass
class Box:
    """An oriented box: centre at frame 0, size (length along its x, width, height), yaw, colour, velocity."""

    id: int
    kind: int
    centre: np.ndarray
    size: np.ndarray
    colour: np.ndarray
    yaw: float = 0.0
    velocity: np.ndarray = field(default_factory=lambda: np.zeros(3))

    def centre_at(self, frame: float) -> np.ndarray:
        return self.centre + self.velocity * frame

    def pose_at(self, frame: float) -> np.ndarray:
        """Box-to-world 4×4 transform at ``frame``."""
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        T = np.eye(4)
        T[:3, :3] = [[c, -s, 0], [s, c, 0], [0, 0, 1]]
        T[:3, 3] = self.centre_at(frame)
        return T


def _hash01(*xs: np.ndarray) -> np.ndarray:
    """Deterministic pseudo-random texture values in [0, 1) from integer lattice coordinates."""
    h = np.zeros(np.broadcast(*xs).shape, dtype=np.uint64)
    for i, x in enumerate(xs):
        h ^= (np.asarray(x).astype(np.int64).astype(np.uint64) + np.uint64(0x9E3779B9 + i)) * np.uint64(
            0x85EBCA6B
        )
        h ^= h >> np.uint64(13)
    return (h % np.uint64(1009)).astype(np.float64) / 1009.0


class ToyDriveScene:
    """One seeded street scene of ``n_frames`` frames (the ego car drives 1 m per frame along y = 0)."""

    def __init__(self, seed: int, n_frames: int = 24, moving_cars: int = 3, parked_cars: int = 8):
        for name, v, lo in (("seed", seed, 0), ("n_frames", n_frames, 1), ("moving_cars", moving_cars, 0),
                            ("parked_cars", parked_cars, 0)):  # fmt: skip
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
                raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
        rng = np.random.default_rng([int(seed), 7])
        self.seed, self.n_frames = int(seed), int(n_frames)
        boxes: list[Box] = []
        x_end = n_frames + 45.0
        for side in (1, -1):  # building blocks on both sides
            x = -12.0
            while x < x_end:
                length = rng.uniform(6, 14)
                depth = rng.uniform(4, 7)
                y0 = rng.uniform(6.5, 8.5)
                h = rng.uniform(5, 15)
                col = rng.uniform(0.35, 0.85, 3)
                boxes.append(
                    Box(
                        len(boxes),
                        KIND_BUILDING,
                        np.array([x + length / 2, side * (y0 + depth / 2), h / 2]),
                        np.array([length, depth, h]),
                        col,
                    )
                )
                x += length + rng.uniform(0.0, 2.5)
        for _ in range(parked_cars):
            side = rng.choice([1, -1])
            col = rng.uniform(0.1, 1.0, 3)
            col[rng.integers(3)] = rng.uniform(0.7, 1.0)
            boxes.append(
                Box(
                    len(boxes),
                    KIND_CAR,
                    np.array([rng.uniform(3, x_end - 10), side * 4.6, 0.75]),
                    np.array([4.2, 1.8, 1.5]),
                    col,
                    yaw=rng.uniform(-0.08, 0.08),
                )
            )
        for _ in range(moving_cars):  # oncoming / same-direction traffic in the right lane (y = −3)
            col = rng.uniform(0.1, 1.0, 3)
            col[rng.integers(3)] = rng.uniform(0.7, 1.0)
            v = rng.choice([-1, 1]) * rng.uniform(0.3, 1.0)
            boxes.append(
                Box(
                    len(boxes),
                    KIND_CAR,
                    np.array([rng.uniform(5, x_end - 15), -3.0, 0.75]),
                    np.array([4.4, 1.9, 1.5]),
                    col,
                    velocity=np.array([v, 0.0, 0.0]),
                )
            )
        for x in np.arange(rng.uniform(0, 8), x_end, rng.uniform(9, 13)):
            for side in (1, -1):
                boxes.append(
                    Box(
                        len(boxes),
                        KIND_POLE,
                        np.array([x, side * 5.6, 2.5]),
                        np.array([0.25, 0.25, 5.0]),
                        np.array([0.25, 0.25, 0.28]),
                    )
                )
        self.boxes = boxes
        self.cars = [b for b in boxes if b.kind == KIND_CAR]

    # --- ray casting ------------------------------------------------------------------------------------------
    def _candidates(self, origins: np.ndarray, dirs: np.ndarray, frame: float, max_range: float) -> list[Box]:
        """Boxes that some ray can hit: a conservative bounding-sphere / ray-cone cull when all rays share one
        origin (cameras, a LiDAR sweep), else every box."""
        if len(origins) == 0 or not np.allclose(origins, origins[0]):
            return self.boxes
        o = origins[0]
        axis = dirs.mean(0)
        na = np.linalg.norm(axis)
        cos_half = -1.0 if na < 1e-6 else float(np.clip((dirs @ (axis / na)).min(), -1.0, 1.0))
        half = np.arccos(cos_half)
        out = []
        for b in self.boxes:
            v = b.centre_at(frame) - o
            dist = np.linalg.norm(v)
            r = 0.5 * np.linalg.norm(b.size)
            if dist - r > max_range:
                continue
            if dist > r and na >= 1e-6:
                ang = np.arccos(np.clip(v @ axis / (dist * na), -1.0, 1.0))
                if ang - np.arcsin(min(1.0, r / dist)) > half + 1e-9:
                    continue
            out.append(b)
        return out

    def cast(self, origins: np.ndarray, dirs: np.ndarray, frame: float, max_range: float = np.inf):
        """First hit of every ray: distance t (inf: none), box id (−1 ground, −2 none), normal, hit point."""
        n = len(origins)
        t_best = np.full(n, np.inf)
        hit_id = np.full(n, -2, dtype=np.int64)
        normal = np.zeros((n, 3))
        with np.errstate(divide="ignore", invalid="ignore"):
            tg = np.where(dirs[:, 2] < -1e-9, -origins[:, 2] / dirs[:, 2], np.inf)  # ground plane z = 0
        better = tg < t_best
        t_best[better], hit_id[better] = tg[better], -1
        normal[better] = (0.0, 0.0, 1.0)
        for b in self._candidates(
            origins, dirs, frame, max_range
        ):  # slab test in the box frame, vectorised rays
            T = b.pose_at(frame)
            R, c = T[:3, :3], T[:3, 3]
            o = (origins - c) @ R
            d = dirs @ R
            half = b.size / 2
            with np.errstate(divide="ignore", invalid="ignore"):
                inv = 1.0 / np.where(np.abs(d) < 1e-12, 1e-12, d)
                t1, t2 = (-half - o) * inv, (half - o) * inv
            tmin, tmax = np.minimum(t1, t2), np.maximum(t1, t2)
            axis = np.argmax(tmin, axis=1)
            tn = tmin[np.arange(n), axis]
            tf = tmax.min(1)
            ok = (tn <= tf) & (tn > 1e-6) & (tn < t_best)
            if not ok.any():
                continue
            t_best[ok], hit_id[ok] = tn[ok], b.id
            nl = np.zeros((ok.sum(), 3))
            nl[np.arange(ok.sum()), axis[ok]] = -np.sign(d[ok, axis[ok]])
            normal[ok] = nl @ R.T
        t_best[t_best > max_range] = np.inf
        hit_id[~np.isfinite(t_best)] = -2
        pts = origins + dirs * np.where(np.isfinite(t_best), t_best, 0.0)[:, None]
        return t_best, hit_id, normal, pts

    def shade(
        self, hit_id: np.ndarray, normal: np.ndarray, pts: np.ndarray, dirs: np.ndarray, frame: float
    ) -> np.ndarray:
        """Lambert-shaded procedural texture at each hit (sky gradient where nothing is hit)."""
        col = np.zeros((len(hit_id), 3))
        g = hit_id == -1
        if g.any():
            x, y = pts[g, 0], pts[g, 1]
            ay = np.abs(y)
            base = np.where(ay < 5.0, 0.33, np.where(ay < 6.5, 0.62, 0.0))[:, None] * np.ones(3)
            grass = ay >= 6.5
            base[grass] = (0.25, 0.5, 0.2)
            tile = (np.floor(x) + np.floor(y)) % 2 == 0
            base[(ay >= 5.0) & (ay < 6.5) & tile] *= 0.9
            noise = 0.06 * (_hash01(np.floor(x * 2), np.floor(y * 2)) - 0.5)
            base += noise[:, None]
            dash = (np.abs(np.abs(y) - 1.5) < 0.12) & ((x % 6.0) < 3.0)
            centre = np.abs(y) < 0.1
            base[dash | centre] = (0.92, 0.92, 0.85)
            col[g] = base
        for b in self.boxes:
            m = hit_id == b.id
            if not m.any():
                continue
            c = np.broadcast_to(b.colour, (m.sum(), 3)).copy()
            p = (pts[m] - b.centre_at(frame)) @ b.pose_at(frame)[:3, :3]  # box-local coordinates
            if b.kind == KIND_BUILDING:
                along = np.where(np.abs(normal[m, 1]) > 0.5, p[:, 0], p[:, 1])
                zz = p[:, 2] + b.size[2] / 2
                win = (
                    ((along % 2.0) > 0.6)
                    & ((along % 2.0) < 1.5)
                    & ((zz % 3.0) > 1.0)
                    & ((zz % 3.0) < 2.2)
                    & (zz > 1.0)
                )
                c[win] = c[win] * 0.35 + np.array([0.1, 0.15, 0.25])
                c *= 0.92 + 0.08 * _hash01(np.floor(along), np.floor(zz), b.id)[:, None]
            elif b.kind == KIND_CAR:
                band = p[:, 2] > b.size[2] * 0.2
                c[band] = (0.12, 0.14, 0.18)
            col[m] = c
        lam = np.clip(normal @ SUN, 0.0, 1.0)
        out = col * (0.5 + 0.5 * lam)[:, None]
        sky = hit_id == -2
        if sky.any():
            e = np.clip(dirs[sky, 2], 0, 1)[:, None]
            out[sky] = (1 - e) * np.array([0.78, 0.85, 0.95]) + e * np.array([0.45, 0.62, 0.9])
        return np.clip(out, 0.0, 1.0)

    def render(
        self, cam: Camera, pose: np.ndarray, frame: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Ground-truth image (H, W, 3), depth along rays (inf = sky) and box-id map (−1 ground, −2 sky)."""
        check_pose(pose)
        o, d = pixel_rays(cam, pose)
        t, hid, n, p = self.cast(o, d, frame)
        img = self.shade(hid, n, p, d, frame).reshape(cam.height, cam.width, 3)
        return img, t.reshape(cam.height, cam.width), hid.reshape(cam.height, cam.width)

    def lidar(
        self,
        frame: float,
        y: float = 0.0,
        beams: int = 32,
        azimuths: int = 720,
        max_range: float = 40.0,
        azimuth_range_deg: float = 180.0,
    ):
        """One sweep from the roof sensor (x = frame, y, 1.8 m): hit points (M, 3) and box ids (M,). ``azimuths``
        is the resolution over 360°; ``azimuth_range_deg`` < 180 casts only the beams within ±that angle of the
        driving direction (the rest would be dropped anyway when only a front camera colours the points)."""
        for name, v in (("beams", beams), ("azimuths", azimuths)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        for name, v in (("frame", frame), ("y", y)):
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float, np.integer, np.floating))
                or not np.isfinite(v)
            ):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if not max_range > 0:
            raise ValueError(f"max_range must be > 0 (metres), got {max_range!r}")
        if not 0 < azimuth_range_deg <= 180:
            raise ValueError(f"azimuth_range_deg must be in (0, 180], got {azimuth_range_deg!r}")
        el = np.deg2rad(np.linspace(-25.0, 8.0, beams))
        az = np.linspace(-np.pi, np.pi, azimuths, endpoint=False)
        az = az[np.abs(az) <= np.deg2rad(azimuth_range_deg)]
        E, A = np.meshgrid(el, az, indexing="ij")
        d = np.stack([np.cos(E) * np.cos(A), np.cos(E) * np.sin(A), np.sin(E)], -1).reshape(-1, 3)
        o = np.broadcast_to(np.array([float(frame), y, LIDAR_HEIGHT]), d.shape).copy()
        t, hid, _, p = self.cast(o, d, frame, max_range=max_range)
        keep = np.isfinite(t)
        return p[keep], hid[keep]

    def car_centres_2d(
        self, cam: Camera, pose: np.ndarray, frame: float, ids: np.ndarray, min_pixels: int = 4
    ):
        """Pixel centroids (u, v) of the cars visible in a rendered id map (the detection probe's ground truth)."""
        out = []
        for b in self.cars:
            m = ids == b.id
            if m.sum() >= min_pixels:
                v, u = np.nonzero(m)
                out.append((u.mean() + 0.5, v.mean() + 0.5))
        return np.asarray(out, dtype=np.float64).reshape(-1, 2)


def check_pose(pose: np.ndarray, name: str = "pose") -> np.ndarray:
    """``ValueError`` unless ``pose`` is a finite 4×4 rigid transform (orthonormal rotation, det +1)."""
    try:
        P = np.asarray(pose, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"{name} must be a finite 4x4 camera-to-world matrix, got {type(pose).__name__}"
        ) from None
    if P.shape != (4, 4) or not np.isfinite(P).all():
        raise ValueError(f"{name} must be a finite 4x4 camera-to-world matrix, got shape {P.shape}")
    R = P[:3, :3]
    if not np.allclose(R.T @ R, np.eye(3), atol=1e-5) or not np.isclose(np.linalg.det(R), 1.0, atol=1e-5):
        raise ValueError(
            f"{name} is not a rigid transform: its rotation block is not orthonormal with det +1"
        )
    if not np.allclose(P[3], (0, 0, 0, 1), atol=1e-9):
        raise ValueError(f"{name} must have last row (0, 0, 0, 1), got {P[3].tolist()}")
    return P
