"""Held-out evaluation of the OT recalibration against the baselines on one calibration/test split, and the
sweep of alternative cal/test halvings (README, "Reproduction"; §3.3 and §4 of the paper).

``evaluate_split`` fits :class:`OTCalibrator`, histogram binning and Platt scaling on the calibration items and
scores the test items: generalised ECE and exact Brier of the phrases (before OT, after OT, histogram binning then
nearest phrase), standard ECE and Brier of the numeric baselines. ``digits_split_sweep`` repeats OT over random
re-halvings of the same items and says which halvings pass given thresholds.
"""

from __future__ import annotations

import numpy as np

from .baselines import HistogramBinningOnPhrases, PlattOnMeans
from .metrics import binned_ece, brier, brier_exact, calibration_error
from .phrases import PhraseSet
from .transport import OTConfig


def evaluate_split(
    ps: PhraseSet,
    idx_cal,
    y_cal,
    idx_test,
    y_test,
    *,
    ot: OTConfig,
    bins: int,
    seed: int,
) -> dict:
    """OT (settings ``ot``) and the baselines fitted on ``(idx_cal, y_cal)`` and scored on ``(idx_test, y_test)`` with ``bins`` bins:
    ``before``, ``ot`` (with ``drop`` = 1 − gECE_after/gECE_before), ``hb_nearest_phrase``, ``platt``,
    ``hist_binning``, the OT ``map`` (phrase names) and ``n_test``."""
    ot_cal = ot.calibrator(ps, bins, seed).fit(idx_cal, y_cal)
    new = ot_cal.transform(idx_test)
    hb = HistogramBinningOnPhrases(ps).fit(idx_cal, y_cal)
    platt = PlattOnMeans(ps).fit(idx_cal, y_cal)
    nearest = hb.to_phrases(idx_test)
    before = calibration_error(idx_test, y_test, ps, bins).ece
    after = calibration_error(new, y_test, ps, bins).ece
    return {
        "before": {
            "gece": before,
            "brier": brier_exact(idx_test, y_test, ps),
            "mean_conf": float(ps.mean[idx_test].mean()),
            "accuracy": float(np.mean(y_test)),
        },
        "ot": {"gece": after, "brier": brier_exact(new, y_test, ps), "drop": 1.0 - after / before},
        "hb_nearest_phrase": {
            "gece": calibration_error(nearest, y_test, ps, bins).ece,
            "brier": brier_exact(nearest, y_test, ps),
        },
        "platt": {
            "ece": binned_ece(platt.predict_proba(idx_test), y_test, bins),
            "brier": brier(platt.predict_proba(idx_test), y_test),
        },
        "hist_binning": {
            "ece": binned_ece(hb.predict_proba(idx_test), y_test, bins),
            "brier": brier(hb.predict_proba(idx_test), y_test),
        },
        "map": ot_cal.mapping_,
        "n_test": int(idx_test.size),
    }


def digits_split_sweep(
    ps: PhraseSet,
    idx: np.ndarray,
    y: np.ndarray,
    *,
    alt_splits: int,
    ot: OTConfig,
    bins: int,
    seed: int,
    min_drop: float,
    max_brier_delta: float,
) -> dict:
    """OT (settings ``ot``) under ``alt_splits`` alternative random cal/test halvings of the same items (same speaker).

    Split j ∈ 1..alt_splits permutes the items with ``np.random.default_rng([seed, j])`` and takes the first half
    as calibration. Returns per-split OT drops and Brier changes, and whether each split passes (drop ≥
    ``min_drop`` and Brier change ≤ ``max_brier_delta``; a NaN drop fails).
    """
    h = idx.size // 2
    drops, dbrier = [], []
    for j in range(1, alt_splits + 1):
        perm = np.random.default_rng([seed, j]).permutation(idx.size)
        cal, test = perm[:h], perm[h:]
        new = ot.calibrator(ps, bins, seed).fit(idx[cal], y[cal]).transform(idx[test])
        before = calibration_error(idx[test], y[test], ps, bins).ece
        after = calibration_error(new, y[test], ps, bins).ece
        drops.append(1.0 - after / before if before > 0 else float("nan"))
        dbrier.append(brier_exact(new, y[test], ps) - brier_exact(idx[test], y[test], ps))
    d, b = np.asarray(drops, float), np.asarray(dbrier, float)
    passed = (d >= min_drop) & (b <= max_brier_delta)  # NaN drop → fails
    out = {"drops": d.tolist(), "brier_delta": b.tolist(), "passed": passed.astype(int).tolist()}
    if d.size:
        out.update(
            pass_rate=float(passed.mean()),
            drop_min=float(np.nanmin(d)) if np.isfinite(d).any() else float("nan"),
            drop_median=float(np.nanmedian(d)) if np.isfinite(d).any() else float("nan"),
            drop_max=float(np.nanmax(d)) if np.isfinite(d).any() else float("nan"),
        )
    return out
