"""A user's corpus as it comes (#51): a text or ragged ``datasets.Dataset`` tokenised / packed inside, and a
streaming ``IterableDataset`` scored as it comes and selected by a streaming top-k — equal to the pre-packed paths."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from datasets import Dataset

from iclr25.pds import (
    NgramRidgeScorer,
    StreamingTopK,
    build_data_scorer,
    gumbel_top_k_select,
    iter_selected,
    pack_token_rows,
    pad_token_rows,
    score_corpus,
    select_corpus,
    select_stream,
)

WORDS = "the cat sat on a mat dog ran in park bird sang song sun is warm today and play".split()


def _tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(
        [" ".join(WORDS)], trainers.WordLevelTrainer(special_tokens=["[UNK]", "[EOS]", "[PAD]"])
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]", pad_token="[PAD]"
    )


@pytest.fixture(scope="module")
def tok():
    t = _tokenizer()
    assert t.pad_token_id == 2 and t.eos_token_id == 1
    return t


@pytest.fixture(scope="module")
def texts():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 14, size=57)  # ragged: 1 to 13 words
    return [" ".join(rng.choice(WORDS, size=n)) for n in lengths]


@pytest.fixture(scope="module")
def ridge(tok, texts):
    rows, _ = pad_token_rows(texts, tok)
    y = np.random.default_rng(1).normal(size=len(texts))
    return NgramRidgeScorer(tokenizer=tok).fit(rows, y)


@pytest.fixture(scope="module")
def transformer(tok):
    sc = build_data_scorer("llama", seed=0, tokenizer=tok, hidden=16, layers=1, heads=2, max_positions=64)
    assert sc.backbone.config._attn_implementation == "sdpa"  # the scorer runs SDPA (no forward AD needed)
    return sc.eval()


def _manual_pack(tok, texts, L):
    flat = np.concatenate([np.asarray(ids + [tok.eos_token_id]) for ids in tok(texts)["input_ids"]])
    n = -(-flat.size // L)
    out = np.full(n * L, tok.pad_token_id, dtype=np.int64)
    out[: flat.size] = flat
    return out.reshape(n, L)


@pytest.mark.parametrize("which", ["ridge", "transformer"])
def test_text_dataset_scores_equal_prepacked(tok, texts, ridge, transformer, which):
    scorer = ridge if which == "ridge" else transformer
    ds = Dataset.from_dict({"text": texts, "source": list(range(len(texts)))})
    rows, _ = pad_token_rows(texts, tok, max_length=12)
    want = score_corpus(rows, scorer, shard_size=8)
    got = score_corpus(ds, scorer, shard_size=8, tokenizer=tok, max_length=12)
    assert np.array_equal(got, want)  # same rows, same shards: bit for bit
    # without max_length each shard is padded to its own longest document: the scorers are padding-invariant
    full, _ = pad_token_rows(texts, tok)
    want_full = score_corpus(full, scorer, shard_size=8)
    got_shardwise = score_corpus(ds, scorer, shard_size=8, tokenizer=tok)
    if which == "ridge":
        assert np.array_equal(got_shardwise, want_full)
    else:
        assert np.allclose(got_shardwise, want_full, rtol=0, atol=1e-5)
    # ragged token ids in a Dataset column = the list-of-lists path
    ids = tok(texts)["input_ids"]
    ragged = Dataset.from_dict({"input_ids": ids})
    assert np.array_equal(score_corpus(ragged, scorer, shard_size=8, tokenizer=tok, max_length=12), want)


def test_packed_text_dataset_equals_prepacked_rows(tok, texts, ridge, transformer):
    L = 9
    manual = _manual_pack(tok, texts, L)
    rows, pid = pack_token_rows(Dataset.from_dict({"text": texts}), tok, L, batch_size=5)
    assert pid == 2 and np.array_equal(rows, manual)
    assert np.array_equal(pack_token_rows(texts, tok, L)[0], manual)  # a list packs the same
    ds = Dataset.from_dict({"text": texts})
    for scorer in (ridge, transformer):
        assert np.array_equal(
            score_corpus(ds, scorer, shard_size=7, tokenizer=tok, max_length=L, pack=True),
            score_corpus(manual, scorer, shard_size=7),
        )


def test_select_text_dataset_writes_kept_texts(tok, texts, ridge, tmp_path):
    ds = Dataset.from_dict({"text": texts, "source": list(range(len(texts)))})
    sel = select_corpus(ds, ridge, ratio=0.4, tau=0.1, seed=3, out_dir=tmp_path, shard_size=10, tokenizer=tok)
    ref = select_corpus(texts, ridge, ratio=0.4, tau=0.1, seed=3, shard_size=10, tokenizer=tok)
    assert np.array_equal(sel.indices, ref.indices) and np.array_equal(sel.scores, ref.scores)
    from datasets import load_from_disk

    kept = load_from_disk(str(tmp_path / "selected"))
    assert kept["text"] == [texts[i] for i in sel.indices] and kept["source"] == sel.indices.tolist()
    packed = select_corpus(
        ds, ridge, ratio=0.5, out_dir=tmp_path / "p", tokenizer=tok, max_length=9, pack=True
    )
    assert np.array_equal(
        np.load(tmp_path / "p" / "selected.npy"), _manual_pack(tok, texts, 9)[packed.indices]
    )


def test_text_dataset_errors(tok, texts, ridge):
    ds = Dataset.from_dict({"body": texts})
    with pytest.raises(
        ValueError, match=r"no 'input_ids' \(token ids\) or 'text' \(text\) column; its columns: \['body'\]"
    ):
        score_corpus(ds, ridge, tokenizer=tok)
    assert score_corpus(ds, ridge, tokenizer=tok, text_column="body").shape == (len(texts),)
    with pytest.raises(ValueError, match="pass tokenizer="):
        score_corpus(ds, ridge, text_column="body", pad_id=2)
    with pytest.raises(
        ValueError, match=r"max_length must be a positive int \(the packed row length\), got None"
    ):
        score_corpus(ds, ridge, tokenizer=tok, text_column="body", pack=True)
    other = NgramRidgeScorer(vocab_size=len(tok), pad_id=0).fit(
        pad_token_rows(texts, tok)[0], np.arange(len(texts))
    )
    with pytest.raises(ValueError, match="scorer.pad_id=0 but the corpus is padded with 2"):
        score_corpus(ds, other, tokenizer=tok, text_column="body")


@pytest.mark.parametrize("tau", [0.0, 0.1, 1.0])
def test_streaming_selection_equals_in_memory(tok, texts, ridge, tau, tmp_path):
    ds = Dataset.from_dict({"text": texts})
    mem = select_corpus(texts, ridge, ratio=0.4, tau=tau, seed=7, tokenizer=tok, max_length=12, shard_size=8)
    stream = ds.to_iterable_dataset(num_shards=3)
    got = select_stream(stream, ridge, 0.4, tau=tau, seed=7, tokenizer=tok, max_length=12, shard_size=8,
                        out_dir=tmp_path)  # fmt: skip
    assert np.array_equal(got.indices, mem.indices)
    assert np.array_equal(np.load(tmp_path / "scores.npy"), mem.scores)
    assert np.array_equal(np.load(tmp_path / "indices.npy"), mem.indices)
    assert not (tmp_path / ".scores.partial.f64").exists()
    k = len(mem.indices)  # k known up front: the top-k runs during the stream (a plain generator of strings)
    by_k = select_stream((t for t in texts), ridge, None, k=k, tau=tau, seed=7, tokenizer=tok, max_length=12,
                         shard_size=5)  # fmt: skip
    assert np.array_equal(by_k.indices, mem.indices)
    by_n = select_stream(ds.to_iterable_dataset(), ridge, 0.4, n_rows=len(texts), tau=tau, seed=7, tokenizer=tok,
                         max_length=12, shard_size=4)  # fmt: skip
    assert np.array_equal(by_n.indices, mem.indices)
    assert [r["text"] for r in iter_selected(ds.to_iterable_dataset(), got.indices)] == [
        texts[i] for i in mem.indices
    ]


def test_streaming_packed_equals_in_memory_packed(tok, texts, ridge):
    mem = select_corpus(texts, ridge, ratio=0.5, seed=1, tokenizer=tok, max_length=9, pack=True)
    got = select_stream(Dataset.from_dict({"text": texts}).to_iterable_dataset(), ridge, 0.5, seed=1, tokenizer=tok,
                        max_length=9, pack=True, shard_size=6)  # fmt: skip
    assert np.array_equal(got.scores, mem.scores) and np.array_equal(got.indices, mem.indices)


def test_streaming_top_k_with_ties_equals_stable_sort():
    rng = np.random.default_rng(5)
    keys = rng.integers(0, 6, size=10_000).astype(np.float64)  # many ties: order by position decides
    for k in (0, 1, 37, 4000, 10_000):
        top = StreamingTopK(k)
        for lo in range(0, keys.size, 333):
            top.push(keys[lo : lo + 333], np.arange(lo, min(keys.size, lo + 333)))
        want = (
            torch.sort(torch.as_tensor(keys), descending=True, stable=True).indices[:k].sort().values.numpy()
        )
        assert np.array_equal(top.indices(), want)
    s = rng.normal(size=2000)
    top = StreamingTopK(800)
    top.push(s, np.arange(2000))
    assert np.array_equal(top.indices(), gumbel_top_k_select(s, 0.4, tau=0.0).numpy())


def test_scores_are_written_as_they_come(tok, texts, ridge, tmp_path):
    calls = []

    def flaky(rows):
        calls.append(rows.shape[0])
        if len(calls) == 3:
            raise RuntimeError("scorer died on shard 3")
        return ridge.predict(rows)

    with pytest.raises(RuntimeError, match="shard 3"):
        select_stream(iter(texts), flaky, 0.4, tokenizer=tok, max_length=12, shard_size=10, out_dir=tmp_path)
    saved = np.fromfile(tmp_path / ".scores.partial.f64", dtype="<f8")
    rows, _ = pad_token_rows(texts[:20], tok, max_length=12)
    assert np.array_equal(saved, ridge.predict(rows))  # the first two shards are on disk


def test_stream_errors(tok, texts, ridge):
    with pytest.raises(ValueError, match="exactly one of ratio"):
        select_stream(texts, ridge, 0.4, k=3, tokenizer=tok)
    with pytest.raises(ValueError, match="n_rows=99 but the stream held 57 rows"):
        select_stream(texts, ridge, 0.4, n_rows=99, tokenizer=tok)
    with pytest.raises(ValueError, match="k=100 but the stream held only 57 rows"):
        select_stream(texts, ridge, None, k=100, tokenizer=tok)
    with pytest.raises(ValueError, match=r"max_length must be a positive int \(the packed row length\)"):
        select_stream(texts, ridge, 0.4, tokenizer=tok, pack=True)
    with pytest.raises(ValueError, match="stream must be an iterable of documents, got int"):
        select_stream(5, ridge, 0.4, tokenizer=tok)


def test_pad_token_rows_pads_up_to_a_longer_max_length():
    """Regression: max_length longer than every row used to raise an IndexError."""
    rows, pid = pad_token_rows([[3, 4], [5]], pad_id=2, max_length=4)
    assert pid == 2 and rows.tolist() == [[3, 4, 2, 2], [5, 2, 2, 2]]
    assert pad_token_rows([[3, 4, 6], [5]], pad_id=2, max_length=2)[0].tolist() == [[3, 4], [5, 2]]
