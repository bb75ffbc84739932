"""The 15 common corruptions × 5 severities of Hendrycks & Dietterich (2019), batched and seeded.

Our own numpy/scipy/PIL implementation of the corruption *definitions* of ``make_cifar_c.py`` /
``make_imagenet_c.py`` (hendrycks/robustness). Two severity profiles hold the published constants:

* ``"cifar"`` (default): CIFAR-10-C constants, for 32×32 images (e.g. gaussian_noise σ ∈ {.04,.06,.08,.09,.10}).
* ``"imagenet"``: ImageNet-C constants (σ ∈ {.08,.12,.18,.26,.38}, …), as used by ``corrupt-tta`` /
  ``imagecorruptions``; far too strong for 32×32 images.

Every function takes a batch ``(N, H, W, 3)`` of uint8 RGB images and a ``numpy.random.Generator`` and returns
uint8 of the same shape (the float result is truncated with ``np.uint8`` as the reference scripts do). The
batch is processed with array operations; only the PIL codecs (JPEG, box resize) loop over images.

Deviations from the reference scripts (they need Wand/ImageMagick or data files):

* ``motion_blur`` / ``snow``: ImageMagick's ``MotionBlurImage`` re-implemented (one-sided Gaussian line kernel,
  taps ``i = 0..2⌈r⌉``, weights ``exp(−i²/2σ²)``, offsets ``⌈i·(cos θ, sin θ) − ½⌉`` added to the pixel
  position, edge clamp, 8-bit rounding) instead of Wand.
* ``glass_blur``: exactly the reference's loop, including its numpy-view "swap" that is really a copy
  ``x[h, w] ← x[h', w']`` (see :func:`glass_shuffle`); the chains of copies are resolved vectorised.
* ``frost``: the real frost photographs, read from the ``corrupt-tta`` wheel (``frost_source="corrupt_tta"``,
  default; OpenCV read/resize as the reference). ``frost_source="procedural"`` is a seeded synthetic ice
  texture for installs without them. The ImageNet profile uses the same ×0.2-shrunk photos (ImageNet-C crops
  the full-size photo).
* Random draws come from a ``numpy.random.Generator`` (one stream per call), not the global ``np.random``
  state, so outputs equal the reference's *given the same draws*, not for the same integer seed.
* ``spatter`` (an "extra" corruption) is not implemented.
"""

from __future__ import annotations

import functools
import hashlib
import io
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from PIL import Image
from scipy import ndimage

COMMON_CORRUPTIONS = (
    "gaussian_noise",
    "shot_noise",
    "impulse_noise",
    "defocus_blur",
    "glass_blur",
    "motion_blur",
    "zoom_blur",
    "snow",
    "frost",
    "fog",
    "brightness",
    "contrast",
    "elastic_transform",
    "pixelate",
    "jpeg_compression",
)
EXTRA_CORRUPTIONS = ("speckle_noise", "gaussian_blur", "saturate")
NOISE_CORRUPTIONS = ("gaussian_noise", "shot_noise", "impulse_noise")
# Corruption groups of Hendrycks & Dietterich (2019)
GROUPS = {
    "noise": NOISE_CORRUPTIONS,
    "blur": ("defocus_blur", "glass_blur", "motion_blur", "zoom_blur"),
    "weather": ("snow", "frost", "fog", "brightness"),
    "digital": ("contrast", "elastic_transform", "pixelate", "jpeg_compression"),
}
SEVERITIES = (1, 2, 3, 4, 5)
PROFILES = ("cifar", "imagenet")

