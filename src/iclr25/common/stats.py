"""Statistics over per-seed values shared by the reproductions: mean ± std cells, paired Student-t intervals of
per-seed differences, and the one-line notes that report them.

Every claim that compares two arms on the same seeds reports the paired differences ``d_s = a_s − b_s`` and the
95 % Student-t interval of their mean (CONTRIBUTING, "House rules for claims"); :func:`paired_note` is that line,
:func:`sign_note` says whether the interval decides the sign.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .fmt import fmt_fixed

__all__ = [
    "interval_note",
    "mean_std",
    "one_sided_bound95",
    "paired_note",
    "sign_note",
    "t_interval95",
]


def mean_std(x: Sequence[float], digits: int = 3) -> str:
    """``"mean ± std"`` of per-seed values with ``digits`` decimals (for report tables); NaN seeds are
    counted, not dropped (:func:`iclr25.common.fmt.fmt_fixed`)."""
    return fmt_fixed(x, digits)


def t_interval95(d: Sequence[float]) -> tuple[float, float]:
    """Two-sided 95 % Student-t interval of the mean of paired per-seed differences ``d`` ((nan, nan) for
    fewer than two seeds)."""
    from scipy import stats

    a = np.asarray(d, dtype=float)
    if a.size < 2:
        return float("nan"), float("nan")
    h = float(stats.t.ppf(0.975, a.size - 1) * a.std(ddof=1) / np.sqrt(a.size))
    return float(a.mean() - h), float(a.mean() + h)


def one_sided_bound95(d: np.ndarray | list, side: str) -> float:
    """Paired one-sided 95 % Student-t bound of the mean of per-seed differences ``d``: ``side="lower"`` gives
    ``L`` with P(mean ≥ L) = 95 % (mean − t₀.₉₅,ₙ₋₁·s/√n), ``"upper"`` the mirror. NaN for fewer than 2 seeds."""
    from scipy import stats

    if side not in ("lower", "upper"):
        raise ValueError(f"side must be 'lower' or 'upper', got {side!r}")
    a = np.asarray(d, dtype=float)
    if a.size < 2 or not np.isfinite(a).all():
        return float("nan")
    h = float(stats.t.ppf(0.95, a.size - 1) * a.std(ddof=1) / np.sqrt(a.size))
    return float(a.mean() - h) if side == "lower" else float(a.mean() + h)


def interval_note(d: Sequence[float], digits: int = 3) -> str:
    """``"[lo, hi]"``: the paired 95 % t-interval of the mean of ``d`` with signed ``digits`` decimals, or
    ``"n/a (1 seed)"`` when fewer than two seeds make an interval undefined."""
    if len(d) < 2:
        return "n/a (1 seed)"
    lo, hi = t_interval95(d)
    return f"[{lo:+.{digits}f}, {hi:+.{digits}f}]"


def sign_note(d: Sequence[float]) -> str:
    """Whether the paired 95 % t-interval of the per-seed differences ``d`` decides the sign of their mean:
    ``"decided: positive"``, ``"decided: negative"``, ``"not decided (the interval contains 0)"`` or
    ``"not decided (1 seed)"``."""
    if len(d) < 2:
        return "not decided (1 seed)"
    lo, hi = t_interval95(d)
    if lo > 0:
        return "decided: positive"
    if hi < 0:
        return "decided: negative"
    return "not decided (the interval contains 0)"


def paired_note(a: Sequence[float], b: Sequence[float], digits: int = 2) -> str:
    """``"per-seed differences +x, +y, …; 95 % t-interval [lo, hi]"`` for paired per-seed values ``a − b``
    (same seeds, same order)."""
    a_, b_ = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a_.shape != b_.shape:
        raise ValueError(f"paired values need the same seeds: got {a_.size} and {b_.size} values")
    d = a_ - b_
    diffs = ", ".join(f"{x:+.{digits}f}" for x in d)
    return f"per-seed differences {diffs}; 95 % t-interval {interval_note(d, digits)}"
