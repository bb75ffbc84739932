"""gymnasium contract: registered env, validated actions, the generic collector / hierarchical evaluator on
Pendulum-v1 with a callable state map, and NaN windows masked (not fatal) in a relabel batch."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import iclr25.ohio  # noqa: F401  (registers iclr25/TwoLinkArm-v0)
from iclr25.ohio import (
    ArmModel,
    LQRLowLevel,
    PendulumModel,
    TwoLinkArmEnv,
    collect_offline_dataset,
    evaluate_hierarchical_env,
    pendulum_state,
    relabel,
    windows,
)


def test_registered_env_and_action_validation():
    env = gym.make("iclr25/TwoLinkArm-v0")
    assert isinstance(env.unwrapped, TwoLinkArmEnv)
    o1, _ = env.reset(seed=3)
    o2, _ = TwoLinkArmEnv().reset(seed=3)
    assert np.array_equal(o1, o2)
    obs, r, term, trunc, info = env.step(np.array([0.5, -0.5]))
    assert obs.shape == (6,) and np.isfinite(r)
    raw = TwoLinkArmEnv()
    raw.reset(seed=0)
    for bad, match in (
        ([0.1], "shape"),
        (np.zeros(3), "shape"),
        ([np.nan, 0.0], "finite"),
        ([0.0, np.inf], "finite"),
    ):
        with pytest.raises(ValueError, match=match):
            raw.step(np.asarray(bad, dtype=float))


def test_rebalancing_env_registered_and_validates_actions():
    env = gym.make("iclr25/Rebalancing-v0")
    obs, _ = env.reset(seed=0)
    n = obs.shape[0]
    _, r, *_ = env.step(np.zeros(n * n))
    assert np.isfinite(r)
    raw = env.unwrapped
    with pytest.raises(ValueError, match="shape"):
        raw.step(np.zeros(n))
    bad = np.zeros(n * n)
    bad[3] = np.nan
    with pytest.raises(ValueError, match="finite"):
        raw.step(bad)


def _pendulum_low():
    return LQRLowLevel(
        PendulumModel(), Q=(10.0, 1.0), R=0.1, k=5, max_ctrl=2.0, state_map=pendulum_state, periodic_dims=[0]
    )


def test_pendulum_collector_evaluator_and_relabel_recover_the_high_level():
    low = _pendulum_low()
    rng = np.random.default_rng(0)
    rets, ds, z = evaluate_hierarchical_env(
        "Pendulum-v1",
        lambda obs: np.array([rng.uniform(-0.5, 0.5), 0.0]),
        low,
        2,
        seed=0,
        return_dataset=True,
    )
    assert len(ds) == 400 and ds.truncations.sum() == 2 and rets.shape == (2,)
    assert np.allclose(rets, [ds.rewards[:200].sum(), ds.rewards[200:].sum()])
    hd = relabel(ds, low, method="analytic", threshold=None)
    assert len(hd) == 80 and hd.meta["n_nonfinite"] == 0
    # re-simulating the recovered goals reproduces the logged windows (angles unwrapped across ±π)
    assert np.median(hd.infos["residual"]) < 1e-4
    # where no control saturated, the goal is identifiable and the analytic inverse finds the true z
    act = ds.actions[windows(ds, low.k)][..., 0]
    free = np.abs(act).max(1) < 1.99
    assert free.sum() >= 5
    err = hd.actions[free] - z[hd.infos["start_index"][free]]
    err[:, 0] = (err[:, 0] + np.pi) % (2 * np.pi) - np.pi
    # (the linear analytic inverse does not model the angle wrap of the control: a window whose error crosses
    # ±π can miss, hence 'most')
    assert np.mean(np.abs(err).max(1) < 1e-5) >= 0.9
    # the flat collector: random actions, seeded, episodes end at the env's truncation
    flat = collect_offline_dataset("Pendulum-v1", None, 2, seed=0)
    again = collect_offline_dataset(gym.make("Pendulum-v1"), None, 2, seed=0)
    assert len(flat) == 400 and flat.truncations.sum() == 2
    assert np.array_equal(flat.actions, again.actions) and np.array_equal(
        flat.observations, again.observations
    )
    short = collect_offline_dataset("Pendulum-v1", lambda o: np.array([0.0]), 3, seed=1, max_steps=20)
    assert len(short) == 60 and short.truncations.sum() == 3
    with pytest.raises(ValueError, match="action_dim"):
        evaluate_hierarchical_env("iclr25/TwoLinkArm-v0", lambda o: np.zeros(2), low, 1)


def test_state_map_callable_must_have_the_model_shape():
    low = LQRLowLevel(PendulumModel(), Q=(10.0, 1.0), R=0.1, state_map=lambda o: o)
    with pytest.raises(ValueError, match="state_map"):
        low.state(np.zeros((4, 3)))
    with pytest.raises(ValueError, match="periodic_dims"):
        LQRLowLevel(PendulumModel(), Q=(10.0, 1.0), R=0.1, periodic_dims=[2])


def test_one_nan_window_is_masked_and_counted_not_fatal():
    low = LQRLowLevel(ArmModel(), k=5)
    env = gym.make("iclr25/TwoLinkArm-v0", horizon=20)
    ds = collect_offline_dataset(env, lambda o: np.array([0.3, -0.2]), 2, seed=0)
    clean = relabel(ds, low, method="analytic", threshold=None)
    ds.observations = ds.observations.copy()
    ds.observations[7, 0] = np.nan  # inside the second window of episode 0
    with pytest.warns(RuntimeWarning, match="1 of 8 windows were masked"):
        hd = relabel(ds, low, method="analytic", threshold=None)
    assert hd.meta == {"n_windows": 8, "n_nonfinite": 1, "n_over_threshold": 0}
    assert len(hd) == 7 and 5 not in hd.infos["start_index"].tolist()
    keep = clean.infos["start_index"] != 5
    assert np.allclose(hd.actions, clean.actions[keep])  # the other windows are exactly as without the NaN
    ds.observations[:] = np.nan
    with pytest.raises(ValueError, match="every one"):
        relabel(ds, low, method="analytic")
