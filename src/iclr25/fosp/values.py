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

import math

import torch
from torch import nn


def _num(name: str, v, lo: float | None = None, hi: float | None = None, open_: bool = False) -> None:
    """A finite real number (not a bool/str) in [lo, hi] ((lo, hi) with ``open_``); ValueError naming it."""
    ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
    if ok and lo is not None:
        ok = v > lo if open_ else v >= lo
    if ok and hi is not None:
        ok = v < hi if open_ else v <= hi
    if not ok:
        rng = "" if lo is None else (f" in ({lo}, {hi})" if open_ else f" in [{lo}, {hi}]")
        raise ValueError(f"{name} must be a finite number{rng}, got {v!r}")


def expectile_loss(q: torch.Tensor, v: torch.Tensor, tau: float) -> torch.Tensor:
    """Elementwise L_τ(u) = |τ − 1[u < 0]|·u² with u = q − v (τ = 0.5 gives 0.5·(q − v)²)."""
    _num("tau", tau, 0.0, 1.0, open_=True)
    try:
        torch.broadcast_shapes(q.shape, v.shape)
    except RuntimeError:
        raise ValueError(
            f"q and v must have broadcastable shapes, got {tuple(q.shape)} and {tuple(v.shape)}"
        ) from None
    u = q - v
    return torch.where(u < 0, 1.0 - tau, tau) * u.pow(2)


def lambda_return(
    rewards: torch.Tensor, values: torch.Tensor, cont: torch.Tensor, gamma: float, lam: float
) -> torch.Tensor:
    """λ-returns G_0..G_{H−1}. rewards, cont: (H, ...) with H >= 1; values: (H + 1, ...) = V(s_0..s_H)."""
    _num("gamma", gamma, 0.0, 1.0)
    _num("lam", lam, 0.0, 1.0)
    if rewards.ndim < 1 or rewards.shape[0] < 1:
        raise ValueError(f"rewards must be (H, ...) with H >= 1, got shape {tuple(rewards.shape)}")
    if (
        values.shape[0] != rewards.shape[0] + 1
        or values.shape[1:] != rewards.shape[1:]
        or cont.shape != rewards.shape
    ):
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
    _num("mu", mu, 0.0, 1.0)
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
    _num("mu", mu, 0.0, 1.0)
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise ValueError(f"iters must be an int >= 1, got {iters!r}")
    S = transition.shape[0] if transition.ndim == 2 else -1
    if transition.ndim != 2 or transition.shape != (S, S) or tuple(unsafe.shape) != (S,):
        raise ValueError(
            f"transition must be (S, S) and unsafe (S,), got {tuple(transition.shape)} and {tuple(unsafe.shape)}"
        )
    rows = transition.sum(1)
    if (transition < 0).any() or not torch.allclose(rows, torch.ones_like(rows), atol=1e-5):
        raise ValueError("transition must be row-stochastic (non-negative rows summing to 1)")
    if not ((unsafe == 0) | (unsafe == 1)).all():
        raise ValueError("unsafe must hold the indicator h in {0, 1}")
    phi = torch.zeros(transition.shape[0], dtype=transition.dtype)
    for _ in range(iters):
        phi = transition @ torch.maximum(unsafe, mu * phi)
    return phi


class PercentileEMA(nn.Module):
    """DreamerV3 "perc_ema" normaliser: (x − offset) / scale with EMA 5th/95th percentiles and scale ≥ 1."""

    def __init__(self, decay: float = 0.99, lo: float = 0.05, hi: float = 0.95, max_scale: float = 1.0):
        super().__init__()
        _num("decay", decay, 0.0, 1.0)
        _num("lo", lo, 0.0, 1.0)
        _num("hi", hi, 0.0, 1.0)
        if not lo < hi:
            raise ValueError(f"lo must be < hi (percentiles), got lo={lo!r}, hi={hi!r}")
        _num("max_scale", max_scale, 0.0)
        if max_scale <= 0:
            raise ValueError(f"max_scale must be > 0, got {max_scale!r}")
        self.decay, self.lo, self.hi, self.max_scale = decay, lo, hi, max_scale
        self.register_buffer("low", torch.zeros(()))
        self.register_buffer("high", torch.zeros(()))
        self.register_buffer("initialised", torch.zeros((), dtype=torch.bool))

    @torch.no_grad()
    def update(self, x: torch.Tensor, validate: bool = True) -> None:
        """EMA update from a batch ``x``; ``validate=False`` skips the finiteness check (a device sync)."""
        x = x.detach().flatten().float()
        if x.numel() == 0:
            raise ValueError("x must be a non-empty tensor of values")
        if validate and not bool(torch.isfinite(x).all()):
            raise ValueError("x must be finite, got NaN/inf")
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
