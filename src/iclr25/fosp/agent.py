"""FOSP agent: world model + in-sample critics + reachability guidance + augmented Lagrangian + PEX fine-tuning.

One update (paper, offline phase; Sec. 3 of the paper, Fig. 1):

1. world-model step on a batch of windows (may be frozen when several agents share one model);
2. imagine H steps with the actor from every posterior state of the batch;
3. critics: Q_r, Q_c regress the λ-returns of the imagined trajectory plus — offline only — the *in-sample* target
   y_i = r_i + γ(1 − term_i)·G_0(s_{i+1}) at the **dataset action** a_i; V_r, V_c follow Q through the expectile
   loss (τ_r, τ_c); the REF head Φ(s, a) regresses φ̂_t = max(h_t, μ·φ̂_{t+1}) with h from the cost model on
   imagined steps and from the real cost on dataset steps; slow EMA copies (mix 0.02) and a pull towards them;
4. actor: REF-weighted advantage regression on dataset actions (``actor_update="awr"``, the paper's closed form) or
   Dreamer backprop through the imagined dynamics (``"backprop"``, what the official code runs), minus an entropy
   bonus, plus the augmented-Lagrangian penalty ψ(g), g = mean Σ_t u_t·G^c_t − d;
5. online: a frozen copy π_off and a learnable π_on choose actions by PEX; only π_on is updated.

The four places where the official JAX code departs from the paper are switches, paper behaviour by default:
``tau_r`` (0.8; code 0.2 — the code's κ(V − Q) weighting is the *lower* expectile for both critics),
``actor_update`` ("awr"; code "backprop": the REF weights are computed but unused for continuous actions),
``ref_target`` ("respo"; code "self": h_t = 1[Φ(s_t, a_t) > 0], a target that never leaves 0) and
``pex_shared_actor`` (False; code True: π_off and π_on share parameters, so π_off is not frozen).
:meth:`FOSPConfig.official_code` sets all four.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from iclr25.common.fields import bounded, check_fields

from .data import OfflineDataset, SequenceStore
from .env import SafeNav2DVec, as_vector_env
from .lagrangian import AugmentedLagrangian
from .policy import Actor, awr_weights, pex_select
from .values import (
    ActionValue,
    PercentileEMA,
    StateValue,
    ema_update,
    expectile_loss,
    lambda_return,
    ref_targets,
)
from .world_model import WorldModel


@dataclass(frozen=True)
class FOSPConfig:
    """Every FOSP hyper-parameter. Defaults: the paper's algorithm at laptop scale (sizes/lrs noted)."""

    # sizes (paper: deter 512, heads 2×512, batch 16×64, H = 15)
    hidden: int = bounded(64, lo=1)
    deter: int = bounded(64, lo=1)
    latent: int = bounded(32, lo=1)
    encoder: str = bounded("mlp", choices=("mlp", "cnn"))  # "cnn" for (H, W, 3) images
    batch: int = bounded(16, lo=1)
    seq_len: int = bounded(16, lo=2)
    horizon: int = bounded(10, lo=1)
    gamma: float = bounded(0.99, kind=float, lo=0, hi=1)  # paper 1 − 1/333
    lam: float = bounded(0.95, kind=float, lo=0, hi=1)
    # optimisation (paper: wm 1e-4, critics/actor 3e-5)
    wm_lr: float = bounded(1e-3, kind=float, lo=0, lo_open=True)
    critic_lr: float = bounded(3e-4, kind=float, lo=0, lo_open=True)
    actor_lr: float = bounded(3e-4, kind=float, lo=0, lo_open=True)
    wm_clip: float = bounded(1000.0, kind=float, lo=0, lo_open=True)
    critic_clip: float = bounded(100.0, kind=float, lo=0, lo_open=True)
    actor_clip: float = bounded(100.0, kind=float, lo=0, lo_open=True)
    cost_weight: float = bounded(10.0, kind=float, lo=0, lo_open=True)
    # algorithm switches
    use_cost: bool = bounded(True)  # False = DreamerV3 (no cost critic, no constraint)
    in_sample: bool = bounded(True)  # offline in-sample Q term at dataset actions
    ref: bool = bounded(True)  # reachability guidance (False: u ≡ 1)
    # "self" = official code (self-referential violation indicator)
    ref_target: str = bounded("respo", choices=("respo", "self"))
    ref_mu: float = bounded(0.99, kind=float, lo=0, hi=1)
    actor_update: str = bounded(
        "awr", choices=("awr", "backprop")
    )  # "backprop" = official code / SafeDreamer
    # expectile of V_r (u = Q − V convention); official code 0.2
    tau_r: float = bounded(0.8, kind=float, lo=0, hi=1, lo_open=True, hi_open=True)
    # expectile of V_c: lower = minimum achievable cost
    tau_c: float = bounded(0.2, kind=float, lo=0, hi=1, lo_open=True, hi_open=True)
    slow_mix: float = bounded(0.02, kind=float, lo=0, hi=1)
    slow_reg: float = bounded(1.0, kind=float, lo=0)
    actor_entropy: float = bounded(3e-4, kind=float, lo=0)
    w_max: float = bounded(100.0, kind=float, lo=0, lo_open=True)
    # w uses exp(β·Â); the paper's weights have β = 1 on normalised advantages
    adv_temperature: float = bounded(1.0, kind=float, lo=0)
    cost_limit: float = bounded(0.0, kind=float, lo=0)  # d (costs are non-negative)
    # feasible action: Q_c ≤ d + tolerance (a regression head is never exactly 0)
    qc_tolerance: float = bounded(0.05, kind=float, lo=0)
    pessimistic: bool = bounded(True)  # J̃_c summed over the horizon (else averaged)
    multiplier_init: float = bounded(1e-6, kind=float, lo=0)
    penalty_init: float = bounded(5e-9, kind=float, lo=0, lo_open=True)
    penalty_growth: float = bounded(1e-5, kind=float, lo=0)
    norm_decay: float = bounded(0.99, kind=float, lo=0, hi=1)
    # online (PEX)
    pex_beta: float = bounded(5.0, kind=float, lo=0)
    pex_kappa: float = bounded(0.1, kind=float, lo=0)
    pex_shared_actor: bool = bounded(False)  # True = official code (π_off shares π_on's parameters)
    # None: replay = D ∪ online sampled uniformly
    online_frac: float | None = bounded(None, kind=float, lo=0, hi=1, optional=True)
    device: str = "cpu"

    def __post_init__(self) -> None:
        check_fields(self)  # every bound above: field, value and what was expected

    @classmethod
    def official_code(cls, **kw: Any) -> FOSPConfig:
        """The official JAX code's behaviour at the four places where it differs from the paper."""
        base = dict(tau_r=0.2, tau_c=0.2, actor_update="backprop", ref_target="self", pex_shared_actor=True)
        return cls(**{**base, **kw})

    @classmethod
    def safedreamer(cls, **kw: Any) -> FOSPConfig:
        """SafeDreamer (Lagrangian) baseline: backprop actor, plain value regression, no in-sample term, no REF."""
        return cls(
            **{**dict(actor_update="backprop", in_sample=False, ref=False, tau_r=0.5, tau_c=0.5), **kw}
        )

    @classmethod
    def dreamerv3(cls, **kw: Any) -> FOSPConfig:
        """DreamerV3 baseline: as SafeDreamer without any cost signal."""
        return cls.safedreamer(**{"use_cost": False, **kw})


