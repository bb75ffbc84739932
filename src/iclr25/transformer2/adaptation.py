"""Few-shot adaptation: a CEM-searched mixture of expert vectors (Sec. 3.2 C, App. A.4).

    z' = Σ_k α_k z_k        α ∈ [0, 1]^K (one scalar per expert) or [0, 1]^{K×M} (one per expert and matrix)

The paper mixes the vectors that multiply Σ. In official mode those are the *effective* scales ``sigmoid(z)``, which
is what :func:`mix_experts` mixes by default; ``raw=True`` mixes the raw ``z`` and uses the result directly as the
scale (what the official ``WeightedCombination`` does). ``normalise=True`` divides α by Σ_k α_k per matrix.
Fitness = accuracy on the shots only (never on held-out test data), ties broken by the mean per-token
log-likelihood of the correct answers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .cem import CEMResult, cem_search
from .svf import Expert, expert_scales, svf_modules, using_scales

EvaluateFn = Callable[
    [nn.Module], "tuple[torch.Tensor, torch.Tensor]"
]  # model -> (correct (N,), loglik (N,))


def mix_experts(
    model: nn.Module,
    experts: Sequence[Mapping[str, torch.Tensor]],
    alpha: np.ndarray | torch.Tensor | Sequence[float],
    normalise: bool = False,
    raw: bool = False,
) -> dict[str, torch.Tensor]:
    """Mixed effective scales ``s'_j = Σ_k α_kj s_kj`` for every SVF matrix j (module order).

    ``alpha`` has shape (K,) or (K, M) with M = number of SVF matrices. One-hot α reproduces expert k exactly.
    """
    mods = svf_modules(model)
    names = list(mods)
    K, M = len(experts), len(names)
    if K == 0:
        raise ValueError("experts must hold at least one expert")
    a = torch.as_tensor(np.asarray(alpha, dtype=np.float64))
    if a.shape == (K,):
        a = a[:, None].expand(K, M)
    if a.shape != (K, M):
        raise ValueError(f"alpha must have shape ({K},) or ({K}, {M}), got {tuple(a.shape)}")
    if normalise:
        a = a / a.sum(0, keepdim=True).clamp_min(1e-12)
    per = [({n: e[n] for n in names} if raw else expert_scales(model, e)) for e in experts]
    out = {}
    for j, n in enumerate(names):
        stack = torch.stack([p[n].to(mods[n].S) for p in per])  # (K, r)
        out[n] = (a[:, j].to(stack)[:, None] * stack).sum(0)  # Σ_k α_kj s_kj
    return out


@dataclass
class FewShotResult:
    alpha: np.ndarray
    scales: dict[str, torch.Tensor]
    shot_accuracy: float
    cem: CEMResult


def few_shot_adapt(
    model: nn.Module,
    experts: Sequence[Mapping[str, torch.Tensor]] | Mapping[str, Expert],
    evaluate: EvaluateFn,
    per_matrix: bool = False,
    normalise: bool = False,
    raw: bool = False,
    iters: int = 50,
    pop_size: int = 32,
    elite_ratio: float = 0.2,
    seed: int = 0,
) -> FewShotResult:
    """Search α with CEM on the few-shot prompts that ``evaluate`` scores, and return the mixed scales.

    ``evaluate(model) -> (correct, loglik)``: greedy correctness (N,) and per-token mean log-likelihood (N,) of the
    model's own answers on the shots, run with the candidate mixture in place. Defaults: pop 32, elite 0.2, 50 iters
    (the official few-shot script); ``per_matrix`` = its ``per_layer`` option.
    """
    ex = list(experts.values()) if isinstance(experts, Mapping) else list(experts)
    M = len(svf_modules(model))
    shape = (len(ex), M) if per_matrix else (len(ex),)

    def fitness(alpha: np.ndarray) -> tuple[float, float]:
        with using_scales(model, mix_experts(model, ex, alpha, normalise, raw)), torch.no_grad():
            correct, loglik = evaluate(model)
        correct = correct.bool()
        tie = float(loglik[correct].mean()) if bool(correct.any()) else float("-inf")
        return float(correct.float().mean()), tie

    res = cem_search(fitness, shape, iters=iters, pop_size=pop_size, elite_ratio=elite_ratio, seed=seed)
    return FewShotResult(res.best, mix_experts(model, ex, res.best, normalise, raw), res.best_fitness, res)
