"""The ``real`` preset's inputs: Fashion-MNIST (28×28 grayscale) and the corruption suite adapted to it (issue #53).

Data (``iclr25.assets.load_fashion_mnist``; the fixed asset, never a seed's choice):

* **test**: the first ``n_test_per_class`` images of each class of the 10,000-image test split, in file order
  (class-balanced, the same for every seed and arm, so the corrupted copies are generated once and cached);
* **train**: per seed, ``n_train_per_class`` images of each class drawn without replacement from the
  60,000-image train split by ``derive_seed(seed, "fashion_subset")`` — the seed varies the sample, the
  initialisation and the data order, never the data;
* normalisation: the mean / std of all 60,000 train pixels (fixed).

Corruptions at 28×28 grayscale (:func:`corrupt_gray`): the 15 corruptions of Hendrycks & Dietterich (2019) at
their five CIFAR-10-C severities (the 32×32 constants; 28×28 is the nearest published scale), applied to the gray
image replicated to three channels and turned back into one channel by rule:

* the three noises draw independently per channel, so channel 0 is kept: it carries exactly the specified noise
  (a channel mean would shrink a Gaussian σ by √3);
* every other corruption, given a gray image, is identical in the three channels except ``frost``, whose overlay
  is a colour photograph: the ITU-R BT.601 luma ``0.299 R + 0.587 G + 0.114 B`` is kept (it equals any channel
  where the three agree). No corruption is dropped; frost is the one adapted (a gray frost overlay).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from iclr25.common.seeding import derive_seed

from .corruptions import COMMON_CORRUPTIONS, NOISE_CORRUPTIONS, SEVERITIES, corrupt, noise_at_level

N_CLASSES = 10
LUMA = np.array([0.299, 0.587, 0.114])


def _check_gray(images: np.ndarray) -> np.ndarray:
    x = np.asarray(images)
    if x.ndim == 3:
        x = x[..., None]
    if x.ndim != 4 or x.shape[-1] != 1 or x.dtype != np.uint8:
        raise ValueError(f"images must be uint8 of shape (N, H, W) or (N, H, W, 1), got {x.dtype} {x.shape}")
    return x


def _to_gray(rgb: np.ndarray, name: str) -> np.ndarray:
    """(N, H, W, 3) uint8 → (N, H, W, 1) by the module's rule (channel 0 for the noises, luma otherwise)."""
    if name in NOISE_CORRUPTIONS:
        return rgb[..., :1].copy()
    return np.clip(np.round(rgb.astype(np.float64) @ LUMA), 0, 255).astype(np.uint8)[..., None]


def corrupt_gray(
    images: np.ndarray,
    name: str,
    severity: int,
    rng: np.random.Generator | int | None = 0,
    frost_source: str = "corrupt_tta",
) -> np.ndarray:
    """Corruption ``name`` at ``severity`` (1–5, CIFAR-10-C constants) of a grayscale batch ``(N, H, W[, 1])``
    uint8; returns ``(N, H, W, 1)`` uint8 (module docstring: replicate, corrupt, back to one channel)."""
    x = _check_gray(images)
    rgb = np.repeat(x, 3, axis=-1)
    return _to_gray(corrupt(rgb, name, severity, rng, profile="cifar", frost_source=frost_source), name)


def noise_gray(
    images: np.ndarray, name: str, level: float, rng: np.random.Generator | int | None = 0
) -> np.ndarray:
    """A noise corruption at an explicit level (:func:`~.corruptions.noise_at_level`) of a grayscale batch."""
    x = _check_gray(images)
    return _to_gray(noise_at_level(np.repeat(x, 3, axis=-1), name, level, rng), name)


def corrupted_gray_set(
    images: np.ndarray,
    corruptions: Sequence[str] = COMMON_CORRUPTIONS,
    severities: Sequence[int] = SEVERITIES,
    seed: int = 0,
    frost_source: str = "corrupt_tta",
    cache_dir: str | Path | None = None,
) -> np.ndarray:
    """Every corrupted copy ``(len(corruptions), len(severities), N, H, W, 1)`` uint8 of a grayscale batch; one
    generator per cell (``derive_seed(seed, "corruption", name, severity)``), cached under ``cache_dir``."""
    x = np.ascontiguousarray(_check_gray(images))
    key = hashlib.sha256(x.tobytes())
    key.update(
        repr(("gray", tuple(corruptions), tuple(severities), int(seed), frost_source, x.shape)).encode()
    )
    path = None
    if cache_dir is not None:
        path = Path(cache_dir) / f"corrupted_gray_{key.hexdigest()[:16]}.npy"
        if path.exists():
            try:
                return np.load(path)
            except (OSError, ValueError):
                pass
    out = np.empty((len(corruptions), len(severities), *x.shape), dtype=np.uint8)
    for a, nme in enumerate(corruptions):
        for b, s in enumerate(severities):
            rng = np.random.default_rng(derive_seed(seed, "corruption", nme, int(s)))
            out[a, b] = corrupt_gray(x, nme, int(s), rng, frost_source=frost_source)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".corrupted.", suffix=".npy", dir=path.parent)
        os.close(fd)
        with open(tmp, "wb") as f:
            np.save(f, out)
        os.replace(tmp, path)
    return out


def load_split(split: str) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST ``split`` as numpy: uint8 ``(N, 28, 28, 1)`` and int64 labels."""
    from iclr25.assets import load_fashion_mnist

    x, y = load_fashion_mnist(split)
    return x.numpy()[..., None], y.numpy()


def balanced_first(y: np.ndarray, per_class: int) -> np.ndarray:
    """Indices of the first ``per_class`` examples of each class, in file order (sorted)."""
    idx = [np.flatnonzero(y == c)[:per_class] for c in range(N_CLASSES)]
    if any(len(i) < per_class for i in idx):
        raise ValueError(f"per_class must be <= the smallest class count, got {per_class}")
    return np.sort(np.concatenate(idx))


def balanced_sample(y: np.ndarray, per_class: int, seed: int) -> np.ndarray:
    """Indices of ``per_class`` examples of each class drawn without replacement by
    ``derive_seed(seed, "fashion_subset")`` (sorted)."""
    rng = np.random.default_rng(derive_seed(seed, "fashion_subset"))
    out = []
    for c in range(N_CLASSES):
        pool = np.flatnonzero(y == c)
        if per_class > pool.size:
            raise ValueError(f"per_class must be <= {pool.size} (class {c}), got {per_class}")
        out.append(rng.choice(pool, size=per_class, replace=False))
    return np.sort(np.concatenate(out))