def _action_bounds(space: Any, act_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """(low, high) float32 arrays of shape (act_dim,) from a Box, a (low, high) pair or None (= [−1, 1])."""
    if space is None:
        return -np.ones(act_dim, np.float32), np.ones(act_dim, np.float32)
    if hasattr(space, "low") and hasattr(space, "high"):
        low, high = space.low, space.high
    elif isinstance(space, (tuple, list)) and len(space) == 2:
        low, high = space
    else:
        raise ValueError(
            f"action_space must be a gymnasium Box, a (low, high) pair or None, got {type(space).__name__}"
        )
    try:
        low = np.broadcast_to(np.asarray(low, np.float64), (act_dim,)).astype(np.float32)
        high = np.broadcast_to(np.asarray(high, np.float64), (act_dim,)).astype(np.float32)
    except (ValueError, TypeError):
        raise ValueError(
            f"action_space bounds must have shape ({act_dim},) (act_dim), got low={low!r}, high={high!r}"
        ) from None
    if not (np.isfinite(low).all() and np.isfinite(high).all() and (low < high).all()):
        raise ValueError(
            f"action_space bounds must be finite with low < high (to rescale [-1, 1] actions), got "
            f"low={low.tolist()}, high={high.tolist()}"
        )
    return low, high


def _to_torch(batch: dict[str, np.ndarray], device: str) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(v, device=device) for k, v in batch.items()}


