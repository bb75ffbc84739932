"""Checks on the anchor-word learner (paper Algorithms 3–5) and its unlearning (Algorithms 1–2): sufficient
statistic, invariants, exactness on a fixed support, the Gaussian mechanism, head vs base sensitivity."""

import copy

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import minimize

from iclr25.topic_unlearning import (
    AnchorTopicModel,
    deletion_capacity,
    estimate_sensitivity,
    fit_head,
    gaussian_sigma,
    newton_unlearn,
    release_head,
    retrain_reference,
    unlearn_base,
    unlearn_head,
)
from iclr25.topic_unlearning.model import cooccurrence_sum, max_column_l1, topic_permutation
from iclr25.topic_unlearning.simplex import duality_gap, project_simplex, solve_simplex_ls
from iclr25.topic_unlearning.synthetic import sample_documents, separable_topics


@pytest.fixture(scope="module")
def corpus():
    A, anchors = separable_topics(100, 5, 0.2, rng=0)
    X = sample_documents(A, 20000, doc_len=30, rng=1)
    model = AnchorTopicModel(5, min_doc_freq=0.01).fit(X)
    return A, anchors, X, model


def test_cooccurrence_statistic_matches_per_document_definition():
    D = np.random.default_rng(0).integers(0, 3, (40, 12)).astype(float)
    D[0] = 0
    D[1] = 0
    D[1, 3] = 1  # one-token document: dropped
    X = sp.csr_matrix(D)
    S, m = cooccurrence_sum(X)
    ref = np.zeros((12, 12))
    cnt = 0
    for h in X.toarray():
        L = h.sum()
        if L >= 2:
            ref += (np.outer(h, h) - np.diag(h)) / (L * (L - 1))
            cnt += 1
    assert m == cnt == 38 and np.allclose(S, ref, atol=1e-14)


def test_sufficient_statistic_after_unlearning_equals_recomputation(corpus):
    _, _, X, model = corpus
    forget = np.arange(0, 3000, 7)
    _, _, stats, _ = newton_unlearn(model.stats_, X[forget])
    keep = np.setdiff1d(np.arange(X.shape[0]), forget)
    S_ref, m_ref = cooccurrence_sum(X[keep])
    assert stats.m == m_ref
    assert np.abs(stats.Sigma - S_ref).max() <= 1e-12 * np.abs(S_ref).max()


def test_empty_forget_set_changes_nothing(corpus):
    _, _, X, model = corpus
    m2 = copy.deepcopy(model)
    rel = unlearn_base(m2, X[:0], epsilon=None, delta=None)
    assert np.abs(rel.A - model.topic_word_).max() <= 1e-10
    assert np.abs(rel.R - model.topic_cov_).max() <= 1e-10


def test_model_invariants(corpus):
    _, _, X, model = corpus
    A_f, _, stats_f, _ = newton_unlearn(model.stats_, X[:500])
    for A, C in [(model.topic_word_, model.word_topic_), (A_f, stats_f.C)]:
        assert (A >= 0).all() and np.allclose(A.sum(0), 1, atol=1e-9)
        off = A[model.anchors_].copy()
        off[np.arange(5), np.arange(5)] = 0
        assert np.all(off == 0)  # anchor rows are one-hot
        assert (C >= 0).all() and np.allclose(C.sum(1), 1, atol=1e-9)


def test_exact_recovery_from_the_population_statistic():
    """On Q* = A* R A*ᵀ (no sampling noise) FastAnchorWords finds the planted anchors and RecoverL2 + Bayes rule
    return A* and R exactly."""
    from iclr25.topic_unlearning.model import find_anchors, row_normalise

    r, alpha = 5, 0.5
    A, anchors = separable_topics(100, r, 0.2, rng=0)
    a0 = alpha * r
    R = (np.full((r, r), alpha * alpha) + np.eye(r) * alpha) / (a0 * (a0 + 1))  # E[WWᵀ], W ~ Dirichlet(α)
    Q = A @ R @ A.T
    found = find_anchors(row_normalise(Q)[0], r, np.arange(100))
    assert sorted(found.tolist()) == anchors.tolist()
    model = AnchorTopicModel(r).fit_from_stats(Q * 1000, 1000, found)
    perm = topic_permutation(A, anchors, model.topic_word_, model.anchors_)
    assert np.abs(model.topic_word_[:, perm] - A).max() < 1e-8
    assert np.abs(model.topic_cov_[np.ix_(perm, perm)] - R).max() < 1e-8


