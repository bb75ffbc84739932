"""Transformer² (Transformer-Squared): Self-adaptive LLMs — Sun, Cetin & Tang, ICLR 2025 (arXiv:2501.06252).

Singular Value Fine-tuning (SVF) trains, for each weight matrix ``W = U Σ Vᵀ`` of a frozen LLM, one vector ``z``
that rescales its singular values (``W' = U (Σ ⊗ diag(z)) Vᵀ``) — an "expert" of a few hundred thousand numbers for
an 8B model, trained with REINFORCE on a task reward with a KL penalty to the base model. At inference the model
adapts itself in two passes: pass 1 identifies the task (the base model's own classification of the prompt, a
classification expert, or a CEM search over mixtures ``Σ_k α_k z_k`` scored on a few labelled shots) and pass 2
answers with the chosen or mixed expert.

Public API::

    apply_svf(model, target_modules, mode)     inject SVFLinear into an HF model (paper σ·z or official sigmoid mask);
                                               nn.Linear and GPT-2 Conv1D; SVD cached (SVDCache: memory or a folder)
    using_row_experts(model, experts, index)   a different expert per row of one batch (vectorised)
    train_reinforce(model, params, ...)        the RL loss (±1 rewards, KL(π_ref‖π) by default) for SVF or LoRA
    make_lora(model, r, alpha, ...)            the PEFT LoRA baseline
    prompt_dispatch / expert_dispatch / two_pass     the two-pass inference ("other" → base weights)
    few_shot_adapt(model, experts, evaluate)   CEM mixture of experts selected on the shots only
    cem_search(fitness, k, ...)                the CEM optimiser on its own
"""

from .adaptation import FewShotResult, few_shot_adapt, mix_experts
from .cem import CEMResult, cem_search
from .dispatch import (
    CLASSIFICATION_PROMPT,
    OTHER,
    expert_dispatch,
    hf_classify_fn,
    parse_boxed,
    prompt_dispatch,
    to_routes,
    two_pass,
)
from .lora_baseline import lora_trainable_params, make_lora
from .reinforce import (
    ReinforceConfig,
    completion_logprobs,
    kl_per_sample,
    reinforce_loss,
    rollout,
    train_reinforce,
)
from .svd_cache import MEMORY_SVD_CACHE, SVDCache
from .svf import (
    ATTN_MODULES,
    GPT2_MLP_MODULES,
    MLP_MODULES,
    SVFLinear,
    apply_svf,
    count_svf_params,
    expert_scales,
    find_targets,
    get_expert,
    load_expert,
    merge_expert,
    reset_svf,
    save_expert,
    set_expert,
    set_scales,
    svf_disabled,
    svf_modules,
    svf_parameters,
    using_expert,
    using_row_experts,
    using_scales,
)

__all__ = [
    "ATTN_MODULES",
    "CEMResult",
    "CLASSIFICATION_PROMPT",
    "FewShotResult",
    "GPT2_MLP_MODULES",
    "MEMORY_SVD_CACHE",
    "MLP_MODULES",
    "OTHER",
    "ReinforceConfig",
    "SVDCache",
    "SVFLinear",
    "apply_svf",
    "cem_search",
    "completion_logprobs",
    "count_svf_params",
    "expert_dispatch",
    "expert_scales",
    "few_shot_adapt",
    "find_targets",
    "get_expert",
    "hf_classify_fn",
    "kl_per_sample",
    "load_expert",
    "lora_trainable_params",
    "make_lora",
    "merge_expert",
    "mix_experts",
    "parse_boxed",
    "prompt_dispatch",
    "reinforce_loss",
    "reset_svf",
    "rollout",
    "save_expert",
    "set_expert",
    "set_scales",
    "svf_disabled",
    "svf_modules",
    "svf_parameters",
    "to_routes",
    "train_reinforce",
    "two_pass",
    "using_expert",
    "using_row_experts",
    "using_scales",
]
