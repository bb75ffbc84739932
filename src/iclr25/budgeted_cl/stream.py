"""Online class-incremental streams (SDP's Gaussian / boundary-free and disjoint) and the digits benchmark.

Gaussian stream (Koh et al., ICLR 2023, ``make_stream``): shuffle the classes, give the class of rank i the time
centre i/C, draw each of its samples' times from N(i/C, σ²) (σ = 0.1), optionally add a random period index in
{0..repeat−1}, and sort all samples by time. σ = 0 gives the disjoint order by class; :func:`disjoint_stream`
groups the shuffled classes into tasks instead.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

__all__ = [
    "gaussian_stream",
    "disjoint_stream",
    "ImageStreamData",
    "DigitsData",
    "images_to_float",
    "load_digits16",
]


def gaussian_stream(labels: np.ndarray, sigma: float = 0.1, repeat: int = 1, seed: int = 0) -> np.ndarray:
    """Order (indices into ``labels``) of the Gaussian-scheduled stream."""
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.size == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
    if sigma < 0:
        raise ValueError(f"sigma must be >= 0, got {sigma}")
    if repeat < 1:
        raise ValueError(f"repeat must be >= 1, got {repeat}")
    rng = np.random.default_rng(seed)
    classes = np.unique(labels)
    order = rng.permutation(classes)
    rank = np.empty(int(classes.max()) + 1, dtype=np.int64)
    rank[order] = np.arange(order.size)
    centre = rank[labels] / order.size  # i / C
    t = centre + sigma * rng.standard_normal(labels.size)
    if repeat > 1:
        t = t + rng.integers(0, repeat, labels.size)
    return np.argsort(t, kind="stable")


def disjoint_stream(labels: np.ndarray, n_tasks: int = 5, seed: int = 0) -> np.ndarray:
    """Order of the disjoint stream: shuffled classes split into ``n_tasks`` tasks, samples shuffled within."""
    labels = np.asarray(labels)
    classes = np.unique(labels)
    if not 1 <= n_tasks <= classes.size:
        raise ValueError(f"n_tasks must be in [1, {classes.size}], got {n_tasks}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(classes)
    task_of_class = np.empty(int(classes.max()) + 1, dtype=np.int64)
    for k, chunk in enumerate(np.array_split(order, n_tasks)):
        task_of_class[chunk] = k
    key = task_of_class[labels] + rng.random(labels.size)  # task, then random position inside the task
    return np.argsort(key, kind="stable")


@dataclass
class ImageStreamData:
    """An image classification benchmark for an online stream: train images (the stream) and test images.

    ``train_x`` / ``test_x``: ``(N, C, H, W)`` tensors, either ``uint8`` in 0–255 (stored as is, divided by 255 when
    fed to the model) or floating point already in [0, 1] (fed as is). Anything else (other dtypes, float values
    outside [0, 1], NaN/inf) is refused: a float image in 0–255 would otherwise be silently mis-scaled.
    ``train_y`` / ``test_y``: int64 labels in ``[0, n_classes)``.
    """

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    n_classes: int

    def __post_init__(self) -> None:
        if not isinstance(self.n_classes, int) or self.n_classes < 2:
            raise ValueError(f"n_classes must be an int >= 2, got {self.n_classes!r}")
        for name in ("train_x", "test_x"):
            x = getattr(self, name)
            if not torch.is_tensor(x) or x.dim() != 4 or x.shape[0] == 0:
                shape = tuple(x.shape) if torch.is_tensor(x) else type(x).__name__
                raise ValueError(f"{name} must be a non-empty (N, C, H, W) tensor, got {shape}")
            if x.dtype == torch.uint8:
                continue
            if not x.is_floating_point():
                raise ValueError(
                    f"{name} must be uint8 (0-255) or floating point in [0, 1], got dtype {x.dtype}"
                )
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"{name} holds NaN or inf values; expected floats in [0, 1]")
            lo, hi = float(x.min()), float(x.max())
            if lo < 0.0 or hi > 1.0:
                raise ValueError(
                    f"{name} is floating point with values in [{lo:g}, {hi:g}]; expected [0, 1] "
                    "(pass uint8 images for 0-255 data, or divide by 255 once yourself)"
                )
        if self.train_x.shape[1:] != self.test_x.shape[1:] or self.train_x.dtype != self.test_x.dtype:
            raise ValueError(
                f"train_x and test_x must share sample shape and dtype, got {tuple(self.train_x.shape[1:])} "
                f"{self.train_x.dtype} and {tuple(self.test_x.shape[1:])} {self.test_x.dtype}"
            )
        for name, xname in (("train_y", "train_x"), ("test_y", "test_x")):
            y = getattr(self, name)
            n = getattr(self, xname).shape[0]
            if not torch.is_tensor(y) or y.dtype != torch.int64 or tuple(y.shape) != (n,):
                got = f"{tuple(y.shape)} {y.dtype}" if torch.is_tensor(y) else type(y).__name__
                raise ValueError(f"{name} must be an int64 tensor of shape ({n},), got {got}")
            if int(y.min()) < 0 or int(y.max()) >= self.n_classes:
                raise ValueError(
                    f"{name} must hold labels in [0, {self.n_classes}), got [{int(y.min())}, {int(y.max())}]"
                )

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.train_x.shape[1:])

    @property
    def bytes_per_image(self) -> int:
        return int(self.train_x[0].numel() * self.train_x.element_size())


class DigitsData(ImageStreamData):
    """Deprecated alias of :class:`ImageStreamData` (the container was never specific to digits)."""

    def __post_init__(self) -> None:
        warnings.warn(
            "DigitsData is deprecated; use ImageStreamData (same fields)", DeprecationWarning, stacklevel=3
        )
        super().__post_init__()


def images_to_float(x: torch.Tensor) -> torch.Tensor:
    """Model input from stored images: uint8 0–255 → float / 255; float images (already in [0, 1]) as they are."""
    if x.dtype == torch.uint8:
        return x.float().div_(255.0)
    return x.float()


def load_digits16(seed: int = 0, size: int = 16, test_fraction: float = 0.2) -> ImageStreamData:
    """scikit-learn's bundled digits (1 797 8×8 images), upsampled bilinearly to size×size, stored as uint8."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if size < 8:
        raise ValueError(f"size must be >= 8, got {size}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction}")
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0  # (N, 1, 8, 8) in [0, 1]
    if size != 8:
        x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    x = (x.clamp(0, 1) * 255).round().to(torch.uint8)
    y = np.asarray(d.target, dtype=np.int64)
    tr, te = train_test_split(np.arange(y.size), test_size=test_fraction, random_state=seed, stratify=y)
    tr, te = np.sort(tr), np.sort(te)
    yt = torch.from_numpy(y)
    return ImageStreamData(x[tr], yt[tr], x[te], yt[te], int(y.max()) + 1)