def test_sampled_corpus_recovers_topics_approximately(corpus):
    A, anchors, _, model = corpus
    perm = topic_permutation(A, anchors, model.topic_word_, model.anchors_)
    assert (
        max_column_l1(A, model.topic_word_[:, perm]) < 0.35
    )  # noisy anchors (see README) but the right topics


def test_simplex_solver_matches_scipy_reference():
    rng = np.random.default_rng(0)
    Xa = rng.random((4, 30))
    G = Xa @ Xa.T
    B = rng.random((6, 30)) @ Xa.T
    C, info = solve_simplex_ls(G, B, tol=1e-14)
    assert info["max_gap"] < 1e-12
    for i in range(6):
        res = minimize(
            lambda c, i=i: c @ G @ c - 2 * c @ B[i],
            np.full(4, 0.25),
            method="SLSQP",
            bounds=[(0, 1)] * 4,
            constraints={"type": "eq", "fun": lambda c: c.sum() - 1},
            options={"ftol": 1e-15, "maxiter": 500},
        )
        f = lambda c, i=i: c @ G @ c - 2 * c @ B[i]  # noqa: E731
        assert f(C[i]) <= f(res.x) + 1e-9
    assert np.all(duality_gap(C, G, B) >= -1e-12)


def test_project_simplex():
    V = np.random.default_rng(1).normal(size=(50, 7))
    P = project_simplex(V)
    assert (P >= 0).all() and np.allclose(P.sum(1), 1)
    assert np.allclose(project_simplex(P), P)


def test_newton_is_exact_when_supports_do_not_change():
    A, anchors = separable_topics(100, 5, 0.2, rng=3)
    X = sample_documents(A, 80000, doc_len=30, rng=4)
    model = AnchorTopicModel(5, anchors=anchors).fit(X)
    for m_f in (1, 2, 3):
        A_f, _, _, n_bad = newton_unlearn(model.stats_, X[:m_f])
        ref = retrain_reference(model, X[:m_f])
        assert ref.solver_info_["max_gap"] <= 1e-12
        # precondition of the exactness check (holds for this seeded corpus): no support changed
        assert n_bad == 0 and np.array_equal(ref.word_topic_ > 1e-9, model.word_topic_ > 1e-9)
        assert np.linalg.norm(A_f - ref.topic_word_) <= 1e-6


def test_newton_beats_doing_nothing_and_gap_grows_with_m_f(corpus):
    _, _, X, model = corpus
    g_new, g_none = [], []
    for m_f in (10, 100):
        A_f, _, _, _ = newton_unlearn(model.stats_, X[:m_f])
        ref = retrain_reference(model, X[:m_f])
        g_new.append(np.linalg.norm(A_f - ref.topic_word_))
        g_none.append(np.linalg.norm(model.topic_word_ - ref.topic_word_))
    assert all(n * 5 <= o for n, o in zip(g_new, g_none))
    assert g_none[1] > g_none[0]
    assert newton_unlearn(model.stats_, X[:10], newton="plain")[0].shape == model.topic_word_.shape


def test_gaussian_mechanism_std_and_determinism(corpus):
    _, _, X, model = corpus
    rel1 = unlearn_base(copy.deepcopy(model), X[:10], epsilon=0.5, delta=1e-5, sensitivity=1e-3, seed=3)
    rel2 = unlearn_base(copy.deepcopy(model), X[:10], epsilon=0.5, delta=1e-5, sensitivity=1e-3, seed=3)
    A_f, _, _, _ = newton_unlearn(model.stats_, X[:10])
    expected = 1e-3 * np.sqrt(2 * np.log(1.25 / 1e-5)) / 0.5
    assert rel1.sigma == pytest.approx(expected)
    assert (rel1.A - A_f).std() == pytest.approx(
        expected, rel=0.05
    )  # 100 x 5 = 500 entries... see next assert
    assert np.array_equal(rel1.A, rel2.A)
    assert rel1.R is None  # R is released only with its own sensitivity


def test_gaussian_std_over_1600_entries():
    rng = np.random.default_rng(0)
    sigma = gaussian_sigma(2e-3, 1.0, 1e-5)
    z = rng.normal(0, sigma, (200, 8))
    assert z.size >= 1600 and z.std() == pytest.approx(2e-3 * 4.8448, rel=0.05)


