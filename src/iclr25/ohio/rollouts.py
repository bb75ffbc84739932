"""Data collection and deployment on the arm: flat policies, and the hierarchical policy (high level every k
steps, LQR low level in between), all episodes of a batch stepped together."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from .arm import ArmBatch, ArmParams, flat_expert_action
from .lqr import LQRLowLevel
from .relabel import OfflineDataset


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
    arm = ArmBatch(n_episodes, params, horizon)
    o = arm.reset(np.random.default_rng(seed))
    ret = np.zeros(n_episodes)
    for _ in range(horizon):
        o, r, _ = arm.step(policy(o))
        ret += r
    return ret


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
    arm = ArmBatch(n_episodes, params, horizon)
    o = arm.reset(np.random.default_rng(seed))
    ret = np.zeros(n_episodes)
    t = 0
    while t < horizon:
        z = torch.as_tensor(high(o), dtype=torch.float64)
        K = low.gains(low.state(o))
        for ell in range(min(low.k, horizon - t)):
            a = low.control(low.state(o), z, K[:, ell]).numpy()
            o, r, _ = arm.step(a)
            ret += r
            t += 1
    return ret
