"""LaW — Large Scale Knowledge Washing (Wang, Wu, He, Chen, McAuley; ICLR 2025), https://arxiv.org/abs/2405.16720.

LaW removes a large set of facts from a decoder-only LM by editing a few MLP output matrices ``W_out`` (viewed as
key→value memories). Starting from a MEMIT edit of every fact's prompt to EOS, it maximises how far the washed
facts' keys move, ``max ‖ΔK‖²``, under a budget on how far generic-text keys move, ``tr(ΔCΔᵀ)/tr(C) ≤ β`` with
``C = E[kkᵀ]``, layer by layer, re-testing after each layer which facts survive (successive elimination). Works on
any Hugging Face decoder whose blocks have one MLP output projection (found by structure: Llama, Qwen2/3, Mistral,
Gemma2, OLMo2, GPT-2, GPT-J, OPT, …)::

    from iclr25.law import Fact, key_covariance, wash
    cov = key_covariance(model, [4, 5, 6], generic_texts, tokenizer, cache_dir="stats")
    report = wash(model, tokenizer, [Fact("The Eiffel Tower is in", " Paris", "The Eiffel Tower")], [4, 5, 6], cov)
"""

from .baselines import FTReport, ft_to_eos, ft_unlearn
from .covariance import check_covariance, key_covariance
from .evaluation import associative_recall_facts, fact_accuracy, fact_known, generic_loss
from .facts import Fact, facts_from_triplets, load_facts
from .memit import LamSearch, MemitResult, ZConfig, compute_z, memit_closed_form, memit_to_eos
from .memories import ARCHITECTURES, MemoryLayer, resolve_layers
from .washing import (
    AscentResult,
    LayerReport,
    WashReport,
    apply_delta,
    c_ratio,
    constrained_ascent,
    objective_upper_bound,
    wash,
    wash_objective,
)
from .world import World, WorldConfig

__all__ = [
    "ARCHITECTURES",
    "AscentResult",
    "FTReport",
    "Fact",
    "LamSearch",
    "LayerReport",
    "MemitResult",
    "MemoryLayer",
    "WashReport",
    "World",
    "WorldConfig",
    "ZConfig",
    "apply_delta",
    "associative_recall_facts",
    "c_ratio",
    "check_covariance",
    "compute_z",
    "constrained_ascent",
    "fact_accuracy",
    "fact_known",
    "facts_from_triplets",
    "ft_to_eos",
    "ft_unlearn",
    "generic_loss",
    "key_covariance",
    "load_facts",
    "memit_closed_form",
    "memit_to_eos",
    "objective_upper_bound",
    "resolve_layers",
    "wash",
    "wash_objective",
]