def test_analytic_gaussian_is_tighter_and_valid():
    from scipy.stats import norm

    s = gaussian_sigma(1.0, 2.0, 1e-5)  # ε > 1: analytic
    a, b = 1 / (2 * s), 2.0 * s
    assert norm.cdf(a - b) - np.exp(2.0) * norm.cdf(-a - b) <= 1e-5 + 1e-12
    assert s < gaussian_sigma(1.0, 1.0, 1e-5) / 2 * 1.5
    with pytest.raises(ValueError, match="epsilon"):
        gaussian_sigma(1.0, 2.0, 1e-5, mechanism="classical")


def test_head_sensitivity_inequality_and_head_paths(corpus):
    A, _, X, model = corpus
    Xt, W = sample_documents(A, 3000, rng=9, return_topics=True)
    y = (W @ np.array([1.0, -1.0, 0.5, 0.2, -0.7]) > 0).astype(float)
    head = fit_head(model, Xt, y)
    acc = np.mean((head.decision(release_head(model.topic_word_, head), Xt) > 0.5) == (y > 0.5))
    assert acc > 0.7  # the head learned the task
    for m_f in (10, 300):
        A_f, _, _, _ = newton_unlearn(model.stats_, X[:m_f])
        ref = retrain_reference(model, X[:m_f])
        lhs = np.linalg.norm((A_f - ref.topic_word_) @ head.w)
        assert lhs <= np.linalg.norm(head.w) * np.linalg.norm(A_f - ref.topic_word_) + 1e-15
    m2 = copy.deepcopy(model)
    r_fixed = unlearn_head(m2, X[:10], head, epsilon=None, delta=None, variant="base_fixed")
    assert np.array_equal(m2.topic_word_, model.topic_word_)  # base untouched
    assert np.allclose(r_fixed.A, model.topic_word_ @ head.w)
    r_upd = unlearn_head(m2, X[:10], head, epsilon=None, delta=None, variant="updated")
    assert np.allclose(r_upd.A, newton_unlearn(model.stats_, X[:10])[0] @ head.w)


def test_estimate_sensitivity_and_capacity(corpus):
    _, _, X, model = corpus
    d_new = estimate_sensitivity(model, X, 50, trials=2, seed=0)
    d_none = estimate_sensitivity(model, X, 50, trials=2, seed=0, method="none")
    assert 0 < d_new["A"] < d_none["A"]
    assert deletion_capacity({1: True, 10: True, 100: False, 1000: True}) == 10
    assert deletion_capacity({1: False, 10: True}) == 0


def test_inputs_gensim_and_sklearn_shapes(corpus):
    _, _, X, model = corpus
    bow = [[(int(j), float(c)) for j, c in zip(row.indices, row.data)] for row in X[:2000]]
    m_bow = AnchorTopicModel(5, anchors=model.anchors_).fit(bow, n_words=X.shape[1])
    m_sp = AnchorTopicModel(5, anchors=model.anchors_).fit(X[:2000])
    m_wd = AnchorTopicModel(5, anchors=model.anchors_).fit(X[:2000].T.tocsc(), layout="word_doc")
    assert np.allclose(m_bow.topic_word_, m_sp.topic_word_) and np.allclose(
        m_wd.topic_word_, m_sp.topic_word_
    )


def test_bad_parameters_raise_naming_them(corpus):
    _, _, X, model = corpus
    with pytest.raises(ValueError, match="n_topics"):
        AnchorTopicModel(1).fit(X)
    with pytest.raises(ValueError, match="sensitivity"):
        unlearn_base(copy.deepcopy(model), X[:3], epsilon=1.0, delta=1e-5)
    with pytest.raises(ValueError, match="newton"):
        newton_unlearn(model.stats_, X[:3], newton="bfgs")
    with pytest.raises(ValueError, match="layout"):
        AnchorTopicModel(3).fit(X, layout="columns")


def test_model_does_not_import_unlearning():
    """Dependencies point one way: unlearning uses the model's public ``set_state``, the model knows no unlearning."""
    import ast
    import inspect

    from iclr25.topic_unlearning import model as model_mod
    from iclr25.topic_unlearning import unlearning as unlearning_mod

    imported = {
        n.module or ""
        for n in ast.walk(ast.parse(inspect.getsource(model_mod)))
        if isinstance(n, ast.ImportFrom)
    }
    assert not any("unlearning" in m for m in imported), imported
    assert "._" not in inspect.getsource(unlearning_mod).replace(
        "self._", ""
    )  # no private member of another object


