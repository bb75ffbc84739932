"""Calibrating Expressions of Certainty (Wang et al., ICLR 2025, arXiv:2410.04315).

Certainty phrases ("maybe", "likely", "consistent with") are treated as Beta distributions on [0, 1] rather than
numbers. That gives a calibration error for speakers who talk in phrases — the binned ECE with soft, exactly
integrated bin memberships (``calibration_error``) — and a post-hoc recalibration that keeps outputs as words: an
optimal-transport plan between phrases whose cost is the linearised change of the calibration error
(``OTCalibrator``), solved with POT's unbalanced Sinkhorn.

    >>> from iclr25.certainty_calibration import gpt4o, calibration_error, OTCalibrator
    >>> ps = gpt4o(12)
    >>> cal = OTCalibrator(ps).fit(phrases, labels)          # names or indices, 0/1 labels
    >>> new = cal.transform(test_phrases); cal.mapping_       # {'Definitely': 'Possibly', ...}
    >>> calibration_error(new, test_labels, ps).ece
"""

from .baselines import HistogramBinningOnPhrases, PlattOnMeans
from .metrics import (
    Reliability,
    bin_integrals,
    binned_ece,
    brier,
    brier_exact,
    calibration_error,
    plot_reliability,
)
from .phrases import PhraseSet, beta_from_moments, gpt4o, phrase_set, radiologist_survey, social_poll
from .transport import OTCalibrator, OTConfig, cost_matrix

__all__ = [
    "PhraseSet",
    "gpt4o",
    "radiologist_survey",
    "social_poll",
    "phrase_set",
    "beta_from_moments",
    "calibration_error",
    "Reliability",
    "bin_integrals",
    "brier_exact",
    "binned_ece",
    "brier",
    "plot_reliability",
    "OTCalibrator",
    "OTConfig",
    "cost_matrix",
    "PlattOnMeans",
    "HistogramBinningOnPhrases",
]
