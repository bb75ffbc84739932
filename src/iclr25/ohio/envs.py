"""OHIO on any gymnasium environment: collect a flat offline dataset, and deploy a hierarchical policy (a high level
every k steps driving the known LQR low level of §4.1) — with a user-supplied dynamics model and state map.

The pieces a user brings for their own env:

- a dynamics model with ``state_dim``, ``action_dim`` and a differentiable ``step(x, a)`` in torch (the model the
  low level is designed with and, by default, the one its inverse uses — the paper's P̃);
- a map from observations to the model's state: observation indices, or a callable (e.g. angles from the
  (cos θ, sin θ) of ``Pendulum-v1``), passed to :class:`~iclr25.ohio.LQRLowLevel` as ``state_map``.

:class:`PendulumModel` and :func:`pendulum_state` are that pair for gymnasium's ``Pendulum-v1`` (the README's example).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from ..common.checks import need_array
from .lqr import LQRLowLevel
from .relabel import OfflineDataset


def _check_common(n_episodes: int, seed: int, max_steps: int | None) -> None:
    if isinstance(n_episodes, bool) or not isinstance(n_episodes, (int, np.integer)) or n_episodes < 1:
        raise ValueError(f"n_episodes must be an int >= 1, got {n_episodes!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if max_steps is not None and (not isinstance(max_steps, (int, np.integer)) or max_steps < 1):
        raise ValueError(f"max_steps must be None or an int >= 1, got {max_steps!r}")


def _as_env(env: gym.Env | str, **make_kw: Any) -> gym.Env:
    if not isinstance(env, (str, gym.Env)):
        raise ValueError(f"env must be a gymnasium Env or an env id, got {type(env).__name__}")
    return gym.make(env, **make_kw) if isinstance(env, str) else env


def collect_offline_dataset(
    env: gym.Env | str,
    policy: Callable[[np.ndarray], np.ndarray] | None,
    n_episodes: int,
    seed: int = 0,
    *,
    max_steps: int | None = None,
) -> OfflineDataset:
    """Roll out a flat behaviour ``policy`` (obs ↦ action; ``None``: uniform random actions) on a gymnasium env
    (an instance or an id for ``gym.make``) and return the transitions as an :class:`OfflineDataset` (episodes back
    to back, ``terminations``/``truncations`` from the env; ``max_steps`` truncates longer episodes).

    Episode i is reset with ``seed + i`` (random actions drawn from the action space seeded with ``seed``), so the
    same arguments give the same data.
    """
    _check_common(n_episodes, seed, max_steps)
    if policy is not None and not callable(policy):
        raise ValueError(f"policy must be a callable obs -> action or None, got {policy!r:.80}")
    env = _as_env(env)
    env.action_space.seed(int(seed))
    cols: dict[str, list] = {k: [] for k in ("o", "a", "r", "o2", "term", "trunc")}
    for i in range(int(n_episodes)):
        obs, _ = env.reset(seed=int(seed) + i)
        t, done = 0, False
        while not done:
            act = env.action_space.sample() if policy is None else np.asarray(policy(obs))
            nxt, r, term, trunc, _ = env.step(act)
            t += 1
            trunc = bool(trunc) or (max_steps is not None and t >= max_steps and not term)
            for k, v in zip(cols, (obs, act, r, nxt, term, trunc)):
                cols[k].append(v)
            obs, done = nxt, bool(term) or trunc
    o = np.asarray(cols["o"], dtype=float)
    a = np.asarray(cols["a"], dtype=float).reshape(len(o), -1)
    return OfflineDataset(
        o.reshape(len(o), -1),
        a,
        np.asarray(cols["r"], dtype=float),
        np.asarray(cols["o2"], dtype=float).reshape(len(o), -1),
        np.asarray(cols["term"], bool),
        np.asarray(cols["trunc"], bool),
    )


def evaluate_hierarchical_env(
    env: gym.Env | str,
    high: Callable[[np.ndarray], np.ndarray],
    low: LQRLowLevel,
    n_episodes: int,
    seed: int = 0,
    *,
    max_steps: int | None = None,
    return_dataset: bool = False,
) -> np.ndarray | tuple[np.ndarray, OfflineDataset, np.ndarray]:
    """Returns of the hierarchical policy on a gymnasium env: every k = ``low.k`` steps z = high(obs) (a reference
    state of ``low``'s model) and gains from the LQR linearised at the current state, then k steps of
    clip(K_l (x_l − z)) (§4.1). Episode i is reset with ``seed + i``.

    ``return_dataset=True`` also returns the flat transitions and the high-level actions z used at each step
    (rows aligned with the dataset) — ground truth for checking :func:`~iclr25.ohio.relabel` on a new env.
    """
    _check_common(n_episodes, seed, max_steps)
    if not isinstance(low, LQRLowLevel):
        raise ValueError(f"low must be an LQRLowLevel, got {type(low).__name__}")
    env = _as_env(env)
    shape = env.action_space.shape
    if shape is None or int(np.prod(shape)) != low.model.action_dim:
        raise ValueError(
            f"the env's action space {env.action_space} does not match the dynamics model's "
            f"action_dim={low.model.action_dim}"
        )
    rets = np.zeros(int(n_episodes))
    rows: dict[str, list] = {k: [] for k in ("o", "a", "r", "o2", "term", "trunc", "z")}
    for i in range(int(n_episodes)):
        obs, _ = env.reset(seed=int(seed) + i)
        t, done = 0, False
        while not done:
            z = torch.as_tensor(np.asarray(high(obs), dtype=float), dtype=torch.float64).reshape(1, -1)
            if z.shape[1] != low.model.state_dim or not torch.isfinite(z).all():
                raise ValueError(
                    f"high(obs) must give {low.model.state_dim} finite numbers, got {z.tolist()}"
                )
            K = low.gains(low.state(obs[None]))
            for ell in range(low.k):
                a = low.control(low.state(obs[None]), z, K[:, ell]).numpy()[0]
                act = a.reshape(shape).astype(env.action_space.dtype)
                nxt, r, term, trunc, _ = env.step(act)
                t += 1
                trunc = bool(trunc) or (max_steps is not None and t >= max_steps and not term)
                rets[i] += float(r)
                if return_dataset:
                    for k, v in zip(rows, (obs, a, r, nxt, term, trunc, z[0].numpy())):
                        rows[k].append(v)
                obs, done = nxt, bool(term) or trunc
                if done:
                    break
    if not return_dataset:
        return rets
    o = np.asarray(rows["o"], dtype=float)
    ds = OfflineDataset(
        o,
        np.asarray(rows["a"], dtype=float),
        np.asarray(rows["r"], dtype=float),
        np.asarray(rows["o2"], dtype=float),
        np.asarray(rows["term"], bool),
        np.asarray(rows["trunc"], bool),
    )
    return rets, ds, np.asarray(rows["z"], dtype=float)


class PendulumModel:
    """Gymnasium ``Pendulum-v1`` dynamics in torch: state x = (θ, θ̇), action u (torque, clipped to ±max_torque).

    θ̇' = clip(θ̇ + (3g/(2l) sin θ + 3/(m l²) u) dt, ±max_speed),  θ' = θ + θ̇' dt  (gymnasium's equations).
    """

    state_dim, action_dim = 2, 1

    def __init__(
        self,
        g: float = 10.0,
        m: float = 1.0,
        length: float = 1.0,
        dt: float = 0.05,
        max_speed: float = 8.0,
        max_torque: float = 2.0,
    ):
        for name, v in (("g", g), ("m", m), ("length", length), ("dt", dt), ("max_speed", max_speed)):
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and np.isfinite(v) and v > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {v!r}")
        self.g, self.m, self.length, self.dt = g, m, length, dt
        self.max_speed, self.max_torque = max_speed, max_torque

    def step(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        th, thdot = x[..., 0], x[..., 1]
        u = a[..., 0].clamp(-self.max_torque, self.max_torque)
        g, m, ln, dt = self.g, self.m, self.length, self.dt
        newthdot = (thdot + (3 * g / (2 * ln) * torch.sin(th) + 3.0 / (m * ln**2) * u) * dt).clamp(
            -self.max_speed, self.max_speed
        )
        return torch.stack([th + newthdot * dt, newthdot], -1)


def pendulum_state(obs: np.ndarray) -> np.ndarray:
    """``Pendulum-v1`` observation (cos θ, sin θ, θ̇) → state (θ, θ̇), θ = atan2(sin θ, cos θ) ∈ (−π, π]."""
    obs = need_array("obs", obs, last=3, finite=False)
    return np.stack([np.arctan2(obs[..., 1], obs[..., 0]), obs[..., 2]], -1)
