"""Fashion-MNIST from its IDX files — the Debian ``dataset-fashion-mnist`` package's, or a torchvision root.

The IDX format (big-endian magic, dimension sizes, then uint8 data) is read with numpy and returned as torch
tensors: the same arrays torchvision's ``FashionMNIST`` holds in ``.data`` / ``.targets``.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any

import numpy as np

from .store import path

CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def read_idx(file: str | os.PathLike) -> np.ndarray:
    """An IDX file (optionally gzipped) as a numpy array of its declared shape (uint8 data only)."""
    p = Path(file)
    raw = gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{p.name}: not an IDX file (bad magic {raw[:4]!r})")
    if raw[2] != 0x08:
        raise ValueError(f"{p.name}: IDX data type {raw[2]:#x} is not uint8 (0x08)")
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{p.name}: {data.size} values for the declared shape {shape}")
    return data.reshape(shape)


def _find(root: Path, stem: str) -> Path:
    for cand in (
        root / f"{stem}.gz",
        root / stem,
        root / "FashionMNIST" / "raw" / f"{stem}.gz",
        root / "FashionMNIST" / "raw" / stem,
    ):
        if cand.is_file():
            return cand
    raise FileNotFoundError(
        f"root: no {stem}[.gz] in {root} (nor in {root}/FashionMNIST/raw, torchvision's layout)"
    )


def load_fashion_mnist(split: str = "train", root: str | os.PathLike | None = None) -> tuple[Any, Any]:
    """``(images, labels)``: uint8 tensor ``(N, 28, 28)`` and int64 tensor ``(N,)`` — 60,000 for ``train``,
    10,000 for ``test``. ``root``: a folder of the IDX files (``/usr/share/datasets/fashion-mnist``) or a
    torchvision root; default the asset cache (``iclr25 assets fetch fashion-mnist``)."""
    import torch

    if split not in _FILES:
        raise ValueError(f"split must be 'train' or 'test', got {split!r}")
    folder = Path(root) if root is not None else path("fashion-mnist") / "fashion-mnist"
    xs = read_idx(_find(folder, _FILES[split][0]))
    ys = read_idx(_find(folder, _FILES[split][1]))
    if xs.shape[0] != ys.shape[0] or xs.shape[1:] != (28, 28):
        raise ValueError(f"Fashion-MNIST {split}: images {xs.shape} do not match labels {ys.shape}")
    return torch.from_numpy(xs.copy()), torch.from_numpy(ys.astype(np.int64))
