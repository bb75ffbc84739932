"""Generalised calibration error for phrases-as-distributions (§3.2), exact Brier, reliability diagrams.

With M equal-width bins I_m = (b_{m-1}, b_m], phrase distributions P_i and label probabilities y_i:

    w_im = P_i(S ∈ I_m) = F_i(b_m) − F_i(b_{m−1})                     (soft bin membership)
    e_im = E_i[S·1{S ∈ I_m}] = α/(α+β)·[F_{α+1,β}(b_m) − F_{α+1,β}(b_{m−1})]   (Beta closed form)
    n_m = Σ_i w_im,  acc_m = Σ_i y_i w_im / n_m,  conf_m = Σ_i e_im / n_m
    gECE = Σ_m (n_m / Σ n) |acc_m − conf_m|,   MCE = max_m |acc_m − conf_m|

Everything depends on the data only through per-phrase counts c_k and label sums s_k, so one evaluation is
O(K·M) whatever N is (examples using the same phrase share w and e).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import special

from .phrases import PhraseSet

MODES = ("exact", "midpoint")


def _check_bins(bins: int) -> np.ndarray:
    if not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be a positive int, got {bins!r}")
    return np.linspace(0.0, 1.0, int(bins) + 1)


def bin_integrals(alpha: np.ndarray, beta: np.ndarray, bins: int = 100, mode: str = "exact"):
    """Per-distribution bin masses w (K, M) and first moments e (K, M).

    ``mode='exact'`` integrates in closed form (regularised incomplete beta); ``'midpoint'`` is the paper's
    code default (``integrate_dist='none'``): w ≈ f(c_m)/M, e ≈ c_m f(c_m)/M, which loses mass near 0 and 1.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    edges = _check_bins(bins)
    a = np.asarray(alpha, float)[:, None]
    b = np.asarray(beta, float)[:, None]
    if mode == "exact":
        F = special.betainc(a, b, edges[None, :])  # (K, M+1)
        F1 = special.betainc(a + 1, b, edges[None, :])
        w = np.diff(F, axis=1)
        e = a / (a + b) * np.diff(F1, axis=1)
    else:
        c = (edges[:-1] + edges[1:]) / 2
        logpdf = (a - 1) * np.log(c) + (b - 1) * np.log1p(-c) - special.betaln(a, b)
        f = np.exp(logpdf)
        w = f / bins
        e = c * f / bins
    return np.clip(w, 0.0, None), np.clip(e, 0.0, None)


@dataclass(frozen=True)
class Reliability:
    """Per-bin data of a reliability diagram and the summary errors."""

    edges: np.ndarray  # (M+1,)
    n: np.ndarray  # (M,) soft counts
    acc: np.ndarray  # (M,) NaN in empty bins
    conf: np.ndarray  # (M,)
    ece: float
    mce: float


def reliability_from_counts(
    counts: np.ndarray, label_sums: np.ndarray, w: np.ndarray, e: np.ndarray, edges: np.ndarray
) -> Reliability:
    """gECE from per-phrase counts c_k and label sums s_k. ``counts``/``label_sums`` may carry leading batch
    dimensions (..., K); the result's arrays then do too."""
    n = counts @ w  # (..., M)
    sy = label_sums @ w
    se = counts @ e
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = sy / n
        conf = se / n
    gap = np.where(n > 0, np.abs(acc - conf), 0.0)
    total = n.sum(-1, keepdims=True)
    ece = (n / total * gap).sum(-1)
    mce = gap.max(-1)
    return Reliability(edges, n, acc, conf, ece, mce)


def calibration_error(
    phrases_used, outcomes, phrase_set: PhraseSet, bins: int = 100, mode: str = "exact"
) -> Reliability:
    """Generalised ECE of a speaker who said ``phrases_used[i]`` (names or indices into ``phrase_set``) on items
    whose outcome probability is ``outcomes[i]`` (0/1 labels, or P(Y=1) for uncertain labels).

    Returns a :class:`Reliability` (``.ece``, ``.mce`` and the diagram's per-bin data). Point-mass phrases reduce it
    to the standard binned ECE.
    """
    idx = phrase_set.index(phrases_used)
    y = _check_outcomes(outcomes, idx.size)
    w, e = bin_integrals(phrase_set.alpha, phrase_set.beta, bins, mode)
    K = len(phrase_set)
    c = np.bincount(idx, minlength=K).astype(float)
    s = np.bincount(idx, weights=y, minlength=K)
    r = reliability_from_counts(c, s, w, e, _check_bins(bins))
    return Reliability(r.edges, r.n, r.acc, r.conf, float(r.ece), float(r.mce))


def _check_outcomes(outcomes, n: int) -> np.ndarray:
    y = np.asarray(outcomes, float)
    if n == 0:
        raise ValueError(
            "phrases_used/outcomes must not be empty: the calibration error of no items is undefined"
        )
    if y.shape != (n,):
        raise ValueError(f"outcomes must have shape ({n},) like phrases_used, got {y.shape}")
    if np.any((y < 0) | (y > 1)) or not np.all(np.isfinite(y)):
        raise ValueError("outcomes must be probabilities in [0, 1] (0/1 labels or P(Y=1))")
    return y


def brier_exact(phrases_used, outcomes, phrase_set: PhraseSet) -> float:
    """Exact Brier score of phrase distributions: mean_i [Var_i(S) + (E_i[S] − y_i)²]."""
    idx = phrase_set.index(phrases_used)
    y = _check_outcomes(outcomes, idx.size)
    return float(np.mean(phrase_set.var[idx] + (phrase_set.mean[idx] - y) ** 2))


def binned_ece(probs, outcomes, bins: int = 100) -> float:
    """Standard binned ECE of numeric confidences (equal-width bins, right-closed like the generalised one)."""
    p = np.asarray(probs, float)
    y = _check_outcomes(outcomes, p.size)
    edges = _check_bins(bins)
    m = np.clip(np.searchsorted(edges, p, side="left") - 1, 0, len(edges) - 2)
    n = np.bincount(m, minlength=bins).astype(float)
    sy = np.bincount(m, weights=y, minlength=bins)
    sp = np.bincount(m, weights=p, minlength=bins)
    nz = n > 0
    return float(np.sum(np.abs(sy[nz] - sp[nz])) / p.size)


def brier(probs, outcomes) -> float:
    p = np.asarray(probs, float)
    return float(np.mean((p - _check_outcomes(outcomes, p.size)) ** 2))


def plot_reliability(ax, rel: Reliability, label: str = "", color: str | None = None) -> None:
    """Draw a reliability curve (accuracy vs confidence per bin, bins with mass) on a matplotlib axis."""
    keep = rel.n > 1e-9 * rel.n.sum()
    ax.plot(
        rel.conf[keep],
        rel.acc[keep],
        marker="o",
        ms=2.5,
        lw=1.2,
        color=color,
        label=f"{label} (gECE {rel.ece:.3f})" if label else None,
    )
    ax.plot([0, 1], [0, 1], ls="--", color="0.6", lw=0.8)
    ax.set_xlabel("confidence E[S | bin]")
    ax.set_ylabel("accuracy")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
