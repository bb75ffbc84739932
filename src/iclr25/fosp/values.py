"""Value-learning pieces of FOSP: expectile loss, λ-returns, reachability (REF) targets, percentile-EMA scaling.

* In-sample value learning (paper, "in-sample optimisation"): V is fitted to Q(s, a) with an asymmetric
  (expectile) loss L_τ(u) = |τ − 1[u < 0]|·u², u = Q − V (IQL convention). τ > 0.5 makes V an upper expectile
  (≈ max over in-support actions) for the reward critic; τ < 0.5 a lower expectile (≈ min achievable cost) for the
  cost critic. The official code weights by κ(V − Q) = 0.8 if V > Q, which is τ = 0.2 for *both* critics.
* λ-return on imagined trajectories (DreamerV3, bootstrapped with V): G_H = V(s_H),
  G_t = r_t + γ·cont_t·[(1 − λ)·V(s_{t+1}) + λ·G_{t+1}] where r_t, cont_t belong to the transition s_t → s_{t+1}.
* Reachability estimation function (REF, from RESPO, Ganai et al. 2023): φ(s) = P(ever entering the violation
  set); target along a trajectory φ̂_t = max(h_t, μ·φ̂_{t+1}), bootstrapped with φ at the horizon.
* Percentile-EMA normaliser (DreamerV3 "perc_ema"): offset = EMA of the 5th percentile, scale = max(1, EMA 95th −
  EMA 5th), decay 0.99.
"""

from __future__ import annotations

import torch
from torch import nn


def expectile_loss(q: torch.Tensor, v: torch.Tensor, tau: float) -> torch.Tensor:
    """Elementwise L_τ(u) = |τ − 1[u < 0]|·u² with u = q − v (τ = 0.5 gives 0.5·(q − v)²)."""
    if not 0.0 < tau < 1.0:
        raise ValueError(f"tau must be in (0, 1), got {tau!r}")
    u = q - v
    return torch.where(u < 0, 1.0 - tau, tau) * u.pow(2)


def lambda_return(
    rewards: torch.Tensor, values: torch.Tensor, cont: torch.Tensor, gamma: float, lam: float
) -> torch.Tensor:
    """λ-returns G_0..G_{H−1}. rewards, cont: (H, ...); values: (H + 1, ...) = V(s_0..s_H)."""
    if values.shape[0] != rewards.shape[0] + 1 or cont.shape != rewards.shape:
        raise ValueError(
            f"values must have one more step than rewards and cont the shape of rewards; got rewards "
            f"{tuple(rewards.shape)}, values {tuple(values.shape)}, cont {tuple(cont.shape)}"
        )
    out = []
    g = values[-1]
    for t in reversed(range(rewards.shape[0])):
        g = rewards[t] + gamma * cont[t] * ((1 - lam) * values[t + 1] + lam * g)
        out.append(g)
    return torch.stack(out[::-1])


def ref_targets(
    violation: torch.Tensor, mu: float, bootstrap: torch.Tensor | float = 0.0, validate: bool = True
) -> torch.Tensor:
    """REF targets φ̂_t = max(h_t, μ·φ̂_{t+1}) for t = 0..H−1 with φ̂_H = ``bootstrap``; h: (H, ...) in {0, 1}.

    With h = [0, 0, 1, 0, 0], μ = 0.99 and zero bootstrap: [0.9801, 0.99, 1, 0, 0]. Targets stay in [0, 1] when h
    and the bootstrap do. ``validate=False`` skips the value checks (a device sync), for callers that built
    ``violation`` as an indicator themselves.
    """
    if not 0.0 <= mu <= 1.0:
        raise ValueError(f"mu must be in [0, 1], got {mu!r}")
    if violation.ndim < 1 or violation.shape[0] < 1:
        raise ValueError(f"violation must be (H, ...) with H >= 1, got shape {tuple(violation.shape)}")
    if validate:
        if not bool(((violation == 0) | (violation == 1)).all()):
            raise ValueError(
                "violation must hold the indicator h in {0, 1} (e.g. (cost > 0).float()), got other values"
            )
        b = torch.as_tensor(bootstrap, dtype=violation.dtype)
        if not bool(torch.isfinite(b).all()) or bool((b < 0).any() | (b > 1).any()):
            raise ValueError("bootstrap must be finite values in [0, 1] (a REF estimate), got values outside")
    nxt = torch.as_tensor(bootstrap, dtype=violation.dtype).expand_as(violation[0])
    out = []
    for t in reversed(range(violation.shape[0])):
        nxt = torch.maximum(violation[t], mu * nxt)
        out.append(nxt)
    return torch.stack(out[::-1])


