"""Normalisation, Gumbel-top-k and corpus-scale selection (the selection step of the pipeline in the method card),
scorers, their LR schedule and the DSIR baseline."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from iclr25.pds import (
    NgramRidgeScorer,
    build_data_scorer,
    dsir_log_weights,
    gumbel_top_k_select,
    make_markov_corpus,
    normalize_scores,
    random_select,
    select_corpus,
    spearman,
    train_data_scorer,
)


def test_normalize_scores():
    s = torch.randn(1000, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 5 + 3
    s[0] = 1e3  # an outlier gets clipped
    z = normalize_scores(s)
    unclipped = (s - s.mean()) / s.std(unbiased=False)
    assert abs(float(unclipped.mean())) <= 1e-6 and z.abs().max() <= 3.0 and z[0] == 3.0
    assert torch.allclose(z[1:], unclipped[1:].clamp(-3, 3))
    assert isinstance(normalize_scores(s.numpy()), np.ndarray)
    with pytest.raises(ValueError, match="clip"):
        normalize_scores(s, clip=0)


def test_gumbel_top_k_count_order_determinism_and_tau_limit():
    g = torch.Generator().manual_seed(1)
    s = torch.randn(1001, generator=g, dtype=torch.float64)
    for r in (0.4, 0.1, 1.0):
        idx = gumbel_top_k_select(s, r, tau=0.1, seed=3)
        assert len(idx) == math.floor(r * 1001)
        assert torch.all(idx[1:] > idx[:-1])  # original order, no duplicates
    assert torch.equal(gumbel_top_k_select(s, 0.4, 0.1, seed=3), gumbel_top_k_select(s, 0.4, 0.1, seed=3))
    assert not torch.equal(gumbel_top_k_select(s, 0.4, 0.1, seed=3), gumbel_top_k_select(s, 0.4, 0.1, seed=4))
    exact = torch.topk(s, 400).indices.sort().values
    assert torch.equal(gumbel_top_k_select(s, 0.4, tau=0.0), exact)
    assert torch.equal(gumbel_top_k_select(s, 0.4, tau=1e-9, seed=7), exact)  # τ → 0
    # τ large → nearly uniform: the kept set's mean score approaches the population mean
    hot = gumbel_top_k_select(s, 0.4, tau=1e3, seed=0)
    assert abs(float(s[hot].mean() - s.mean())) < 0.15 < float(s[exact].mean() - s.mean())
    r = random_select(1001, 0.4, seed=0)
    assert len(r) == 400 and torch.all(r[1:] > r[:-1])
    with pytest.raises(ValueError, match="ratio"):
        gumbel_top_k_select(s, 0.0)
    with pytest.raises(ValueError, match="tau"):
        gumbel_top_k_select(s, 0.5, tau=-1)


def test_gumbel_top_k_samples_proportional_to_exp_score_over_tau():
    """k = 1: P(select n) = softmax(s/τ)_n (Gumbel-max)."""
    s = torch.tensor([0.0, 0.1, 0.2, 0.3], dtype=torch.float64)
    counts = torch.zeros(4)
    for seed in range(4000):
        counts[gumbel_top_k_select(s, 0.25, tau=0.2, seed=seed)] += 1
    p = torch.softmax(s / 0.2, 0).float()
    assert torch.allclose(counts / 4000, p, atol=0.03)


@pytest.fixture(scope="module")
def corpus():
    return make_markov_corpus(n_pool=1200, n_dev=64, n_test=32, seed=0)


def test_markov_corpus_sources(corpus):
    assert corpus.pool.shape == (1200, 33) and (corpus.pool[:, 0] == 1).all()
    frac = corpus.source_fractions()
    assert frac == pytest.approx({"clean": 0.3, "noisy": 0.3, "other": 0.2, "repeat": 0.2}, abs=1e-9)
    assert int(corpus.pool.max()) < corpus.vocab_size and int(corpus.pool[:, 1:].min()) >= 4
    again = make_markov_corpus(n_pool=1200, n_dev=64, n_test=32, seed=0)
    assert torch.equal(again.pool, corpus.pool) and torch.equal(again.dev, corpus.dev)


def test_ridge_scorer_learns_and_ignores_padding(corpus):
    sc = NgramRidgeScorer(corpus.vocab_size, alpha=1e-3)
    w = np.random.default_rng(0).standard_normal(sc.features(corpus.pool[:1]).shape[1])
    w[corpus.vocab_size :] *= 0.05  # mostly unigram-driven, so 1000 rows determine it
    y = sc.features(corpus.pool) @ w  # a target linear in the n-gram frequencies is recovered
    sc.fit(corpus.pool[200:], y[200:])
    assert spearman(sc.predict(corpus.pool[:200]), y[:200]) > 0.9
    src = (corpus.source == 0).double().numpy()  # and a source label is learnable from n-grams
    sc2 = NgramRidgeScorer(corpus.vocab_size).fit(corpus.pool[200:], src[200:])
    pred = sc2.predict(corpus.pool[:200])
    assert pred[src[:200] == 1].mean() > pred[src[:200] == 0].mean() + 0.3
    padded = torch.cat([corpus.pool[:5], torch.zeros(5, 7, dtype=torch.long)], 1)
    assert np.allclose(sc.predict(padded), sc.predict(corpus.pool[:5]))
    with pytest.raises(ValueError, match="not fitted"):
        NgramRidgeScorer(10).predict(corpus.pool[:2])


def test_transformer_data_scorer_learns_and_mean_pools_non_pad(corpus):
    y = normalize_scores((corpus.pool[:, 1:] < 28).double().mean(1).numpy())  # a mean-poolable target
    sc = build_data_scorer(
        "llama", seed=0, vocab_size=corpus.vocab_size, hidden=32, layers=1, heads=2, max_positions=64
    )
    fit = train_data_scorer(
        sc, corpus.pool[:500], y[:500], dev_num=100, epochs=3, batch_size=50, lr=3e-3, seed=0
    )
    assert fit.best_spearman > 0.7 and len(fit.history) == 3
    assert fit.best_spearman == max(h["val_spearman"] for h in fit.history)
    padded = torch.cat([corpus.pool[:4], torch.zeros(4, 5, dtype=torch.long)], 1)
    assert np.allclose(sc.predict(padded), sc.predict(corpus.pool[:4]), atol=1e-5)


def test_dsir_weights_prefer_target_distribution(corpus):
    logw = dsir_log_weights(corpus.pool[:400], corpus.dev)
    by = [logw[(corpus.source[:400] == i).numpy()].mean() for i in range(4)]
    assert logw.shape == (400,) and by[0] == max(by)
    # the vectorised backend is the same estimator: with few bucket collisions the weights agree
    a = dsir_log_weights(corpus.pool[:100], corpus.dev, num_buckets=50_021)
    b = dsir_log_weights(corpus.pool[:100], corpus.dev, num_buckets=50_021, backend="numpy")
    assert spearman(a, b) > 0.99 and np.corrcoef(a, b)[0, 1] > 0.99


class _SumScorer:
    def predict(self, x: np.ndarray) -> np.ndarray:
        return (x % 7).sum(1).astype(float) / 10


def test_select_corpus_memmap_and_dataset(tmp_path, corpus):
    arr = corpus.pool.numpy()
    mm = np.lib.format.open_memmap(tmp_path / "corpus.npy", mode="w+", dtype=arr.dtype, shape=arr.shape)
    mm[:] = arr
    mm.flush()
    src = np.load(tmp_path / "corpus.npy", mmap_mode="r")
    res = select_corpus(
        src, _SumScorer(), ratio=0.4, tau=0.1, seed=5, out_dir=tmp_path / "out", shard_size=97
    )
    expect = gumbel_top_k_select(_SumScorer().predict(arr), 0.4, 0.1, seed=5).numpy()
    assert np.array_equal(res.indices, expect)
    assert np.array_equal(np.load(tmp_path / "out" / "selected.npy"), arr[expect])
    assert np.array_equal(np.load(tmp_path / "out" / "indices.npy"), expect)
    res2 = select_corpus(corpus.pool, _SumScorer(), ratio=0.4, tau=0.1, seed=5, shard_size=5000)
    assert np.array_equal(res2.indices, expect)  # shard-size and container invariant

    from datasets import Dataset, load_from_disk

    ds = Dataset.from_dict({"input_ids": arr.tolist()})
    res3 = select_corpus(
        ds, _SumScorer(), ratio=0.4, tau=0.1, seed=5, out_dir=tmp_path / "ds", shard_size=300
    )
    assert np.array_equal(res3.indices, expect)
    kept = load_from_disk(str(tmp_path / "ds" / "selected"))
    assert np.array_equal(np.asarray(kept["input_ids"]), arr[expect])


def test_scorer_lr_schedule_is_warmup_cosine(corpus, monkeypatch):
    """The scorer's LR sequence (transformers' warm-up + cosine via iclr25.common.schedule) equals, step by step,
    the hand-written schedule it replaced (linear warm-up lr·(s+1)/W, then cosine to 0)."""
    lrs: list[float] = []
    step = torch.optim.AdamW.step

    def recording_step(self, *a, **k):
        lrs.append(self.param_groups[0]["lr"])
        return step(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)
    sc = build_data_scorer("llama", seed=0, vocab_size=corpus.vocab_size, hidden=8, layers=1, heads=2)
    lr, warm, epochs, bs, n = 1e-3, 4, 3, 50, 300
    y = np.linspace(0, 1, n)
    train_data_scorer(
        sc, corpus.pool[:n], y, dev_num=50, epochs=epochs, batch_size=bs, lr=lr, warmup_steps=warm
    )
    total = epochs * math.ceil((n - 50) / bs)

    def old(s: int) -> float:  # the replaced hand-written schedule
        if s < warm:
            return lr * (s + 1) / warm
        return lr * 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm)))

    assert len(lrs) == total
    assert np.allclose(lrs, [old(s) for s in range(total)], rtol=1e-12, atol=0)
