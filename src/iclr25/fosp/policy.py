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

import torch
from torch import nn
from torch.distributions import Independent, Normal

from .values import mlp


class Actor(nn.Module):
    """MLP → Normal(tanh(μ), σ), σ = 0.9·sigmoid(s + 2) + 0.1 (DreamerV3 continuous head; samples not squashed)."""

    def __init__(self, feat: int, act: int, hidden: int, layers: int = 2):
        super().__init__()
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
) -> torch.Tensor:
    """w = (1 − u)·exp(−Â_c) + u·1[Q_c ≤ cost_limit]·exp(Â_r), clipped at ``w_max``.

    ``adv_r`` = Â_r, ``adv_c`` = Â_c = (Q_c − V_c)/S_c (so exp(−Â_c) = exp(Â_c⁻)), ``u`` ∈ [0, 1] the feasibility.
    """
    if w_max <= 0:
        raise ValueError(f"w_max must be > 0, got {w_max!r}")
    feasible = (q_c <= cost_limit).to(adv_r.dtype)
    # clamp inside exp so that a huge advantage cannot overflow before the clip
    cap = float(torch.log(torch.tensor(w_max)))
    w = (1 - u) * torch.exp(torch.clamp(-adv_c, max=cap)) + u * feasible * torch.exp(
        torch.clamp(adv_r, max=cap)
    )
    return torch.clamp(w, max=w_max).detach()


def pex_probs(q_off: torch.Tensor, q_on: torch.Tensor, beta: float) -> torch.Tensor:
    """P(choose π_off) = softmax(β·[q_off, q_on])[0], elementwise (log-space, no overflow)."""
    return torch.sigmoid(beta * (q_off - q_on))


def pex_select(
    q_off: torch.Tensor,
    q_on: torch.Tensor,
    beta: float,
    generator: torch.Generator | None = None,
    greedy: bool = False,
) -> torch.Tensor:
    """Boolean (N,): True where π_off's action is executed. One draw per environment (vectorised)."""
    if beta < 0:
        raise ValueError(f"beta must be >= 0, got {beta!r}")
    if greedy:
        return q_off >= q_on
    p = pex_probs(q_off, q_on, beta)
    return torch.rand(p.shape, generator=generator, dtype=p.dtype).to(p.device) < p
