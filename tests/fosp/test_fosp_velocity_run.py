"""The full preset's pipeline on the velocity task (issue #53) at miniature size: the scripted behaviour data (shapes,
the velocity cost rule on the recorded x-velocity, fast = costly, slow = safe), a whole run with finite per-seed
numbers and the claims that apply there (``ref_helps_shift`` is SafeNav2D-only and said so), the preset printed."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from iclr25.fosp.velocity import (
    CHEETAH_GAIT,
    VELOCITY_TASKS,
    collect_velocity_dataset,
    gait_actions,
    make_velocity_vec,
)

THRESHOLD = VELOCITY_TASKS["SafetyHalfCheetahVelocity-v1"][1]


@pytest.fixture(autouse=True)
def mujoco_asset(need_asset):
    need_asset("mujoco")


@pytest.fixture(scope="module")
def collected():
    # 2 episodes of 150 steps per behaviour, 2 envs stepped together
    return collect_velocity_dataset(
        episodes_per_policy=2, seed=0, max_steps=150, batch_envs=2, with_info=True
    )


def test_dataset_shapes_and_the_velocity_cost_rule(collected):
    data, info = collected
    n = 3 * 2 * 150
    assert len(data) == n and data.obs_shape == (17,) and data.act_dim == 6
    assert data.next_observations.shape == (n, 17) and np.abs(data.actions).max() <= 1.0
    # every episode is 150 contiguous steps ending in a truncation (HalfCheetah never terminates)
    assert data.truncations.sum() == 6 and not data.terminations.any()
    assert np.flatnonzero(data.truncations).tolist() == [150 * k - 1 for k in range(1, 7)]
    assert np.array_equal(
        data.next_observations[:-1][~data.truncations[:-1]], data.observations[1:][~data.truncations[:-1]]
    )
    # costs: Safety-Gymnasium's rule recomputed from the recorded x-velocity
    assert np.array_equal(data.costs, (info["x_velocity"] > THRESHOLD).astype(np.float32))
    # the recorded x-velocity is the simulator's: HalfCheetah-v5's reward = x_velocity − 0.1·|a|²
    ctrl = 0.1 * (data.actions.astype(np.float64) ** 2).sum(1)
    np.testing.assert_allclose(data.rewards, info["x_velocity"] - ctrl, atol=1e-4)
    assert info["policy"].tolist() == ["fast"] * 300 + ["slow"] * 300 + ["random"] * 300


def test_fast_behaviour_is_costly_and_slow_is_safe(collected):
    data, info = collected
    cost = {p: data.costs[info["policy"] == p].mean() for p in ("fast", "slow", "random")}
    speed = {p: info["x_velocity"][info["policy"] == p].mean() for p in ("fast", "slow", "random")}
    assert cost["fast"] > 0.05  # the gait runs over 3.2096 m/s on a real share of its steps
    assert cost["slow"] < cost["fast"] and cost["random"] < cost["fast"]
    assert speed["fast"] > speed["slow"] > 0.3 > speed["random"]  # the safe gait still moves forward


def test_gait_is_vectorised_and_deterministic_per_generator():
    t = np.array([0, 5, 9])
    a = gait_actions(t, CHEETAH_GAIT, 0.05, 1.0, 0.0, np.random.default_rng(0))
    for i, ti in enumerate(t):  # one batched call = the per-env formula
        want = CHEETAH_GAIT["offset"] + CHEETAH_GAIT["amp"] * np.sin(
            2 * np.pi * CHEETAH_GAIT["freq"] * ti * 0.05 + CHEETAH_GAIT["phase"]
        )
        np.testing.assert_allclose(a[i], np.clip(want, -1, 1))
    d1 = collect_velocity_dataset(episodes_per_policy=1, seed=3, max_steps=20, policies=("fast", "random"))
    d2 = collect_velocity_dataset(episodes_per_policy=1, seed=3, max_steps=20, policies=("fast", "random"))
    assert all(np.array_equal(getattr(d1, f), getattr(d2, f)) for f in ("observations", "actions", "costs"))


def test_bad_inputs_name_the_parameter():
    with pytest.raises(ValueError, match="policies"):
        collect_velocity_dataset(episodes_per_policy=1, max_steps=5, policies=("fast", "greedy"))
    with pytest.raises(ValueError, match="env_id"):
        collect_velocity_dataset("SafetyPointGoal1-v0")
    with pytest.raises(ValueError, match="episodes_per_policy"):
        collect_velocity_dataset(episodes_per_policy=0)
    with pytest.raises(ValueError, match="noise"):
        collect_velocity_dataset(noise=float("nan"))
    with pytest.raises(ValueError, match="num_envs"):
        make_velocity_vec(num_envs=0)


def _tiny_full():
    from iclr25.fosp.experiment import PRESETS

    full = PRESETS["full"]
    agent = dataclasses.replace(full.agent, hidden=16, deter=16, latent=8, batch=2, seq_len=4, horizon=3)
    return dataclasses.replace(
        full,
        seeds=1,
        episodes_per_policy=2,
        max_steps=60,
        wm_updates=4,
        offline_updates=3,
        online_env_steps=16,
        online_envs=2,
        updates_per_step=1,
        eval_episodes=2,
        device="cpu",
        agent=agent,
    )


def test_full_preset_pipeline_runs_on_the_velocity_task_at_miniature_size(tmp_path):
    from iclr25.common.claims import validate_claims_document
    from iclr25.common.results import values
    from iclr25.fosp.config import SAFENAV_ONLY_CLAIMS
    from iclr25.fosp.experiment import required_keys, run
    from iclr25.harness.artefacts import write_run

    cfg = _tiny_full()
    res = run(cfg, tmp_path)
    d = res.per_seed[0]
    for k in required_keys(cfg):  # every key the claims read: a finite number
        assert all(math.isfinite(x) for x in values(res.per_seed, k)), k
    for arm in ("fosp", "safedreamer", "dreamerv3", "fosp_noref", "official"):
        assert set(d[arm]) >= {"task"} and "shifted" not in d[arm] and "base" not in d[arm]
        assert 0 <= d[arm]["task"]["cost"] <= cfg.max_steps
    assert 0 <= d["pex"]["pex_off_frac"] <= 1
    assert d["data"]["episodes"] == 6 and d["data"]["fast"]["cost"] > d["data"]["slow"]["cost"]
    # the claims that apply on the velocity task; the SafeNav2D-only one is said to be left out
    assert [c.id for c in res.claims] == ["offline_safe", "online_safe_expansion", "no_collapse"]
    assert all("SafetyHalfCheetahVelocity-v1" in c.statement for c in res.claims)
    assert set(SAFENAV_ONLY_CLAIMS) == {"ref_helps_shift"}
    assert "`ref_helps_shift` is SafeNav2D-only and not computed here" in res.report_md
    assert "| fast |" in res.report_md and "| official |" in res.report_md
    res.slug, res.preset = "fosp", "full"
    write_run(res, cfg, tmp_path)
    validate_claims_document(json.loads((tmp_path / "claims.json").read_text()))
    assert (tmp_path / "figures" / "fosp_arms.png").exists()


def test_config_cli_shows_the_full_preset(capsys):
    from iclr25.harness.cli import main

    assert main(["config", "fosp", "--preset", "full"]) == 0
    out = capsys.readouterr().out
    doc = json.loads(out[out.index("{") :])
    assert doc["config"]["env_id"] == "SafetyHalfCheetahVelocity-v1"
    assert doc["config"]["max_steps"] == 1000 and doc["config"]["agent"]["deter"] == 512
