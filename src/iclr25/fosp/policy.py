"""Policy extraction with reachability guidance, and safe policy expansion (PEX).

Offline extraction (paper, Fig. 1 objective): maximise E[u(s)·A_r(s, a) − (1 − u(s))·A_c(s, a)] while staying close
to the behaviour policy π_b, whose closed form π*(a|s) ∝ π_b(a|s)·exp(·) is fitted by weighted maximum likelihood.
With feasibility u = 1 − φ̃ (normalised REF) the weights are

    w = (1 − u)·exp(Â_c⁻) + u·1[Q_c ≤ d]·exp(Â_r),   Â_r = (Q_r − V_r)/S_r,   Â_c⁻ = (V_c − Q_c)/S_c,

clipped at w_max: inside the feasible region the policy improves reward among zero-cost actions, outside it
reduces cost.

Online (PEX, Zhang et al., ICLR 2023): a frozen offline policy π_off and a learnable π_on each propose an action;
the executed one is drawn from softmax(β·q) with q_i = Q_r(s, a_i) − κ·Q_c(s, a_i), per environment.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.distributions import Independent, Normal

from .values import mlp


class Actor(nn.Module):
    """MLP → Normal(tanh(μ), σ), σ = 0.9·sigmoid(s + 2) + 0.1 (DreamerV3 continuous head; samples not squashed)."""

    def __init__(self, feat: int, act: int, hidden: int, layers: int = 2):
        super().__init__()
        for name, v in (("feat", feat), ("act", act), ("hidden", hidden), ("layers", layers)):
            if isinstance(v, bool) or not isinstance(v, int) or v < (0 if name == "layers" else 1):
                raise ValueError(f"{name} must be a positive int, got {v!r}")
        self.act_dim = act
        self.net = mlp(feat, 2 * act, hidden, layers)

    def dist(self, s: torch.Tensor) -> Independent:
        mu, std = self.net(s).chunk(2, -1)
        return Independent(Normal(torch.tanh(mu), 0.9 * torch.sigmoid(std + 2.0) + 0.1), 1)

    def forward(self, s: torch.Tensor) -> Independent:
        return self.dist(s)


def awr_weights(
    adv_r: torch.Tensor,
    adv_c: torch.Tensor,
    u: torch.Tensor,
    q_c: torch.Tensor,
    cost_limit: float = 0.0,
    w_max: float = 100.0,
    validate: bool = True,
) -> torch.Tensor:
    """w = (1 − u)·exp(−Â_c) + u·1[Q_c ≤ cost_limit]·exp(Â_r), clipped at ``w_max``.

    ``adv_r`` = Â_r, ``adv_c`` = Â_c = (Q_c − V_c)/S_c (so exp(−Â_c) = exp(Â_c⁻)), ``u`` ∈ [0, 1] the feasibility.
    ``validate=False`` skips the u ∈ [0, 1] check (a device sync) for internal callers.
    """
    if isinstance(w_max, bool) or not isinstance(w_max, (int, float)) or not 0 < w_max < math.inf:
        raise ValueError(f"w_max must be a finite number > 0, got {w_max!r}")
    if (
        isinstance(cost_limit, bool)
        or not isinstance(cost_limit, (int, float))
        or not math.isfinite(cost_limit)
    ):
        raise ValueError(f"cost_limit must be a finite number, got {cost_limit!r}")
    try:
        torch.broadcast_shapes(adv_r.shape, adv_c.shape, u.shape, q_c.shape)
    except RuntimeError:
        raise ValueError(
            f"adv_r, adv_c, u and q_c must have broadcastable shapes, got {tuple(adv_r.shape)}, {tuple(adv_c.shape)}, "
            f"{tuple(u.shape)}, {tuple(q_c.shape)}"
        ) from None
    if validate and not bool(((u >= 0) & (u <= 1)).all()):
        raise ValueError("u (the feasibility) must lie in [0, 1]")
    feasible = (q_c <= cost_limit).to(adv_r.dtype)
    # clamp inside exp so that a huge advantage cannot overflow before the clip
    cap = float(torch.log(torch.tensor(w_max)))
    w = (1 - u) * torch.exp(torch.clamp(-adv_c, max=cap)) + u * feasible * torch.exp(
        torch.clamp(adv_r, max=cap)
    )
    return torch.clamp(w, max=w_max).detach()


def _check_pex(q_off: torch.Tensor, q_on: torch.Tensor, beta: float) -> None:
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) or not 0 <= beta < math.inf:
        raise ValueError(f"beta must be a finite number >= 0, got {beta!r}")
    try:
        torch.broadcast_shapes(q_off.shape, q_on.shape)
    except RuntimeError:
        raise ValueError(
            f"q_off and q_on must have broadcastable shapes, got {tuple(q_off.shape)}, {tuple(q_on.shape)}"
        ) from None


def pex_probs(q_off: torch.Tensor, q_on: torch.Tensor, beta: float) -> torch.Tensor:
    """P(choose π_off) = softmax(β·[q_off, q_on])[0], elementwise (log-space, no overflow)."""
    _check_pex(q_off, q_on, beta)
    return torch.sigmoid(beta * (q_off - q_on))


def pex_select(
    q_off: torch.Tensor,
    q_on: torch.Tensor,
    beta: float,
    generator: torch.Generator | None = None,
    greedy: bool = False,
) -> torch.Tensor:
    """Boolean (N,): True where π_off's action is executed. One draw per environment (vectorised)."""
    _check_pex(q_off, q_on, beta)
    if greedy:
        return q_off >= q_on
    p = pex_probs(q_off, q_on, beta)
    return torch.rand(p.shape, generator=generator, dtype=p.dtype).to(p.device) < p
