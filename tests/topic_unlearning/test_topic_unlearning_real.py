"""The real preset's inputs and the method on real documents (issue #53): the corpus loader's counts, the vocabulary
filters, unlearning on real text against re-fitting without the deleted documents, the multi-class head, and a
smoke-sized real run whose claims compute."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from iclr25.harness.runs import run as run_system
from iclr25.topic_unlearning import (
    AnchorTopicModel,
    AnchorVanishedError,
    RealCorpusConfig,
    estimate_sensitivity,
    fit_head,
    load_real_corpus,
    newton_unlearn,
    retrain_reference,
)
from iclr25.topic_unlearning.corpus import corpus_texts
from iclr25.topic_unlearning.experiment import PRESETS, Config, real_inputs
from iclr25.topic_unlearning.model import cooccurrence_sum
from iclr25.topic_unlearning.simplex import face_newton, solve_simplex_ls
from iclr25.topic_unlearning.synthetic import sample_documents, separable_topics

ASSETS = ("reuters", "gensim-test-data")


@pytest.fixture
def corpus(need_asset):
    need_asset(*ASSETS)
    return load_real_corpus(RealCorpusConfig())  # cached per process: one load for the module


def test_presets_include_real():
    assert set(PRESETS) == {"smoke", "quick", "real", "full"}
    real = PRESETS["real"]
    assert real.data == "real" and real.seeds >= 3 and PRESETS["quick"].data == "synthetic"
    # the quick claims' thresholds and criteria are kept (only the grids are scaled to the corpus)
    for f in ("epsilon", "delta", "utility_threshold", "head_tolerance", "noise_draws", "sensitivity_trials"):
        assert getattr(real, f) == getattr(PRESETS["quick"], f), f
    assert max(real.newton_grid) <= 0.005 * real.m and real.m_small == real.m // 8


def test_loader_counts(corpus):
    """Documents per corpus as loaded and kept, and the vocabulary / token count after every filter."""
    c = corpus.counts
    assert c["documents"] == {
        "reuters": 395,
        "lee": 350,
        "wikipedia": 106,
        "polarity": 200,
        "newsgroups": 200,
        "total": 1251,
    }
    # 40 polarity sentences and one newsgroup post keep < 2 tokens after the filters
    assert c["documents_kept"] == {
        "reuters": 395,
        "lee": 350,
        "wikipedia": 106,
        "polarity": 160,
        "newsgroups": 199,
        "total": 1210,
    }
    assert c["tokeniser"] == {"vocabulary": 38905, "tokens": 653918}
    assert c["stop_words"] == {"vocabulary": 38600, "tokens": 396532}
    assert c["doc_freq"] == {"vocabulary": 8006, "tokens": 319245}
    assert c["max_features"] == {"vocabulary": 2000, "tokens": 224141}
    X = corpus.X
    assert X.shape == (1210, 2000) and len(corpus.vocab) == 2000
    assert 0 <= 224141 - int(X.sum()) <= 1251 - 1210  # the dropped documents held ≤ 1 token each
    assert (np.asarray(X.sum(axis=1)).ravel() >= 2).all()
    assert sorted(corpus.classes) == ["lee", "newsgroups", "polarity", "reuters", "wikipedia"]
    assert {s: int((corpus.source == s).sum()) for s in corpus.classes} == {
        k: v for k, v in c["documents_kept"].items() if k != "total"
    }
    assert set(corpus.label[corpus.source == "newsgroups"]) == {"alt.atheism", "sci.space"}


def test_vocabulary_filters(corpus):
    """Every kept word is alphabetic, lowercase, ≥ 2 letters, not a stop word, in ≥ 5 and ≤ 50 % of the documents;
    the newsgroup headers (which name the newsgroup) are gone."""
    vocab = corpus.vocab.tolist()
    assert all(re.fullmatch(r"[^\W\d_]{2,}", w) and w == w.lower() for w in vocab)
    assert not set(vocab) & ENGLISH_STOP_WORDS
    df = np.asarray((corpus.X > 0).sum(axis=0)).ravel()
    assert df.max() <= 0.5 * 1251
    # min_df counts the 1,251 loaded documents; the 41 dropped ones held ≤ 1 token each
    assert df.min() >= 5 - (1251 - 1210)
    news, _, _, _ = corpus_texts(RealCorpusConfig(corpora=("newsgroups",)))
    raw, _, _, _ = corpus_texts(RealCorpusConfig(corpora=("newsgroups",), strip_headers=False))
    assert len(news) == len(raw) == 200
    assert sum(t.startswith(("Newsgroups:", "From:", "Path:")) for t in news) == 0
    assert sum("Newsgroups: " in t.partition("\n\n")[0] for t in raw) == 200  # what the default strips
    assert all(r.endswith(t) for r, t in zip(raw, news))


def test_corpus_config_rejects_bad_filters():
    with pytest.raises(ValueError, match="min_df"):
        RealCorpusConfig(min_df=0)
    with pytest.raises(ValueError, match="max_df"):
        RealCorpusConfig(max_df=1.5)
    with pytest.raises(ValueError, match="corpora"):
        RealCorpusConfig(corpora=("reuters", "imdb"))
    with pytest.raises(ValueError, match="corpora"):
        RealCorpusConfig(corpora=("reuters", "reuters"))
    with pytest.raises(ValueError, match="data"):
        Config(data="web")
    with pytest.raises(ValueError, match="timing_forget"):
        Config(m=100, m_small=10, timing_forget=10, newton_grid=(1,), capacity_grid=(1,), head_grid=(1,))


def test_unlearning_real_docs_equals_refitting_without_them(corpus):
    """On real documents: the statistic after unlearning is the statistic of the kept documents, and the Newton
    step equals fitting the kept documents with the anchors fixed (exact here: no row's support changes)."""
    X = corpus.X[::3]  # 404 documents from all five corpora
    model = AnchorTopicModel(10, min_doc_freq=0.05).fit(X)
    forget = np.array([0, 1])
    kept = np.setdiff1d(np.arange(X.shape[0]), forget)
    A_f, R_f, stats, n_bad = newton_unlearn(model.stats_, X[forget])
    Sigma_kept, m_kept = cooccurrence_sum(X[kept])
    assert stats.m == m_kept == X.shape[0] - 2
    assert np.abs(stats.Sigma - Sigma_kept).max() <= 1e-12 * np.abs(Sigma_kept).max()
    refit = AnchorTopicModel(10, anchors=model.anchors_, tol=1e-12).fit(X[kept])
    assert n_bad == 0
    assert np.linalg.norm(A_f - refit.topic_word_) <= 1e-9
    assert np.linalg.norm(A_f - retrain_reference(model, X[forget]).topic_word_) <= 1e-9
    assert np.abs(R_f - refit.topic_cov_).max() <= 1e-6 * np.abs(refit.topic_cov_).max()
    # doing nothing is measurably off: the two documents moved the topics
    assert np.linalg.norm(model.topic_word_ - refit.topic_word_) > 1e-5
    # model invariants on real text: columns are distributions, anchor rows one-hot
    assert (A_f >= 0).all() and np.allclose(A_f.sum(axis=0), 1, atol=1e-9)
    off = A_f[model.anchors_].copy()
    off[np.arange(10), np.arange(10)] = 0
    assert np.abs(off).max() == 0


def test_multiclass_head_on_real_topics(corpus):
    """One-vs-rest least squares on φ_A = Aᵀx̄: equals one single-output head per class; B = A W is (n, k); its
    sensitivity obeys ||(A^F − A')W||_F ≤ ||W||_F ||A^F − A'||_F; it beats the majority class."""
    X, src = corpus.X, corpus.source
    model = AnchorTopicModel(10, min_doc_freq=0.05).fit(X[::2])
    classes = corpus.classes
    y = np.searchsorted(classes, src)
    tr, te = np.arange(1, X.shape[0], 4), np.arange(3, X.shape[0], 4)
    head = fit_head(model, X[tr], np.eye(len(classes))[y[tr]])
    assert head.w.shape == (10, 5) and head.b0.shape == (5,)
    for k in range(5):
        hk = fit_head(model, X[tr], (y[tr] == k).astype(float))
        assert np.allclose(hk.w, head.w[:, k], rtol=1e-6, atol=1e-6 * np.abs(head.w).max())
        assert np.isclose(hk.b0, head.b0[k], atol=1e-6 * np.abs(head.b0).max() + 1e-9)
    B = model.topic_word_ @ head.w
    assert B.shape == (2000, 5) and head.decision(B, X[te]).shape == (len(te), 5)
    acc = float(np.mean(head.predict(B, X[te]) == y[te]))
    assert acc > np.bincount(y[te]).max() / len(te) + 0.1
    d = estimate_sensitivity(model, X[::2], 2, trials=2, head=head, seed=0)
    assert d["B"] <= np.linalg.norm(head.w) * d["A"] + 1e-12
    with pytest.raises(ValueError, match="one value"):
        fit_head(model, X[tr], np.eye(5)[y[tr]][:-1])


def test_real_inputs_refuse_a_too_large_split(corpus):
    cfg = dataclasses.replace(PRESETS["real"], m=1000, m_small=125, task_docs=200)  # 1,400 > 1,210 documents
    with pytest.raises(ValueError, match="m \\+ 2 \\* task_docs"):
        real_inputs(cfg, np.random.default_rng(0))


@pytest.mark.slow
def test_smoke_sized_real_run_computes_every_claim(tmp_path, need_asset):
    need_asset(*ASSETS)
    overrides = {
        "m": 300,
        "m_small": 60,
        "task_docs": 120,
        "newton_grid": (1,),
        "capacity_grid": (1, 10),
        "head_grid": (1, 10),
        "noise_draws": 5,
        "sensitivity_trials": 2,
        "timing_reps": 1,
        "timing_forget": 1,
    }
    doc = run_system("topic_unlearning", "real", tmp_path, seeds=1, overrides=overrides)
    ids = [c["id"] for c in doc["claims"]]
    assert ids == [
        "real_newton_vs_nothing",
        "real_cost_independent_of_n",
        "real_capacity_vs_noise_only",
        "real_head_easier_than_base",
    ]
    m = json.loads((tmp_path / "topic_unlearning" / "metrics.json").read_text())
    per = m["per_seed"]["0"]
    assert per["corpus"] == {"documents": 1210, "vocabulary": 2000}
    # the Newton step is exact on a single real deletion here: far closer to retraining than doing nothing
    assert per["min_ratio_nothing_over_newton"] > 5
    assert 0 < per["head"]["noise_free_accuracy"] <= 1 and per["head"]["classes"] == 5
    assert set(per["capacity"]) >= {"newton", "noise_only", "head", "base"}
    t = json.loads((tmp_path / "topic_unlearning" / "timings.json").read_text())["per_seed"]["0"]
    assert {"small", "large", "large3x"} <= set(t["cost"]) and t["retrain_time_ratio_3x"] > 0
    assert "real_text" not in m["aggregate"]  # the Lee smoke check is for the synthetic presets
    report = (tmp_path / "topic_unlearning" / "report.md").read_text()
    assert "Real text has no planted A*" in report


def test_forgetting_every_occurrence_of_an_anchor_is_refused_not_a_crash():
    """Regression (found by a real run at m = 243 deleting 200 documents): a forget set holding every document with
    an anchor word made the face-Newton solve raise numpy's LinAlgError ("Singular matrix"). Now unlearning and
    fixed-anchor retraining refuse it by name, and the sensitivity estimate counts it as an infinite gap."""
    A, _ = separable_topics(40, 4, 0.2, rng=0)
    X = sample_documents(A, 400, doc_len=8, rng=1)
    model = AnchorTopicModel(4, min_doc_freq=0.01).fit(X)
    a = int(model.anchors_[0])
    holders = np.flatnonzero(np.asarray(X[:, a].todense()).ravel() > 0)
    assert 0 < len(holders) < X.shape[0] - 2
    with pytest.raises(AnchorVanishedError, match=f"anchor word\\(s\\) \\[{a}\\]"):
        newton_unlearn(model.stats_, X[holders])
    with pytest.raises(AnchorVanishedError):
        retrain_reference(model, X[holders])
    # one occurrence left: defined again
    A_f, *_ = newton_unlearn(model.stats_, X[holders[1:]])
    assert np.isfinite(A_f).all()
    # the estimate: a forget set of every document is drawn → +inf, never a crash
    d = estimate_sensitivity(model, X, X.shape[0] - 1, trials=1, seed=0)
    assert d["A"] == np.inf


def test_face_newton_survives_a_singular_face():
    """Two coinciding anchor rows make the face Hessian singular: the step falls back to the minimum-norm solution
    (or keeps the row) instead of raising."""
    rng = np.random.default_rng(0)
    Xa = rng.dirichlet(np.ones(30), size=3)
    Xa = np.vstack([Xa, Xa[:1]])  # anchor 3 duplicates anchor 0
    G = Xa @ Xa.T
    Bm = rng.dirichlet(np.ones(4), size=20) @ G
    C0 = np.full((20, 4), 0.25)
    Cn, bad = face_newton(C0, G, Bm)
    assert np.isfinite(Cn).all() and np.allclose(Cn.sum(axis=1), 1) and (Cn >= 0).all()
    C, info = solve_simplex_ls(G, Bm)
    assert np.isfinite(C).all() and info["max_gap"] < 1e-6
