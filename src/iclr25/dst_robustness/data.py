"""scikit-learn's bundled digits as a 32×32 RGB image-classification set (no download)."""

from __future__ import annotations

import numpy as np
import torch


def digits32(split_seed: int = 0, test_frac: float = 0.2, size: int = 32) -> tuple[np.ndarray, ...]:
    """``(x_train, y_train, x_test, y_test)``: uint8 images ``(N, size, size, 3)`` and int64 labels.

    The 8×8 digits (values 0–16) are scaled to [0, 255], bilinearly upsampled to ``size`` and replicated to
    three channels; the split is stratified 80/20, seeded by ``split_seed``.
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not 0.0 < test_frac < 1.0:
        raise ValueError(f"test_frac must be in (0, 1), got {test_frac!r}")
    d = load_digits()
    x = torch.tensor(d.images * (255.0 / 16.0), dtype=torch.float32)[:, None]  # (N, 1, 8, 8)
    x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    x = x.clamp(0, 255).round().to(torch.uint8).repeat(1, 3, 1, 1).permute(0, 2, 3, 1).contiguous().numpy()
    y = d.target.astype(np.int64)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=test_frac, stratify=y, random_state=int(split_seed))
    return xtr, ytr, xte, yte


def to_tensor(
    images: np.ndarray, mean: float, std: float, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """uint8 ``(N, H, W, 3)`` → normalised float ``(N, 3, H, W)``: ``(x/255 − mean)/std``."""
    t = torch.from_numpy(np.ascontiguousarray(images)).to(device).permute(0, 3, 1, 2).float() / 255.0
    return (t - mean) / std


def random_crop(x: torch.Tensor, pad: int, generator: torch.Generator) -> torch.Tensor:
    """Random ``pad``-pixel translation crop of a batch ``(B, C, H, W)`` (zero padding), one offset per sample."""
    if pad <= 0:
        return x
    b, c, h, w = x.shape
    xp = torch.nn.functional.pad(x, (pad, pad, pad, pad))  # (B, C, H+2p, W+2p)
    oy = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(x.device)
    ox = torch.randint(0, 2 * pad + 1, (b,), generator=generator).to(x.device)
    rows = (oy[:, None] + torch.arange(h, device=x.device)[None])[:, None, :, None]  # (B, 1, H, 1)
    cols = (ox[:, None] + torch.arange(w, device=x.device)[None])[:, None, None, :]  # (B, 1, 1, W)
    xr = torch.gather(xp, 2, rows.expand(b, c, h, w + 2 * pad))  # (B, C, H, W+2p)
    return torch.gather(xr, 3, cols.expand(b, c, h, w))
