"""SCOPE — self-supervised unfaithful samples + preference tuning for grounded generation.

Paper: Song Duong, Florian Le Bronnec, Alexandre Allauzen, Vincent Guigue, Alberto Lumbreras, Laure Soulier,
Patrick Gallinari, "SCOPE: A Self-supervised Framework for Improving Faithfulness in Conditional Text Generation",
ICLR 2025, arXiv:2502.13674 (https://arxiv.org/abs/2502.13674).

Models fine-tuned on data-to-text or summarisation data hallucinate: they say things the input does not support.
SCOPE needs no human labels. It splits the training set in halves D₁/D₂, fine-tunes on D₁ (p_θ₀), then for every
(x, y) ∈ D₂ samples an *unfaithful* y⁻ by switching, token by token with probability α, from p_θ₀(·|x, y<t) to the
context-free pre-trained LM p_LM(·|y<t) — fluent text that drifts away from x. Preference tuning (DPO, π_ref = p_θ₀)
on (x, chosen = y, rejected = y⁻) then teaches the model to prefer grounded continuations (the paper's Fig. 1).
``Config`` is the reproduction's configuration (``config.py``: the synthetic world's data, the model, both
stages and the noise levels α); ``World`` configures the synthetic biographies.

Example::

    from iclr25.scope_faithfulness import split_halves, build_preference_pairs, scope_dpo
    d1, d2 = split_halves(dataset, seed=0)                 # SFT your model on d1 first
    pairs = build_preference_pairs(sft_model, base_lm, d2, alpha=0.5, tokenizer=tok)   # prompt/chosen/rejected
    model, logs = scope_dpo(sft_model, pairs, tok)        # TRL DPOTrainer, β = 0.1, sigmoid loss
"""

from .biographies import World, hallucination_and_recall, pretraining_corpus, records_dataset, word_tokenizer
from .config import Config
from .data import load_data_to_text
from .metrics import corpus_bleu, nli_faithfulness
from .noisy_generation import (
    ScopeNoiseProcessor,
    check_same_vocabulary,
    context_aware_generate,
    generate_unfaithful,
)
from .preference import (
    build_preference_pairs,
    dpo_config,
    dpo_sigmoid_loss,
    independent_copy,
    make_dpo_trainer,
    scope_dpo,
    sequence_logps,
    split_halves,
)

__all__ = [
    "Config",
    "ScopeNoiseProcessor",
    "World",
    "build_preference_pairs",
    "check_same_vocabulary",
    "context_aware_generate",
    "corpus_bleu",
    "dpo_config",
    "dpo_sigmoid_loss",
    "generate_unfaithful",
    "independent_copy",
    "load_data_to_text",
    "hallucination_and_recall",
    "make_dpo_trainer",
    "nli_faithfulness",
    "pretraining_corpus",
    "records_dataset",
    "scope_dpo",
    "sequence_logps",
    "split_halves",
    "word_tokenizer",
]
