"""Pinhole cameras with gsplat's conventions, orbit rigs and Plücker ray embeddings.

Conventions (identical to gsplat / nerfstudio's ``rasterization``):

* ``viewmats`` are **world-to-camera** 4×4 matrices in the OpenCV frame (x right, y down, z forward).
* ``Ks`` are 3×3 intrinsics in pixels; pixel ``(u, v)`` has its centre at ``(u + 0.5, v + 0.5)``.
* The world is y-up; an orbit camera at azimuth 0 sits on the +z axis looking at the origin (the body's
  front faces +z), azimuth 180° is the back view.

Plücker rays (HGM §3.1, inherited from LGM): every input pixel carries ``(o × d, d)`` with ``o`` the camera
centre and ``d`` the unit viewing direction, so the network knows each pixel's ray in world space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = [
    "Camera",
    "intrinsics_from_fov",
    "look_at",
    "orbit_cameras",
    "pixel_rays",
    "plucker_rays",
    "project_points",
    "unproject_pixels",
]


def _check_real(name: str, v, positive: bool = False) -> None:
    """A finite real number (not a bool or a string); ``positive`` also requires v > 0."""
    if (
        isinstance(v, bool)
        or not isinstance(v, (int, float))
        or not math.isfinite(v)
        or (positive and v <= 0)
    ):
        what = "a finite number > 0" if positive else "a finite number"
        raise ValueError(f"{name} must be {what}; got {v!r}")


def _check_pos_int(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise ValueError(f"{name} must be a positive int; got {v!r}")


def _check_camera(camera) -> None:
    if not isinstance(camera, Camera):
        raise ValueError(f"camera must be an iclr25.hgm.Camera; got {type(camera).__name__}")


def _check_finite(name: str, t: Tensor) -> None:
    if not torch.isfinite(t).all():
        raise ValueError(
            f"{name} must be finite; got a tensor containing NaN or inf (shape {tuple(t.shape)})"
        )


@dataclass(frozen=True)
class Camera:
    """A set of ``C`` pinhole cameras sharing one image size.

    ``viewmats``: (..., C, 4, 4) world-to-camera (OpenCV); ``Ks``: (..., C, 3, 3); ``width``/``height`` in pixels.
    A leading batch dimension is allowed (one rig per subject).
    """

    viewmats: Tensor
    Ks: Tensor
    width: int
    height: int

    def __post_init__(self) -> None:
        _check_pos_int("width", self.width)
        _check_pos_int("height", self.height)
        for name, t in (("viewmats", self.viewmats), ("Ks", self.Ks)):
            if not isinstance(t, Tensor):
                raise ValueError(f"{name} must be a torch.Tensor; got {type(t).__name__}")
        if self.viewmats.dim() < 3 or self.viewmats.shape[-2:] != (4, 4):
            raise ValueError(f"viewmats must have shape (..., C, 4, 4); got {tuple(self.viewmats.shape)}")
        if self.Ks.shape[:-2] != self.viewmats.shape[:-2] or self.Ks.shape[-2:] != (3, 3):
            raise ValueError(
                f"Ks must have shape {tuple(self.viewmats.shape[:-2]) + (3, 3)} to match viewmats; "
                f"got {tuple(self.Ks.shape)}"
            )
        _check_finite("viewmats", self.viewmats)
        _check_finite("Ks", self.Ks)
        bottom = self.viewmats.new_tensor([0.0, 0.0, 0.0, 1.0])
        if self.viewmats.numel() and not torch.allclose(
            self.viewmats[..., 3, :], bottom.expand_as(self.viewmats[..., 3, :]), atol=1e-5
        ):
            raise ValueError("viewmats must be rigid 4×4 transforms with last row (0, 0, 0, 1)")
        if (
            self.Ks.numel()
            and ((self.Ks[..., 0, 0] == 0) | (self.Ks[..., 1, 1] == 0) | (self.Ks[..., 2, 2] == 0)).any()
        ):
            raise ValueError("Ks must be invertible pinhole intrinsics (fx, fy and K[2, 2] non-zero)")

    @property
    def num_views(self) -> int:
        return int(self.viewmats.shape[-3])

    def to(self, *args, **kwargs) -> Camera:
        return Camera(self.viewmats.to(*args, **kwargs), self.Ks.to(*args, **kwargs), self.width, self.height)

    def __getitem__(self, idx) -> Camera:
        """Select views (last batch axis) — ``cam[[0, 6]]`` keeps views 0 and 6."""
        return Camera(self.viewmats[..., idx, :, :], self.Ks[..., idx, :, :], self.width, self.height)

    def expand(self, batch: int) -> Camera:
        """Add a leading batch axis of size ``batch`` (shared rig)."""
        if self.viewmats.dim() != 3:
            raise ValueError("expand needs an un-batched camera with viewmats of shape (C, 4, 4)")
        return Camera(
            self.viewmats.expand(batch, -1, -1, -1),
            self.Ks.expand(batch, -1, -1, -1),
            self.width,
            self.height,
        )

    @property
    def camtoworlds(self) -> Tensor:
        return torch.linalg.inv(self.viewmats)

    @property
    def centres(self) -> Tensor:
        """Camera centres in world space, (..., C, 3)."""
        R = self.viewmats[..., :3, :3]
        t = self.viewmats[..., :3, 3]
        return -(R.transpose(-1, -2) @ t.unsqueeze(-1)).squeeze(-1)


def intrinsics_from_fov(fovy_deg: float, width: int, height: int, dtype=torch.float32) -> Tensor:
    """Pinhole intrinsics for a vertical field of view (degrees), square pixels, principal point at the centre."""
    _check_real("fovy_deg", fovy_deg)
    if not 0.0 < fovy_deg < 180.0:
        raise ValueError(f"fovy_deg must be in (0, 180); got {fovy_deg}")
    for name, v in (("width", width), ("height", height)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int (pixels); got {v!r}")
    f = 0.5 * height / math.tan(math.radians(fovy_deg) / 2)
    return torch.tensor([[f, 0.0, width / 2], [0.0, f, height / 2], [0.0, 0.0, 1.0]], dtype=dtype)


def look_at(
    eye: Tensor, target: Tensor | None = None, up: tuple[float, float, float] = (0.0, 1.0, 0.0)
) -> Tensor:
    """World-to-camera (OpenCV) matrices for cameras at ``eye`` (..., 3) looking at ``target``."""
    if not isinstance(eye, Tensor) or not (target is None or isinstance(target, Tensor)):
        raise ValueError(
            f"eye and target must be torch.Tensors; got {type(eye).__name__}, {type(target).__name__}"
        )
    if (
        not isinstance(up, (tuple, list))
        or len(up) != 3
        or any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) for x in up)
        or math.hypot(*up) == 0
    ):
        raise ValueError(f"up must be three finite numbers, not all zero; got {up!r}")
    if target is None:
        target = torch.zeros_like(eye)
    if eye.shape[-1:] != (3,) or target.shape[-1:] != (3,):
        raise ValueError(
            f"eye and target must end in a size-3 axis; got {tuple(eye.shape)}, {tuple(target.shape)}"
        )
    _check_finite("eye", eye)
    _check_finite("target", target)
    fwd = target - eye
    if (fwd.norm(dim=-1) < 1e-12).any():
        raise ValueError("eye and target coincide for some camera: the viewing direction is undefined")
    f = torch.nn.functional.normalize(fwd, dim=-1)
    u = torch.tensor(up, dtype=eye.dtype, device=eye.device).expand_as(f)
    side = torch.cross(f, u, dim=-1)
    if (side.norm(dim=-1) < 1e-9 * torch.tensor(up, dtype=eye.dtype).norm()).any():
        raise ValueError(
            f"up={up} is parallel to the viewing direction of some camera: the camera roll is undefined"
        )
    r = torch.nn.functional.normalize(side, dim=-1)
    d = torch.cross(f, r, dim=-1)  # camera y axis points down
    R = torch.stack([r, d, f], dim=-2)  # rows = camera axes in world coordinates
    t = -(R @ eye.unsqueeze(-1)).squeeze(-1)
    M = torch.zeros(eye.shape[:-1] + (4, 4), dtype=eye.dtype, device=eye.device)
    M[..., :3, :3] = R
    M[..., :3, 3] = t
    M[..., 3, 3] = 1.0
    return M


def orbit_cameras(
    num_views: int = 12,
    width: int = 32,
    height: int = 32,
    radius: float = 1.5,
    fovy_deg: float = 49.1,
    elevation_deg: float = 0.0,
    azimuths_deg: list[float] | Tensor | None = None,
    dtype=torch.float32,
) -> Camera:
    """``num_views`` cameras on a circle (HGM's rig: radius 1.5, FOV 49.1°, every 360/num_views degrees).

    View ``k`` has azimuth ``k · 360 / num_views``; with 12 views, view 0 is the front and view 6 the back.
    """
    _check_pos_int("num_views", num_views)
    _check_real("radius", radius, positive=True)
    _check_real("elevation_deg", elevation_deg)
    if not -90.0 < elevation_deg < 90.0:
        raise ValueError(
            f"elevation_deg must be in (-90, 90) (at ±90 the camera roll is undefined); got {elevation_deg}"
        )
    if azimuths_deg is None:
        az = torch.arange(num_views, dtype=torch.float64) * (360.0 / num_views)
    else:
        az = torch.as_tensor(azimuths_deg, dtype=torch.float64).reshape(-1)
        if az.numel() == 0 or not torch.isfinite(az).all():
            raise ValueError(f"azimuths_deg must be a non-empty list of finite angles; got {azimuths_deg!r}")
    a, e = torch.deg2rad(az), math.radians(elevation_deg)
    eye = torch.stack(
        [
            radius * math.cos(e) * torch.sin(a),
            torch.full_like(a, radius * math.sin(e)),
            radius * math.cos(e) * torch.cos(a),
        ],
        dim=-1,
    )
    viewmats = look_at(eye).to(dtype)
    Ks = intrinsics_from_fov(fovy_deg, width, height, dtype).expand(len(az), 3, 3).clone()
    return Camera(viewmats, Ks, width, height)


def pixel_rays(camera: Camera) -> tuple[Tensor, Tensor]:
    """Ray origins and unit directions through every pixel centre, each (..., C, H, W, 3) in world space."""
    _check_camera(camera)
    H, W = camera.height, camera.width
    dtype, device = camera.Ks.dtype, camera.Ks.device
    v, u = torch.meshgrid(
        torch.arange(H, dtype=dtype, device=device) + 0.5,
        torch.arange(W, dtype=dtype, device=device) + 0.5,
        indexing="ij",
    )
    pix = torch.stack([u, v, torch.ones_like(u)], dim=-1)  # (H, W, 3)
    Kinv = torch.linalg.inv(camera.Ks)  # (..., C, 3, 3)
    d_cam = torch.einsum("...ij,hwj->...hwi", Kinv, pix)
    R = camera.viewmats[..., :3, :3]
    d_world = torch.einsum("...ji,...hwj->...hwi", R, d_cam)  # R^T d
    d_world = torch.nn.functional.normalize(d_world, dim=-1)
    o = camera.centres[..., None, None, :].expand_as(d_world)
    return o, d_world


def plucker_rays(camera: Camera) -> Tensor:
    """Plücker embedding ``(o × d, d)`` per pixel, (..., C, 6, H, W) — channels-first, ready to concatenate to RGB."""
    o, d = pixel_rays(camera)
    pl = torch.cat([torch.cross(o, d, dim=-1), d], dim=-1)  # (..., C, H, W, 6)
    return pl.movedim(-1, -3)


def project_points(points: Tensor, camera: Camera, validate: bool = True) -> tuple[Tensor, Tensor]:
    """Project world points (..., N, 3) into every view: pixel coordinates (..., C, N, 2) and depths (..., C, N).

    Pixel coordinates follow gsplat (continuous, pixel ``u`` spans ``[u, u+1)``). ``validate=False`` skips the
    finiteness check of ``points`` (a device sync) for internal callers.
    """
    _check_camera(camera)
    if not isinstance(points, Tensor) or points.dim() < 2 or points.shape[-1] != 3:
        raise ValueError(
            f"points must be a tensor of shape (..., N, 3); got {getattr(points, 'shape', points)!r}"
        )
    if validate:
        _check_finite("points", points)
    R = camera.viewmats[..., :3, :3]
    t = camera.viewmats[..., :3, 3]
    pc = torch.einsum("...cij,...nj->...cni", R, points) + t[..., None, :]
    z = pc[..., 2]
    uv = torch.einsum("...cij,...cnj->...cni", camera.Ks[..., :2, :], pc) / z.unsqueeze(-1)
    return uv, z


def unproject_pixels(uv: Tensor, depth: Tensor, camera: Camera) -> Tensor:
    """Inverse of :func:`project_points`: pixels (..., C, N, 2) at camera depths (..., C, N) → world (..., C, N, 3)."""
    _check_camera(camera)
    if uv.dim() < 3 or uv.shape[-1] != 2 or tuple(depth.shape) != tuple(uv.shape[:-1]):
        raise ValueError(
            f"uv must have shape (..., C, N, 2) and depth (..., C, N); got {tuple(uv.shape)}, {tuple(depth.shape)}"
        )
    pix = torch.cat([uv, torch.ones_like(uv[..., :1])], dim=-1)
    pc = torch.einsum("...cij,...cnj->...cni", torch.linalg.inv(camera.Ks), pix) * depth.unsqueeze(-1)
    R = camera.viewmats[..., :3, :3]
    t = camera.viewmats[..., :3, 3]
    return torch.einsum("...cji,...cnj->...cni", R, pc - t[..., None, :])
