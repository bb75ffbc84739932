"""PDS — PMP-based Data Selection.

Paper: Yuxian Gu, Li Dong, Hongning Wang, Yaru Hao, Qingxiu Dong, Furu Wei, Minlie Huang,
"Data Selection via Optimal Control for Language Models", ICLR 2025 (Oral), arXiv:2410.07064.

Pre-training data selection is posed as an optimal-control problem: the per-example weights γ are the control,
gradient-descent training is the state equation, and the objective is the area under the downstream-loss
curve. Pontryagin's Maximum Principle gives the co-states λ_t (the gradient of all future downstream losses
w.r.t. θ_t, propagated back through the training Hessian) and scores every example by
η Σ_t ⟨∇l(x_n, θ_t), λ_{t+1}⟩. ``pmp_scores`` computes these exactly with ``torch.func`` (per-example JVPs,
forward-over-reverse HVPs, O(√T) memory) on a proxy set; a cheap data scorer learns the normalised scores and
``select_corpus`` keeps the top fraction of a whole corpus by Gumbel-top-k (also under ``torchrun``).

Example::

    from iclr25.pds import pmp_scores, normalize_scores, NgramRidgeScorer, select_corpus
    s = pmp_scores(proxy_lm, proxy_rows, trajectory_batches, dev_rows, lr=0.5, score_every=10)
    scorer = NgramRidgeScorer(vocab_size).fit(proxy_rows, normalize_scores(s).numpy())
    kept = select_corpus(corpus, scorer, ratio=0.4, tau=0.1, seed=0, out_dir="selected/").indices

A text ``datasets.Dataset`` is tokenised inside (``select_corpus(ds, scorer, tokenizer=tok, max_length=1024)``, one
row per document, or ``pack=True`` for packed rows); a streaming ``IterableDataset`` goes through ``select_stream``
(scores written as they come, streaming top-k).
"""

from .corpus import SOURCES, MarkovCorpus, make_markov_corpus
from .dsir import dsir_log_weights
from .packing import pack_token_rows, pad_token_rows
from .pmp import (
    PMPDivergenceWarning,
    PMPTrace,
    check_forward_ad_ready,
    example_losses,
    pmp_scores,
    resolve_pad_id,
    tokenizer_pad_id,
    trainable_params,
)
from .scorer import (
    DataScorer,
    NgramRidgeScorer,
    ScorerFit,
    build_data_scorer,
    normalize_scores,
    spearman,
    train_data_scorer,
)
from .selection import (
    CorpusSelection,
    gumbel_top_k_select,
    random_select,
    score_corpus,
    select_corpus,
)
from .stream import StreamingTopK, iter_selected, select_stream

__all__ = [
    "SOURCES",
    "CorpusSelection",
    "StreamingTopK",
    "DataScorer",
    "MarkovCorpus",
    "NgramRidgeScorer",
    "PMPDivergenceWarning",
    "PMPTrace",
    "ScorerFit",
    "build_data_scorer",
    "check_forward_ad_ready",
    "dsir_log_weights",
    "example_losses",
    "gumbel_top_k_select",
    "iter_selected",
    "make_markov_corpus",
    "normalize_scores",
    "pack_token_rows",
    "pad_token_rows",
    "pmp_scores",
    "random_select",
    "resolve_pad_id",
    "score_corpus",
    "select_corpus",
    "select_stream",
    "spearman",
    "tokenizer_pad_id",
    "train_data_scorer",
    "trainable_params",
]
