"""A real-text corpus for the topic model: five corpora from ``iclr25.assets`` in one vocabulary (README, "Real inputs").

Documents: Reuters (lda 3.0.2, shipped as bags of words), the Lee news corpus (background + test), gensim's shortened
Wikipedia articles, the polarity sentences and the 20-Newsgroups sample (gensim 4.4.0 test data), one row each. The
vocabulary is scikit-learn's ``CountVectorizer`` (no hand-written tokenisation): lowercase, alphabetic tokens of ≥ 2
letters, scikit-learn's English stop-word list, document-frequency filters and a cap on the vocabulary size, all fixed
in :class:`RealCorpusConfig` before any result was looked at. Documents left with < 2 tokens are dropped (the learner
ignores them anyway). :func:`load_real_corpus` returns the counts with every filter's before/after numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import scipy.sparse as sp

from ..common.fields import bounded, check_fields

CORPORA = ("reuters", "lee", "wikipedia", "polarity", "newsgroups")
# alphabetic tokens of two or more letters (scikit-learn's default pattern, digits and '_' excluded)
TOKEN_PATTERN = r"(?u)\b[^\W\d_]{2,}\b"


@dataclass(frozen=True)
class RealCorpusConfig:
    """Which corpora and which vocabulary filters (the defaults are the ``real`` preset's, fixed up front)."""

    corpora: tuple[str, ...] = bounded(CORPORA, choices=CORPORA, each=True)
    min_df: int = bounded(5, lo=1)  # a word must occur in ≥ 5 documents
    max_df: float = bounded(0.5, lo=0, hi=1, lo_open=True)  # ... and in ≤ 50 % of them
    max_features: int = bounded(2000, lo=2)  # then the most frequent 2,000 words are kept
    stop_words: bool = True  # scikit-learn's English stop-word list (318 words)
    # drop each newsgroup post's header block (up to the first blank line), as scikit-learn's
    # fetch_20newsgroups(remove=("headers",)) does: the "Newsgroups:" line names the label
    strip_headers: bool = True

    def __post_init__(self) -> None:
        check_fields(self)
        if len(set(self.corpora)) != len(self.corpora):
            raise ValueError(f"corpora must not repeat a corpus, got {self.corpora}")


@dataclass(frozen=True)
class RealCorpus:
    """Counts ``X`` (docs × words, CSR float64; only documents with ≥ 2 tokens), the vocabulary, each document's
    ``source`` corpus, ``doc_id`` and ``label`` (the newsgroup or pos/neg where the corpus has one, else ""), and
    ``counts``: documents, vocabulary size and tokens before and after every filter."""

    X: sp.csr_matrix
    vocab: np.ndarray
    source: np.ndarray
    doc_id: np.ndarray
    label: np.ndarray
    counts: dict = field(default_factory=dict)

    @property
    def classes(self) -> list[str]:
        return sorted(set(self.source.tolist()))


def corpus_texts(cfg: RealCorpusConfig) -> tuple[list[str], list[str], list[str], list[str]]:
    """The raw texts (and source, doc_id, label) of the configured corpora, in ``cfg.corpora`` order."""
    from iclr25.assets import load_corpus

    texts, source, doc_id, label = [], [], [], []
    for name in cfg.corpora:
        ds = load_corpus(name)
        labels = ds["label"] if "label" in ds.column_names else [""] * len(ds)
        for text, did, lab in zip(ds["text"], ds["doc_id"], labels):
            if name == "newsgroups" and cfg.strip_headers:
                text = text.partition("\n\n")[2]  # scikit-learn's strip_newsgroup_header
            texts.append(text)
            source.append(name)
            doc_id.append(did)
            label.append(lab)
    return texts, source, doc_id, label


def _vectorizer(**kw):
    from sklearn.feature_extraction.text import CountVectorizer

    return CountVectorizer(lowercase=True, token_pattern=TOKEN_PATTERN, dtype=np.float64, **kw)


def _size(X: sp.spmatrix) -> dict:
    return {"vocabulary": int(X.shape[1]), "tokens": int(X.sum())}


@lru_cache(maxsize=4)
def load_real_corpus(cfg: RealCorpusConfig = RealCorpusConfig()) -> RealCorpus:  # noqa: B008 (frozen)
    """The corpora of ``cfg`` as one docs × words count matrix (cached per config: treat the result as read-only).

    ``counts``: ``documents`` per corpus as loaded; ``tokeniser`` (every alphabetic token, lowercased),
    ``stop_words``, ``doc_freq`` (min_df / max_df) and ``max_features`` — vocabulary size and token count after each
    step; ``documents_kept`` (≥ 2 tokens left) per corpus and in total.
    """
    texts, source, doc_id, label = corpus_texts(cfg)
    stop = "english" if cfg.stop_words else None
    counts: dict = {"documents": {n: source.count(n) for n in cfg.corpora}}
    counts["documents"]["total"] = len(texts)
    counts["tokeniser"] = _size(_vectorizer().fit_transform(texts))
    counts["stop_words"] = _size(_vectorizer(stop_words=stop).fit_transform(texts))
    counts["doc_freq"] = _size(
        _vectorizer(stop_words=stop, min_df=cfg.min_df, max_df=cfg.max_df).fit_transform(texts)
    )
    vec = _vectorizer(stop_words=stop, min_df=cfg.min_df, max_df=cfg.max_df, max_features=cfg.max_features)
    X = sp.csr_matrix(vec.fit_transform(texts), dtype=np.float64)
    counts["max_features"] = _size(X)
    keep = np.asarray(X.sum(axis=1)).ravel() >= 2
    src = np.asarray(source)
    counts["documents_kept"] = {n: int((keep & (src == n)).sum()) for n in cfg.corpora}
    counts["documents_kept"]["total"] = int(keep.sum())
    X = X[keep]
    X.sort_indices()
    return RealCorpus(
        X=X,
        vocab=np.asarray(vec.get_feature_names_out()),
        source=src[keep],
        doc_id=np.asarray(doc_id)[keep],
        label=np.asarray(label)[keep],
        counts=counts,
    )
