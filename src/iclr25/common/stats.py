"""Statistics over per-seed values shared by the reproductions: mean ± std cells, paired Student-t intervals of
per-seed differences, and the one-line notes that report them.

Every claim that compares two arms on the same seeds reports the paired differences ``d_s = a_s − b_s`` and the
95 % Student-t interval of their mean (CONTRIBUTING, "House rules for claims"); :func:`paired_note` is that line,
:func:`sign_note` says whether the interval decides the sign.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from .fmt import fmt_fixed

__all__ = [
    "fieller_interval95",
    "interval_note",
    "mean_std",
    "one_sided_bound95",
    "paired_note",
    "seeds_to_decide",
    "sign_note",
    "t_interval95",
]

MAX_SEEDS_ESTIMATE = 1000  # seeds_to_decide looks no further (the CLI's --seeds limit)


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


def fieller_interval95(m: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """95 % interval of the ratio of means ``mean(m) / mean(b)`` of paired per-seed values (Fieller): the set of
    ratios ``θ`` for which the paired 95 % Student-t interval of ``m_s − θ·b_s`` contains 0.

    ``(-inf, inf)`` when that set is unbounded (the baseline's mean is not distinguishable from 0 at this seed
    count: the ratio's sign or size is not decided); ``(nan, nan)`` for fewer than two pairs, a NaN value or
    unpaired lengths. With no spread (every ``m_s`` and ``b_s`` constant) it is the point ``[r, r]``."""
    from scipy import stats

    m_, b_ = np.asarray(m, dtype=float), np.asarray(b, dtype=float)
    n = m_.size
    if n < 2 or b_.shape != m_.shape or not (np.isfinite(m_).all() and np.isfinite(b_).all()):
        return float("nan"), float("nan")
    q = float(stats.t.ppf(0.975, n - 1)) ** 2 / n
    mm, mb = float(m_.mean()), float(b_.mean())
    cov = np.cov(np.vstack([m_, b_]), ddof=1)
    s_mm, s_bb, s_mb = float(cov[0, 0]), float(cov[1, 1]), float(cov[0, 1])
    # {θ : (mm − θ·mb)² ≤ q·(s_mm − 2θ·s_mb + θ²·s_bb)}  ⟺  a·θ² − 2·h·θ + c ≤ 0
    a = mb * mb - q * s_bb
    h = mm * mb - q * s_mb
    c = mm * mm - q * s_mm
    if a <= 0:
        return -math.inf, math.inf
    disc = max(h * h - a * c, 0.0)  # ≥ 0 whenever a > 0: θ = mm/mb satisfies the inequality
    r = math.sqrt(disc)
    return float((h - r) / a), float((h + r) / a)


def seeds_to_decide(d: Sequence[float], threshold: float, cap: int = MAX_SEEDS_ESTIMATE) -> int | None:
    """The smallest seed count ``n`` at which the two-sided 95 % Student-t interval of the mean of ``d`` would
    clear ``threshold``, were the mean and the standard deviation (ddof=1) to stay as measured:
    ``t₀.₉₇₅,ₙ₋₁ · sd / √n < |mean − threshold|``. ``None`` when that takes more than ``cap`` seeds, when the mean
    sits on the threshold, or when it cannot be estimated (fewer than two finite values)."""
    from scipy import stats

    a = np.asarray(d, dtype=float)
    if a.size < 2 or not np.isfinite(a).all() or not math.isfinite(threshold):
        return None
    gap = abs(float(a.mean()) - threshold)
    sd = float(a.std(ddof=1))
    if gap == 0:
        return None
    if sd == 0:
        return int(a.size)
    ns = np.arange(2, cap + 1)
    ok = stats.t.ppf(0.975, ns - 1) * sd / np.sqrt(ns) < gap
    return int(ns[np.argmax(ok)]) if ok.any() else None


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
