"""Safety-Gymnasium's velocity tasks rebuilt on gymnasium's MuJoCo locomotion (issue #53).

Safety-Gymnasium does not import on Python 3.11 (a dataclass error in its assets), but its velocity tasks are plain
gymnasium MuJoCo locomotion plus a cost: ``SafetyHalfCheetahVelocity-v1`` is HalfCheetah with

    x_velocity = (x_after − x_before) / dt,      c_t = 1[x_velocity > 3.2096 m/s]

(``safety_gymnasium/tasks/safe_velocity/safety_half_cheetah_velocity_v1.py``: threshold 3.2096; the signed forward
velocity of the root's x position over one env step, as in ``..._v0.py``'s ``step``). :class:`VelocityCost` adds that
cost, computed from the simulator state (``data.qpos[0]`` before and after the step), to any gymnasium MuJoCo env
as ``info["cost"]`` (the Safety-Gymnasium gymnasium convention, which :class:`~iclr25.fosp.env.VectorCostEnv`
reads). The underlying env is gymnasium's ``HalfCheetah-v5`` (Safety-Gymnasium builds on ``-v4``; v5 has the same
model, reward and observation by default), loaded through :func:`iclr25.assets.make_env`.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

# Safety-Gymnasium id -> (the gymnasium MuJoCo env it wraps, its velocity threshold in m/s)
VELOCITY_TASKS = {"SafetyHalfCheetahVelocity-v1": ("HalfCheetah-v5", 3.2096)}


class VelocityCost(gym.Wrapper):
    """``info["cost"] = 1[x_velocity > threshold]`` with x_velocity = Δ qpos[0] / dt over the step (state-based).

    ``info["x_velocity"]`` is set to the same number. ``threshold`` (m/s, finite, > 0) defaults to the task's.
    """

    def __init__(self, env: gym.Env, threshold: float):
        if not isinstance(env, gym.Env):
            raise ValueError(f"env must be a gymnasium Env, got {type(env).__name__}")
        data = getattr(env.unwrapped, "data", None)
        if data is None or not hasattr(data, "qpos") or not hasattr(env.unwrapped, "dt"):
            raise ValueError(
                f"env must be a gymnasium MuJoCo env (unwrapped.data.qpos and unwrapped.dt), got "
                f"{type(env.unwrapped).__name__}"
            )
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not np.isfinite(threshold)
        ):
            raise ValueError(f"threshold must be a finite velocity in m/s, got {threshold!r}")
        if threshold <= 0:
            raise ValueError(f"threshold must be > 0 m/s, got {threshold!r}")
        super().__init__(env)
        self.threshold = float(threshold)

    def step(self, action: Any):
        u = self.env.unwrapped
        x_before = float(u.data.qpos[0])
        obs, r, term, trunc, info = self.env.step(action)
        v = (float(u.data.qpos[0]) - x_before) / float(u.dt)
        return obs, r, term, trunc, {**info, "x_velocity": v, "cost": float(v > self.threshold)}


def make_velocity_env(env_id: str = "SafetyHalfCheetahVelocity-v1", **kwargs: Any) -> VelocityCost:
    """The Safety-Gymnasium velocity task ``env_id`` as gymnasium MuJoCo + :class:`VelocityCost` (``kwargs`` go to
    ``gymnasium.make``)."""
    if env_id not in VELOCITY_TASKS:
        raise ValueError(f"env_id must be one of {sorted(VELOCITY_TASKS)}, got {env_id!r}")
    from iclr25.assets import make_env

    base, threshold = VELOCITY_TASKS[env_id]
    return VelocityCost(make_env(base, **kwargs), threshold)
