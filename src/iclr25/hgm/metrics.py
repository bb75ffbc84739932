"""Evaluation metrics: PSNR, SSIM (torchmetrics' maintained implementation) and symmetric Chamfer distance."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

__all__ = ["chamfer_distance", "psnr", "ssim", "topk_mask"]


def _check_range(data_range: float) -> None:
    import math

    if (
        isinstance(data_range, bool)
        or not isinstance(data_range, (int, float))
        or not math.isfinite(data_range)
    ):
        raise ValueError(
            f"data_range must be a finite number > 0 (the images' value range), got {data_range!r}"
        )
    if data_range <= 0:
        raise ValueError(f"data_range must be > 0 (the images' value range), got {data_range!r}")


def _check_images(pred: Tensor, target: Tensor) -> None:
    if not isinstance(pred, Tensor) or not isinstance(target, Tensor):
        raise ValueError(
            f"pred and target must be torch.Tensors; got {type(pred).__name__}, {type(target).__name__}"
        )
    if pred.shape != target.shape:
        raise ValueError(
            f"pred and target must have the same shape; got {tuple(pred.shape)} vs {tuple(target.shape)}"
        )
    if pred.dim() < 3 or pred.numel() == 0:
        raise ValueError(
            f"pred and target must be non-empty images (..., H, W, C); got shape {tuple(pred.shape)}"
        )
    if not (torch.isfinite(pred).all() and torch.isfinite(target).all()):
        raise ValueError("pred and target must be finite; got NaN or inf")


def psnr(pred: Tensor, target: Tensor, data_range: float = 1.0) -> Tensor:
    """Peak signal-to-noise ratio per image over the trailing (H, W, 3) axes; returns (...)."""
    _check_range(data_range)
    _check_images(pred, target)
    mse = ((pred - target) ** 2).flatten(-3).mean(-1)
    return 10 * torch.log10(data_range**2 / mse.clamp_min(1e-12))


def ssim(pred: Tensor, target: Tensor, data_range: float = 1.0) -> Tensor:
    """Mean SSIM per image (…, H, W, 3) → (…); uses ``torchmetrics.functional.structural_similarity_index_measure``
    with a 7×7 Gaussian window (σ 1.5) so it works on small renders."""
    from torchmetrics.functional.image import structural_similarity_index_measure as _ssim

    _check_range(data_range)
    _check_images(pred, target)
    if min(pred.shape[-3:-1]) < 7:
        raise ValueError(
            f"pred and target must be at least 7×7 pixels (the SSIM window); got {tuple(pred.shape)}"
        )
    lead = pred.shape[:-3]
    p = pred.reshape(-1, *pred.shape[-3:]).permute(0, 3, 1, 2)
    t = target.reshape(-1, *target.shape[-3:]).permute(0, 3, 1, 2)
    val = _ssim(p, t, data_range=data_range, kernel_size=7, reduction="none")
    return val.reshape(lead)


def chamfer_distance(a: Tensor, b: Tensor, mask_a: Tensor | None = None) -> Tensor:
    """Symmetric Chamfer distance ½(mean_a min_b ‖a−b‖ + mean_b min_a ‖a−b‖) between point sets (B, Na, 3), (B, Nb, 3).

    ``mask_a`` (B, Na) selects the points of ``a`` that count (e.g. opaque Gaussians); returns (B,).
    """
    if a.ndim != 3 or b.ndim != 3 or a.shape[-1] != 3 or b.shape[-1] != 3 or a.shape[0] != b.shape[0]:
        raise ValueError(
            f"a and b must be point sets (B, Na, 3) and (B, Nb, 3); got {tuple(a.shape)}, {tuple(b.shape)}"
        )
    if a.shape[1] == 0 or b.shape[1] == 0:
        raise ValueError(f"a and b must hold at least one point each; got {tuple(a.shape)}, {tuple(b.shape)}")
    if mask_a is not None and tuple(mask_a.shape) != tuple(a.shape[:2]):
        raise ValueError(f"mask_a must have shape {tuple(a.shape[:2])} (B, Na); got {tuple(mask_a.shape)}")
    if mask_a is not None and mask_a.dtype != torch.bool:
        raise ValueError(f"mask_a must be a bool tensor; got dtype {mask_a.dtype}")
    if not (torch.isfinite(a).all() and torch.isfinite(b).all()):
        raise ValueError("a and b must be finite point sets; got NaN or inf")
    d = torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")  # (B, Na, Nb)
    if mask_a is None:
        mask_a = torch.ones(a.shape[:2], dtype=torch.bool, device=a.device)
    if (mask_a.sum(-1) == 0).any():
        raise ValueError("mask_a selects no points for some batch element; Chamfer distance is undefined")
    a2b = (d.min(-1).values * mask_a).sum(-1) / mask_a.sum(-1)
    b2a = d.masked_fill(~mask_a.unsqueeze(-1), float("inf")).min(1).values.mean(-1)
    return 0.5 * (a2b + b2a)


def topk_mask(opacities: Tensor, frac: float) -> Tensor:
    """(B, N) mask of each row's ``ceil(frac·N)`` most opaque Gaussians (ties at the cut-off included)."""
    k = max(1, int(np.ceil(frac * opacities.shape[-1])))
    kth = opacities.topk(k, dim=-1).values[..., -1:]
    return opacities >= kth
