"""The separable synthetic topic model of the reproduction (README): anchors with mass p, Dirichlet topics and documents."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def separable_topics(
    n_words: int = 200,
    n_topics: int = 8,
    p: float = 0.15,
    beta: float = 0.1,
    rng: np.random.Generator | int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """A* (n × r): word k is topic k's anchor with mass ``p`` (zero elsewhere); the remaining 1 − p of every topic
    is Dirichlet(``beta``) over the non-anchor words. Returns (A*, anchor ids)."""
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    if n_words <= n_topics:
        raise ValueError(f"n_words must exceed n_topics, got {n_words} <= {n_topics}")
    if not 0 < p < 1:
        raise ValueError(f"p must be in (0, 1), got {p}")
    A = np.zeros((n_words, n_topics))
    A[n_topics:] = (1 - p) * rng.dirichlet(np.full(n_words - n_topics, beta), size=n_topics).T
    A[np.arange(n_topics), np.arange(n_topics)] = p
    return A, np.arange(n_topics)


def sample_documents(
    A: np.ndarray,
    m: int,
    doc_len: int = 30,
    alpha: float = 0.5,
    rng: np.random.Generator | int = 0,
    return_topics: bool = False,
):
    """m documents of ``doc_len`` tokens: W ~ Dirichlet(α), counts ~ Multinomial(L, A W) (vectorised)."""
    rng = np.random.default_rng(rng) if not isinstance(rng, np.random.Generator) else rng
    n, r = A.shape
    X = np.empty((m, n), dtype=np.int32)
    Ws = []
    for start in range(0, m, 20000):  # chunks bound the (chunk × n) probability matrix
        k = min(20000, m - start)
        W = rng.dirichlet(np.full(r, alpha), size=k)
        P = W @ A.T
        P /= P.sum(1, keepdims=True)
        X[start : start + k] = rng.multinomial(doc_len, P)
        Ws.append(W)
    Xs = sp.csr_matrix(X, dtype=np.float64)
    return (Xs, np.vstack(Ws)) if return_topics else Xs
