"""MMR retrieval (maximal marginal relevance over TF-IDF)."""

import numpy as np
import pytest

from iclr25.improver import ExampleRetriever, mmr


def test_lambda_one_is_plain_top_k_cosine():
    rng = np.random.default_rng(0)
    docs, q = rng.normal(size=(30, 8)), rng.normal(size=8)
    cos = docs @ q / np.linalg.norm(docs, axis=1) / np.linalg.norm(q)
    for k in (1, 3, 7):
        assert mmr(q, docs, k=k, lambda_mult=1.0, fetch_k=30) == list(np.argsort(-cos)[:k])


def test_duplicates_are_not_both_returned():
    docs = np.array([[1.0, 0.1, 0.0], [1.0, 0.1, 0.0], [0.6, 0.0, 0.8], [0.0, 1.0, 0.0]])
    got = mmr(np.array([1.0, 0.0, 0.0]), docs, k=2, lambda_mult=0.5)
    assert len(got) == 2 and not {0, 1} <= set(got) and got[0] == 0


def test_bad_inputs():
    with pytest.raises(ValueError, match="lambda_mult"):
        mmr(np.ones(2), np.ones((3, 2)), lambda_mult=1.5)
    with pytest.raises(ValueError, match="finite"):
        mmr(np.array([np.nan, 1.0]), np.ones((3, 2)))
    with pytest.raises(ValueError, match="dim"):
        mmr(np.ones(3), np.ones((3, 2)))


def test_example_retriever_prefers_similar_examples():
    ex = [
        ("constructor\n· exact a\n· exact b", "exact ⟨a, b⟩"),
        ("left\nexact a", "exact Or.inl a"),
        ("apply f\nexact x", "exact f x"),
    ]
    r = ExampleRetriever(ex)
    assert r.retrieve("left\nexact c", 1)[0][1] == "exact Or.inl a"
    assert len(r.retrieve("apply g\nexact y", 5)) == 3 and r.retrieve("x", 0) == []
