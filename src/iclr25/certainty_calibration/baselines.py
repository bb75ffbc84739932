"""Number-valued baselines on the phrase means (Platt scaling, histogram binning, scikit-learn) and the
phrase-valued baseline "histogram binning, then the nearest phrase"."""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression

from .phrases import PhraseSet


class PlattOnMeans:
    """Logistic regression of the label on the stated phrase's mean (outputs numbers)."""

    def __init__(self, phrase_set: PhraseSet):
        self.phrase_set = phrase_set

    def fit(self, phrases_used, labels) -> PlattOnMeans:
        x = self.phrase_set.mean[self.phrase_set.index(phrases_used)][:, None]
        y = np.asarray(labels) >= 0.5
        if y.all() or not y.any():
            raise ValueError("labels must contain both classes to fit Platt scaling")
        self.lr_ = LogisticRegression(C=1e6).fit(x, y)
        return self

    def predict_proba(self, phrases_used) -> np.ndarray:
        x = self.phrase_set.mean[self.phrase_set.index(phrases_used)][:, None]
        return self.lr_.predict_proba(x)[:, 1]


class HistogramBinningOnPhrases:
    """Each phrase is a bin: its calibrated value is the empirical accuracy of the items that used it on the
    calibration set (unseen phrases keep their mean). ``to_phrases`` gives the phrase-valued variant."""

    def __init__(self, phrase_set: PhraseSet):
        self.phrase_set = phrase_set

    def fit(self, phrases_used, outcomes) -> HistogramBinningOnPhrases:
        ps = self.phrase_set
        idx = ps.index(phrases_used)
        c = np.bincount(idx, minlength=len(ps)).astype(float)
        s = np.bincount(idx, weights=np.asarray(outcomes, float), minlength=len(ps))
        self.value_ = np.where(c > 0, s / np.maximum(c, 1), ps.mean)
        return self

    def predict_proba(self, phrases_used) -> np.ndarray:
        return self.value_[self.phrase_set.index(phrases_used)]

    def to_phrases(self, phrases_used) -> np.ndarray:
        """Histogram binning then the phrase with the nearest mean (outputs stay phrases)."""
        return self.phrase_set.nearest(self.predict_proba(phrases_used))
