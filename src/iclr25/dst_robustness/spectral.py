"""Frequency analysis of Sec. 5.2 (Eq. 1–2): Radius–Accuracy (RA) curves.

Each test image is transformed with a centre-shifted 2-D FFT; frequencies at distance ``≤ r`` from the centre
are kept (``mode="low"``: low-pass, i.e. *high-frequency attenuation*) or those ``> r`` (``mode="high"``:
high-pass, *low-frequency attenuation*); the inverse FFT (real part, clipped to the input range) is then
classified. The paper finds that dense models lose more accuracy than DST models when high frequencies are
removed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


def max_radius(h: int, w: int) -> float:
    """Largest distance of a frequency from the centre of a centre-shifted ``h × w`` spectrum."""
    return float(np.hypot(h // 2, w // 2))


def frequency_filter(
    x: torch.Tensor, radius: float, mode: str = "low", clip: tuple[float, float] = (0.0, 1.0)
) -> torch.Tensor:
    """Keep frequencies with ``dist ≤ radius`` (``low``) or ``> radius`` (``high``) of images ``(N, C, H, W)``.

    ``F = fftshift(fft2(x))``; ``x' = Re(ifft2(ifftshift(F ⊙ mask)))``, clipped to ``clip``.
    """
    if mode not in ("low", "high"):
        raise ValueError(f"mode must be 'low' or 'high', got {mode!r}")
    if radius < 0:
        raise ValueError(f"radius must be >= 0, got {radius!r}")
    h, w = x.shape[-2:]
    f = torch.fft.fftshift(torch.fft.fft2(x.to(torch.float64)), dim=(-2, -1))
    yy = torch.arange(h, device=x.device, dtype=torch.float64)[:, None] - h // 2
    xx = torch.arange(w, device=x.device, dtype=torch.float64)[None, :] - w // 2
    dist = torch.sqrt(yy**2 + xx**2)
    mask = dist <= radius if mode == "low" else dist > radius
    out = torch.fft.ifft2(torch.fft.ifftshift(f * mask, dim=(-2, -1))).real
    return out.clamp(*clip).to(x.dtype)


@torch.no_grad()
def ra_curve(
    model: nn.Module,
    x01: torch.Tensor,
    y: torch.Tensor,
    radii: Sequence[float],
    mode: str,
    mean: float,
    std: float,
) -> list[float]:
    """Accuracy of ``model`` on images ``x01`` (N, C, H, W in [0, 1]) filtered at each radius (RA curve)."""
    from .robustness import accuracy

    return [accuracy(model, (frequency_filter(x01, r, mode) - mean) / std, y) for r in radii]
