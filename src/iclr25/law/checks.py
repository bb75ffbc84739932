"""Argument checks shared by the LaW modules: a ``ValueError`` naming the parameter, the value and what was expected."""

from __future__ import annotations

from typing import Any

import torch

from ..common.checks import need_int, need_real


def int_at_least(name: str, v: Any, lo: int) -> int:
    return need_int(name, v, lo)


def number(
    name: str, v: Any, lo: float | None = None, hi: float | None = None, *, open_lo: bool = False
) -> float:
    """A finite real number in [lo, hi] (``open_lo``: > lo)."""
    return need_real(name, v, lo, hi, lo_open=open_lo)


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
