"""The anchor-word topic model learner (Algorithm 3 of the paper = Arora et al. 2013) and its sufficient statistic.

Per document d with word counts h_d (length L_d ≥ 2):  Q_d = (h_d h_dᵀ − diag(h_d)) / (L_d(L_d − 1)),
an unbiased estimate of Q* = A* R A*ᵀ. The learner keeps Σ = Σ_d Q_d and m (the statistic T(S) that unlearning
updates), then: Q = Σ/m, p_w = Q1, Q̄ = diag(p_w)⁻¹Q; anchors by FastAnchorWords on Q̄; C by RecoverL2 on the
simplex; A[i,k] = C[i,k]p_w[i] / Σ_j C[j,k]p_w[j] (Bayes rule); R[k,l] = Q[s_k,s_l] / (A[s_k,k]A[s_l,l]).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from .simplex import solve_simplex_ls


def as_doc_word(X, layout: str = "doc_word", n_words: int | None = None) -> sp.csr_matrix:
    """Counts as a CSR doc × word matrix. Accepts a scipy.sparse or dense array (``layout='doc_word'`` or
    ``'word_doc'``), scikit-learn ``CountVectorizer`` output, or a gensim bag-of-words corpus (list of
    ``[(word_id, count), ...]``; pass ``n_words=len(dictionary)``)."""
    if layout not in ("doc_word", "word_doc"):
        raise ValueError(f"layout must be 'doc_word' or 'word_doc', got {layout!r}")
    if isinstance(X, (list, tuple)) and (len(X) == 0 or isinstance(X[0], (list, tuple))):
        from gensim.matutils import corpus2csc

        M = corpus2csc(X, num_terms=n_words, dtype=np.float64).T.tocsr()  # gensim is word × doc
        return M
    M = sp.csr_matrix(X, dtype=np.float64)
    if layout == "word_doc":
        M = M.T.tocsr()
    if M.nnz and (M.data < 0).any():
        raise ValueError("X must hold non-negative word counts")
    return M


def cooccurrence_sum(X: sp.csr_matrix) -> tuple[np.ndarray, int]:
    """Σ_d Q_d over documents with ≥ 2 tokens, and their number m.

    Vectorised: with H_s = diag(1/√(L(L−1))) H,  Σ = H_sᵀH_s − diag(Σ_d h_d / (L_d(L_d−1))).
    """
    L = np.asarray(X.sum(axis=1)).ravel()
    keep = L >= 2
    Xk = X[keep]
    Lk = L[keep]
    scale = 1.0 / np.sqrt(Lk * (Lk - 1))
    Hs = sp.diags(scale) @ Xk
    S = (Hs.T @ Hs).toarray()
    S -= np.diag(np.asarray((sp.diags(scale * scale) @ Xk).sum(axis=0)).ravel())
    return S, int(keep.sum())


def row_normalise(Q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    p = Q.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        Qbar = np.where(p[:, None] > 0, Q / p[:, None], 0.0)
    return Qbar, p


def find_anchors(Qbar: np.ndarray, r: int, candidates: np.ndarray) -> np.ndarray:
    """FastAnchorWords: greedy farthest-point search with stabilised Gram–Schmidt on the candidate rows."""
    P = Qbar[candidates].astype(np.float64).copy()  # (c, n)
    if P.shape[0] < r:
        raise ValueError(f"only {P.shape[0]} candidate anchor words for n_topics={r}; lower min_doc_freq")
    norms = (P * P).sum(1)
    first = int(np.argmax(norms))
    anchors = [first]
    P -= P[first]  # translate: the first anchor is the origin
    norms = (P * P).sum(1)
    second = int(np.argmax(norms))
    anchors.append(second)
    basis = [P[second] / np.sqrt(norms[second])]
    for _ in range(r - 2):
        b = basis[-1]
        P -= np.outer(P @ b, b)  # project out the last basis direction
        norms = (P * P).sum(1)
        nxt = int(np.argmax(norms))
        anchors.append(nxt)
        basis.append(P[nxt] / np.sqrt(norms[nxt]))
    return candidates[np.asarray(anchors)]


def recover_from_stats(
    Sigma: np.ndarray,
    m: int,
    anchors: np.ndarray,
    C0: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iter: int = 20000,
):
    """(A, R, C, p_w, info) from Σ and m with the anchor set fixed."""
    Q = Sigma / m
    Qbar, p = row_normalise(Q)
    X = Qbar[anchors]  # (r, n)
    G = X @ X.T
    B = Qbar @ X.T  # (n, r)
    C, info = solve_simplex_ls(G, B, C0=C0, tol=tol, max_iter=max_iter)
    C[anchors] = np.eye(len(anchors))
    A, R = topics_from_C(C, p, Q, anchors)
    return A, R, C, p, info


def topics_from_C(C: np.ndarray, p: np.ndarray, Q: np.ndarray, anchors: np.ndarray):
    """Bayes rule A[i,k] ∝ C[i,k] p_w[i] (columns normalised) and R[k,l] = Q[s_k,s_l]/(A[s_k,k]A[s_l,l])."""
    Aun = C * p[:, None]
    A = Aun / Aun.sum(axis=0, keepdims=True)
    d = A[anchors, np.arange(len(anchors))]
    R = Q[np.ix_(anchors, anchors)] / np.outer(d, d)
    return A, R


@dataclass
class TopicStats:
    """The stored statistic T(S): Σ (float64), m, anchors, C, p_w."""

    Sigma: np.ndarray
    m: int
    anchors: np.ndarray
    C: np.ndarray
    p_w: np.ndarray


class AnchorTopicModel:
    """Anchor-word topic model with provable recovery (Arora et al. 2013), scikit-learn estimator shape.

    Parameters: ``n_topics`` r; ``min_doc_freq`` — candidate anchors must occur in at least this many documents
    (an int) or this fraction of documents (a float in (0, 1)); ``anchors`` — fix the anchor words (word ids) instead
    of searching; ``tol`` — duality-gap tolerance of the simplex solver.

    Fitted: ``topic_word_`` A (n_words × n_topics, columns are word distributions), ``topic_cov_`` R (r × r),
    ``anchors_`` (anchor word id per topic; topic k is labelled by its anchor), ``word_topic_`` C (P(topic | word)),
    ``stats_`` (the sufficient statistic kept for unlearning), ``n_docs_``.
    """

    def __init__(
        self,
        n_topics: int,
        min_doc_freq: int | float = 0.01,
        anchors=None,
        tol: float = 1e-12,
        max_iter: int = 20000,
    ):
        if not isinstance(n_topics, (int, np.integer)) or n_topics < 2:
            raise ValueError(f"n_topics must be an int >= 2, got {n_topics!r}")
        if isinstance(min_doc_freq, float) and not 0 <= min_doc_freq < 1:
            raise ValueError(f"min_doc_freq as a fraction must be in [0, 1), got {min_doc_freq!r}")
        if isinstance(min_doc_freq, (int, np.integer)) and min_doc_freq < 0:
            raise ValueError(f"min_doc_freq must be >= 0, got {min_doc_freq!r}")
        if anchors is not None and len(anchors) != n_topics:
            raise ValueError(f"anchors must list n_topics={n_topics} word ids, got {len(anchors)}")
        if not tol > 0:
            raise ValueError(f"tol must be > 0, got {tol!r}")
        self.n_topics, self.min_doc_freq, self.anchors, self.tol, self.max_iter = (
            int(n_topics),
            min_doc_freq,
            anchors,
            float(tol),
            int(max_iter),
        )

    def fit(self, X, layout: str = "doc_word", n_words: int | None = None) -> AnchorTopicModel:
        X = as_doc_word(X, layout, n_words)
        Sigma, m = cooccurrence_sum(X)
        if m < 1:
            raise ValueError("X has no document with at least 2 tokens")
        if self.anchors is None:
            df = np.asarray((X > 0).sum(axis=0)).ravel()
            thr = (
                self.min_doc_freq * X.shape[0] if isinstance(self.min_doc_freq, float) else self.min_doc_freq
            )
            candidates = np.flatnonzero(df >= thr)
            Qbar, _ = row_normalise(Sigma / m)
            anchors = find_anchors(Qbar, self.n_topics, candidates)
        else:
            anchors = np.asarray(self.anchors, dtype=np.int64)
        return self._set(Sigma, m, anchors)

    def fit_from_stats(self, Sigma: np.ndarray, m: int, anchors) -> AnchorTopicModel:
        """Learn from a given statistic with fixed anchors (used by unlearning and by reference retraining)."""
        return self._set(np.asarray(Sigma, np.float64), int(m), np.asarray(anchors, np.int64))

    def _set(self, Sigma, m, anchors, C0=None):
        A, R, C, p, info = recover_from_stats(Sigma, m, anchors, C0, self.tol, self.max_iter)
        self.solver_info_ = info
        return self.set_state(A, R, TopicStats(Sigma, m, anchors, C, p))

    def set_state(self, A: np.ndarray, R: np.ndarray, stats: TopicStats) -> AnchorTopicModel:
        """Replace the fitted state by (A, R) learned from ``stats`` — how an unlearning update is applied.

        :func:`iclr25.topic_unlearning.unlearn_base` / ``unlearn_head`` call it with the updated statistic
        T(S ∖ S_f); it does no fitting itself, so ``A`` and ``R`` must come from ``stats``.
        """
        self.topic_word_, self.topic_cov_, self.word_topic_ = A, R, stats.C
        self.anchors_ = stats.anchors
        self.stats_ = stats
        self.n_docs_ = stats.m
        return self

    def transform(self, X, layout: str = "doc_word") -> np.ndarray:
        """Topic features φ_A(x) = Aᵀ x̄ of documents (x̄ = word frequencies), shape (docs, r)."""
        X = as_doc_word(X, layout)
        L = np.asarray(X.sum(axis=1)).ravel()
        Xbar = sp.diags(1.0 / np.maximum(L, 1)) @ X
        return np.asarray(Xbar @ self.topic_word_)

    def top_words(self, vocab, k: int = 8) -> list[list[str]]:
        return [[vocab[i] for i in np.argsort(-self.topic_word_[:, t])[:k]] for t in range(self.n_topics)]


def topic_permutation(A: np.ndarray, anchors_a, B: np.ndarray, anchors_b) -> np.ndarray:
    """Column order of ``B`` matching ``A``: by anchor-word identity when the anchor sets agree (the discovery order
    may differ), else by an L1 assignment (``scipy.optimize.linear_sum_assignment``)."""
    anchors_a, anchors_b = [int(a) for a in anchors_a], [int(b) for b in anchors_b]
    if sorted(anchors_a) == sorted(anchors_b):
        return np.asarray([anchors_b.index(s) for s in anchors_a])
    from scipy.optimize import linear_sum_assignment

    cost = np.abs(A[:, :, None] - B[:, None, :]).sum(0)
    _, cols = linear_sum_assignment(cost)
    return cols


def align_topics(A: np.ndarray, anchors_a, B: np.ndarray, anchors_b) -> np.ndarray:
    """``B`` with its columns reordered to match ``A`` (see :func:`topic_permutation`)."""
    return B[:, topic_permutation(A, anchors_a, B, anchors_b)]


def max_column_l1(A: np.ndarray, B: np.ndarray) -> float:
    """max_k ||A_:k − B_:k||₁ (the recovery error of Arora et al.)."""
    return float(np.abs(A - B).sum(axis=0).max())
