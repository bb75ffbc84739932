"""Image metrics, the classical hole-filling baseline, and the detection-consistency probe.

- PSNR on images in [0, 1]; **hole-PSNR** on the pixels that are empty in the pseudo-image (where the generator
  must invent content); SSIM from scikit-image.
- Hole filling: every empty pixel takes the colour of the nearest filled one (``scipy.ndimage.distance_transform_edt``
  indices) — "geometry only, no generative prior".
- Detection probe: a small CNN trained on recorded-trajectory frames to predict car-centre heatmaps, evaluated
  on synthesised frames of shifted trajectories against the cars visible in the ground truth (AP with a 3-pixel
  match radius) — the toy counterpart of the paper's 3D-detection consistency. Its pooled features give an
  **FD-proxy** (a Fréchet distance on the probe's features; not FID, whose Inception weights are not offline).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from scipy import linalg, ndimage


def _check_pair(pred, target) -> tuple[np.ndarray, np.ndarray]:
    pred, target = np.asarray(pred, dtype=np.float64), np.asarray(target, dtype=np.float64)
    if pred.shape != target.shape:
        raise ValueError(f"pred and target must have the same shape, got {pred.shape} and {target.shape}")
    if pred.ndim != 3 or pred.size == 0:
        raise ValueError(f"pred and target must be non-empty (H, W, C) images, got shape {pred.shape}")
    if not (np.isfinite(pred).all() and np.isfinite(target).all()):
        raise ValueError("pred and target must be finite (got NaN or inf)")
    lo, hi = min(pred.min(), target.min()), max(pred.max(), target.max())
    if lo < -1e-6 or hi > 1 + 1e-6:
        raise ValueError(
            f"pred and target must lie in [0, 1] (data range 1); got values in [{lo:.4g}, {hi:.4g}]"
        )
    return pred, target


def psnr(pred: np.ndarray, target: np.ndarray, mask: np.ndarray | None = None) -> float:
    """PSNR in dB for images in [0, 1] (over ``mask`` pixels when given; NaN when the mask is empty)."""
    pred, target = _check_pair(pred, target)
    err = (pred - target) ** 2
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != pred.shape[:2] or mask.dtype != bool:
            raise ValueError(
                f"mask must be a bool array of shape {pred.shape[:2]} (H, W); got {mask.dtype} {mask.shape}"
            )
        m = np.broadcast_to(np.asarray(mask, dtype=bool)[..., None], err.shape)
        if not m.any():
            return float("nan")
        mse = err[m].mean()
    else:
        mse = err.mean()
    return float(10 * np.log10(1.0 / max(mse, 1e-12)))


def ssim(pred: np.ndarray, target: np.ndarray) -> float:
    """Mean SSIM of two (H, W, 3) images in [0, 1] (7×7 window, so H, W >= 7)."""
    from skimage.metrics import structural_similarity

    pred, target = _check_pair(pred, target)
    if min(pred.shape[:2]) < 7:
        raise ValueError(f"pred and target must be at least 7×7 pixels (the SSIM window); got {pred.shape}")
    return float(structural_similarity(pred, target, channel_axis=-1, data_range=1.0, win_size=7))


def fill_holes(image: np.ndarray, filled: np.ndarray) -> np.ndarray:
    """Nearest-filled-pixel in-painting of ``image`` (H, W, C) from the bool mask ``filled`` (H, W) (an image
    with no filled pixel is returned unchanged)."""
    image, filled = np.asarray(image), np.asarray(filled)
    if image.ndim < 2 or filled.shape != image.shape[:2] or filled.dtype != bool:
        raise ValueError(
            f"filled must be a bool array of shape {image.shape[:2]} (image's H, W); got {filled.dtype} {filled.shape}"
        )
    if not filled.any():
        return image.copy()
    _, (ii, jj) = ndimage.distance_transform_edt(~filled, return_indices=True)
    return image[ii, jj]


class DetectionProbe(nn.Module):
    """A tiny CenterNet-style car-centre detector (heatmap at full resolution) and feature extractor."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=2, dilation=2),
            nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=4, dilation=4),
            nn.ReLU(),
        )
        self.head = nn.Conv2d(width, 1, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:  # x: (B, 3, H, W) in [0, 1]
        f = self.body(x)
        return self.head(f).squeeze(1), f.mean((2, 3))


def centre_heatmap(centres: list[np.ndarray], h: int, w: int, sigma: float = 1.5) -> np.ndarray:
    yy, xx = np.mgrid[0:h, 0:w] + 0.5
    out = np.zeros((len(centres), h, w), dtype=np.float32)
    for i, c in enumerate(centres):
        for u, v in c:
            out[i] = np.maximum(out[i], np.exp(-((xx - u) ** 2 + (yy - v) ** 2) / (2 * sigma**2)))
    return out


def train_probe(images: np.ndarray, centres: list[np.ndarray], steps: int, seed: int) -> DetectionProbe:
    """Fit the probe on GT frames (N, H, W, 3) with their visible car centres (focal-free logistic loss)."""
    g = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    probe = DetectionProbe()
    x = torch.tensor(images, dtype=torch.float32).permute(0, 3, 1, 2)
    y = torch.tensor(centre_heatmap(centres, *images.shape[1:3]))
    opt = torch.optim.Adam(probe.parameters(), lr=3e-3)
    pos_w = torch.tensor(20.0)
    for _ in range(steps):
        idx = torch.randint(0, len(x), (16,), generator=g)
        logit, _ = probe(x[idx])
        loss = F.binary_cross_entropy_with_logits(logit, y[idx], pos_weight=pos_w)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return probe.eval()


@torch.no_grad()
def detect(probe: DetectionProbe, images: np.ndarray, thresh: float = 0.05) -> tuple[list, np.ndarray]:
    """Peaks of the heatmap (3×3 local maxima above ``thresh``): per image a list of (u, v, score); and features."""
    x = torch.tensor(images, dtype=torch.float32).permute(0, 3, 1, 2)
    logit, feats = probe(x)
    p = torch.sigmoid(logit)
    peak = (p == F.max_pool2d(p[:, None], 3, 1, 1)[:, 0]) & (p > thresh)
    dets = []
    for i in range(len(images)):
        v, u = torch.nonzero(peak[i], as_tuple=True)
        dets.append(
            np.stack([u.numpy() + 0.5, v.numpy() + 0.5, p[i, v, u].numpy()], 1)
            if len(u)
            else np.zeros((0, 3))
        )
    return dets, feats.numpy()


def average_precision(dets: list[np.ndarray], gts: list[np.ndarray], radius: float = 3.0) -> float:
    """AP of centre detections: greedy matching by score to unmatched GT centres within ``radius`` pixels,
    area under the (monotone) precision–recall curve. NaN when there is no GT car."""
    for name, arrs in (("dets", dets), ("gts", gts)):
        if isinstance(arrs, np.ndarray) or not isinstance(arrs, (list, tuple)):
            raise ValueError(f"{name} must be a list with one array per image; got {type(arrs).__name__}")
    if len(dets) != len(gts):
        raise ValueError(f"dets and gts must hold one entry per image; got {len(dets)} and {len(gts)}")
    if not (
        isinstance(radius, (int, float))
        and not isinstance(radius, bool)
        and np.isfinite(radius)
        and radius > 0
    ):
        raise ValueError(f"radius must be a finite number > 0 (pixels), got {radius!r}")
    for name, arrs, width in (("dets", dets, 3), ("gts", gts, 2)):
        for i, x in enumerate(arrs):
            x = np.asarray(x, dtype=float)
            if x.size and (x.ndim != 2 or x.shape[1] < width):
                raise ValueError(f"{name}[{i}] must have shape (n, {width}+); got {x.shape}")
            if not np.isfinite(x).all():
                raise ValueError(f"{name}[{i}] must be finite (got NaN or inf)")
    n_gt = sum(len(g) for g in gts)
    if n_gt == 0:
        return float("nan")
    rows = []
    for i, d in enumerate(dets):
        for u, v, s in d:
            rows.append((s, i, u, v))
    rows.sort(key=lambda r: -r[0])
    used = [np.zeros(len(g), dtype=bool) for g in gts]
    tp = np.zeros(len(rows))
    for k, (_, i, u, v) in enumerate(rows):
        g = gts[i]
        if len(g):
            dist = np.hypot(g[:, 0] - u, g[:, 1] - v)
            dist[used[i]] = np.inf
            j = int(np.argmin(dist))
            if dist[j] <= radius:
                used[i][j] = True
                tp[k] = 1
    if not len(rows):
        return 0.0
    ctp = np.cumsum(tp)
    prec = ctp / np.arange(1, len(rows) + 1)
    rec = ctp / n_gt
    prec = np.maximum.accumulate(prec[::-1])[::-1]
    return float(np.sum(np.diff(np.concatenate([[0.0], rec])) * prec))


def frechet_distance(a: np.ndarray, b: np.ndarray) -> float:
    """‖μ_a − μ_b‖² + Tr(Σ_a + Σ_b − 2 (Σ_a Σ_b)^½) between two feature sets (rows = samples)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(
            f"a and b must be (samples, features) with the same features; got {a.shape}, {b.shape}"
        )
    if len(a) < 2 or len(b) < 2:
        raise ValueError(f"a and b need >= 2 samples each for a covariance; got {len(a)} and {len(b)}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("a and b must be finite (got NaN or inf)")
    mu_a, mu_b = a.mean(0), b.mean(0)
    eye = 1e-6 * np.eye(a.shape[1])  # keeps the product well conditioned for small sample sets
    ca, cb = np.cov(a, rowvar=False) + eye, np.cov(b, rowvar=False) + eye
    covmean = linalg.sqrtm(ca @ cb)
    if np.iscomplexobj(covmean):
        covmean = covmean.real
    return float(((mu_a - mu_b) ** 2).sum() + np.trace(ca + cb - 2 * covmean))
