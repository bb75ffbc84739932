"""The anchor-word topic model learner (Algorithm 3 of the paper = Arora et al. 2013) and its sufficient statistic.

Per document d with word counts h_d (length L_d ≥ 2):  Q_d = (h_d h_dᵀ − diag(h_d)) / (L_d(L_d − 1)),
an unbiased estimate of Q* = A* R A*ᵀ. The learner keeps Σ = Σ_d Q_d and m (the statistic T(S) that unlearning
updates), then: Q = Σ/m, p_w = Q1, Q̄ = diag(p_w)⁻¹Q; anchors by FastAnchorWords on Q̄; C by RecoverL2 on the
simplex; A[i,k] = C[i,k]p_w[i] / Σ_j C[j,k]p_w[j] (Bayes rule); R[k,l] = Q[s_k,s_l] / (A[s_k,k]A[s_l,l]).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from .simplex import solve_simplex_ls


def _is_gensim_bow(X) -> bool:
    """A gensim corpus is a list of documents, each a list of ``(word_id, count)`` pairs; a list of count rows
    (lists of numbers) is a dense matrix instead."""
    for doc in X:
        if len(doc) == 0:
            continue
        first = doc[0]
        return isinstance(first, (list, tuple)) and len(first) == 2
    return len(X) == 0 or all(len(d) == 0 for d in X)


def as_doc_word(X, layout: str = "doc_word", n_words: int | None = None) -> sp.csr_matrix:
    """Counts as a CSR doc × word matrix. Accepts a scipy.sparse or dense array or a list of count rows
    (``layout='doc_word'`` or ``'word_doc'``), scikit-learn ``CountVectorizer`` output, or a gensim bag-of-words
    corpus (list of ``[(word_id, count), ...]``; pass ``n_words=len(dictionary)``).

    Refuses (``ValueError``) negative, NaN or infinite counts, and gensim word ids outside ``[0, n_words)``.
    """
    if layout not in ("doc_word", "word_doc"):
        raise ValueError(f"layout must be 'doc_word' or 'word_doc', got {layout!r}")
    if isinstance(X, (list, tuple)) and all(isinstance(d, (list, tuple)) for d in X) and _is_gensim_bow(X):
        from gensim.matutils import corpus2csc

        ids = [int(w) for d in X for w, _ in d]
        if ids and (min(ids) < 0 or (n_words is not None and max(ids) >= n_words)):
            raise ValueError(
                f"gensim corpus word ids must be in [0, n_words={n_words}), got range [{min(ids)}, {max(ids)}]"
            )
        M = corpus2csc(X, num_terms=n_words, dtype=np.float64).T.tocsr()  # gensim is word × doc
    else:
        if not sp.issparse(X):
            arr = np.asarray(X)
            if arr.dtype.kind == "c":
                raise ValueError("Complex data not supported: X must hold real word counts")
            if arr.dtype.kind == "O":
                arr = arr.astype(np.float64)  # numbers as objects or strings; anything else raises here
            if arr.dtype.kind not in "biuf":
                raise ValueError(f"X must hold numeric word counts, got dtype {arr.dtype}")
            if arr.ndim != 2:
                raise ValueError(
                    f"X must be a 2-D docs × words count matrix, got shape {arr.shape}. Reshape your data "
                    "(one row per document)"
                )
            X = arr
        M = sp.csr_matrix(X, dtype=np.float64, copy=True)  # never share index arrays with the caller's matrix
        if layout == "word_doc":
            M = M.T.tocsr()
    if M.nnz and not np.all(np.isfinite(M.data)):
        raise ValueError(
            f"X holds {int((~np.isfinite(M.data)).sum())} NaN/inf count(s); expected finite word counts"
        )
    if M.nnz and (M.data < 0).any():
        raise ValueError("Negative values in data passed to X: word counts must be non-negative")
    return M


def doc_keys(X: sp.csr_matrix) -> np.ndarray:
    """Exact fingerprints of the documents with ≥ 2 tokens, shape (docs, 2) int64: ``X @ R`` with a fixed integer
    matrix R (seed 0), so a forget set can be checked against the training statistic without storing documents.
    Counts are rounded to 1e-6 first (integer counts give exact keys)."""
    rng = np.random.default_rng(0)
    R = rng.integers(1, 2**20, size=(X.shape[1], 2)).astype(np.float64)
    L = np.asarray(X.sum(axis=1)).ravel()
    Xr = sp.csr_matrix(X[L >= 2], copy=True)
    Xr.sum_duplicates()  # canonical storage (sorted, no duplicates): the key depends only on the counts
    Xr.sort_indices()
    Xr.data = np.round(Xr.data * 1e6)
    return np.asarray(Xr @ R).astype(np.int64)


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


class DocKeys:
    """A multiset of training-document fingerprints that supports removal in O(|removed|), independent of m.

    The full multiset of the fit is shared (never copied); each unlearning step returns a new ``DocKeys`` with a
    larger ``removed`` counter, so the statistic of an earlier state stays valid (``newton_unlearn`` is pure)."""

    __slots__ = ("_base", "_removed")

    def __init__(self, base: Counter, removed: Counter | None = None):
        self._base = base
        self._removed = Counter() if removed is None else removed

    def get(self, key, default: int = 0) -> int:
        n = self._base.get(key, 0) - self._removed.get(key, 0)
        return n if n > 0 else default

    def __sub__(self, other: Counter) -> DocKeys:
        return DocKeys(self._base, self._removed + other)

    def __len__(self) -> int:  # distinct keys still present (O(m); not used on the unlearning path)
        return sum(1 for k in self._base if self.get(k) > 0)


@dataclass
class TopicStats:
    """The stored statistic T(S): Σ (float64), m, anchors, C, p_w, and (when known) the fingerprints of the
    training documents still in Σ (``doc_keys``: key → multiplicity), used to refuse forgetting documents that were
    never trained on or are already forgotten."""

    Sigma: np.ndarray
    m: int
    anchors: np.ndarray
    C: np.ndarray
    p_w: np.ndarray
    doc_keys: DocKeys | Counter | None = None


def _check_anchors(anchors, n_topics: int, n_words: int) -> np.ndarray:
    a = np.asarray(anchors)
    if a.ndim != 1 or a.size != n_topics:
        raise ValueError(f"anchors must list n_topics={n_topics} word ids, got shape {a.shape}")
    if a.dtype.kind not in "iu" and not (a.dtype.kind == "f" and np.all(a == np.round(a))):
        raise ValueError(f"anchors must be integer word ids, got {a.tolist()}")
    a = a.astype(np.int64)
    if a.min() < 0 or a.max() >= n_words:
        raise ValueError(f"anchors must be word ids in [0, {n_words}), got {a.tolist()}")
    if np.unique(a).size != a.size:
        raise ValueError(f"anchors must be distinct word ids (one per topic), got {a.tolist()}")
    return a


def _check_number(name, v, lo, lo_open=True, integer=False):
    kinds = (int, np.integer) if integer else (int, float, np.integer, np.floating)
    if (
        isinstance(v, bool)
        or not isinstance(v, kinds)
        or not np.isfinite(v)
        or (v <= lo if lo_open else v < lo)
    ):
        what = "an int" if integer else "a finite number"
        raise ValueError(f"{name} must be {what} {'>' if lo_open else '>='} {lo}, got {v!r}")


class AnchorTopicModel(TransformerMixin, BaseEstimator):
    """Anchor-word topic model with provable recovery (Arora et al. 2013), a scikit-learn transformer.

    Parameters: ``n_topics`` r; ``min_doc_freq`` — candidate anchors must occur in at least this many documents
    (an int) or this fraction of documents (a float in [0, 1)); ``anchors`` — fix the anchor words (distinct word
    ids in ``[0, n_words)``) instead of searching; ``tol`` — duality-gap tolerance of the simplex solver. Parameters
    are validated in ``fit`` (scikit-learn convention), so ``set_params``/``clone``/grid search work.

    ``fit(X, y=None, *, layout='doc_word', n_words=None)``: ``y`` is ignored (Pipeline compatibility); ``X`` as in
    :func:`as_doc_word`. ``transform(X)`` gives topic features φ_A(x) = Aᵀx̄, shape (docs, r).

    Fitted: ``topic_word_`` A (n_words × n_topics, columns are word distributions) — after a noisy
    :func:`~iclr25.topic_unlearning.unlearn_base` this is the RELEASED (noised) matrix, the noise-free one is kept
    privately as ``_noise_free_topic_word_`` —, ``topic_cov_`` R (r × r), ``anchors_`` (anchor word id per topic;
    topic k is labelled by its anchor), ``word_topic_`` C (P(topic | word)), ``stats_`` (the sufficient statistic
    kept for unlearning), ``n_docs_``, ``n_features_in_`` (vocabulary size).
    """

    def __init__(
        self,
        n_topics: int = 10,
        min_doc_freq: int | float = 0.01,
        anchors=None,
        tol: float = 1e-12,
        max_iter: int = 20000,
    ):
        self.n_topics, self.min_doc_freq, self.anchors, self.tol, self.max_iter = (
            n_topics,
            min_doc_freq,
            anchors,
            tol,
            max_iter,
        )

    def _check_params(self) -> None:
        _check_number("n_topics", self.n_topics, 2, lo_open=False, integer=True)
        mdf = self.min_doc_freq
        if isinstance(mdf, bool) or not isinstance(mdf, (int, float, np.integer, np.floating)):
            raise ValueError(f"min_doc_freq must be an int >= 0 or a float in [0, 1), got {mdf!r}")
        if isinstance(mdf, (float, np.floating)) and not 0 <= mdf < 1:
            raise ValueError(f"min_doc_freq as a fraction must be in [0, 1), got {mdf!r}")
        if isinstance(mdf, (int, np.integer)) and mdf < 0:
            raise ValueError(f"min_doc_freq must be >= 0, got {mdf!r}")
        _check_number("tol", self.tol, 0)
        _check_number("max_iter", self.max_iter, 1, lo_open=False, integer=True)

    def fit(self, X, y=None, *, layout: str = "doc_word", n_words: int | None = None) -> AnchorTopicModel:
        """Learn topics from counts ``X`` (docs × words; ``layout='word_doc'`` for the transpose). ``y`` is
        ignored."""
        self._check_params()
        X = as_doc_word(X, layout, n_words)
        if X.shape[1] < self.n_topics:
            raise ValueError(
                f"Found array with {X.shape[1]} feature(s) (shape={X.shape}) while a minimum of {self.n_topics} is "
                f"required: the vocabulary must have at least n_topics={self.n_topics} words"
            )
        if X.shape[0] < 2:
            raise ValueError(
                f"n_samples = {X.shape[0]}: the co-occurrence statistic needs at least 2 documents"
            )
        Sigma, m = cooccurrence_sum(X)
        if m < 1:
            raise ValueError("X has no document with at least 2 tokens")
        if self.anchors is None:
            df = np.asarray((X > 0).sum(axis=0)).ravel()
            thr = (
                self.min_doc_freq * X.shape[0]
                if isinstance(self.min_doc_freq, (float, np.floating))
                else self.min_doc_freq
            )
            candidates = np.flatnonzero(df >= thr)
            Qbar, _ = row_normalise(Sigma / m)
            anchors = find_anchors(Qbar, int(self.n_topics), candidates)
        else:
            anchors = _check_anchors(self.anchors, int(self.n_topics), X.shape[1])
        keys = doc_keys(X)
        return self._set(
            Sigma, m, anchors, keys=DocKeys(Counter(zip(keys[:, 0].tolist(), keys[:, 1].tolist())))
        )

    def fit_from_stats(self, Sigma: np.ndarray, m: int, anchors) -> AnchorTopicModel:
        """Learn from a given statistic with fixed anchors (used by unlearning and by reference retraining).
        The documents behind ``Sigma`` are unknown, so unlearning from this model cannot check its forget sets."""
        self._check_params()
        Sigma = np.asarray(Sigma, np.float64)
        if Sigma.ndim != 2 or Sigma.shape[0] != Sigma.shape[1] or not np.all(np.isfinite(Sigma)):
            raise ValueError(
                f"Sigma must be a finite square (n_words, n_words) matrix, got shape {Sigma.shape}"
            )
        _check_number("m", m, 1, lo_open=False, integer=True)
        return self._set(Sigma, int(m), _check_anchors(anchors, int(self.n_topics), Sigma.shape[0]))

    def _set(self, Sigma, m, anchors, C0=None, keys=None):
        A, R, C, p, info = recover_from_stats(Sigma, m, anchors, C0, float(self.tol), int(self.max_iter))
        self.solver_info_ = info
        self.n_iter_ = int(info.get("iterations", 0))
        return self.set_state(A, R, TopicStats(Sigma, m, anchors, C, p, keys))

    def set_state(
        self, A: np.ndarray, R: np.ndarray, stats: TopicStats, released: np.ndarray | None = None
    ) -> AnchorTopicModel:
        """Replace the fitted state by (A, R) learned from ``stats`` — how an unlearning update is applied.

        :func:`iclr25.topic_unlearning.unlearn_base` calls it with the updated statistic T(S ∖ S_f); it does no
        fitting itself, so ``A`` and ``R`` must come from ``stats``. ``released``: the noised matrix that was
        published; it becomes the public ``topic_word_`` (and what ``transform`` uses) while the noise-free ``A``
        stays private in ``_noise_free_topic_word_``.
        """
        self._noise_free_topic_word_ = A
        self.topic_word_ = A if released is None else released
        self.topic_cov_, self.word_topic_ = R, stats.C
        self.anchors_ = stats.anchors
        self.stats_ = stats
        self.n_docs_ = stats.m
        self.n_features_in_ = A.shape[0]
        return self

    def transform(self, X, layout: str = "doc_word") -> np.ndarray:
        """Topic features φ_A(x) = Aᵀ x̄ of documents (x̄ = word frequencies), shape (docs, r)."""
        check_is_fitted(self, "topic_word_")
        X = as_doc_word(X, layout, n_words=self.n_features_in_)
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but AnchorTopicModel is expecting {self.n_features_in_} features "
                f"as input (the fitted vocabulary size; layout={layout!r})"
            )
        L = np.asarray(X.sum(axis=1)).ravel()
        Xbar = sp.diags(1.0 / np.maximum(L, 1)) @ X
        return np.asarray(Xbar @ self.topic_word_)

    def fit_transform(self, X, y=None, **fit_params) -> np.ndarray:
        return self.fit(X, y, **fit_params).transform(X, layout=fit_params.get("layout", "doc_word"))

    def top_words(self, vocab, k: int = 8) -> list[list[str]]:
        check_is_fitted(self, "topic_word_")
        return [
            [vocab[i] for i in np.argsort(-self.topic_word_[:, t])[:k]]
            for t in range(self.topic_word_.shape[1])
        ]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.positive_only = True
        tags.input_tags.sparse = True
        return tags


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
