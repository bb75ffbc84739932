"""Off-the-shelf offline learners for the relabelled high-level data: BC and IQL (standard value target).

Policies expose ``log_prob(obs, act)`` and ``act(obs)`` (deterministic):

- :class:`GaussianPolicy`: an MLP mean and a state-independent log-std on *standardised* actions; the
  deterministic action is the mean, clipped to the data range (a plain Gaussian with clipping,
  instead of the official pre-tanh log-probability without Jacobian).
- :class:`DirichletPolicy`: concentrations softplus(MLP) + ε for actions on the simplex (network low level);
  the deterministic action is the Dirichlet mean α/Σα.

IQL (Kostrikov et al.), with twin Q, a V network and Polyak-averaged target Qs:

    L_V = E[ |τ − 1(Q̂(s,a) − V(s) < 0)| (Q̂(s,a) − V(s))² ],    Q̂ = min_i Q_targ,i(s, a)
    L_Q = E[ (r + γ (1 − d) V(s') − Q_i(s, a))² ]
    L_π = −E[ min(exp(β (Q̂(s,a) − V(s))), 100) · log π(a|s) ]

``value_target="official"`` reproduces the official repo's quirk, which evaluates
min Q_targ(**s'**, a) for the V target and the advantage; the default is the standard Q̂(s, a).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.distributions import Dirichlet, Normal

from ..common.checks import need_bool, need_int, need_real, need_seed, need_type
from ..common.fields import bounded, check_fields
from .relabel import OfflineDataset


def _check_obs_act(obs, act) -> None:
    for name, v in (("obs", obs), ("act", act)):
        if np.ndim(v) != 2 or len(v) == 0:
            raise ValueError(f"{name} must be a non-empty (n, dim) array, got shape {np.shape(v)}")
    if len(obs) != len(act):
        raise ValueError(f"obs and act must have the same rows, got {len(obs)} and {len(act)}")


def _check_finite_ds(ds: OfflineDataset) -> None:
    for name in ("observations", "actions", "rewards", "next_observations"):
        if not np.isfinite(np.asarray(getattr(ds, name), dtype=float)).all():
            raise ValueError(f"ds.{name} must be finite, got NaN/inf entries (relabel masks such windows)")


def mlp(inp: int, out: int, hidden: int = 256, layers: int = 2) -> nn.Sequential:
    for name, v, lo in (("inp", inp, 1), ("out", out, 1), ("hidden", hidden, 1), ("layers", layers, 0)):
        need_int(name, v, lo)
    mods: list[nn.Module] = []
    d = inp
    for _ in range(layers):
        mods += [nn.Linear(d, hidden), nn.ReLU()]
        d = hidden
    mods.append(nn.Linear(d, out))
    return nn.Sequential(*mods)


class _Standardise(nn.Module):
    def __init__(self, x: np.ndarray):
        super().__init__()
        x = np.asarray(x, dtype=np.float64)
        self.register_buffer("mean", torch.as_tensor(x.mean(0), dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(x.std(0) + 1e-6, dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.std


class GaussianPolicy(nn.Module):
    """π(a|s) = N(μ(s), σ²) on standardised actions; ``act`` returns the mean clipped to the data range."""

    def __init__(self, obs: np.ndarray, act: np.ndarray, hidden: int = 256, layers: int = 2):
        super().__init__()
        _check_obs_act(obs, act)
        self.obs_norm, self.act_norm = _Standardise(obs), _Standardise(act)
        self.mu = mlp(obs.shape[1], act.shape[1], hidden, layers)
        self.log_std = nn.Parameter(torch.zeros(act.shape[1]))
        self.register_buffer("low", torch.as_tensor(np.min(act, 0), dtype=torch.float32))
        self.register_buffer("high", torch.as_tensor(np.max(act, 0), dtype=torch.float32))

    def log_prob(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        mu = self.mu(self.obs_norm(obs))
        return Normal(mu, self.log_std.clamp(-5, 2).exp()).log_prob(self.act_norm(act)).sum(-1)

    @torch.no_grad()
    def act(self, obs: np.ndarray | torch.Tensor) -> np.ndarray:
        d = self.obs_norm.mean.shape[-1]
        if np.shape(obs)[-1:] != (d,):
            raise ValueError(f"obs must be (..., {d}) observations, got shape {tuple(np.shape(obs))}")
        o = torch.as_tensor(np.asarray(obs), dtype=torch.float32)
        a = self.mu(self.obs_norm(o)) * self.act_norm.std + self.act_norm.mean
        return torch.maximum(torch.minimum(a, self.high), self.low).double().numpy()


class DirichletPolicy(nn.Module):
    """π(u|s) = Dirichlet(softplus(f(s)) + ε) for u on the simplex; ``act`` returns the mean."""

    def __init__(self, obs: np.ndarray, act: np.ndarray, hidden: int = 256, layers: int = 2):
        super().__init__()
        _check_obs_act(obs, act)
        if (np.asarray(act) < 0).any():
            raise ValueError("act must be distributions on the simplex (entries >= 0) for a Dirichlet policy")
        self.obs_norm = _Standardise(obs)
        self.net = mlp(obs.shape[1], act.shape[1], hidden, layers)

    def concentration(self, obs: torch.Tensor) -> torch.Tensor:
        return nn.functional.softplus(self.net(self.obs_norm(obs))) + 1e-3

    def log_prob(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return Dirichlet(self.concentration(obs)).log_prob(act)

    @torch.no_grad()
    def act(self, obs: np.ndarray | torch.Tensor) -> np.ndarray:
        c = self.concentration(torch.as_tensor(np.asarray(obs), dtype=torch.float32))
        return (c / c.sum(-1, keepdim=True)).double().numpy()


POLICIES = {"gaussian": GaussianPolicy, "dirichlet": DirichletPolicy}


def _tensors(ds: OfflineDataset, device: torch.device | None = None) -> dict[str, torch.Tensor]:
    return {
        "obs": torch.as_tensor(ds.observations, dtype=torch.float32, device=device),
        "act": torch.as_tensor(ds.actions, dtype=torch.float32, device=device),
        "rew": torch.as_tensor(ds.rewards, dtype=torch.float32, device=device),
        "next_obs": torch.as_tensor(ds.next_observations, dtype=torch.float32, device=device),
        "done": torch.as_tensor(ds.terminations, dtype=torch.float32, device=device),
    }


def train_bc(
    ds: OfflineDataset,
    *,
    policy: str = "gaussian",
    steps: int = 3000,
    batch_size: int = 256,
    lr: float = 1e-3,
    hidden: int = 256,
    layers: int = 2,
    seed: int = 0,
    cosine: bool = True,
    device: str | torch.device = "cpu",
) -> nn.Module:
    """Behaviour cloning: maximise E log π(a|s) with Adam (official BC: lr 1e-4, batch 256), the learning rate
    decayed to 0 over ``steps`` by a cosine schedule (``cosine=False``: constant). Trained on ``device``; the
    policy is returned on the CPU (the rollouts feed it numpy observations)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {tuple(POLICIES)}, got {policy!r}")
    need_type("ds", ds, OfflineDataset)
    if len(ds) == 0:
        raise ValueError("ds must hold at least one transition, got an empty dataset")
    need_int("steps", steps, 1)
    need_int("batch_size", batch_size, 1)
    need_real("lr", lr, 0.0, lo_open=True)
    need_int("hidden", hidden, 1)
    need_int("layers", layers, 0)
    need_seed("seed", seed)
    need_bool("cosine", cosine)
    _check_finite_ds(ds)
    torch.manual_seed(seed)
    dev = torch.device(device)
    pi = POLICIES[policy](ds.observations, ds.actions, hidden, layers).to(dev)
    t = _tensors(ds, dev)
    g = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(pi.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=steps) if cosine else None
    for _ in range(steps):
        b = torch.randint(0, len(ds), (batch_size,), generator=g).to(dev)  # drawn on the CPU generator
        loss = -pi.log_prob(t["obs"][b], t["act"][b]).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if sched is not None:
            sched.step()
    return pi.cpu().eval()


