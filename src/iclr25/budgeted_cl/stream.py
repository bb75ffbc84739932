"""Online class-incremental streams (SDP's Gaussian / boundary-free and disjoint) and the digits benchmark.

Gaussian stream (Koh et al., ICLR 2023, ``make_stream``): shuffle the classes, give the class of rank i the time
centre i/C, draw each of its samples' times from N(i/C, σ²) (σ = 0.1), optionally add a random period index in
{0..repeat−1}, and sort all samples by time. σ = 0 gives the disjoint order by class; :func:`disjoint_stream`
groups the shuffled classes into tasks instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch.nn import functional as F

__all__ = ["gaussian_stream", "disjoint_stream", "DigitsData", "load_digits16"]


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
class DigitsData:
    """uint8 images (N, 1, H, W) and int64 labels, split into train (the stream) and test."""

    train_x: torch.Tensor
    train_y: torch.Tensor
    test_x: torch.Tensor
    test_y: torch.Tensor
    n_classes: int

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return tuple(self.train_x.shape[1:])

    @property
    def bytes_per_image(self) -> int:
        return int(self.train_x[0].numel() * self.train_x.element_size())


def load_digits16(seed: int = 0, size: int = 16, test_fraction: float = 0.2) -> DigitsData:
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
    return DigitsData(x[tr], yt[tr], x[te], yt[te], int(y.max()) + 1)
