"""scikit-learn contract of AnchorTopicModel, bad inputs, and the unlearning contract (forget set ⊆ training
statistic, released vs noise-free topics, U_head leaves the base model alone)."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import check_estimator

from iclr25.topic_unlearning import AnchorTopicModel, fit_head, newton_unlearn, unlearn_base, unlearn_head
from iclr25.topic_unlearning.synthetic import sample_documents, separable_topics


@pytest.fixture(scope="module")
def data():
    A, _ = separable_topics(60, 4, 0.2, rng=0)
    X = sample_documents(A, 3000, doc_len=30, rng=1)
    return X, AnchorTopicModel(4, min_doc_freq=0.01).fit(X)


def test_check_estimator_passes_every_check():
    """All of scikit-learn's estimator checks pass (no exclusions needed for the topic model)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = check_estimator(AnchorTopicModel(n_topics=2, min_doc_freq=0), on_fail=None, on_skip=None)
    failed = {r["check_name"]: str(r["exception"])[:200] for r in res if r["status"] == "failed"}
    assert len(res) >= 40 and not failed, failed


def test_params_clone_pipeline_and_fit_y_none(data):
    X, model = data
    assert model.get_params()["n_topics"] == 4
    m2 = clone(model).set_params(n_topics=3)
    assert m2.n_topics == 3 and not hasattr(m2, "topic_word_")
    y = (np.asarray(X[:, :15].sum(1)).ravel() > np.median(np.asarray(X[:, :15].sum(1)))).astype(int)
    pipe = make_pipeline(AnchorTopicModel(4, min_doc_freq=0.01), LogisticRegression()).fit(X, y)
    assert pipe.score(X, y) > 0.6  # topic features carry the signal the labels were built from
    # fit(X, y) with a y passes it as y (ignored), not as the layout: same topics as fit(X)
    assert np.allclose(AnchorTopicModel(4, min_doc_freq=0.01).fit(X, y).topic_word_, model.topic_word_)
    F = AnchorTopicModel(4, min_doc_freq=0.01).fit_transform(X)
    assert F.shape == (X.shape[0], 4) and np.allclose(F, model.transform(X))
    with pytest.raises(NotFittedError):
        AnchorTopicModel(4).transform(X)


def test_bad_inputs_raise_clear_errors(data):
    X, model = data
    D = X[:200].toarray()
    for bad in (np.nan, np.inf):
        Dn = D.copy()
        Dn[0, 0] = bad
        with pytest.raises(ValueError, match="NaN/inf"):
            AnchorTopicModel(4, min_doc_freq=0.01).fit(Dn)
    # a Python list of count rows is a dense matrix, not a gensim corpus
    assert np.allclose(
        AnchorTopicModel(4, anchors=model.anchors_).fit(D.tolist()).topic_word_,
        AnchorTopicModel(4, anchors=model.anchors_).fit(D).topic_word_,
    )
    with pytest.raises(ValueError, match="distinct"):
        AnchorTopicModel(4, anchors=[0, 0, 1, 2]).fit(X)
    with pytest.raises(ValueError, match=r"\[0, 60\)"):
        AnchorTopicModel(4, anchors=[0, 1, 2, 60]).fit(X)
    with pytest.raises(ValueError, match="expecting 60 features"):
        model.transform(X[:, :50])
    with pytest.raises(ValueError, match="word ids"):
        AnchorTopicModel(2).fit([[(0, 1.0), (99, 2.0)]], n_words=10)


def test_fit_does_not_modify_the_callers_matrix():
    """CountVectorizer output has unsorted indices; fitting once sorted them in the caller's matrix (shared index
    arrays), silently changing its documents."""
    rng = np.random.default_rng(0)
    D = rng.poisson(0.5, (300, 40))
    X = sp.csr_matrix(D)
    perm = [np.random.default_rng(i).permutation(np.arange(X.indptr[i], X.indptr[i + 1])) for i in range(300)]
    X.indices = np.concatenate([X.indices[p] for p in perm]).astype(X.indices.dtype)
    X.data = np.concatenate([X.data[p] for p in perm])
    X.has_sorted_indices = False
    before = X.toarray().copy()
    AnchorTopicModel(3, min_doc_freq=0).fit(X)
    assert np.array_equal(X.toarray(), before)


def test_forget_set_must_be_in_the_training_statistic(data):
    X, model = data
    m = copy.deepcopy(model)
    unlearn_base(m, X[:5], epsilon=None, delta=None)
    assert m.n_docs_ == model.n_docs_ - 5
    with pytest.raises(ValueError, match="already forgotten"):  # the same documents twice
        unlearn_base(m, X[:5], epsilon=None, delta=None)
    A, _ = separable_topics(60, 4, 0.2, rng=5)
    stranger = sample_documents(A, 3, doc_len=30, rng=99)
    with pytest.raises(ValueError, match="never trained on"):
        newton_unlearn(model.stats_, stranger)
    assert m.n_docs_ == model.n_docs_ - 5  # refused calls change nothing
    unlearn_base(m, X[5:8], epsilon=None, delta=None)  # other training documents are still accepted
    assert m.n_docs_ == model.n_docs_ - 8


def test_public_topic_word_is_the_released_noisy_matrix(data):
    X, model = data
    m = copy.deepcopy(model)
    rel = unlearn_base(m, X[:5], epsilon=1.0, delta=1e-5, sensitivity=0.05, seed=3)
    assert np.array_equal(m.topic_word_, rel.A)  # what a user publishes is the noised release
    A_nf, _, _, _ = newton_unlearn(model.stats_, X[:5])
    assert np.allclose(m._noise_free_topic_word_, A_nf)  # the noise-free matrix is private
    assert np.abs(m.topic_word_ - A_nf).max() > 1e-3
    with pytest.raises(ValueError, match="seed"):
        unlearn_base(copy.deepcopy(model), X[:5], epsilon=1.0, delta=1e-5, sensitivity=0.05, seed=-1)


def test_unlearn_head_updated_does_not_mutate_the_base(data):
    X, model = data
    m = copy.deepcopy(model)
    y = np.asarray(X[:, :15].sum(1)).ravel()
    head = fit_head(m, X, y)
    rel = unlearn_head(m, X[:5], head, epsilon=None, delta=None, variant="updated")
    assert m.n_docs_ == model.n_docs_ and np.array_equal(m.topic_word_, model.topic_word_)
    A_nf, _, _, _ = newton_unlearn(model.stats_, X[:5])
    assert np.allclose(rel.A, A_nf @ head.w)  # but the release uses A^F
    fixed = unlearn_head(m, X[:5], head, epsilon=None, delta=None, variant="base_fixed")
    assert np.allclose(fixed.A, model.topic_word_ @ head.w)
