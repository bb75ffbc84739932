"""Pad ids from a real (locally built, offline) tokenizer, the divergence warning and list corpora (issue #17).

The tokenizer is trained here with the ``tokenizers`` library on a few strings and wrapped in
``PreTrainedTokenizerFast``; its pad id is 2 (not 0), so a hidden "pad = 0" default cannot pass these tests.
The model is a tiny random HF Llama whose config keeps the library default ``pad_token_id=None``.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from iclr25.pds import (
    DataScorer,
    NgramRidgeScorer,
    PMPDivergenceWarning,
    build_data_scorer,
    pad_token_rows,
    pmp_scores,
    resolve_pad_id,
    select_corpus,
    spearman,
)

TEXTS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "the bird sang a song",
    "cats and dogs play in the sun",
    "the sun is warm today",
    "a song for the park",
]
SPECIALS = ["[UNK]", "[EOS]", "[PAD]"]  # ids 0, 1, 2


def _tokenizer(pad: bool = True):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(TEXTS, trainers.WordLevelTrainer(special_tokens=SPECIALS))
    kw = {"pad_token": "[PAD]"} if pad else {}
    return PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="[EOS]", **kw)


@pytest.fixture(scope="module")
def tok():
    t = _tokenizer()
    assert t.pad_token_id == 2 and t.eos_token_id == 1
    return t


def _llama(vocab: int, seed: int = 0):
    """A tiny random Llama with the library's default config (pad_token_id=None), eager attention."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=32,
        attn_implementation="eager",
    )
    assert cfg.pad_token_id is None
    torch.manual_seed(seed)
    return LlamaForCausalLM(cfg).double()


def _rows(tok, texts, length=9):
    return torch.as_tensor(
        tok(texts, padding="max_length", max_length=length, truncation=True)["input_ids"], dtype=torch.long
    )


@pytest.fixture(scope="module")
def data(tok):
    g = np.random.default_rng(0)
    words = [w for t in TEXTS for w in t.split()]
    # ragged documents of 2..8 words → heavy right padding
    docs = [" ".join(g.choice(words, size=g.integers(2, 9))) for _ in range(40)]
    return {
        "proxy": _rows(tok, docs[:24]),
        "batches": _rows(tok, docs[24:40]).view(4, 4, -1),
        "dev": _rows(tok, TEXTS),
    }


def test_auto_pad_id_on_default_llama_raises_without_tokenizer(tok, data):
    m = _llama(len(tok))
    with pytest.raises(ValueError, match=r"pad_id='auto'.*pad_token_id is None"):
        resolve_pad_id(m, "auto")
    with pytest.raises(ValueError, match="pad_id"):
        pmp_scores(m, data["proxy"], data["batches"], data["dev"], lr=0.05)
    with pytest.raises(ValueError, match="pad_id"):
        resolve_pad_id(m, "pad")


def test_auto_pad_id_comes_from_the_tokenizer_and_changes_the_ranking(tok, data):
    m = _llama(len(tok))
    assert resolve_pad_id(m, "auto", tok) == 2
    args = (m, data["proxy"], data["batches"], data["dev"])
    s_tok, tr = pmp_scores(*args, lr=0.05, tokenizer=tok, return_trace=True)
    s_int = pmp_scores(*args, lr=0.05, pad_id=2)
    assert tr.pad_id == 2
    torch.testing.assert_close(s_tok, s_int, rtol=0, atol=0)
    # scoring the padding as target tokens (no mask) gives a different ranking: the bug this guards against
    s_none = pmp_scores(*args, lr=0.05, pad_id=None)
    assert spearman(s_none.numpy(), s_tok.numpy()) < 0.8  # measured 0.31


def test_tokenizer_that_pads_with_eos_resolves_to_eos_and_no_pad_token_raises():
    t = _tokenizer(pad=False)
    m = _llama(len(t))
    with pytest.raises(ValueError, match=r"pad_id='auto'.*no pad token.*eos_token"):
        resolve_pad_id(m, "auto", t)
    t.pad_token = t.eos_token  # the usual Llama set-up
    assert resolve_pad_id(m, "auto", t) == t.eos_token_id == 1
    m.config.pad_token_id = (
        0  # a config that disagrees: the tokenizer padded the rows, it wins (with a warning)
    )
    with pytest.warns(UserWarning, match="differs from model.config.pad_token_id"):
        assert resolve_pad_id(m, "auto", t) == 1


