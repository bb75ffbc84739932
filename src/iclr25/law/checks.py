"""Argument checks shared by the LaW modules: a ``ValueError`` naming the parameter, the value and what was expected."""

from __future__ import annotations

import math
from typing import Any

import torch


def int_at_least(name: str, v: Any, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    return v


def number(
    name: str, v: Any, lo: float | None = None, hi: float | None = None, *, open_lo: bool = False
) -> float:
    """A finite real number in [lo, hi] (``open_lo``: > lo)."""
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    if ok and lo is not None:
        ok = v > lo if open_lo else v >= lo
    if ok and hi is not None:
        ok = v <= hi
    if not ok:
        lo_s = "" if lo is None else (f" > {lo}" if open_lo else f" >= {lo}")
        hi_s = "" if hi is None else f" <= {hi}"
        raise ValueError(
            f"{name} must be a finite number{lo_s}{' and' if lo_s and hi_s else ''}{hi_s}, got {v!r}"
        )
    return float(v)


def matrix(name: str, t: Any, rows: int | None = None, cols: int | None = None) -> torch.Tensor:
    """A finite 2-D tensor (shape checked where given)."""
    if not isinstance(t, torch.Tensor) or t.ndim != 2:
        got = tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__
        raise ValueError(f"{name} must be a 2-D torch.Tensor, got {got}")
    if (rows is not None and t.shape[0] != rows) or (cols is not None and t.shape[1] != cols):
        want = f"({'?' if rows is None else rows}, {'?' if cols is None else cols})"
        raise ValueError(f"{name} must have shape {want}, got {tuple(t.shape)}")
    if not bool(torch.isfinite(t).all()):
        raise ValueError(f"{name} must be finite (got NaN or inf)")
    return t


def batch_size(v: Any) -> int:
    return int_at_least("batch_size", v, 1)


def seed(v: Any) -> int:
    return int_at_least("seed", v, 0)


def token_ids(name: str, t: torch.Tensor, vocab_size: int | None) -> None:
    """Integer token ids of shape (n, L) inside the model's vocabulary."""
    if t.dtype not in (torch.int64, torch.int32) or t.ndim != 2:
        raise ValueError(
            f"{name} as a tensor must be integer token ids of shape (n, L), got {t.dtype} {tuple(t.shape)}"
        )
    if t.numel() and (int(t.min()) < 0 or (vocab_size is not None and int(t.max()) >= vocab_size)):
        raise ValueError(
            f"{name} holds token ids outside the model's vocabulary [0, {vocab_size}): "
            f"min {int(t.min())}, max {int(t.max())}"
        )
