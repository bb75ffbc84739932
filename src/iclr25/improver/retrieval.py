"""Retrieval of in-context examples: maximal marginal relevance over TF-IDF vectors (ImProver §3.3).

The paper retrieves metric examples, syntax documentation and Mathlib chunks with MMR search over embeddings
(LangChain defaults ``fetch_k = 20``, ``λ = 0.5``). Offline, documents are embedded with scikit-learn's
``TfidfVectorizer`` (character n-grams, so tactic names and symbols count); any embedding function can be
passed instead.

MMR (Carbonell & Goldstein 1998): repeatedly pick ``argmax_d λ·sim(q, d) − (1 − λ)·max_{s∈S} sim(d, s)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..common.checks import need_int, need_real, need_str


def mmr(
    query: np.ndarray, docs: np.ndarray, k: int = 4, lambda_mult: float = 0.5, fetch_k: int = 20
) -> list[int]:
    """Indices of ``k`` documents chosen by MMR from the ``fetch_k`` most similar (cosine) to ``query``.

    ``query``: (dim,), ``docs``: (n_docs, dim). ``lambda_mult = 1`` is plain top-k cosine similarity.
    """
    need_real("lambda_mult", lambda_mult, 0.0, 1.0)
    need_int("k", k, 0)
    need_int("fetch_k", fetch_k, 1)
    try:
        docs = np.asarray(docs, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"docs must be a numeric (n, dim) array, got {type(docs).__name__}") from e
    try:
        q = np.asarray(query, dtype=float)
    except (TypeError, ValueError) as e:
        raise ValueError(f"query must be a numeric (dim,) array, got {type(query).__name__}") from e
    if docs.ndim != 2 or q.ndim != 1 or docs.shape[1] != q.shape[0]:
        raise ValueError(f"docs must be (n, dim) and query (dim,), got {docs.shape} and {q.shape}")
    if not (np.isfinite(docs).all() and np.isfinite(q).all()):
        raise ValueError("query and docs must be finite (got NaN or inf)")
    if k == 0 or len(docs) == 0:
        return []
    dn = docs / np.maximum(np.linalg.norm(docs, axis=1, keepdims=True), 1e-12)
    qn = q / max(np.linalg.norm(q), 1e-12)
    sim_q = dn @ qn  # (n_docs,)
    cand = list(np.argsort(-sim_q, kind="stable")[: max(fetch_k, k)])
    sim_dd = dn[cand] @ dn[cand].T  # (fetch, fetch)
    chosen: list[int] = []
    while cand and len(chosen) < k:
        idx = [i for i in range(len(cand)) if cand[i] not in chosen]
        if not idx:
            break
        pos = {c: i for i, c in enumerate(cand)}
        best, best_val = None, -np.inf
        for i in idx:
            red = max((sim_dd[i, pos[c]] for c in chosen), default=0.0)
            val = lambda_mult * sim_q[cand[i]] - (1 - lambda_mult) * red
            if val > best_val + 1e-12:
                best, best_val = i, val
        chosen.append(int(cand[best]))
    return chosen


class ExampleRetriever:
    """Retrieve ``(input, output)`` examples whose input resembles a query (TF-IDF + MMR by default)."""

    def __init__(
        self,
        examples: Sequence[tuple[str, str]],
        embed: Callable[[list[str]], np.ndarray] | None = None,
        lambda_mult: float = 0.5,
        fetch_k: int = 20,
    ):
        need_real("lambda_mult", lambda_mult, 0.0, 1.0)
        need_int("fetch_k", fetch_k, 1)
        if embed is not None and not callable(embed):
            raise ValueError(f"embed must be a callable list[str] -> (n, dim) array or None, got {embed!r}")
        if isinstance(examples, (str, bytes)) or not isinstance(examples, Sequence):
            raise ValueError(
                f"examples must be a sequence of (input, output) pairs, got {type(examples).__name__}"
            )
        for i, p in enumerate(examples):
            if not (isinstance(p, (tuple, list)) and len(p) == 2):
                raise ValueError(f"examples[{i}] must be an (input, output) pair, got {p!r:.80}")
        self.examples = [(str(a), str(b)) for a, b in examples]
        self.lambda_mult, self.fetch_k = float(lambda_mult), int(fetch_k)
        self._embed = embed
        self._vec = None
        if self.examples and embed is None:
            from sklearn.feature_extraction.text import TfidfVectorizer

            self._vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), sublinear_tf=True)
            self._docs = self._vec.fit_transform([a for a, _ in self.examples]).toarray()
        elif self.examples:
            self._docs = np.asarray(embed([a for a, _ in self.examples]), dtype=float)
            if self._docs.ndim != 2 or len(self._docs) != len(self.examples):
                raise ValueError(
                    f"embed must return one row per example ({len(self.examples)}, dim), got {self._docs.shape}"
                )

    def _q(self, text: str) -> np.ndarray:
        if self._vec is not None:
            return self._vec.transform([text]).toarray()[0]
        return np.asarray(self._embed([text]), dtype=float)[0]

    def retrieve(self, query: str, k: int) -> list[tuple[str, str]]:
        need_str("query", query)
        need_int("k", k, 0)
        if not self.examples or k == 0:
            return []
        idx = mmr(
            self._q(query),
            self._docs,
            k=min(k, len(self.examples)),
            lambda_mult=self.lambda_mult,
            fetch_k=self.fetch_k,
        )
        return [self.examples[i] for i in idx]
