"""Provable unlearning in topic modeling and downstream tasks (Wei, Malladi, Arora, Sanyal; ICLR 2025,
arXiv:2411.12600).

The learner is the anchor-word algorithm of Arora et al. (2013): a word co-occurrence statistic Σ = Σ_d Q_d,
anchors by FastAnchorWords, P(topic | word) by simplex least squares, topics by Bayes rule. Unlearning a set of
documents subtracts their Q_d from Σ (cost independent of the corpus size), keeps the anchors, takes one Newton step
per word on its face of the simplex and releases the result through the Gaussian mechanism (``unlearn_base``). A
downstream linear head can be unlearned by releasing only B = A w with noise (``unlearn_head``), which tolerates
more deletions. The paper has no code or experiments; the reconstructed steps are marked in the README.

    >>> model = AnchorTopicModel(n_topics=8).fit(X)              # X: docs × words counts (scipy.sparse, gensim bow)
    >>> release = unlearn_base(model, X[forget], epsilon=1.0, delta=1e-5, sensitivity=delta_A)
    >>> release.A                                               # the noisy topic-word matrix to publish
    >>> corpus = load_real_corpus()                             # five real corpora, one 2,000-word vocabulary
"""

from .corpus import RealCorpus, RealCorpusConfig, load_real_corpus
from .model import AnchorTopicModel, TopicStats, align_topics, as_doc_word, max_column_l1, topic_permutation
from .synthetic import sample_documents, separable_topics
from .unlearning import (
    AnchorVanishedError,
    LinearHead,
    Release,
    deletion_capacity,
    estimate_sensitivity,
    fit_head,
    gaussian_sigma,
    newton_unlearn,
    release_head,
    retrain_reference,
    retrain_scratch,
    unlearn_base,
    unlearn_head,
    utility_passes,
)

__all__ = [
    "AnchorTopicModel",
    "RealCorpus",
    "RealCorpusConfig",
    "load_real_corpus",
    "TopicStats",
    "align_topics",
    "topic_permutation",
    "as_doc_word",
    "max_column_l1",
    "separable_topics",
    "sample_documents",
    "AnchorVanishedError",
    "LinearHead",
    "Release",
    "deletion_capacity",
    "estimate_sensitivity",
    "fit_head",
    "gaussian_sigma",
    "newton_unlearn",
    "release_head",
    "retrain_reference",
    "retrain_scratch",
    "unlearn_base",
    "unlearn_head",
    "utility_passes",
]
