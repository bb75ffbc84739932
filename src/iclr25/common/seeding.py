"""One call seeds every random source; components take explicit generators."""

from __future__ import annotations

import os
import random

import numpy as np
import torch


def seed_everything(seed: int) -> None:
    """Seed python's ``random``, numpy's legacy global RNG and torch (CPU and CUDA)."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    random.seed(int(seed))
    np.random.seed(int(seed) % (2**32))
    torch.manual_seed(int(seed))
    os.environ["PYTHONHASHSEED"] = str(int(seed))


def torch_generator(seed: int, device: str | torch.device = "cpu") -> torch.Generator:
    """A fresh ``torch.Generator`` on ``device`` seeded with ``seed``."""
    g = torch.Generator(device=device)
    g.manual_seed(int(seed))
    return g


def numpy_rng(seed: int) -> np.random.Generator:
    """A fresh numpy ``Generator`` (PCG64) seeded with ``seed``."""
    return np.random.default_rng(int(seed))


def derive_seed(seed: int, *names: str | int) -> int:
    """A stable sub-seed for a named component (independent streams for data, init, noise ...)."""
    ss = np.random.SeedSequence([int(seed)] + [_stable_int(n) for n in names])
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def _stable_int(x: str | int) -> int:
    if isinstance(x, (int, np.integer)):
        return int(x) % (2**32)
    h = 2166136261
    for b in str(x).encode():
        h = ((h ^ b) * 16777619) % (2**32)
    return h
