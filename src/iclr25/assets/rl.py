"""MuJoCo environments through ``gymnasium.make``, headless.

MuJoCo renders through OpenGL only when asked; ``MUJOCO_GL=disable`` (set here unless the user chose a backend)
keeps a machine without a display from loading one. The physics needs nothing else.
"""

from __future__ import annotations

import os
from typing import Any

from .store import path

MUJOCO_ENVS = ("Reacher-v5", "HalfCheetah-v5", "Hopper-v5", "Ant-v5", "Walker2d-v5")


def make_env(env_id: str, **kwargs: Any) -> Any:
    """``gymnasium.make(env_id, **kwargs)`` for a MuJoCo env, after checking the pinned MuJoCo is installed."""
    os.environ.setdefault("MUJOCO_GL", "disable")
    path("mujoco")  # the pinned version, or one line saying what to install
    import gymnasium as gym

    try:
        spec = gym.spec(env_id)
    except gym.error.Error as e:
        raise ValueError(
            f"env_id {env_id!r} is not a registered gymnasium env ({e}); MuJoCo envs: {MUJOCO_ENVS}"
        ) from None
    return gym.make(spec, **kwargs)
