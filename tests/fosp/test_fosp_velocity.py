"""The Safety-Gymnasium velocity task rebuilt on gymnasium's MuJoCo HalfCheetah-v5: the cost is 1 exactly when the
real forward velocity (Δ qpos[0] / dt of the simulator) exceeds Safety-Gymnasium's 3.2096 m/s; bad inputs refused."""

from __future__ import annotations

import numpy as np
import pytest

from iclr25.fosp.env import VectorCostEnv
from iclr25.fosp.velocity import VELOCITY_TASKS, VelocityCost, make_velocity_env


@pytest.fixture(autouse=True)
def mujoco_asset(need_asset):
    need_asset("mujoco")


def test_threshold_is_safety_gymnasiums():
    assert VELOCITY_TASKS["SafetyHalfCheetahVelocity-v1"] == ("HalfCheetah-v5", 3.2096)
    assert make_velocity_env().threshold == 3.2096


def test_cost_follows_the_real_x_velocity():
    env = make_velocity_env()
    u = env.unwrapped
    env.reset(seed=0)
    # drive the root forward at set speeds around the threshold: the cost switches exactly at 3.2096 m/s
    for speed, want in ((2.0, 0.0), (3.0, 0.0), (3.5, 1.0), (6.0, 1.0), (-5.0, 0.0)):
        qpos, qvel = u.data.qpos.copy(), u.data.qvel.copy()
        qvel[:] = 0.0
        qvel[0] = speed
        u.set_state(qpos, qvel)
        x0 = float(u.data.qpos[0])
        _, _, _, _, info = env.step(np.zeros(6))
        v = (float(u.data.qpos[0]) - x0) / u.dt
        assert info["x_velocity"] == pytest.approx(v)
        assert info["cost"] == want == float(v > 3.2096)
        # gymnasium's own forward velocity (reward_forward = x_velocity at weight 1) is the same number
        assert info["reward_forward"] == pytest.approx(v)
    # random actions from rest: the cheetah stays slow, so every cost is 0 and matches the rule
    env.reset(seed=1)
    env.action_space.seed(1)
    costs = [env.step(env.action_space.sample())[4] for _ in range(50)]
    assert all(i["cost"] == float(i["x_velocity"] > 3.2096) for i in costs)


def test_fosp_vector_interface_reads_the_cost():
    vec = VectorCostEnv(make_velocity_env())
    obs = vec.reset(seed=0)
    assert obs.shape == (1, 17)
    _, r, c, term, trunc, _ = vec.step(np.zeros((1, 6)))
    assert c.shape == (1,) and c[0] in (0.0, 1.0) and not term[0]


def test_bad_inputs():
    with pytest.raises(ValueError, match="env_id"):
        make_velocity_env("SafetyPointGoal1-v0")
    with pytest.raises(ValueError, match="threshold"):
        VelocityCost(make_velocity_env().env, float("nan"))
    with pytest.raises(ValueError, match="threshold"):
        VelocityCost(make_velocity_env().env, -1.0)
    import gymnasium as gym

    with pytest.raises(ValueError, match="MuJoCo"):
        VelocityCost(gym.make("Pendulum-v1"), 3.0)
    with pytest.raises(ValueError, match="gymnasium Env"):
        VelocityCost("HalfCheetah-v5", 3.0)


def test_full_preset_names_the_velocity_task_and_needs_no_safety_gymnasium():
    from iclr25.fosp.experiment import PRESETS, require_env, required_keys

    full = PRESETS["full"]
    assert full.env_id == "SafetyHalfCheetahVelocity-v1" and full.env_id in VELOCITY_TASKS
    assert full.velocity and full.settings == ("task",) and full.max_steps == 1000
    require_env(full)  # runs: the rebuilt task needs no Safety-Gymnasium (issue #53)
    keys = required_keys(full)
    assert keys and not any("shifted" in k or "fosp_noref" in k for k in keys)
