"""Number-valued baselines on the phrase means (Platt scaling, histogram binning, scikit-learn) and the
phrase-valued baseline "histogram binning, then the nearest phrase".

Both are scikit-learn estimators: ``X`` holds one phrase per item (names or indices into ``phrase_set``, 1-D or a
one-column 2-D array), ``y`` the outcomes; ``predict_proba`` returns the calibrated P(Y=1) per item, shape (n,).
"""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.linear_model import LogisticRegression
from sklearn.utils.validation import check_is_fitted

from .metrics import _check_outcomes
from .transport import _check_params, _phrase_input


class _PhraseBaseline(BaseEstimator):
    def _xy(self, X, y):
        _check_params(self)
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None (y: the outcomes)"
            )
        idx, _ = _phrase_input(X, self.phrase_set)
        if idx.size == 0:
            raise ValueError("X (phrases_used) must not be empty")
        return idx, _check_outcomes(np.ravel(np.asarray(y, float)) if np.ndim(y) == 2 else y, idx.size)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        return tags


class PlattOnMeans(_PhraseBaseline):
    """Logistic regression of the label on the stated phrase's mean (outputs numbers)."""

    def __init__(self, phrase_set=None):
        self.phrase_set = phrase_set

    def fit(self, X, y=None) -> PlattOnMeans:
        idx, y = self._xy(X, y)
        x = self.phrase_set.mean[idx][:, None]
        yb = y >= 0.5
        if yb.all() or not yb.any():
            raise ValueError("y must contain both classes to fit Platt scaling")
        self.lr_ = LogisticRegression(C=1e6).fit(x, yb)
        self.n_features_in_ = 1
        return self

    def predict_proba(self, X) -> np.ndarray:
        check_is_fitted(self, "lr_")
        x = self.phrase_set.mean[_phrase_input(X, self.phrase_set)[0]][:, None]
        return self.lr_.predict_proba(x)[:, 1]


class HistogramBinningOnPhrases(_PhraseBaseline):
    """Each phrase is a bin: its calibrated value is the empirical accuracy of the items that used it on the
    calibration set (unseen phrases keep their mean). ``to_phrases`` gives the phrase-valued variant."""

    def __init__(self, phrase_set=None):
        self.phrase_set = phrase_set

    def fit(self, X, y=None) -> HistogramBinningOnPhrases:
        idx, y = self._xy(X, y)
        ps = self.phrase_set
        c = np.bincount(idx, minlength=len(ps)).astype(float)
        s = np.bincount(idx, weights=y, minlength=len(ps))
        self.value_ = np.where(c > 0, s / np.maximum(c, 1), ps.mean)
        self.n_features_in_ = 1
        return self

    def predict_proba(self, X) -> np.ndarray:
        check_is_fitted(self, "value_")
        return self.value_[_phrase_input(X, self.phrase_set)[0]]

    def to_phrases(self, X) -> np.ndarray:
        """Histogram binning then the phrase with the nearest mean (outputs stay phrases)."""
        return self.phrase_set.nearest(self.predict_proba(X))
