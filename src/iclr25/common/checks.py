"""Argument checks shared by the systems' public functions: a ``ValueError`` naming the parameter, its value and
what was expected (bools are never numbers; numpy integers count as ints)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def need_str(name: str, v) -> str:
    if not isinstance(v, str):
        raise ValueError(f"{name} must be a str, got {type(v).__name__} {v!r:.80}")
    return v


def need_bool(name: str, v) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{name} must be a bool, got {v!r}")
    return v


def need_int(name: str, v, lo: int = 0) -> int:
    """An int (not a bool) >= ``lo``."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return v


def need_count(name: str, v, lo: int = 1) -> int:
    """An int (not a bool) >= ``lo`` (default 1: a size or a count)."""
    return need_int(name, v, lo)


def need_real(name: str, v, lo: float | None = None, hi: float | None = None, lo_open: bool = False) -> float:
    """A finite real number (not a bool) in ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``)."""
    ok = not isinstance(v, (bool, np.bool_)) and isinstance(v, (int, float, np.integer, np.floating))
    ok = ok and math.isfinite(v)
    if ok and lo is not None:
        ok = v > lo if lo_open else v >= lo
    if ok and hi is not None:
        ok = v <= hi
    if not ok:
        rng = f" in {'(' if lo_open else '['}{lo}, {hi}]" if lo is not None and hi is not None else ""
        if lo is not None and hi is None:
            rng = f" {'>' if lo_open else '>='} {lo}"
        raise ValueError(f"{name} must be a finite number{rng}, got {v!r}")
    return float(v)


def need_seed(name: str, v) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
        raise ValueError(f"{name} must be a non-negative int seed, got {v!r}")
    return v


def need_pairs(name: str, v) -> list[tuple[str, str]]:
    """A sequence of (str, str) pairs."""
    if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
        raise ValueError(f"{name} must be a sequence of (str, str) pairs, got {type(v).__name__}")
    for i, p in enumerate(v):
        if not (isinstance(p, (tuple, list)) and len(p) == 2 and all(isinstance(x, str) for x in p)):
            raise ValueError(f"{name}[{i}] must be a (str, str) pair, got {p!r:.80}")
    return list(v)


def need_type(name: str, v, cls, what: str | None = None):
    if not isinstance(v, cls):
        what = what or (cls.__name__ if isinstance(cls, type) else " or ".join(c.__name__ for c in cls))
        raise ValueError(f"{name} must be a {what}, got {type(v).__name__} {v!r:.80}")
    return v


def need_callable(name: str, v, what: str) -> None:
    if not callable(v):
        raise ValueError(f"{name} must be a callable {what}, got {type(v).__name__} {v!r:.80}")


def need_array(
    name: str, v, ndim: int | None = None, last: int | None = None, finite: bool = True
) -> np.ndarray:
    """A float array with ``ndim`` dimensions, ``last`` entries on its last axis, all finite."""
    try:
        a = np.asarray(v, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{name} must be a numeric array, got {type(v).__name__}") from e
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-d, got shape {a.shape}")
    if last is not None and (a.ndim == 0 or a.shape[-1] != last):
        raise ValueError(f"{name} must have {last} entries on its last axis, got shape {a.shape}")
    if finite and not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite, got NaN/inf entries")
    return a


def need_rng(name: str, v) -> None:
    if not isinstance(v, np.random.Generator):
        raise ValueError(f"{name} must be a numpy Generator (np.random.default_rng(seed)), got {v!r:.80}")


def need_range(name: str, r, lo: float | None = None) -> tuple[float, float]:
    """A ``(low, high)`` pair of finite numbers with ``low <= high`` (and ``low >= lo``)."""
    try:
        a, b = r
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a (low, high) pair, got {r!r}") from None
    a, b = need_real(name, a, lo), need_real(name, b, lo)
    if not a <= b:
        raise ValueError(f"{name} must be a (low, high) range with low <= high, got {r!r}")
    return a, b
