"""The cross-entropy method (CEM) used by Transformer²'s few-shot adaptation (App. A.4), usable on its own.

Each iteration samples a population ``P ~ clamp(N(μ, σ²), lo, hi)``, puts the incumbent in slot 0 so it is
re-evaluated on the same data, scores everybody, takes the best member (ties broken by a secondary score such as
the log-likelihood of the correct answers), and refits ``μ, σ`` to the top ``⌊elite_ratio·pop⌋`` members
(unbiased std, no smoothing: ``optim_ema = 0`` in the official configs).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from iclr25.common.seeding import numpy_rng

Fitness = Callable[[np.ndarray], "float | tuple[float, float]"]


@dataclass
class CEMResult:
    best: np.ndarray  # the incumbent α, shape `shape`
    best_fitness: float
    best_tiebreak: float
    mean: np.ndarray
    std: np.ndarray
    history: list[dict] = field(default_factory=list)  # per iteration: best/mean/max fitness
    n_evals: int = 0


def _split(v: float | tuple[float, float]) -> tuple[float, float]:
    if isinstance(v, tuple):
        return float(v[0]), float(v[1])
    return float(v), float("-inf")


def cem_search(
    fitness: Fitness,
    k: int | tuple[int, ...],
    iters: int = 50,
    pop_size: int = 32,
    elite_ratio: float = 0.2,
    lo: float = 0.0,
    hi: float = 1.0,
    init_mean: np.ndarray | float | None = None,
    init_std: float | None = None,
    re_eval_best: bool = True,
    seed: int = 0,
) -> CEMResult:
    """Maximise ``fitness(α)`` over ``α ∈ [lo, hi]^k`` with CEM.

    ``fitness`` returns a score or ``(score, tiebreak)``; among members with the best score the highest tiebreak
    wins (Transformer²: mean per-token log-likelihood of the correct answers). ``k`` is an int (one coefficient
    per expert) or a shape such as ``(K, n_matrices)`` (``per_layer``). Defaults follow the official few-shot
    config: pop 32, elite 0.2, range [0, 1], μ₀ = 1/K, σ₀ = (hi − lo)/2, incumbent re-evaluation on.
    """
    shape = (int(k),) if np.isscalar(k) else tuple(int(x) for x in k)
    if any(s < 1 for s in shape):
        raise ValueError(f"k must be a positive int or shape, got {k!r}")
    if not isinstance(iters, int) or iters < 1:
        raise ValueError(f"iters must be an int >= 1, got {iters!r}")
    if not isinstance(pop_size, int) or pop_size < 2:
        raise ValueError(f"pop_size must be an int >= 2, got {pop_size!r}")
    n_elite = int(np.floor(elite_ratio * pop_size))
    if not 2 <= n_elite <= pop_size:
        raise ValueError(
            f"elite_ratio must leave 2..pop_size elites, got elite_ratio={elite_ratio!r} (pop {pop_size})"
        )
    if not hi > lo:
        raise ValueError(f"hi must exceed lo, got lo={lo!r}, hi={hi!r}")
    rng = numpy_rng(seed)
    mean = (
        np.full(shape, 1.0 / shape[0])
        if init_mean is None
        else np.broadcast_to(np.asarray(init_mean, float), shape).copy()
    )
    std = np.full(shape, (hi - lo) / 2.0 if init_std is None else float(init_std))
    best = np.clip(mean, lo, hi)
    best_f, best_t = _split(fitness(best))
    n_evals = 1
    history: list[dict] = []
    for it in range(iters):
        pop = np.clip(rng.normal(mean, std, size=(pop_size, *shape)), lo, hi)  # (P, *shape)
        if re_eval_best:
            pop[0] = best  # the incumbent is re-scored on the same few-shot set
        scores = np.empty(pop_size)
        ties = np.empty(pop_size)
        for p in range(pop_size):  # fitness is a black box (a model evaluation): one call per member
            scores[p], ties[p] = _split(fitness(pop[p]))
        n_evals += pop_size
        top = np.flatnonzero(scores == scores.max())
        j = int(top[np.argmax(ties[top])])  # tie-break by the secondary score (first member on equal ties)
        if re_eval_best or (scores[j], ties[j]) >= (best_f, best_t):
            best, best_f, best_t = pop[j].copy(), float(scores[j]), float(ties[j])
        elite = np.argsort(-scores, kind="stable")[:n_elite]
        mean = pop[elite].mean(axis=0)
        std = pop[elite].std(axis=0, ddof=1)
        history.append(
            {"iter": it, "best": best_f, "pop_max": float(scores.max()), "pop_mean": float(scores.mean())}
        )
    return CEMResult(
        best=best,
        best_fitness=best_f,
        best_tiebreak=best_t,
        mean=mean,
        std=std,
        history=history,
        n_evals=n_evals,
    )