class FOSPAgent(nn.Module):
    """FOSP for one observation/action space. ``obs_shape`` (D,) for states or (H, W, 3) for images.

    ``action_space`` (a bounded ``gymnasium.spaces.Box`` of shape (act_dim,), or a ``(low, high)`` pair) gives the
    environment's action bounds: the networks work in [−1, 1] (tanh-mean actor), :meth:`act` returns actions
    rescaled to [low, high] and dataset/replay actions (environment units) are mapped back to [−1, 1] before
    they reach the model. ``None`` means [−1, 1] (SafeNav2D, Safety-Gymnasium's Point/Car robots).
    Reparameterised samples in imagination draw from the agent's own ``torch.Generator`` (seeded with ``seed``
    and saved in checkpoints), so a resumed run is bit-identical to an uninterrupted one.
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        act_dim: int,
        cfg: FOSPConfig | None = None,
        seed: int = 0,
        action_space: Any = None,
    ):
        super().__init__()
        if cfg is not None and not isinstance(cfg, FOSPConfig):
            raise ValueError(f"cfg must be a FOSPConfig or None, got {type(cfg).__name__}")
        self.cfg = cfg = cfg or FOSPConfig()
        shp = tuple(obs_shape) if isinstance(obs_shape, (tuple, list)) else None
        if not shp or any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1 for d in shp):
            raise ValueError(f"obs_shape must be a non-empty tuple of positive ints, got {obs_shape!r}")
        if isinstance(act_dim, bool) or not isinstance(act_dim, int) or act_dim < 1:
            raise ValueError(f"act_dim must be an int >= 1, got {act_dim!r}")
        self.seed = int(seed)
        low, high = _action_bounds(action_space, act_dim)
        self.register_buffer("act_low", torch.as_tensor(low, dtype=torch.float32))
        self.register_buffer("act_high", torch.as_tensor(high, dtype=torch.float32))
        self.gen = torch.Generator(device=cfg.device).manual_seed(self.seed)
        with torch.random.fork_rng():
            torch.manual_seed(self.seed)
            self.wm = WorldModel(
                tuple(obs_shape), act_dim, cfg.deter, cfg.latent, cfg.hidden, cfg.encoder, cfg.cost_weight
            )
            F, A, Hd = self.wm.feat_dim, act_dim, cfg.hidden
            self.actor = Actor(F, A, Hd)
            self.vr, self.qr = StateValue(F, Hd), ActionValue(F, A, Hd)
            self.vc, self.qc = StateValue(F, Hd), ActionValue(F, A, Hd)
            self.phi = ActionValue(F, A, Hd)
        self.qr_slow, self.qc_slow, self.phi_slow = (copy.deepcopy(m) for m in (self.qr, self.qc, self.phi))
        for m in (self.qr_slow, self.qc_slow, self.phi_slow):
            m.requires_grad_(False)
        self.qr_norm = PercentileEMA(cfg.norm_decay)
        self.qc_norm = PercentileEMA(cfg.norm_decay)
        self.phi_norm = PercentileEMA(cfg.norm_decay)
        self.lagrange = AugmentedLagrangian(cfg.multiplier_init, cfg.penalty_init, cfg.penalty_growth)
        self.actor_off: Actor | None = None  # set by start_online(pex=True)
        self.online = False
        self.updates = 0
        self.to(cfg.device)
        self._make_optimisers()

    # ---------------------------------------------------------------------------------------- plumbing
    def _critics(self) -> list[nn.Module]:
        return [self.vr, self.qr, self.vc, self.qc, self.phi]

    def _make_optimisers(self) -> None:
        c = self.cfg
        self.wm_opt = torch.optim.Adam(self.wm.parameters(), lr=c.wm_lr, eps=1e-8)
        self.critic_opt = torch.optim.Adam(
            [p for m in self._critics() for p in m.parameters()], lr=c.critic_lr, eps=1e-5
        )
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=c.actor_lr, eps=1e-5)

    @property
    def action_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """(low, high) of the environment's actions, arrays of shape (act_dim,)."""
        return self.act_low.cpu().numpy(), self.act_high.cpu().numpy()

    def _unit_bounds(self) -> bool:
        return bool((self.act_low == -1).all() and (self.act_high == 1).all())

    def to_env_action(self, a: torch.Tensor) -> torch.Tensor:
        """Model action in [−1, 1] → environment action in [low, high] (affine; identity for [−1, 1])."""
        if self._unit_bounds():
            return a
        return self.act_low + (a + 1.0) * 0.5 * (self.act_high - self.act_low)

    def from_env_action(self, a: torch.Tensor) -> torch.Tensor:
        """Environment action in [low, high] → model action in [−1, 1] (inverse of :meth:`to_env_action`)."""
        if self._unit_bounds():
            return a
        return (a - self.act_low) / (self.act_high - self.act_low) * 2.0 - 1.0

    def _batch(self, batch: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
        b = _to_torch(batch, self.cfg.device)
        b["actions"] = self.from_env_action(b["actions"].float())
        return b

    def _rsample(self, f: torch.Tensor) -> torch.Tensor:
        """Reparameterised action sample μ + σ·ε, ε from the agent's generator (checkpointed: bit-exact resume)."""
        d = self.actor.dist(f)
        eps = torch.randn(d.mean.shape, generator=self.gen, device=d.mean.device, dtype=d.mean.dtype)
        return d.mean + d.stddev * eps

    def load_world_model(self, other: FOSPAgent) -> None:
        """Copy another agent's world model (several offline arms may share one model)."""
        self.wm.load_state_dict(other.wm.state_dict())

    # ------------------------------------------------------------------------------------ world model
    def train_world_model(self, batch: dict[str, np.ndarray]) -> dict[str, float]:
        b = self._batch(batch)
        loss, logs, _ = self.wm.loss(b)
        self.wm_opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(self.wm.parameters(), self.cfg.wm_clip)
        self.wm_opt.step()
        return logs

    # ------------------------------------------------------------------------------------- behaviour
    def _u(self, s: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """Feasibility u = 1 − φ̃(s, a) ∈ [0, 1] (φ̃ = percentile-normalised REF); 1 without REF."""
        if not (self.cfg.ref and self.cfg.use_cost):
            return torch.ones(s.shape[:-1], device=s.device)
        return 1.0 - self.phi_norm(self.phi(s, a)).clamp(0.0, 1.0)

    def train_behavior(self, batch: dict[str, np.ndarray], train_wm: bool = True) -> dict[str, float]:
        """One FOSP update (world model optional, then actor and critics) on a batch of windows."""
        c = self.cfg
        b = self._batch(batch)
        logs: dict[str, float] = {}
        if train_wm:
            loss, logs, post = self.wm.loss(b)
            self.wm_opt.zero_grad(set_to_none=True)
            loss.backward()
            nn.utils.clip_grad_norm_(self.wm.parameters(), c.wm_clip)
            self.wm_opt.step()
            post = post.detach()
        else:
            with torch.no_grad():
                post = self.wm.observe(b["observations"], b["actions"], b["next_observations"][:, -1])[0]
        B, T1, F = post.shape  # T1 = T + 1
        starts = post.reshape(-1, F)
        in_sample = c.in_sample and not self.online
        s_i, a_i = post[:, :-1], b["actions"]  # real posterior states and dataset actions (B, T, ·)
        # ---- imagination (gradients reach the actor through actions and dynamics; the model is frozen here)
        frozen = [self.wm, *self._critics()]
        for m in frozen:
            m.requires_grad_(False)
        feats, acts = self.wm.imagine(starts, lambda f: self._rsample(f.detach()), c.horizon)
        r_hat, c_prob, cont = self.wm.heads(feats[1:])  # (H, N)
        # trajectory weight w_t = Π_{i<t} γ·cont_i (DreamerV3 / SafeDreamer: cumprod(γ·cont) / γ), (H, N)
        weight = torch.cat([torch.ones_like(cont[:1]), torch.cumprod(c.gamma * cont, 0)[:-1]]).detach()
        self._last_traj_weight = weight  # exposed for tests
        # ---- actor
        ent = self.actor.dist(feats[:-1].detach()).entropy()
        if c.actor_update == "backprop":
            g_r = lambda_return(r_hat, self.vr(feats), cont, c.gamma, c.lam)
            self.qr_norm.update(g_r, validate=False)
            adv = (g_r - self.vr(feats[:-1])) / self.qr_norm.scale
            pi_loss = -(weight * adv).mean()
        else:
            with torch.no_grad():
                adv_r = (self.qr(s_i, a_i) - self.vr(s_i)) / self.qr_norm.scale
                adv_c = (
                    (self.qc(s_i, a_i) - self.vc(s_i)) / self.qc_norm.scale
                    if c.use_cost
                    else torch.zeros_like(adv_r)
                )
                u = self._u(s_i, a_i)
                q_c = self.qc(s_i, a_i) if c.use_cost else torch.zeros_like(adv_r)
                w = awr_weights(
                    c.adv_temperature * adv_r,
                    c.adv_temperature * adv_c,
                    u,
                    q_c,
                    c.cost_limit + c.qc_tolerance,
                    c.w_max,
                    validate=False,  # u comes from a clamp to [0, 1]
                )
            logs["qc_feasible_frac"] = float((q_c <= c.cost_limit + c.qc_tolerance).float().mean())
            pi_loss = -(w * self.actor.dist(s_i).log_prob(a_i)).mean()
            logs["awr_w_mean"] = float(w.mean())
            logs["feasible_frac"] = float(u.mean())
        pi_loss = pi_loss - c.actor_entropy * (weight * ent).mean()
        if c.use_cost:
            g_c = lambda_return(c_prob, self.vc(feats), cont, c.gamma, c.lam)  # (H, N)
            with torch.no_grad():
                u_t = self._u(feats[:-1], acts[:-1])
            j = weight * u_t * g_c
            j = j.sum(0) if c.pessimistic else j.mean(0)
            g = j.mean() - c.cost_limit
            pi_loss = pi_loss + self.lagrange.step(g).float()
            logs["constraint_g"] = float(g.detach())
            logs["multiplier"] = float(self.lagrange.multiplier)
        self.actor_opt.zero_grad(set_to_none=True)
        pi_loss.backward()
        nn.utils.clip_grad_norm_(self.actor.parameters(), c.actor_clip)
        self.actor_opt.step()
        for m in frozen:
            m.requires_grad_(True)
        self.wm.requires_grad_(True)
        logs["actor_loss"] = float(pi_loss.detach())
        # ---- critics (targets from the detached trajectory)
        f, a = feats.detach(), acts.detach()
        r_hat, c_prob, cont = r_hat.detach(), c_prob.detach(), cont.detach()
        with torch.no_grad():
            g_r = lambda_return(r_hat, self.vr(f), cont, c.gamma, c.lam)
            qr_slow = self.qr_slow(f[:-1], a[:-1])
            if c.use_cost:
                g_c = lambda_return(c_prob, self.vc(f), cont, c.gamma, c.lam)
                qc_slow = self.qc_slow(f[:-1], a[:-1])
                # φ̂_t = max(h_t, μ·φ̂_{t+1}) with φ̂_H = h_H (the violation indicator at the horizon, as the
                # paper and the official RefVFunction.score; no critic bootstrap)
                if c.ref_target == "respo":
                    h = (c_prob > 0.5).float()  # violation indicator from the cost model, h_t for t < H
                    h_last = h[-1]  # h_H = 1[ĉ(s_H) > 0.5]: the cost head on s_H's features
                else:  # official code: the REF head's own output 1[Φ(s_t, a_t) > 0], t = 0..H
                    h_all = (self.phi_slow(f, a) > 0).float()
                    h, h_last = h_all[:-1], h_all[-1]
                phi_t = ref_targets(h, c.ref_mu, h_last, validate=False)
                self._last_ref_targets = phi_t  # exposed for tests
        loss = (weight * (self.qr(f[:-1], a[:-1]) - g_r).pow(2)).mean()
        loss = loss + c.slow_reg * (self.qr(f[:-1], a[:-1]) - qr_slow).pow(2).mean()
        loss = loss + (weight * expectile_loss(qr_slow, self.vr(f[:-1]), c.tau_r)).mean()
        if c.use_cost:
            loss = loss + (weight * (self.qc(f[:-1], a[:-1]) - g_c).pow(2)).mean()
            loss = loss + c.slow_reg * (self.qc(f[:-1], a[:-1]) - qc_slow).pow(2).mean()
            loss = loss + (weight * expectile_loss(qc_slow, self.vc(f[:-1]), c.tau_c)).mean()
            if c.ref:
                loss = loss + (weight * (self.phi(f[:-1], a[:-1]) - phi_t).pow(2)).mean()
        if in_sample:
            loss = loss + self.in_sample_loss(
                b,
                s_i,
                a_i,
                g_r,
                g_c if c.use_cost else None,
                phi_t if (c.use_cost and c.ref) else None,
                (B, T1),
            )
        self.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_([p for m in self._critics() for p in m.parameters()], c.critic_clip)
        self.critic_opt.step()
        with torch.no_grad():
            self.qr_norm.update(self.qr(s_i, a_i), validate=False)
            if c.use_cost:
                self.qc_norm.update(self.qc(s_i, a_i), validate=False)
                if c.ref:
                    self.phi_norm.update(self.phi(f[:-1], a[:-1]).clamp(0, 1), validate=False)
        ema_update(self.qr_slow, self.qr, c.slow_mix)
        ema_update(self.qc_slow, self.qc, c.slow_mix)
        ema_update(self.phi_slow, self.phi, c.slow_mix)
        logs["critic_loss"] = float(loss.detach())
        self.updates += 1
        return logs

    def in_sample_loss(self, b, s_i, a_i, g_r, g_c, phi_t, shape) -> torch.Tensor:
        """Offline in-sample term: Q(s_i, a_i) at the *dataset* action regresses r_i + γ(1 − term_i)·G_0(s_{i+1}).

        Pairs are explicit (t, t+1) inside each window; G_0(s_{i+1}) is the λ-return of the imagination that
        starts at the next real posterior state. The REF head gets max(h_i, μ·φ̂_0(s_{i+1})) with h_i = 1[c_i > 0].
        """
        c = self.cfg
        B, T1 = shape
        self._last_in_sample_actions = a_i  # exposed for tests: the action tensor this loss sees
        nxt = lambda x: x[0].reshape(B, T1)[:, 1:]  # noqa: E731  value at imagination start t + 1
        notdone = 1.0 - b["terminations"].float()
        loss = (self.qr(s_i, a_i) - (b["rewards"] + c.gamma * notdone * nxt(g_r))).pow(2).mean()
        if g_c is not None:
            loss = loss + (self.qc(s_i, a_i) - (b["costs"] + c.gamma * notdone * nxt(g_c))).pow(2).mean()
        if phi_t is not None:
            if c.ref_target == "respo":
                h = (b["costs"] > 0).float()
            else:
                with torch.no_grad():
                    h = (self.phi_slow(s_i, a_i) > 0).float()
            target = torch.maximum(h, c.ref_mu * notdone * nxt(phi_t))
            loss = loss + (self.phi(s_i, a_i) - target).pow(2).mean()
        return loss

    # --------------------------------------------------------------------------------------- acting
    def start_online(self, pex: bool = True) -> None:
        """Enter the online phase: PEX keeps a frozen deep copy π_off (official-code option: shared parameters)."""
        self.online = True
        if pex:
            if self.cfg.pex_shared_actor:
                self.actor_off = self.actor
            else:
                self.actor_off = copy.deepcopy(self.actor)
                self.actor_off.requires_grad_(False)
        else:
            self.actor_off = None

    @torch.no_grad()
    def act(
        self,
        obs: np.ndarray,
        state: dict | None = None,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> tuple[np.ndarray, dict]:
        """Actions (N, A) in the env's bounds for observations (N, ·); ``state`` carries the recurrent feature.

        Sampling uses ``generator`` when given (else the global torch RNG); the model-space action (in [−1, 1])
        is kept in ``state["a"]`` for the next recurrent step, the returned one is rescaled to [low, high].
        """
        o = torch.as_tensor(np.asarray(obs), device=self.cfg.device)
        if tuple(o.shape[1:]) != self.wm.obs_shape:
            raise ValueError(
                f"obs must have shape (N, {', '.join(map(str, self.wm.obs_shape))}), got {tuple(o.shape)}"
            )
        if o.is_floating_point() and not torch.isfinite(o).all():
            raise ValueError("obs must be finite, got NaN/inf")
        feat = self.wm.obs_step(
            None if state is None else state["feat"], None if state is None else state["a"], o
        )

        def draw(d):
            if deterministic:
                return d.mean
            eps = torch.randn(d.mean.shape, generator=generator, dtype=d.mean.dtype).to(d.mean.device)
            return d.mean + d.stddev * eps

        a = draw(self.actor.dist(feat))
        info = {}
        if self.actor_off is not None:
            a_off = draw(self.actor_off.dist(feat))
            q = lambda x: self.qr(feat, x) - self.cfg.pex_kappa * self.qc(feat, x)  # noqa: E731
            take_off = pex_select(q(a_off), q(a), self.cfg.pex_beta, generator, greedy=deterministic)
            a = torch.where(take_off[:, None], a_off, a)
            info["pex_off_frac"] = float(take_off.float().mean())
        a = a.clamp(-1.0, 1.0)
        return self.to_env_action(a).cpu().numpy(), {"feat": feat, "a": a, **info}

    # ----------------------------------------------------------------------------------- checkpoints
    def save(self, path: str | Path) -> Path:
        """safetensors checkpoint: every module, buffer and optimiser state (resumable), config in metadata."""
        from safetensors.torch import save_file

        from iclr25.common.io import atomic_write_with

        t = {
            f"model.{k}": v.detach().cpu().contiguous()
            for k, v in self.state_dict().items()
            if not k.startswith("actor_off.")
        }
        if self.actor_off is not None and self.actor_off is not self.actor:
            t.update(
                {
                    f"actor_off.{k}": v.detach().cpu().contiguous()
                    for k, v in self.actor_off.state_dict().items()
                }
            )
        t["rng.imagination"] = self.gen.get_state().contiguous()  # the rsample stream (bit-exact resume)
        for name, opt in (("wm", self.wm_opt), ("critic", self.critic_opt), ("actor", self.actor_opt)):
            for idx, st in opt.state_dict()["state"].items():
                for k, v in st.items():
                    t[f"opt.{name}.{idx}.{k}"] = torch.as_tensor(v).detach().cpu().contiguous()
        meta = {
            "config": json.dumps(dataclasses.asdict(self.cfg)),
            "updates": str(self.updates),
            "online": str(self.online),
            "pex": str(self.actor_off is not None),
            "obs_shape": json.dumps(list(self.wm.obs_shape)),
            "act_dim": str(self.wm.act_dim),
            "seed": str(self.seed),
        }
        return atomic_write_with(path, lambda tmp: save_file(t, tmp, metadata=meta))

    @classmethod
    def load(cls, path: str | Path) -> FOSPAgent:
        from safetensors import safe_open
        from safetensors.torch import load_file

        with safe_open(str(path), "pt") as fh:
            meta = fh.metadata()
        cfg = FOSPConfig(**json.loads(meta["config"]))
        t = load_file(str(path), device=cfg.device)
        bounds = (
            (t["model.act_low"].cpu().numpy(), t["model.act_high"].cpu().numpy())
            if "model.act_low" in t
            else None
        )
        agent = cls(
            tuple(json.loads(meta["obs_shape"])), int(meta["act_dim"]), cfg, int(meta["seed"]), bounds
        )
        res = agent.load_state_dict({k[6:]: v for k, v in t.items() if k.startswith("model.")}, strict=False)
        bad = res.unexpected_keys + [k for k in res.missing_keys if not k.startswith("actor_off.")]
        if bad:
            raise ValueError(f"checkpoint {path} does not match the agent: keys {bad[:5]}")
        agent.updates = int(meta["updates"])
        if "rng.imagination" in t:
            agent.gen.set_state(t["rng.imagination"].cpu())
        if meta["online"] == "True":
            agent.start_online(pex=meta["pex"] == "True")
            if agent.actor_off is not None and agent.actor_off is not agent.actor:
                agent.actor_off.load_state_dict(
                    {k[10:]: v for k, v in t.items() if k.startswith("actor_off.")}
                )
        for name, opt in (("wm", agent.wm_opt), ("critic", agent.critic_opt), ("actor", agent.actor_opt)):
            sd = opt.state_dict()
            state: dict[int, dict[str, torch.Tensor]] = {}
            pre = f"opt.{name}."
            for k, v in t.items():
                if k.startswith(pre):
                    idx, key = k[len(pre) :].split(".", 1)
                    state.setdefault(int(idx), {})[key] = v.cpu() if key == "step" else v
            opt.load_state_dict({"state": state, "param_groups": sd["param_groups"]})
        return agent


# ------------------------------------------------------------------------------------------- loops
def _batch_rng(seed: int, step: int) -> np.random.Generator:
    return np.random.default_rng([seed, step, 7])


def train_world_model(agent: FOSPAgent, data: OfflineDataset, updates: int) -> list[float]:
    """World-model pre-training on an offline dataset (batches depend only on (seed, step): resumable)."""
    _check_dataset(agent, data)
    if isinstance(updates, bool) or not isinstance(updates, int) or updates < 0:
        raise ValueError(f"updates must be an int >= 0, got {updates!r}")
    store = SequenceStore(agent.cfg.seq_len, data)
    agent.wm.set_obs_stats(torch.as_tensor(data.observations))
    losses = []
    for k in range(updates):
        losses.append(
            agent.train_world_model(store.sample(agent.cfg.batch, _batch_rng(agent.seed, k)))["wm_loss"]
        )
    return losses


def train_offline(
    agent: FOSPAgent,
    data: OfflineDataset,
    updates: int,
    train_wm: bool = True,
    checkpoint: str | Path | None = None,
    checkpoint_every: int = 500,
) -> list[dict[str, float]]:
    """Offline phase: ``updates`` FOSP updates on D. With ``checkpoint`` the run resumes from the file if present
    (safetensors, written every ``checkpoint_every`` updates and at the end)."""
    _check_dataset(agent, data)
    if isinstance(updates, bool) or not isinstance(updates, int) or updates < 0:
        raise ValueError(f"updates must be an int >= 0, got {updates!r}")
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or checkpoint_every < 1:
        raise ValueError(f"checkpoint_every must be an int >= 1, got {checkpoint_every!r}")
    if checkpoint is not None and Path(checkpoint).exists():
        loaded = FOSPAgent.load(checkpoint)
        agent.load_state_dict(loaded.state_dict(), strict=False)
        agent.wm_opt.load_state_dict(loaded.wm_opt.state_dict())
        agent.critic_opt.load_state_dict(loaded.critic_opt.state_dict())
        agent.actor_opt.load_state_dict(loaded.actor_opt.state_dict())
        agent.gen.set_state(loaded.gen.get_state())
        agent.updates = loaded.updates
    elif train_wm and agent.updates == 0:
        agent.wm.set_obs_stats(torch.as_tensor(data.observations))
    store = SequenceStore(agent.cfg.seq_len, data)
    logs = []
    while agent.updates < updates:
        logs.append(
            agent.train_behavior(
                store.sample(agent.cfg.batch, _batch_rng(agent.seed, 10**6 + agent.updates)), train_wm
            )
        )
        if checkpoint is not None and (agent.updates % checkpoint_every == 0 or agent.updates == updates):
            agent.save(checkpoint)
    return logs


def _check_dataset(agent: FOSPAgent, data: OfflineDataset) -> None:
    if not isinstance(agent, FOSPAgent):
        raise ValueError(f"agent must be a FOSPAgent, got {type(agent).__name__}")
    if not isinstance(data, OfflineDataset):
        raise ValueError(f"data must be an OfflineDataset, got {type(data).__name__}")
    if data.obs_shape != agent.wm.obs_shape:
        raise ValueError(
            f"dataset observations have shape {data.obs_shape}, the agent expects {agent.wm.obs_shape}"
        )
    if data.act_dim != agent.wm.act_dim:
        raise ValueError(f"dataset actions have dim {data.act_dim}, the agent expects {agent.wm.act_dim}")
    low, high = agent.action_bounds
    tol = 1e-5 * np.maximum(1.0, high - low)
    if (data.actions < low - tol).any() or (data.actions > high + tol).any():
        raise ValueError(
            f"dataset actions span [{data.actions.min(0).tolist()}, {data.actions.max(0).tolist()}], outside the "
            f"agent's action bounds low={low.tolist()}, high={high.tolist()}; build the agent with the env's "
            "action_space (FOSPAgent(..., action_space=env.action_space))"
        )


def _check_env(agent: FOSPAgent, env: Any) -> Any:
    """The env as FOSP's vectorised interface, with action bounds and observation shape matching the agent."""
    try:
        env = as_vector_env(env)
    except TypeError as e:
        raise ValueError(str(e)) from None
    sp = env.single_action_space
    low, high = agent.action_bounds
    e_low, e_high = np.asarray(sp.low, np.float32), np.asarray(sp.high, np.float32)
    if e_low.shape != low.shape or not (np.allclose(e_low, low) and np.allclose(e_high, high)):
        raise ValueError(
            f"env action bounds low={e_low.tolist()}, high={e_high.tolist()} differ from the agent's "
            f"low={low.tolist()}, high={high.tolist()}; build the agent with FOSPAgent(..., "
            "action_space=env.single_action_space) so its [-1, 1] actions are rescaled to the env's range"
        )
    return env


def finetune_online(
    agent: FOSPAgent,
    env: Any,
    env_steps: int,
    offline: OfflineDataset | None = None,
    pex: bool = True,
    updates_per_step: int = 1,
    seed: int = 0,
) -> dict[str, Any]:
    """Online phase on a vectorised env: act (PEX or the actor alone), store, and update every vectorised step.

    ``env``: a :class:`SafeNav2DVec`, or any gymnasium (vector) env whose ``info`` carries a per-step ``cost``
    (or that returns the Safety-Gymnasium 6-tuple); its action bounds must be the agent's. When one environment's
    episode ends, every environment is reset (their episodes are cut there, marked truncated in the replay) so the
    recurrent states stay aligned. Replay = offline D (if given) ∪ online transitions. Returns cumulative training
    cost/return and per-episode training statistics.
    """
    env = _check_env(agent, env)
    if isinstance(updates_per_step, bool) or not isinstance(updates_per_step, int) or updates_per_step < 1:
        raise ValueError(f"updates_per_step must be an int >= 1, got {updates_per_step!r}")
    if offline is not None:
        _check_dataset(agent, offline)
    if isinstance(env_steps, bool) or not isinstance(env_steps, int) or env_steps < env.num_envs:
        raise ValueError(f"env_steps must be an int >= num_envs={env.num_envs}, got {env_steps!r}")
    c = agent.cfg
    agent.start_online(pex=pex)
    store = SequenceStore(c.seq_len, offline, c.online_frac)
    n_vec = env_steps // env.num_envs
    store.init_online(env.num_envs, n_vec, agent.wm.obs_shape, agent.wm.act_dim)
    if offline is None and agent.updates == 0:
        stats_set = False
    else:
        stats_set = True
    gen = torch.Generator().manual_seed(seed)
    o = env.reset(seed=seed)
    state = None
    cum_cost = cum_ret = 0.0
    ep_ret = np.zeros(env.num_envs)
    ep_cost = np.zeros(env.num_envs)
    episodes: list[tuple[float, float]] = []
    off_frac = []
    for _k in range(n_vec):
        a, state = agent.act(o, state, generator=gen)
        if "pex_off_frac" in state:
            off_frac.append(state["pex_off_frac"])
        o2, r, cst, term, trunc, _ = env.step(a)
        if (
            term | trunc
        ).any():  # every env is reset below: its episode ends here (truncated unless terminated)
            trunc = trunc | ~term
        store.add(o, a, r, cst, o2, term, trunc)
        cum_cost += float(cst.sum())
        cum_ret += float(r.sum())
        ep_ret += r
        ep_cost += cst
        o = o2
        if (term | trunc).any():
            episodes += list(zip(ep_ret.tolist(), ep_cost.tolist()))
            ep_ret[:], ep_cost[:] = 0, 0
            o = env.reset()
            state = None
        if store.on_fill >= c.seq_len or offline is not None:
            if not stats_set:
                agent.wm.set_obs_stats(torch.as_tensor(store.on["observations"][:, : store.on_fill]))
                stats_set = True
            for _ in range(updates_per_step):
                agent.train_behavior(
                    store.sample(c.batch, _batch_rng(seed, 2 * 10**6 + agent.updates)), train_wm=True
                )
    return {
        "cum_cost": cum_cost,
        "cum_return": cum_ret,
        "episodes": episodes,
        "pex_off_frac": float(np.mean(off_frac)) if off_frac else float("nan"),
    }


def evaluate(
    agent: FOSPAgent,
    layout: str = "base",
    episodes: int = 10,
    seed: int = 0,
    max_steps: int = 200,
    env: Any = None,
) -> dict[str, float]:
    """Mean episodic return and cost of the deterministic policy (PEX: greedy choice) over ``episodes`` episodes,
    run as one vectorised batch.

    Default: ``episodes`` SafeNav2D envs of ``layout``. With ``env`` (a gymnasium vector env with
    ``info["cost"]``, a single such env, or a SafeNav2DVec) one episode per environment is scored
    (``episodes`` and ``layout`` are then ignored), each cut at ``max_steps`` steps.
    """
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
    if env is None:
        if isinstance(episodes, bool) or not isinstance(episodes, int) or episodes < 1:
            raise ValueError(f"episodes must be an int >= 1, got {episodes!r}")
        env = SafeNav2DVec(episodes, layout=layout, max_steps=max_steps)
    else:
        env = _check_env(agent, env)
    n = env.num_envs
    o = env.reset(seed=seed)
    state = None
    ret = np.zeros(n)
    cost = np.zeros(n)
    live = np.ones(n, bool)  # first episode of each env still running
    for _ in range(max_steps):
        a, state = agent.act(o, state, deterministic=True)
        o, r, c, term, trunc, _ = env.step(a)
        ret += np.where(live, r, 0.0)
        cost += np.where(live, c, 0.0)
        live &= ~(term | trunc)
        if not live.any():
            break
    return {
        "return": float(ret.mean()),
        "cost": float(cost.mean()),
        "return_std": float(ret.std()),
        "cost_std": float(cost.std()),
    }
