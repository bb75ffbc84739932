"""The reproduction's two speakers (README, "Reproduction"): data A, an overconfident synthetic speaker, and data B,
an overconfident PCA(2) + logistic classifier on scikit-learn's digits verbalised as phrases; and the stratified
calibration / test halving of data A."""

from __future__ import annotations

import numpy as np

from .phrases import PhraseSet


def synthetic_speaker(n: int, ps: PhraseSet, shift: float, noise: float, seed: int):
    """Data A: outcome probabilities, 0/1 outcomes and the overconfident speaker's phrase indices."""
    rng = np.random.default_rng(seed)
    p = rng.beta(2.0, 3.0, n)
    y = (rng.random(n) < p).astype(float)
    stated = np.clip(p + shift + noise * rng.standard_normal(n), 0.0, 1.0)
    return p, y, ps.nearest(stated)


def stratified_halves(idx: np.ndarray, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Data A's 50/50 calibration / test split of item indices, stratified by the phrase used."""
    from sklearn.model_selection import train_test_split

    strat = idx.copy()
    vals, counts = np.unique(idx, return_counts=True)
    rare = np.isin(idx, vals[counts < 2])
    strat[rare] = vals[counts.argmax()]  # phrases used once can't be stratified (as in the paper's code)
    return train_test_split(np.arange(idx.size), test_size=0.5, random_state=seed, stratify=strat)


def digits_speaker(ps: PhraseSet, scale: float, seed: int):
    """Data B: an overconfident PCA(2) + logistic classifier on digits {3,5,8,9}, verbalised as phrases."""
    from sklearn.datasets import load_digits
    from sklearn.decomposition import PCA
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline

    X, d = load_digits(return_X_y=True)
    keep = np.isin(d, [3, 5, 8, 9])
    X, lab = X[keep], np.isin(d[keep], [3, 5]).astype(int)
    Xtr, Xrest, ytr, yrest = train_test_split(X, lab, train_size=0.4, random_state=seed, stratify=lab)
    clf = make_pipeline(PCA(2, random_state=seed), LogisticRegression()).fit(Xtr, ytr)
    p1 = 1.0 / (1.0 + np.exp(-scale * clf.decision_function(Xrest)))
    pred = (p1 >= 0.5).astype(int)
    conf = np.maximum(p1, 1 - p1)
    correct = (pred == yrest).astype(float)
    # the rest stays in train_test_split's (shuffled) order: the caller takes its first half as calibration
    return ps.nearest(conf), correct