def reachability_dp(
    unsafe: torch.Tensor, transition: torch.Tensor, mu: float, iters: int = 1000
) -> torch.Tensor:
    """Exact REF of a finite Markov chain by value iteration: φ(s) = max(h(s'), μ·φ(s')) in expectation over s'.

    ``transition[s, s']`` row-stochastic; ``unsafe[s']`` = h of the state entered. Reference for tests.
    """
    phi = torch.zeros(transition.shape[0], dtype=transition.dtype)
    for _ in range(iters):
        phi = transition @ torch.maximum(unsafe, mu * phi)
    return phi


class PercentileEMA(nn.Module):
    """DreamerV3 "perc_ema" normaliser: (x − offset) / scale with EMA 5th/95th percentiles and scale ≥ 1."""

    def __init__(self, decay: float = 0.99, lo: float = 0.05, hi: float = 0.95, max_scale: float = 1.0):
        super().__init__()
        self.decay, self.lo, self.hi, self.max_scale = decay, lo, hi, max_scale
        self.register_buffer("low", torch.zeros(()))
        self.register_buffer("high", torch.zeros(()))
        self.register_buffer("initialised", torch.zeros((), dtype=torch.bool))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        x = x.detach().flatten().float()
        lo, hi = torch.quantile(x, self.lo), torch.quantile(x, self.hi)
        if not bool(self.initialised):
            self.low.copy_(lo)
            self.high.copy_(hi)
            self.initialised.fill_(True)
        else:
            self.low.mul_(self.decay).add_((1 - self.decay) * lo)
            self.high.mul_(self.decay).add_((1 - self.decay) * hi)

    @property
    def scale(self) -> torch.Tensor:
        return torch.clamp(self.high - self.low, min=1.0 / self.max_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.low) / self.scale


def mlp(inp: int, out: int, hidden: int, layers: int = 2, zero_out: bool = False) -> nn.Sequential:
    """MLP with LayerNorm + SiLU (DreamerV3 heads); ``zero_out`` initialises the output layer at 0."""
    mods: list[nn.Module] = []
    d = inp
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.LayerNorm(hidden), nn.SiLU()]
        d = hidden
    last = nn.Linear(d, out)
    if zero_out:
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)
    mods.append(last)
    return nn.Sequential(*mods)


class StateValue(nn.Module):
    """V(s) on latent features."""

    def __init__(self, feat: int, hidden: int, layers: int = 2):
        super().__init__()
        self.net = mlp(feat, 1, hidden, layers, zero_out=True)

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return self.net(s).squeeze(-1)


class ActionValue(nn.Module):
    """Q(s, a) on latent features and the action (also used for the REF head Φ(s, a))."""

    def __init__(self, feat: int, act: int, hidden: int, layers: int = 2):
        super().__init__()
        self.net = mlp(feat + act, 1, hidden, layers, zero_out=True)

    def forward(self, s: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([s, a], -1)).squeeze(-1)


@torch.no_grad()
def ema_update(slow: nn.Module, fast: nn.Module, mix: float) -> None:
    """slow ← (1 − mix)·slow + mix·fast (DreamerV3 slow critic, mix 0.02 every update)."""
    for ps, pf in zip(slow.parameters(), fast.parameters()):
        ps.lerp_(pf, mix)