@dataclass(frozen=True)
class IQLConfig:
    """IQL hyper-parameters (reacher-lite defaults τ = 0.7, β = 3; official γ 0.99, Polyak 0.995, clip 100)."""

    expectile: float = bounded(0.7, lo=0, hi=1, lo_open=True, hi_open=True)
    beta: float = bounded(3.0, lo=0)
    gamma: float = bounded(0.99, lo=0, hi=1)
    polyak: float = bounded(0.995, lo=0, hi=1)
    lr: float = bounded(3e-4, lo=0, lo_open=True)
    batch_size: int = bounded(256, lo=1)
    steps: int = bounded(5000, lo=0)
    hidden: int = bounded(256, lo=1)
    weight_clip: float = bounded(100.0, lo=0, lo_open=True)
    # "standard": Q̂(s, a);  "official": the repo's Q̂(s', a)
    value_target: str = bounded("standard", choices=("standard", "official"))

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """E[|τ − 1(u < 0)| u²] with u = Q̂ − V (weight τ if u > 0 else 1 − τ)."""
    need_real("expectile", expectile, 0.0, 1.0, lo_open=True)
    if expectile >= 1:
        raise ValueError(f"expectile must be in (0, 1), got {expectile!r}")
    if diff.numel() == 0:
        raise ValueError("diff must hold at least one element, got an empty tensor")
    w = torch.where(diff > 0, torch.full_like(diff, expectile), torch.full_like(diff, 1 - expectile))
    return (w * diff**2).mean()


def awr_weights(adv: torch.Tensor, beta: float, clip: float = 100.0) -> torch.Tensor:
    """min(exp(β A), clip)."""
    need_real("beta", beta, 0.0)
    need_real("clip", clip, 0.0, lo_open=True)
    return torch.exp(beta * adv).clamp(max=clip)


