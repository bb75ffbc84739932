"""Gaussian parameter activations (HGM §3, inherited from LGM) and feature sampling helpers.

A network predicts a raw 14-vector per Gaussian, ordered (μ 3, α 1, s 3, q 4, c 3) as in LGM/HGM; the
activations map arbitrary real outputs to valid Gaussians:

    μ = clamp(x, −1, 1),  α = sigmoid(x),  s = 0.1 · softplus(x),  q = x / ‖x‖,  c = ½ tanh(x) + ½.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

__all__ = ["GAUSSIAN_DIM", "GaussianSet", "activate_gaussians", "sample_image_features", "sample_volume"]

GAUSSIAN_DIM = 14


@dataclass
class GaussianSet:
    """Activated Gaussians, batched: means (B, N, 3), opacities (B, N), scales (B, N, 3), quats (B, N, 4) in
    (w, x, y, z), colours (B, N, 3). Unpack into :func:`render_gaussians` with ``render_gaussians(*g, camera)``."""

    means: Tensor
    opacities: Tensor
    scales: Tensor
    quats: Tensor
    colours: Tensor

    def __iter__(self):  # the order render_gaussians expects
        return iter((self.means, self.quats, self.scales, self.opacities, self.colours))

    @property
    def num(self) -> int:
        return int(self.means.shape[-2])

    @staticmethod
    def cat(sets: list[GaussianSet]) -> GaussianSet:
        return GaussianSet(*(torch.cat([getattr(s, k) for s in sets], dim=1) for k in _FIELDS))

    def detach(self) -> GaussianSet:
        return GaussianSet(*(getattr(self, k).detach() for k in _FIELDS))

    def to(self, *args, **kwargs) -> GaussianSet:
        """Every tensor moved/cast like ``Tensor.to(*args, **kwargs)``."""
        return GaussianSet(*(getattr(self, k).to(*args, **kwargs) for k in _FIELDS))


_FIELDS = ("means", "opacities", "scales", "quats", "colours")


def activate_gaussians(raw: Tensor, scale_factor: float = 0.1, clamp_means: bool = True) -> GaussianSet:
    """Raw (..., N, 14) network outputs → :class:`GaussianSet` with the HGM/LGM activations."""
    if isinstance(scale_factor, bool) or not isinstance(scale_factor, (int, float)) or not scale_factor > 0:
        raise ValueError(f"scale_factor must be a finite number > 0; got {scale_factor!r}")
    if scale_factor == float("inf"):
        raise ValueError(f"scale_factor must be a finite number > 0; got {scale_factor!r}")
    if raw.shape[-1] != GAUSSIAN_DIM:
        raise ValueError(
            f"raw must have {GAUSSIAN_DIM} channels (μ3, α1, s3, q4, c3) in its last axis; got {raw.shape[-1]}"
        )
    if not torch.isfinite(raw).all():
        raise ValueError("raw contains NaN or inf; expected finite network outputs")
    mu, a, s, q, c = raw.split([3, 1, 3, 4, 3], dim=-1)
    return GaussianSet(
        means=mu.clamp(-1.0, 1.0) if clamp_means else mu,
        opacities=torch.sigmoid(a.squeeze(-1)),
        scales=scale_factor * F.softplus(s) + 1e-6,  # +1e-6 keeps s > 0 where softplus underflows
        quats=F.normalize(q, dim=-1, eps=1e-8),
        colours=0.5 * torch.tanh(c) + 0.5,
    )


def sample_image_features(features: Tensor, uv: Tensor, width: int, height: int) -> Tensor:
    """Bilinearly sample (B, C, Hf, Wf) feature maps at pixel coordinates uv (B, N, 2) of a width×height image.

    Pixel centres of the image map to feature-map pixel centres (so features may be lower resolution than the
    image); implemented with ``F.grid_sample(align_corners=False)``; zeros outside. Returns (B, N, C).
    """
    if features.dim() != 4 or uv.dim() != 3 or uv.shape[-1] != 2 or uv.shape[0] != features.shape[0]:
        raise ValueError(
            f"expected features (B, C, H, W) and uv (B, N, 2); got {tuple(features.shape)}, {tuple(uv.shape)}"
        )
    for name, v in (("width", width), ("height", height)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < float("inf"):
            raise ValueError(f"{name} must be a positive image size in pixels; got {v!r}")
    grid = torch.stack(
        [uv[..., 0] / width * 2 - 1, uv[..., 1] / height * 2 - 1], dim=-1
    )  # (B, N, 2) in [-1, 1]
    out = F.grid_sample(
        features, grid.unsqueeze(1), mode="bilinear", padding_mode="zeros", align_corners=False
    )
    return out[:, :, 0].transpose(1, 2)


def sample_volume(volume: Tensor, points: Tensor, lo: float = -1.0, hi: float = 1.0) -> Tensor:
    """Trilinearly sample a (B, C, D, H, W) volume spanning the cube [lo, hi]³ (grid points at the corners,
    ``align_corners=True``; axis order W ↔ x, H ↔ y, D ↔ z) at world points (B, N, 3). Returns (B, N, C)."""
    if volume.dim() != 5 or points.dim() != 3 or points.shape[-1] != 3:
        raise ValueError(
            f"expected volume (B, C, D, H, W) and points (B, N, 3); got {tuple(volume.shape)}, {tuple(points.shape)}"
        )
    if points.shape[0] != volume.shape[0]:
        raise ValueError(
            f"points and volume must share the batch size; got {tuple(points.shape)}, {tuple(volume.shape)}"
        )
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise ValueError(f"lo and hi must be finite numbers with lo < hi; got lo={lo!r}, hi={hi!r}")
    grid = ((points - lo) / (hi - lo) * 2 - 1).view(points.shape[0], 1, 1, -1, 3)
    out = F.grid_sample(volume, grid, mode="bilinear", padding_mode="border", align_corners=True)
    return out[:, :, 0, 0].transpose(1, 2)