# Published severity constants (facts from make_cifar_c.py / make_imagenet_c.py).
CIFAR_C: dict[str, list] = {
    "gaussian_noise": [0.04, 0.06, 0.08, 0.09, 0.10],
    "shot_noise": [500, 250, 100, 75, 50],
    "impulse_noise": [0.01, 0.02, 0.03, 0.05, 0.07],
    "speckle_noise": [0.06, 0.1, 0.12, 0.16, 0.2],
    "gaussian_blur": [0.4, 0.6, 0.7, 0.8, 1.0],
    "glass_blur": [
        (0.05, 1, 1),
        (0.25, 1, 1),
        (0.4, 1, 1),
        (0.25, 1, 2),
        (0.4, 1, 2),
    ],  # σ, max δ, iterations
    "defocus_blur": [(0.3, 0.4), (0.4, 0.5), (0.5, 0.6), (1, 0.2), (1.5, 0.1)],  # radius, alias blur
    "motion_blur": [(6, 1), (6, 1.5), (6, 2), (8, 2), (9, 2.5)],  # radius, σ
    "zoom_blur": [
        (1.0, 1.06, 0.01),
        (1.0, 1.11, 0.01),
        (1.0, 1.16, 0.01),
        (1.0, 1.21, 0.01),
        (1.0, 1.26, 0.01),
    ],
    "snow": [
        (0.1, 0.2, 1, 0.6, 8, 3, 0.95),
        (0.1, 0.2, 1, 0.5, 10, 4, 0.9),
        (0.15, 0.3, 1.75, 0.55, 10, 4, 0.9),
        (0.25, 0.3, 2.25, 0.6, 12, 6, 0.85),
        (0.3, 0.3, 1.25, 0.65, 14, 12, 0.8),
    ],
    "frost": [(1, 0.2), (1, 0.3), (0.9, 0.4), (0.85, 0.4), (0.75, 0.45)],  # image weight, frost weight
    "fog": [(0.2, 3), (0.5, 3), (0.75, 2.5), (1, 2), (1.5, 1.75)],  # scale, wibble decay
    "brightness": [0.05, 0.1, 0.15, 0.2, 0.3],
    "contrast": [0.75, 0.5, 0.4, 0.3, 0.15],
    # (α, σ, affine) as fractions of the image side (CIFAR: × 32)
    "elastic_transform": [
        (0, 0, 0.08),
        (0.05, 0.2, 0.07),
        (0.08, 0.06, 0.06),
        (0.1, 0.04, 0.05),
        (0.1, 0.03, 0.03),
    ],
    "pixelate": [0.95, 0.9, 0.85, 0.75, 0.65],
    "jpeg_compression": [80, 65, 58, 50, 40],
    "saturate": [(0.3, 0), (0.1, 0), (1.5, 0), (2, 0.1), (2.5, 0.2)],
}
IMAGENET_C: dict[str, list] = {
    "gaussian_noise": [0.08, 0.12, 0.18, 0.26, 0.38],
    "shot_noise": [60, 25, 12, 5, 3],
    "impulse_noise": [0.03, 0.06, 0.09, 0.17, 0.27],
    "speckle_noise": [0.15, 0.2, 0.35, 0.45, 0.6],
    "gaussian_blur": [1, 2, 3, 4, 6],
    "glass_blur": [(0.7, 1, 2), (0.9, 2, 1), (1, 2, 3), (1.1, 3, 2), (1.5, 4, 2)],
    "defocus_blur": [(3, 0.1), (4, 0.5), (6, 0.5), (8, 0.5), (10, 0.5)],
    "motion_blur": [(10, 3), (15, 5), (15, 8), (15, 12), (20, 15)],
    "zoom_blur": [
        (1.0, 1.11, 0.01),
        (1.0, 1.16, 0.01),
        (1.0, 1.21, 0.02),
        (1.0, 1.26, 0.02),
        (1.0, 1.31, 0.03),
    ],
    "snow": [
        (0.1, 0.3, 3, 0.5, 10, 4, 0.8),
        (0.2, 0.3, 2, 0.5, 12, 4, 0.7),
        (0.55, 0.3, 4, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65),
        (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55),
    ],
    "frost": [(1, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75)],
    "fog": [(1.5, 2), (2.0, 2), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4)],
    "brightness": [0.1, 0.2, 0.3, 0.4, 0.5],
    "contrast": [0.4, 0.3, 0.2, 0.1, 0.05],
    # ImageNet-C: (244·2, 244·0.7, 244·0.1), … as fractions of the image side
    "elastic_transform": [
        (2, 0.7, 0.1),
        (2, 0.08, 0.2),
        (0.05, 0.01, 0.02),
        (0.07, 0.01, 0.02),
        (0.12, 0.01, 0.02),
    ],
    "pixelate": [0.6, 0.5, 0.4, 0.3, 0.25],
    "jpeg_compression": [25, 18, 15, 10, 7],
    "saturate": [(0.3, 0), (0.1, 0), (2, 0), (5, 0.1), (20, 0.2)],
}


# ----------------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------------
def _gaussian(x: np.ndarray, sigma: float, mode: str = "nearest", truncate: float = 4.0) -> np.ndarray:
    """skimage.filters.gaussian over the spatial axes of ``(N, H, W[, C])`` (mode 'nearest', truncate 4)."""
    if sigma <= 0:
        return x.astype(np.float64, copy=True)
    s = [0.0] * x.ndim
    s[1] = s[2] = sigma
    return ndimage.gaussian_filter(x.astype(np.float64), sigma=s, mode=mode, truncate=truncate)


def _cv2_gaussian_kernel(ksize: int, sigma: float) -> np.ndarray:
    """cv2.getGaussianKernel: ``exp(−(i − (k−1)/2)² / 2σ²)`` normalised."""
    i = np.arange(ksize) - (ksize - 1) / 2
    g = np.exp(-(i**2) / (2 * sigma**2))
    return g / g.sum()


def disk_kernel(radius: float, alias_blur: float) -> np.ndarray:
    """Anti-aliased disk ``1[x² + y² ≤ r²]`` (normalised), smoothed by a 3×3 (r ≤ 8) or 5×5 Gaussian of σ = alias."""
    if radius <= 8:
        L, k = np.arange(-8, 9), 3
    else:
        L, k = np.arange(-math.ceil(radius), math.ceil(radius) + 1), 5
    X, Y = np.meshgrid(L, L)
    d = ((X**2 + Y**2) <= radius**2).astype(np.float32)
    d /= d.sum()
    g = _cv2_gaussian_kernel(k, alias_blur)
    # cv2.GaussianBlur border = BORDER_REFLECT_101 == scipy 'mirror'
    d = ndimage.correlate1d(d.astype(np.float64), g, axis=0, mode="mirror")
    d = ndimage.correlate1d(d, g, axis=1, mode="mirror")
    return d.astype(np.float32)