def test_divergence_warning_when_J_rises(tok, data):
    m = _llama(len(tok))
    dev = data["dev"]
    batches = dev[None].expand(3, -1, -1)  # descending J itself: a small step must lower J
    with warnings.catch_warnings():
        warnings.simplefilter("error", PMPDivergenceWarning)
        _, tr = pmp_scores(m, data["proxy"], batches, dev, lr=0.05, tokenizer=tok, return_trace=True)
    assert not tr.diverged and tr.dev_losses[-1] < tr.dev_losses[0]
    with pytest.warns(PMPDivergenceWarning, match=r"diverged.*J\(θ_0\)"):
        _, tr = pmp_scores(m, data["proxy"], batches, dev, lr=500.0, tokenizer=tok, return_trace=True)
    assert tr.diverged
    J = np.asarray(tr.dev_losses)
    assert not np.isfinite(J).all() or J.max() > 1.5 * J[0]  # J blew up (here 3.2 → 6e7 → a collapsed model)


def test_scorers_take_the_tokenizers_pad_id(tok):
    r = NgramRidgeScorer(tokenizer=tok)
    assert r.pad_id == 2 and r.vocab_size == len(tok)
    with pytest.raises(ValueError, match="contradicts tokenizer.pad_token_id"):
        NgramRidgeScorer(pad_id=0, tokenizer=tok)
    # padding-invariant features: the same text padded to 7 or 12 positions has the same n-gram frequencies
    a, b = _rows(tok, TEXTS[:3], 7), _rows(tok, TEXTS[:3], 12)
    assert (r.features(a) != r.features(b)).nnz == 0
    sc = build_data_scorer("llama", seed=0, tokenizer=tok, hidden=16, layers=1, heads=2, max_positions=32)
    assert sc.pad_id == 2 and sc.backbone.config.pad_token_id == 2
    torch.testing.assert_close(
        torch.as_tensor(sc.predict(a)), torch.as_tensor(sc.predict(b)), rtol=1e-5, atol=1e-6
    )
    with pytest.raises(ValueError, match="pad_id='auto'"):
        DataScorer(_llama(len(tok)).model)  # default Llama config, no tokenizer: no silent pad = 0


def test_select_corpus_on_strings_and_token_lists(tok, tmp_path):
    texts = TEXTS * 5
    z = np.arange(len(texts), dtype=float) % 7  # any learnable target
    rows, pid = pad_token_rows(texts, tok)
    assert pid == 2 and rows.shape == (30, max(len(t.split()) for t in texts))
    lens = np.array([len(t.split()) for t in texts])
    assert ((rows == 2).sum(1) == rows.shape[1] - lens).all()  # right padding with the tokenizer's pad id
    scorer = NgramRidgeScorer(tokenizer=tok).fit(rows, z)

    sel = select_corpus(texts, scorer, ratio=0.5, tau=0.0, tokenizer=tok, out_dir=tmp_path / "s")
    ref = select_corpus(rows, scorer, ratio=0.5, tau=0.0)
    np.testing.assert_array_equal(sel.indices, ref.indices)
    np.testing.assert_array_equal(np.load(tmp_path / "s" / "selected.npy"), rows[sel.indices])
    import json

    assert json.loads((tmp_path / "s" / "selected_texts.json").read_text()) == [texts[i] for i in sel.indices]

    ids = [tok(t)["input_ids"] for t in texts]  # ragged list[list[int]]
    sel2 = select_corpus(ids, scorer, ratio=0.5, tau=0.0, pad_id=2)
    np.testing.assert_array_equal(sel2.indices, ref.indices)
    sel3 = select_corpus(ids, scorer, ratio=0.5, tau=0.0, tokenizer=tok, max_length=4)  # truncate to 4
    assert sel3.scores.shape == (30,)
    assert pad_token_rows(ids, tok, max_length=4)[0].shape == (30, 4)

    with pytest.raises(ValueError, match="tokenizer"):
        select_corpus(texts, scorer, ratio=0.5)
    with pytest.raises(ValueError, match="pad_id"):
        select_corpus(ids, scorer, ratio=0.5)  # no tokenizer, no pad id
    with pytest.raises(ValueError, match=r"scorer.pad_id=0 but the corpus is padded with 2"):
        select_corpus(texts, NgramRidgeScorer(len(tok)).fit(rows, z), ratio=0.5, tokenizer=tok)
    with pytest.raises(ValueError, match="non-negative integers"):
        select_corpus([[1.5, 2.0]], scorer, ratio=0.5, pad_id=2)