class TwinQ(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int):
        super().__init__()
        self.q1, self.q2 = mlp(obs_dim + act_dim, 1, hidden), mlp(obs_dim + act_dim, 1, hidden)

    def both(self, obs: torch.Tensor, act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat([obs, act], -1)
        return self.q1(x)[..., 0], self.q2(x)[..., 0]

    def forward(self, obs: torch.Tensor, act: torch.Tensor) -> torch.Tensor:
        return torch.minimum(*self.both(obs, act))


class IQL(nn.Module):
    """Implicit Q-learning with observation/action standardisation inside the critics."""

    def __init__(
        self, ds: OfflineDataset, cfg: IQLConfig = IQLConfig(), policy: str = "gaussian", seed: int = 0
    ):
        super().__init__()
        if policy not in POLICIES:
            raise ValueError(f"policy must be one of {tuple(POLICIES)}, got {policy!r}")
        torch.manual_seed(seed)
        self.cfg = cfg
        od, ad = ds.observations.shape[1], ds.actions.shape[1]
        self.obs_norm, self.act_norm = _Standardise(ds.observations), _Standardise(ds.actions)
        self.q = TwinQ(od, ad, cfg.hidden)
        self.q_targ = copy.deepcopy(self.q).requires_grad_(False)
        self.v = mlp(od, 1, cfg.hidden)
        self.pi = POLICIES[policy](ds.observations, ds.actions, cfg.hidden)
        self.opt_q = torch.optim.Adam(self.q.parameters(), lr=cfg.lr)
        self.opt_v = torch.optim.Adam(self.v.parameters(), lr=cfg.lr)
        self.opt_pi = torch.optim.Adam(self.pi.parameters(), lr=cfg.lr)

    def value_target(self, obs: torch.Tensor, act: torch.Tensor, next_obs: torch.Tensor) -> torch.Tensor:
        """Q̂ used by the V loss and the advantage: min Q_targ(s, a) (standard) or at s' (official quirk)."""
        o = next_obs if self.cfg.value_target == "official" else obs
        with torch.no_grad():
            return self.q_targ(self.obs_norm(o), self.act_norm(act))

    def update(self, b: dict[str, torch.Tensor]) -> dict[str, float]:
        cfg = self.cfg
        o, a, o2 = self.obs_norm(b["obs"]), self.act_norm(b["act"]), self.obs_norm(b["next_obs"])
        q_hat = self.value_target(b["obs"], b["act"], b["next_obs"])
        v = self.v(o)[..., 0]
        loss_v = expectile_loss(q_hat - v, cfg.expectile)
        self.opt_v.zero_grad()
        loss_v.backward()
        self.opt_v.step()
        with torch.no_grad():
            target = b["rew"] + cfg.gamma * (1 - b["done"]) * self.v(o2)[..., 0]  # r + γ(1 − d) V(s')
        q1, q2 = self.q.both(o, a)
        loss_q = ((q1 - target) ** 2).mean() + ((q2 - target) ** 2).mean()
        self.opt_q.zero_grad()
        loss_q.backward()
        self.opt_q.step()
        with torch.no_grad():
            for p, pt in zip(self.q.parameters(), self.q_targ.parameters(), strict=True):
                pt.mul_(cfg.polyak).add_((1 - cfg.polyak) * p)
            adv = q_hat - self.v(o)[..., 0]
            w = awr_weights(adv, cfg.beta, cfg.weight_clip)
        loss_pi = -(w * self.pi.log_prob(b["obs"], b["act"])).mean()
        self.opt_pi.zero_grad()
        loss_pi.backward()
        self.opt_pi.step()
        return {"loss_v": loss_v.item(), "loss_q": loss_q.item(), "loss_pi": loss_pi.item()}


def train_iql(
    ds: OfflineDataset,
    cfg: IQLConfig = IQLConfig(),
    *,
    policy: str = "gaussian",
    seed: int = 0,
    device: str | torch.device = "cpu",
) -> tuple[nn.Module, IQL]:
    """Train IQL for ``cfg.steps`` steps on ``device``; returns (policy, agent), both moved back to the CPU."""
    need_type("ds", ds, OfflineDataset)
    need_type("cfg", cfg, IQLConfig)
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {tuple(POLICIES)}, got {policy!r}")
    need_seed("seed", seed)
    if len(ds) == 0:
        raise ValueError("ds must hold at least one transition, got an empty dataset")
    dev = torch.device(device)
    agent = IQL(ds, cfg, policy, seed).to(dev)  # in place: the optimisers keep their parameters
    t = _tensors(ds, dev)
    g = torch.Generator().manual_seed(seed)
    for _ in range(cfg.steps):
        idx = torch.randint(0, len(ds), (cfg.batch_size,), generator=g).to(dev)  # drawn on the CPU generator
        agent.update({k: v[idx] for k, v in t.items()})
    agent.cpu()
    return agent.pi.eval(), agent
