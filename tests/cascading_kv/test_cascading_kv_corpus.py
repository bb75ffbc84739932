"""The offline corpus cascading_kv's reproduction trains on (text that ships with Python): dedup, stable split,
generator hooks, English and code sources."""

import pytest

from iclr25.cascading_kv.corpus import dedup, register_generator, split, stdlib_corpus


def test_corpus_dedup_split_and_generators():
    docs = ["a  b", "a b", "c", "d" * 10]
    assert dedup(docs) == ["a  b", "c", "d" * 10]
    c1 = split([f"doc {i}" for i in range(400)], 0.1, 0.1)
    c2 = split([f"doc {i}" for i in reversed(range(400))], 0.1, 0.1)
    assert sorted(c1.val) == sorted(c2.val) and not set(c1.train) & set(c1.val)
    assert 20 < len(c1.val) < 60
    register_generator("markov_toy", lambda: [f"synthetic {i}" for i in range(50)])
    c = stdlib_corpus(("markov_toy",))
    assert len(c) == 50
    with pytest.raises(ValueError, match="sources"):
        stdlib_corpus(("nope",))


def test_stdlib_corpus_has_english_and_code():
    docs = stdlib_corpus(("docs",))
    code = stdlib_corpus(("code",), max_files=40)
    assert len(docs.train) > 100 and any("statement" in d for d in docs.train)
    assert any("def " in d for d in code.train)
