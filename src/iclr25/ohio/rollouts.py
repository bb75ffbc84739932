"""Data collection and deployment on the arm: flat policies, and the hierarchical policy (high level every k
steps, LQR low level in between), all episodes of a batch stepped together.

Two offline datasets, as in the paper's reacher study (§4, Table 1): flat "E2E" data from a flat torque
controller (:func:`collect_flat_dataset`) and "HR" data from a hierarchical policy whose high level picks a
sub-goal z every k steps and whose LQR low level tracks it (:func:`collect_hierarchical_dataset`). Only the
low-level torques are stored in either; the HR sub-goals are kept in ``infos["z"]`` for diagnostics only.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..common.checks import need_array, need_callable, need_int, need_real, need_rng, need_seed, need_type
from .arm import ArmBatch, ArmParams, fingertip, flat_expert_action, inverse_kinematics
from .lqr import LQRLowLevel
from .relabel import OfflineDataset


def _check_counts(n_expert, n_noisy) -> None:
    need_int("n_expert", n_expert, 0)
    need_int("n_noisy", n_noisy, 0)
    if n_expert + n_noisy < 1:
        raise ValueError(f"n_expert + n_noisy must be >= 1, got n_expert={n_expert}, n_noisy={n_noisy}")


def collect_flat_dataset(
    n_expert: int,
    n_noisy: int,
    params: ArmParams,
    rng: np.random.Generator,
    *,
    horizon: int = 200,
    noise_std: float = 0.1,
    random_frac: float = 0.3,
) -> OfflineDataset:
    """The flat behaviour data of the reproduction (README): ``n_expert`` episodes of the computed-torque expert with N(0, σ²)
    action noise, plus ``n_noisy`` episodes where each action is uniform random with probability ``random_frac``."""
    _check_counts(n_expert, n_noisy)
    need_rng("rng", rng)
    need_real("noise_std", noise_std, 0.0)
    need_real("random_frac", random_frac, 0.0, 1.0)
    n = n_expert + n_noisy
    arm = ArmBatch(n, params, horizon)
    o = arm.reset(rng)
    noisy = np.arange(n) >= n_expert
    obs, acts, rews = [o], [], []
    for _ in range(horizon):
        a = flat_expert_action(o, params, rng=rng, noise_std=noise_std)
        rand = noisy & (rng.random(n) < random_frac)
        a = np.where(rand[:, None], rng.uniform(-params.max_torque, params.max_torque, a.shape), a)
        o, r, _ = arm.step(a)
        obs.append(o)
        acts.append(a)
        rews.append(r)
    return OfflineDataset.from_episodes(np.stack(obs, 1), np.stack(acts, 1), np.stack(rews, 1))


def evaluate_flat(
    policy: Callable[[np.ndarray], np.ndarray],
    params: ArmParams,
    n_episodes: int,
    seed: int,
    horizon: int = 200,
) -> np.ndarray:
    """Returns of a flat policy obs ↦ torque on ``n_episodes`` episodes (start states/targets from ``seed``)."""
    need_callable("policy", policy, "obs -> torques")
    need_int("n_episodes", n_episodes, 1)
    need_seed("seed", seed)
    arm = ArmBatch(n_episodes, params, horizon)
    o = arm.reset(np.random.default_rng(seed))
    ret = np.zeros(n_episodes)
    for _ in range(horizon):
        o, r, _ = arm.step(policy(o))
        ret += r
    return ret


def hierarchical_expert_goal(
    obs: np.ndarray,
    params: ArmParams,
    rng: np.random.Generator | None = None,
    noise_std: float = 0.1,
    velocity_gain: float = 3.0,
) -> np.ndarray:
    """The behaviour high level of the HR dataset: z = (q*, g·(q* − q)), q* the IK joint angles of the target
    nearest the current q and g = ``velocity_gain`` (1/s) a velocity reference towards it, plus N(0, σ²) on all four
    components when ``rng`` is given. (With g = 0, i.e. "come to rest at q*", the 5-step LQR saturates and
    reaches only ~0.17 of the flat expert's return; g = 3 reaches ~0.98.)"""
    obs = need_array("obs", obs, ndim=2, last=6)
    need_real("noise_std", noise_std, 0.0)
    need_real("velocity_gain", velocity_gain)
    q = obs[:, :2]
    q_star = inverse_kinematics(fingertip(q, params) + obs[:, 2:4], q, params)
    z = np.concatenate([q_star, velocity_gain * (q_star - q)], -1)
    if rng is not None and noise_std > 0:
        z = z + rng.normal(0.0, noise_std, z.shape)
    return z


def _hierarchical_rollout(
    high: Callable[[np.ndarray], np.ndarray],
    low: LQRLowLevel,
    arm: ArmBatch,
    o: np.ndarray,
    horizon: int,
) -> tuple[list, list, list, list]:
    """Every k steps z = high(obs) and K from the LQR linearised at s_t, then k steps of clip(K_l (x_l − z)).
    Returns per-step lists of observations (horizon + 1), torques, rewards and the goal in force."""
    obs, acts, rews, goals = [o], [], [], []
    t = 0
    while t < horizon:
        z_np = np.asarray(high(o), dtype=float)
        z = torch.as_tensor(z_np, dtype=torch.float64)
        K = low.gains(low.state(o))
        for ell in range(min(low.k, horizon - t)):
            a = low.control(low.state(o), z, K[:, ell]).numpy()
            o, r, _ = arm.step(a)
            obs.append(o)
            acts.append(a)
            rews.append(r)
            goals.append(z_np)
            t += 1
    return obs, acts, rews, goals


def collect_hierarchical_dataset(
    n_expert: int,
    n_noisy: int,
    low: LQRLowLevel,
    params: ArmParams,
    rng: np.random.Generator,
    *,
    horizon: int = 200,
    noise_std: float = 0.1,
    random_frac: float = 0.3,
    random_reach: float = 1.0,
    velocity_gain: float = 3.0,
) -> OfflineDataset:
    """The HR dataset: a hierarchical policy (sub-goal every ``low.k`` steps, LQR ``low`` tracks it) on the arm.

    ``n_expert`` episodes use :func:`hierarchical_expert_goal` (``velocity_gain``) with N(0, σ²) noise; in ``n_noisy`` further
    episodes each sub-goal is, with probability ``random_frac``, replaced by a random one
    (q + U(−r, r), U(−r, r)) with r = ``random_reach``. Stored: observations, torques, rewards (Minari fields) and
    ``infos["z"]`` (n, 4), the sub-goal that was in force at each step (never used by the inverse).
    """
    _check_counts(n_expert, n_noisy)
    need_type("low", low, LQRLowLevel)
    need_rng("rng", rng)
    need_int("horizon", horizon, 1)
    if horizon % low.k:
        raise ValueError(f"horizon must be a multiple of low.k={low.k}, got {horizon!r}")
    if not 0 <= random_frac <= 1:
        raise ValueError(f"random_frac must be in [0, 1], got {random_frac!r}")
    n = n_expert + n_noisy
    noisy = np.arange(n) >= n_expert

    def high(o: np.ndarray) -> np.ndarray:
        z = hierarchical_expert_goal(o, params, rng, noise_std, velocity_gain)
        rand = noisy & (rng.random(n) < random_frac)
        zr = np.concatenate(
            [
                o[:, :2] + rng.uniform(-random_reach, random_reach, (n, 2)),
                rng.uniform(-random_reach, random_reach, (n, 2)),
            ],
            -1,
        )
        return np.where(rand[:, None], zr, z)

    arm = ArmBatch(n, params, horizon)
    obs, acts, rews, goals = _hierarchical_rollout(high, low, arm, arm.reset(rng), horizon)
    ds = OfflineDataset.from_episodes(np.stack(obs, 1), np.stack(acts, 1), np.stack(rews, 1))
    ds.infos["z"] = np.stack(goals, 1).reshape(n * horizon, -1)
    return ds


def evaluate_hierarchical(
    high: Callable[[np.ndarray], np.ndarray],
    low: LQRLowLevel,
    params: ArmParams,
    n_episodes: int,
    seed: int,
    horizon: int = 200,
) -> np.ndarray:
    """Returns of the hierarchical policy: every k steps z = high(obs) and K from the LQR linearised at s_t,
    then k steps of clip(K_l (x_l − z), −1, 1) on the true arm."""
    need_callable("high", high, "obs -> sub-goal")
    need_type("low", low, LQRLowLevel)
    need_int("n_episodes", n_episodes, 1)
    need_seed("seed", seed)
    need_int("horizon", horizon, 1)
    arm = ArmBatch(n_episodes, params, horizon)
    o = arm.reset(np.random.default_rng(seed))
    _, _, rews, _ = _hierarchical_rollout(high, low, arm, o, horizon)
    ret = np.zeros(n_episodes)
    for r in rews:
        ret += r
    return ret