def test_scratch_retraining_equals_refitting_on_the_remaining_documents(corpus):
    """retrain_scratch (Σ − Σ_f, document frequencies minus the forget set's) is exactly a fresh fit on X[keep],
    with its topics reordered to the model's; with a small forget set it reports whether the anchors moved."""
    from iclr25.topic_unlearning import retrain_scratch

    _, _, X, model = corpus
    forget = np.random.default_rng(3).choice(X.shape[0], 2000, replace=False)
    ref, changed = retrain_scratch(model, X, forget)
    keep = np.setdiff1d(np.arange(X.shape[0]), forget)
    fresh = AnchorTopicModel(5, min_doc_freq=0.01, tol=1e-12).fit(X[keep])
    assert sorted(ref.anchors_.tolist()) == sorted(fresh.anchors_.tolist())
    assert changed == (sorted(fresh.anchors_.tolist()) != sorted(model.anchors_.tolist()))
    perm = topic_permutation(ref.topic_word_, ref.anchors_, fresh.topic_word_, fresh.anchors_)
    assert np.abs(ref.topic_word_ - fresh.topic_word_[:, perm]).max() < 1e-9
    # columns follow the model's order: aligned, so the gap is small compared with a random column order
    gap = np.linalg.norm(ref.topic_word_ - model.topic_word_)
    assert gap < 0.5 * np.linalg.norm(ref.topic_word_[:, ::-1] - model.topic_word_)
    with pytest.raises(ValueError, match="forget_idx"):
        retrain_scratch(model, X, [X.shape[0]])


def test_scratch_sensitivity_covers_the_fixed_anchor_one_when_anchors_are_unchanged(corpus):
    _, _, X, model = corpus
    fixed = estimate_sensitivity(model, X, 50, trials=2, seed=1)
    scratch = estimate_sensitivity(model, X, 50, trials=2, seed=1, reference="scratch")
    assert fixed["anchors_changed"] == 0.0 and 0.0 <= scratch["anchors_changed"] <= 1.0
    if scratch["anchors_changed"] == 0.0:  # same anchors ⇒ the same reference, the same estimate
        assert scratch["A"] == pytest.approx(fixed["A"], rel=1e-6, abs=1e-12)
    else:
        assert scratch["A"] >= fixed["A"]
    with pytest.raises(ValueError, match="reference"):
        estimate_sensitivity(model, X, 50, reference="anchors")


def test_releasing_R_too_splits_the_budget_by_basic_composition(corpus):
    """Two Gaussian mechanisms on one forget set spend (ε_A + ε_R, δ_A + δ_R): the default splits (ε, δ) in
    halves; 'per_release' keeps (ε, δ) each and reports the (2ε, 2δ) total."""
    _, _, X, model = corpus
    kw = dict(epsilon=1.0, delta=1e-5, sensitivity=0.01, seed=0)
    a_only = unlearn_base(copy.deepcopy(model), X[:10], **kw)
    assert (a_only.epsilon_total, a_only.delta_total) == (1.0, 1e-5)
    split = unlearn_base(copy.deepcopy(model), X[:10], sensitivity_R=0.02, **kw)
    assert split.epsilon_total == pytest.approx(1.0) and split.delta_total == pytest.approx(1e-5)
    assert split.sigma == pytest.approx(gaussian_sigma(0.01, 0.5, 5e-6))
    assert split.sigma_R == pytest.approx(gaussian_sigma(0.02, 0.5, 5e-6))
    each = unlearn_base(copy.deepcopy(model), X[:10], sensitivity_R=0.02, composition="per_release", **kw)
    assert each.epsilon_total == pytest.approx(2.0) and each.delta_total == pytest.approx(2e-5)
    assert each.sigma == pytest.approx(gaussian_sigma(0.01, 1.0, 1e-5))
    assert each.sigma < split.sigma
    with pytest.raises(ValueError, match="composition"):
        unlearn_base(copy.deepcopy(model), X[:10], composition="advanced", **kw)


def test_forget_set_bookkeeping_does_not_copy_the_training_fingerprints(corpus):
    """The training-fingerprint check costs O(|S_f|) (the cost claim: unlearning independent of m): the fit's
    multiset is shared between successive states, and forgetting twice is still refused."""
    _, _, X, model = corpus
    _, _, s1, _ = newton_unlearn(model.stats_, X[:5])
    assert s1.doc_keys._base is model.stats_.doc_keys._base
    _, _, s2, _ = newton_unlearn(s1, X[5:8])
    assert s2.doc_keys._base is model.stats_.doc_keys._base
    with pytest.raises(ValueError, match="already forgotten"):
        newton_unlearn(s2, X[:1])
    newton_unlearn(model.stats_, X[:1])  # the original state still holds document 0