def _shift_gather(x: np.ndarray, dy: np.ndarray, dx: np.ndarray) -> np.ndarray:
    """``out[n, i, j] = x[n, clip(i + dy_n), clip(j + dx_n)]`` for per-image integer offsets (edge clamp)."""
    n, h, w = x.shape[:3]
    ii = np.clip(np.arange(h)[None, :, None] + dy[:, None, None], 0, h - 1)
    jj = np.clip(np.arange(w)[None, None, :] + dx[:, None, None], 0, w - 1)
    return x[np.arange(n)[:, None, None], ii, jj]


def motion_blur_kernel_taps(radius: float, sigma: float) -> tuple[np.ndarray, np.ndarray]:
    """ImageMagick's ``GetMotionBlurKernel``: taps ``i = 0..width−1`` (``width = 2⌈r⌉ + 1``), weights
    ``exp(−i²/2σ²)`` normalised to sum 1 (all taps kept, as ImageMagick does)."""
    width = 2 * int(math.ceil(radius)) + 1
    i = np.arange(width, dtype=np.float64)
    w = np.exp(-(i**2) / (2 * sigma**2))
    return i, w / w.sum()


def motion_blur_offsets(width: int, angles_deg: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ImageMagick ``MotionBlurImage``'s offset table ``(width, N)`` each: with ``p = width·(sin θ, cos θ)``,
    ``dx_i = ⌈i·p_y/|p| − ½⌉`` (column) and ``dy_i = ⌈i·p_x/|p| − ½⌉`` (row); tap ``i`` reads the pixel at
    ``(row + dy_i, col + dx_i)`` (the blur trails *along* +θ, not mirrored)."""
    th = np.deg2rad(np.asarray(angles_deg, dtype=np.float64))
    px, py = width * np.sin(th), width * np.cos(th)
    hyp = np.hypot(px, py)
    i = np.arange(width, dtype=np.float64)[:, None]
    dx = np.ceil(i * py / hyp - 0.5).astype(np.int64)
    dy = np.ceil(i * px / hyp - 0.5).astype(np.int64)
    return dy, dx


def _motion_blur(x: np.ndarray, radius: float, sigma: float, angles_deg: np.ndarray) -> np.ndarray:
    """Blur each image of ``x`` (N, H, W[, C]) along its own angle: ``out(y, x) = Σ_i k_i · in(y + dy_i, x + dx_i)``."""
    taps, weights = motion_blur_kernel_taps(radius, sigma)
    dys, dxs = motion_blur_offsets(len(taps), angles_deg)
    out = np.zeros(x.shape, dtype=np.float64)
    for wgt, dy, dx in zip(weights, dys, dxs):
        out += wgt * _shift_gather(x, dy, dx)
    return out


def _zoom_matrix(n_in: int, n_out: int) -> np.ndarray:
    """Linear-interpolation matrix ``(n_out, n_in)`` of ``scipy.ndimage.zoom(order=1)`` (corners aligned)."""
    coord = np.arange(n_out) * ((n_in - 1) / (n_out - 1)) if n_out > 1 else np.zeros(1)
    i0 = np.clip(np.floor(coord).astype(np.int64), 0, n_in - 1)
    f = coord - i0
    i1 = np.minimum(i0 + 1, n_in - 1)
    m = np.zeros((n_out, n_in))
    np.add.at(m, (np.arange(n_out), i0), 1 - f)
    np.add.at(m, (np.arange(n_out), i1), f)
    return m


def _clipped_zoom(x: np.ndarray, z: float) -> np.ndarray:
    """Zoom the centre crop of each image by ``z`` (bilinear) and trim back to ``(H, W)``; x is (N, H, W, C).

    Same result as ``scipy.ndimage.zoom(crop, (1, z, z, 1), order=1)`` (output side ``round(side·z)``),
    computed as two interpolation matrices ``R · crop · Cᵀ`` for the whole batch.
    """
    h, w = x.shape[1:3]
    ch, cw = int(np.ceil(h / z)), int(np.ceil(w / z))
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = x[:, top : top + ch, left : left + cw].astype(np.float64)
    oh, ow = int(round(ch * z)), int(round(cw * z))
    xc = crop.transpose(0, 3, 1, 2)  # (N, C, ch, cw)
    res = (_zoom_matrix(ch, oh) @ xc @ _zoom_matrix(cw, ow).T).transpose(0, 2, 3, 1)  # R · crop · Cᵀ
    tt, tl = (oh - h) // 2, (ow - w) // 2
    return res[:, tt : tt + h, tl : tl + w].astype(x.dtype)


def _fold_index(i: np.ndarray, n: int, mode: str) -> np.ndarray:
    """Out-of-range integer indices folded back: 'mirror' = d c b | a b c d (reflect-101), 'reflect' = b a | a b."""
    if mode == "mirror":
        if n == 1:
            return np.zeros_like(i)
        period = 2 * n - 2
        i = np.abs(i) % period
        return np.where(i >= n, period - i, i)
    period = 2 * n
    i = i % period
    return np.where(i >= n, period - 1 - i, i)


def _bilinear(img: np.ndarray, sy: np.ndarray, sx: np.ndarray, mode: str) -> np.ndarray:
    """Sample ``img`` (N, H, W, C) at real coordinates ``(sy, sx)`` (N, H', W') bilinearly (map_coordinates order 1)."""
    n, h, w = img.shape[:3]
    y0, x0 = np.floor(sy), np.floor(sx)
    fy, fx = (sy - y0)[..., None], (sx - x0)[..., None]
    y0, x0 = y0.astype(np.int64), x0.astype(np.int64)
    ya, yb = _fold_index(y0, h, mode), _fold_index(y0 + 1, h, mode)
    xa, xb = _fold_index(x0, w, mode), _fold_index(x0 + 1, w, mode)
    b = np.arange(n)[:, None, None]
    return (
        img[b, ya, xa] * (1 - fy) * (1 - fx)
        + img[b, ya, xb] * (1 - fy) * fx
        + img[b, yb, xa] * fy * (1 - fx)
        + img[b, yb, xb] * fy * fx
    )


def plasma_fractal(n: int, mapsize: int, wibbledecay: float, rng: np.random.Generator) -> np.ndarray:
    """Diamond-square height maps ``(n, mapsize, mapsize)`` in [0, 1] (``mapsize`` a power of two)."""
    if mapsize & (mapsize - 1):
        raise ValueError(f"mapsize must be a power of two, got {mapsize!r}")
    m = np.zeros((n, mapsize, mapsize))
    step = mapsize
    wibble = 100.0
    while step >= 2:
        half = step // 2

        def wmean(a: np.ndarray, wb: float = wibble) -> np.ndarray:
            return a / 4 + wb * rng.uniform(-wb, wb, a.shape)

        # squares: centre = mean of the 4 corners + noise
        corner = m[:, 0:mapsize:step, 0:mapsize:step]
        sq = corner + np.roll(corner, -1, axis=1)
        sq = sq + np.roll(sq, -1, axis=2)
        m[:, half:mapsize:step, half:mapsize:step] = wmean(sq)
        # diamonds
        dr = m[:, half:mapsize:step, half:mapsize:step]
        ul = m[:, 0:mapsize:step, 0:mapsize:step]
        lt = dr + np.roll(dr, 1, axis=1) + ul + np.roll(ul, -1, axis=2)
        m[:, 0:mapsize:step, half:mapsize:step] = wmean(lt)
        tt = dr + np.roll(dr, 1, axis=2) + ul + np.roll(ul, -1, axis=1)
        m[:, half:mapsize:step, 0:mapsize:step] = wmean(tt)
        step //= 2
        wibble /= wibbledecay
    m -= m.min(axis=(1, 2), keepdims=True)
    return m / m.max(axis=(1, 2), keepdims=True)


def rgb_to_hsv(x: np.ndarray) -> np.ndarray:
    """RGB in [0, 1] → HSV in [0, 1] (skimage.color.rgb2hsv formulas), any leading shape, last axis 3."""
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    v = x.max(-1)
    delta = v - x.min(-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(v > 0, delta / v, 0.0)
        dd = np.where(delta > 0, delta, 1.0)
        h = np.where(r == v, (g - b) / dd, np.where(g == v, 2.0 + (b - r) / dd, 4.0 + (r - g) / dd))
    h = np.where(delta > 0, (h / 6.0) % 1.0, 0.0)
    return np.stack([h, s, v], axis=-1)


def hsv_to_rgb(x: np.ndarray) -> np.ndarray:
    """HSV in [0, 1] → RGB (skimage.color.hsv2rgb formulas)."""
    h, s, v = x[..., 0], x[..., 1], x[..., 2]
    hi = np.floor(h * 6)
    f = h * 6 - hi
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    hi = hi.astype(np.int64) % 6
    r = np.choose(hi, [v, q, p, p, t, v])
    g = np.choose(hi, [t, v, v, q, p, p])
    b = np.choose(hi, [p, p, t, v, v, q])
    return np.stack([r, g, b], axis=-1)


# ----------------------------------------------------------------------------------------------------
# corruptions: f(x uint8 (N,H,W,3), c, rng) -> float array in [0, 255]
# ----------------------------------------------------------------------------------------------------
def _gaussian_noise(x: np.ndarray, c: float, rng: np.random.Generator, **_) -> np.ndarray:
    x = x / 255.0
    return np.clip(x + rng.normal(size=x.shape, scale=c), 0, 1) * 255  # x + N(0, c²)


def _shot_noise(x: np.ndarray, c: float, rng: np.random.Generator, **_) -> np.ndarray:
    x = x / 255.0
    return np.clip(rng.poisson(x * c) / float(c), 0, 1) * 255  # Poisson(λ = c·x)/c


def _impulse_noise(x: np.ndarray, c: float, rng: np.random.Generator, **_) -> np.ndarray:
    """Salt & pepper (skimage ``random_noise(mode='s&p')``): each value flipped with prob c, half to 1, half to 0."""
    x = x / 255.0
    flipped = rng.random(x.shape) < c
    salted = rng.random(x.shape) < 0.5
    x = np.where(flipped & salted, 1.0, np.where(flipped & ~salted, 0.0, x))
    return np.clip(x, 0, 1) * 255


def _speckle_noise(x: np.ndarray, c: float, rng: np.random.Generator, **_) -> np.ndarray:
    x = x / 255.0
    return np.clip(x + x * rng.normal(size=x.shape, scale=c), 0, 1) * 255


def _gaussian_blur(x: np.ndarray, c: float, rng: np.random.Generator, **_) -> np.ndarray:
    return np.clip(_gaussian(x / 255.0, c), 0, 1) * 255


def glass_shuffle(y: np.ndarray, delta: int, shifts: np.ndarray) -> np.ndarray:
    """The pixel "shuffle" of ``make_cifar_c.py``'s glass blur, exactly, for a batch ``y`` (N, H, W, C).

    The reference loops ``for h in range(H − δ, δ, −1): for w in range(W − δ, δ, −1)`` with ``dx, dy`` drawn
    from ``[−δ, δ)`` and writes ``x[h, w], x[h', w'] = x[h', w'], x[h, w]`` on numpy *views*: the right-hand
    side holds views, so the first assignment copies the value at ``(h', w')`` into ``(h, w)`` and the second
    copies that same value back. The net effect is a copy ``x[h, w] ← x[h', w']`` (not a swap), where
    ``x[h', w']`` is the value at that moment: already overwritten if ``(h', w')`` came earlier in the
    traversal. Each pixel is written once per iteration, so the value copied into ``p`` is the original value
    at the end of the chain ``p → src(p) → src(src(p)) …`` followed while the next pixel was visited earlier;
    the chains are resolved for the whole batch at once (pointer following), which is exact.

    ``shifts``: integers ``(iterations, rows, cols, 2, N)`` in ``[−δ, δ)``, ``[..., 0, :] = dx`` (column offset),
    ``[..., 1, :] = dy`` (row offset), in traversal order. Returns a new array.
    """
    n, h, w = y.shape[:3]
    rows = np.arange(h - delta, delta, -1)  # traversal order (descending), as range(H − δ, δ, −1)
    cols = np.arange(w - delta, delta, -1)
    if shifts.shape[:3] != (shifts.shape[0], len(rows), len(cols)) or shifts.shape[3:] != (2, n):
        raise ValueError(
            f"shifts must have shape (iterations, {len(rows)}, {len(cols)}, 2, {n}), got {shifts.shape}"
        )
    # rank[r, q]: position of pixel (r, q) in the traversal; pixels never visited get +inf (never "earlier")
    rank = np.full((h, w), np.iinfo(np.int64).max, dtype=np.int64)
    rank[rows[:, None], cols[None, :]] = np.arange(len(rows) * len(cols)).reshape(len(rows), len(cols))
    flat_rank = rank.reshape(-1)
    b = np.arange(n)[:, None]
    y = y.reshape(n, h * w, -1).copy()
    for it in range(shifts.shape[0]):
        src = np.broadcast_to(np.arange(h * w), (n, h * w)).copy()  # (N, HW): src(p) = p for unvisited pixels
        dx, dy = shifts[it, :, :, 0], shifts[it, :, :, 1]  # (rows, cols, N)
        dst = (rows[:, None] * w + cols[None, :]).reshape(-1)  # visited pixels, traversal order
        r2, q2 = rows[:, None, None] + dy, cols[None, :, None] + dx  # (rows, cols, N)
        src[:, dst] = (r2 * w + q2).reshape(-1, n).T
        # follow the chain while the source pixel was visited (written) before the current one
        cur = np.broadcast_to(np.arange(h * w), (n, h * w)).copy()
        while True:
            s = src[b, cur]
            step = flat_rank[s] < flat_rank[cur]
            if not step.any():
                break
            cur = np.where(step, s, cur)
        y = y[b, src[b, cur]]
    return y.reshape(n, h, w, -1)


def _glass_blur(x: np.ndarray, c: tuple, rng: np.random.Generator, **_) -> np.ndarray:
    """Blur, locally "shuffle" pixels (the reference's sequential copy ``x[h, w] ← x[h', w']``), blur again."""
    sigma, delta, iters = c
    n, h, w = x.shape[:3]
    y = np.uint8(_gaussian(x / 255.0, sigma) * 255)
    shifts = rng.integers(-delta, delta, size=(iters, max(h - 2 * delta, 0), max(w - 2 * delta, 0), 2, n))
    y = glass_shuffle(y, delta, shifts)
    return np.clip(_gaussian(y / 255.0, sigma), 0, 1) * 255


def _defocus_blur(x: np.ndarray, c: tuple, rng: np.random.Generator, **_) -> np.ndarray:
    k = disk_kernel(c[0], c[1]).astype(np.float64)
    res = ndimage.correlate(x / 255.0, k[None, :, :, None], mode="mirror")  # cv2.filter2D, BORDER_REFLECT_101
    return np.clip(res, 0, 1) * 255


def _motion_blur_c(x: np.ndarray, c: tuple, rng: np.random.Generator, **_) -> np.ndarray:
    angles = rng.uniform(-45, 45, size=x.shape[0])
    res = _motion_blur(x.astype(np.float64), c[0], c[1], angles)
    return np.clip(np.floor(res + 0.5), 0, 255)  # ImageMagick returns an 8-bit image (rounded)


def _zoom_blur(x: np.ndarray, c: tuple, rng: np.random.Generator, **_) -> np.ndarray:
    zooms = np.arange(*c)
    x = (x / 255.0).astype(np.float32)
    out = np.zeros_like(x)
    for z in zooms:
        out += _clipped_zoom(x, z)
    x = (x + out) / (len(zooms) + 1)
    return np.clip(x, 0, 1) * 255


def _snow(x: np.ndarray, c: tuple, rng: np.random.Generator, **_) -> np.ndarray:
    n, h, w = x.shape[:3]
    x = x.astype(np.float32) / 255.0
    layer = rng.normal(size=(n, h, w), loc=c[0], scale=c[1])
    layer = _clipped_zoom(layer[..., None], c[2])[..., 0]
    layer[layer < c[3]] = 0
    layer = (
        (np.clip(layer, 0, 1) * 255).astype(np.uint8).astype(np.float64)
    )  # 8-bit image as in the reference
    angles = rng.uniform(-135, -45, size=n)
    layer = np.clip(np.floor(_motion_blur(layer, c[4], c[5], angles) + 0.5), 0, 255) / 255.0
    layer = layer[..., None]
    gray = (0.299 * x[..., 0] + 0.587 * x[..., 1] + 0.114 * x[..., 2])[..., None]
    x = c[6] * x + (1 - c[6]) * np.maximum(x, gray * 1.5 + 0.5)
    return np.clip(x + layer + np.rot90(layer, k=2, axes=(1, 2)), 0, 1) * 255


def procedural_frost(n: int, h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A seeded ice texture ``(n, h, w, 3)`` in [0, 255]: blurred crystal streaks over a plasma haze, blue-white."""
    size = 1 << max(1, int(math.ceil(math.log2(max(h, w)))))
    haze = plasma_fractal(n, size, 2.0, rng)[:, :h, :w]
    seeds = (rng.random((n, h, w)) > 0.93).astype(np.float64)
    streaks = np.zeros((n, h, w))
    for lo, hi in ((0, 60), (60, 120), (120, 180)):  # three crystal orientations
        streaks += _motion_blur(seeds, 3, 2.0, rng.uniform(lo, hi, size=n))
    streaks = np.clip(streaks * 2.5, 0, 1)
    ice = np.clip(0.55 * haze + 0.6 * streaks, 0, 1)
    tint = np.array([0.82, 0.9, 1.0])  # R < G < B, pale blue
    return np.clip(ice[..., None] * tint * 255, 0, 255)


FROST_SOURCES = ("corrupt_tta", "procedural")


@functools.lru_cache(maxsize=1)
def frost_images() -> tuple[np.ndarray, ...]:
    """The six frost photographs of Hendrycks & Dietterich (2019), RGB uint8, shrunk ×0.2 as ``make_cifar_c.py``
    does (``cv2.imread`` → ``cv2.resize(fx=fy=0.2)`` bilinear → BGR→RGB). They ship in the ``corrupt-tta`` wheel
    (``corrupt_tta/assets/frost``, part of the ``vision`` extra); read from disk, nothing downloaded."""
    try:
        from importlib import resources

        import cv2

        base = resources.files("corrupt_tta") / "assets" / "frost"
    except ModuleNotFoundError as e:  # pragma: no cover - optional dependency
        raise ValueError(
            "frost_source='corrupt_tta' needs the corrupt-tta package with its frost photos and OpenCV "
            "(pip install 'iclr25[vision]'); use frost_source='procedural' without them"
        ) from e
    out = []
    for i in range(1, 7):
        name = f"frost{i}.png" if i <= 3 else f"frost{i}.jpg"
        with resources.as_file(base / name) as path:
            im = cv2.imread(str(path))  # BGR, alpha dropped, as the reference
        if im is None:  # pragma: no cover - broken install
            raise ValueError(f"frost_source='corrupt_tta': cannot read {name} from the corrupt-tta package")
        a = np.ascontiguousarray(cv2.resize(im, (0, 0), fx=0.2, fy=0.2)[..., ::-1])
        a.setflags(write=False)
        out.append(a)
    return tuple(out)


def _frost(
    x: np.ndarray, c: tuple, rng: np.random.Generator, frost_source: str = "corrupt_tta", **_
) -> np.ndarray:
    """``clip(c₀·x + c₁·frost, 0, 255)``; frost = a random crop of one of the first five photos (the reference
    draws ``randint(5)``, so frost6 is never used), one draw per image."""
    n, h, w = x.shape[:3]
    if frost_source == "procedural":
        fr = procedural_frost(n, h, w, rng)
    elif frost_source == "corrupt_tta":
        imgs = frost_images()
        fr = np.empty((n, h, w, 3))
        idx = rng.integers(0, 5, size=n)  # make_cifar_c.py: np.random.randint(5)
        for k in range(n):  # one crop per image (the photos differ in size)
            a = imgs[idx[k]]
            if a.shape[0] <= h or a.shape[1] <= w:
                raise ValueError(
                    f"images must be smaller than the shrunk frost photo {a.shape[:2]} for frost, got {(h, w)}"
                )
            r0, c0 = rng.integers(0, a.shape[0] - h), rng.integers(0, a.shape[1] - w)
            fr[k] = a[r0 : r0 + h, c0 : c0 + w]
    else:
        raise ValueError(f"frost_source must be one of {FROST_SOURCES}, got {frost_source!r}")
    return np.clip(c[0] * x.astype(np.float64) + c[1] * fr, 0, 255)


def _fog(x: np.ndarray, c: tuple, rng: np.random.Generator, **_) -> np.ndarray:
    n, h, w = x.shape[:3]
    x = x / 255.0
    max_val = x.max(axis=(1, 2, 3), keepdims=True)
    size = 1 << max(1, int(math.ceil(math.log2(max(h, w)))))
    x = x + c[0] * plasma_fractal(n, size, c[1], rng)[:, :h, :w, None]
    return np.clip(x * max_val / (max_val + c[0]), 0, 1) * 255


def _brightness(x: np.ndarray, c: float, rng: np.random.Generator, **_) -> np.ndarray:
    """HSV value ``V ← clip(V + c, 0, 1)`` (float64 HSV as skimage; bit-exact to the reference script)."""
    hsv = rgb_to_hsv(x / 255.0)
    hsv[..., 2] = np.clip(hsv[..., 2] + c, 0, 1)
    return np.clip(hsv_to_rgb(hsv), 0, 1) * 255


def _saturate(x: np.ndarray, c: tuple, rng: np.random.Generator, **_) -> np.ndarray:
    hsv = rgb_to_hsv(x / 255.0)
    hsv[..., 1] = np.clip(hsv[..., 1] * c[0] + c[1], 0, 1)
    return np.clip(hsv_to_rgb(hsv), 0, 1) * 255


def _contrast(x: np.ndarray, c: float, rng: np.random.Generator, **_) -> np.ndarray:
    x = x / 255.0
    means = x.mean(axis=(1, 2), keepdims=True)  # per image and channel
    return np.clip((x - means) * c + means, 0, 1) * 255


def _elastic(x: np.ndarray, c: tuple, rng: np.random.Generator, **_) -> np.ndarray:
    """Random affine (3 jittered points, BORDER_REFLECT_101) then a smoothed random displacement field."""
    n, h, w, ch = x.shape
    side = min(h, w)
    alpha, sigma, aff = c[0] * side, c[1] * side, c[2] * side
    img = x.astype(np.float32) / 255.0
    center = np.float32((h, w)) // 2
    sq = min(h, w) // 3
    pts1 = np.float32(
        [center + sq, [center[0] + sq, center[1] - sq], center - sq]
    )  # (x, y) points as cv2 reads them
    pts2 = pts1[None] + rng.uniform(-aff, aff, size=(n, 3, 2)).astype(np.float32)
    # cv2.getAffineTransform(pts1, pts2): M maps pts1 → pts2; warpAffine samples src at M⁻¹(dst)
    A1 = np.concatenate([pts1, np.ones((3, 1), np.float32)], axis=1).astype(np.float64)  # (3, 3)
    M = np.linalg.solve(A1[None], pts2.astype(np.float64))  # (n, 3, 2): [x y 1] @ M = pts2
    Mf = np.concatenate([M.transpose(0, 2, 1), np.tile([[[0.0, 0.0, 1.0]]], (n, 1, 1))], axis=1)  # (n,3,3)
    Minv = np.linalg.inv(Mf)
    yy, xx = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    dst = np.stack([xx, yy, np.ones_like(xx)], 0).reshape(3, -1).astype(np.float64)
    src = Minv @ dst  # (n, 3, HW)
    img = _bilinear(img, src[:, 1].reshape(n, h, w), src[:, 0].reshape(n, h, w), "mirror")
    dx = _gaussian(rng.uniform(-1, 1, size=(n, h, w)), sigma, mode="reflect", truncate=3) * alpha
    dy = _gaussian(rng.uniform(-1, 1, size=(n, h, w)), sigma, mode="reflect", truncate=3) * alpha
    res = _bilinear(img, yy[None] + dy, xx[None] + dx, "reflect")  # map_coordinates(mode='reflect')
    return np.clip(res, 0, 1) * 255


def _pixelate(x: np.ndarray, c: float, rng: np.random.Generator, **_) -> np.ndarray:
    n, h, w = x.shape[:3]
    out = np.empty_like(x)
    for k in range(n):  # PIL box resize, one image at a time
        im = Image.fromarray(x[k]).resize((int(w * c), int(h * c)), Image.BOX).resize((w, h), Image.BOX)
        out[k] = np.asarray(im)
    return out


def _jpeg(x: np.ndarray, c: int, rng: np.random.Generator, **_) -> np.ndarray:
    out = np.empty_like(x)
    for k in range(x.shape[0]):  # PIL JPEG codec, one image at a time
        buf = io.BytesIO()
        Image.fromarray(x[k]).save(buf, "JPEG", quality=int(c))
        out[k] = np.asarray(Image.open(buf))
    return out


_FUNCS: dict[str, Callable[..., np.ndarray]] = {
    "gaussian_noise": _gaussian_noise,
    "shot_noise": _shot_noise,
    "impulse_noise": _impulse_noise,
    "speckle_noise": _speckle_noise,
    "gaussian_blur": _gaussian_blur,
    "glass_blur": _glass_blur,
    "defocus_blur": _defocus_blur,
    "motion_blur": _motion_blur_c,
    "zoom_blur": _zoom_blur,
    "snow": _snow,
    "frost": _frost,
    "fog": _fog,
    "brightness": _brightness,
    "contrast": _contrast,
    "elastic_transform": _elastic,
    "pixelate": _pixelate,
    "jpeg_compression": _jpeg,
    "saturate": _saturate,
}
ALL_CORRUPTIONS = COMMON_CORRUPTIONS + EXTRA_CORRUPTIONS


def corrupt(
    images: np.ndarray,
    name: str,
    severity: int,
    rng: np.random.Generator | int | None = 0,
    profile: str = "cifar",
    frost_source: str = "corrupt_tta",
) -> np.ndarray:
    """Apply corruption ``name`` at ``severity`` (1–5) to a batch ``(N, H, W, 3)`` (or one ``(H, W, 3)``) uint8 image.

    ``rng``: a ``numpy.random.Generator`` or an int seed (same seed → same output). Returns uint8, same shape.
    """
    if name not in _FUNCS:
        raise ValueError(f"name must be one of {ALL_CORRUPTIONS}, got {name!r}")
    if (
        isinstance(severity, bool)
        or not isinstance(severity, (int, np.integer))
        or not 1 <= int(severity) <= 5
    ):
        raise ValueError(f"severity must be an int in 1..5, got {severity!r}")
    if profile not in PROFILES:
        raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
    if frost_source not in FROST_SOURCES:
        raise ValueError(f"frost_source must be one of {FROST_SOURCES}, got {frost_source!r}")
    x = np.asarray(images)
    single = x.ndim == 3
    if single:
        x = x[None]
    if x.ndim != 4 or x.shape[-1] != 3 or x.shape[1] < 2 or x.shape[2] < 2:
        raise ValueError(
            f"images must have shape (N, H, W, 3) or (H, W, 3) with H, W >= 2, got {np.shape(images)}"
        )
    if x.dtype != np.uint8:
        raise ValueError(f"images must be uint8 in [0, 255], got dtype {x.dtype}")
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(0 if rng is None else int(rng))
    c = (CIFAR_C if profile == "cifar" else IMAGENET_C)[name][int(severity) - 1]
    out = np.uint8(
        _FUNCS[name](x, c, rng, frost_source=frost_source)
    )  # truncation, as np.uint8 in the scripts
    return out[0] if single else out


def noise_at_level(
    images: np.ndarray, name: str, level: float, rng: np.random.Generator | int | None = 0
) -> np.ndarray:
    """One of the three noise corruptions at an explicit constant ``level`` instead of a severity index (for a
    severity ladder beyond the published ones): gaussian σ (> 0), shot photons-per-unit λ (> 0), impulse
    flip probability (in (0, 1]). Same formulas as :func:`corrupt`; uint8 ``(N, H, W, 3)`` in and out."""
    funcs = {"gaussian_noise": _gaussian_noise, "shot_noise": _shot_noise, "impulse_noise": _impulse_noise}
    if name not in funcs:
        raise ValueError(f"name must be one of {tuple(funcs)}, got {name!r}")
    lv = float(level)
    if not math.isfinite(lv) or lv <= 0 or (name == "impulse_noise" and lv > 1):
        raise ValueError(f"level must be a finite number > 0 (<= 1 for impulse_noise), got {level!r}")
    x = np.asarray(images)
    if x.ndim != 4 or x.shape[-1] != 3 or x.dtype != np.uint8:
        raise ValueError(f"images must be uint8 of shape (N, H, W, 3), got {x.dtype} {x.shape}")
    if not isinstance(rng, np.random.Generator):
        rng = np.random.default_rng(0 if rng is None else int(rng))
    return np.uint8(funcs[name](x, lv, rng))


def corrupted_test_set(
    images: np.ndarray,
    corruptions: Sequence[str] = COMMON_CORRUPTIONS,
    severities: Sequence[int] = SEVERITIES,
    seed: int = 0,
    profile: str = "cifar",
    frost_source: str = "corrupt_tta",
    cache_dir: str | Path | None = None,
) -> np.ndarray:
    """All corrupted copies of ``images``: uint8 array ``(len(corruptions), len(severities), N, H, W, 3)``.

    Each (corruption, severity) cell has its own generator derived from ``seed``; the array is cached as
    ``cache_dir/corrupted_<hash>.npy`` (hash of images, names, severities, seed, profile) and written atomically.
    """
    from iclr25.common.seeding import derive_seed

    for nme in corruptions:
        if nme not in _FUNCS:
            raise ValueError(f"corruptions must be names from {ALL_CORRUPTIONS}, got {nme!r}")
    images = np.ascontiguousarray(images)
    key = hashlib.sha256(images.tobytes())
    key.update(
        repr((tuple(corruptions), tuple(severities), int(seed), profile, frost_source, images.shape)).encode()
    )
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / f"corrupted_{key.hexdigest()[:16]}.npy"
        if path.exists():
            try:
                return np.load(path)
            except (OSError, ValueError):
                pass
    out = np.empty((len(corruptions), len(severities), *images.shape), dtype=np.uint8)
    for a, nme in enumerate(corruptions):
        for b, s in enumerate(severities):
            rng = np.random.default_rng(derive_seed(seed, "corruption", nme, int(s)))
            out[a, b] = corrupt(images, nme, int(s), rng, profile=profile, frost_source=frost_source)
    if path is not None:
        import os
        import tempfile

        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".corrupted.", suffix=".npy", dir=path.parent)
        os.close(fd)
        with open(tmp, "wb") as f:
            np.save(f, out)
        os.replace(tmp, path)
    return out


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """Peak signal-to-noise ratio (dB) between two uint8 images/batches."""
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))
