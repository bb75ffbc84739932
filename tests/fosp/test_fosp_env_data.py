"""SafeNav2D contract (gymnasium env checker, Safety-Gymnasium 6-tuple, wrappers), datasets and bad input."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from iclr25.fosp import (
    GymnasiumToSafety,
    OfflineDataset,
    SafeNav2D,
    SafeNav2DVec,
    SafetyToGymnasium,
    SequenceStore,
    collect_dataset,
    hazards_for,
    lidar,
)


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped")
def test_registered_env_passes_gymnasium_checker():
    check_env(SafetyToGymnasium(SafeNav2D(layout="shifted")), skip_render_check=True)
    env = gym.make("SafeNav2D-v0", layout="shifted")
    obs, info = env.reset(seed=0)
    assert obs.shape == (22,) and env.observation_space.contains(obs)
    out = env.step(env.action_space.sample())
    assert len(out) == 5 and "cost" in out[4] and out[4]["cost"] in (0.0, 1.0)


def test_safety_convention_and_roundtrip():
    env = SafeNav2D()
    env.reset(seed=3)
    out = env.step(np.zeros(2, np.float32))
    assert len(out) == 6  # (obs, reward, cost, terminated, truncated, info)
    back = GymnasiumToSafety(SafetyToGymnasium(SafeNav2D()))
    back.reset(seed=3)
    assert len(back.step(np.zeros(2, np.float32))) == 6
    vis = SafeNav2D(obs_type="vision")
    o, _ = vis.reset(seed=0)
    assert o.shape == (16, 16, 3) and o.dtype == np.uint8 and vis.observation_space.contains(o)


def test_env_without_cost_is_refused():
    env = GymnasiumToSafety(gym.make("Pendulum-v1"))
    env.reset(seed=0)
    with pytest.raises(ValueError, match="no cost signal"):
        env.step(env.action_space.sample())


def test_vec_env_matches_single_env_and_costs_mean_hazards():
    single = SafeNav2D(layout="base")
    single.reset(seed=5)
    vec = SafeNav2DVec(1, layout="base")
    vec.rng = np.random.default_rng(5)
    vec.reset()
    vec.pos, vec.vel, vec.goal = single.vec.pos.copy(), single.vec.vel.copy(), single.vec.goal.copy()
    a = np.random.default_rng(0).uniform(-1, 1, (50, 2))
    for t in range(50):
        o1, r1, c1, *_ = single.step(a[t])
        o2, r2, c2, *_ = vec.step(a[t][None])
        assert np.allclose(o1, o2[0]) and r1 == pytest.approx(float(r2[0])) and c1 == float(c2[0])
    # cost is exactly "inside a hazard"
    v = SafeNav2DVec(2)
    v.reset(seed=0)
    v.pos = np.array([[-0.75, 0.55], [1.9, 1.9]])
    v.vel[:] = 0
    _, _, c, *_ = v.step(np.zeros((2, 2)))
    assert c.tolist() == [1.0, 0.0]
    with pytest.raises(ValueError, match="action"):
        v.step(np.full((2, 2), np.nan))


def test_lidar_and_layouts():
    hz = np.array([[1.0, 0.0]])
    out = lidar(np.zeros((1, 2)), hz)
    assert out[0, 0] == pytest.approx(1 - 1 / 3) and out[0, 1:].max() == 0
    assert len(hazards_for("shifted")) == len(hazards_for("base")) + 2
    with pytest.raises(ValueError, match="layout"):
        hazards_for("moon")


def test_collected_mixture_and_sequences():
    ds = collect_dataset(4, seed=0, max_steps=50)
    assert len(ds) == 3 * 4 * 50 and ds.obs_shape == (22,)
    ids = ds.episode_ids()
    assert ids.max() == 11
    store = SequenceStore(8, ds)
    b = store.sample(32, np.random.default_rng(0))
    assert b["observations"].shape == (32, 8, 22)
    # windows never cross an episode boundary: consecutive steps are linked by next_observations
    assert np.allclose(b["next_observations"][:, :-1], b["observations"][:, 1:])


def test_dataset_validation_and_loader(tmp_path):
    ds = collect_dataset(2, seed=1, max_steps=20)
    d = ds.to_dict()
    with pytest.raises(ValueError, match="next_observations"):
        OfflineDataset(**{**d, "next_observations": d["next_observations"][:, :5]})
    with pytest.raises(ValueError, match="costs"):
        OfflineDataset.from_dict({k: v for k, v in d.items() if k != "costs"})
    with pytest.raises(ValueError, match="costs must be >= 0"):
        OfflineDataset(**{**d, "costs": -np.ones_like(d["costs"])})
    bad = d["rewards"].copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="rewards must be finite"):
        OfflineDataset(**{**d, "rewards": bad})
    d4rl = {
        **{k: v for k, v in d.items() if k not in ("terminations", "truncations")},
        "terminals": d["terminations"],
        "timeouts": d["truncations"],
    }
    assert len(OfflineDataset.from_dict(d4rl)) == len(ds)
    p = ds.save(tmp_path / "d.npz")
    back = OfflineDataset.load(p)
    assert np.array_equal(back.observations, ds.observations)
    with pytest.raises(ValueError, match="concatenate"):
        ds.concat(
            OfflineDataset(
                **{
                    **d,
                    "observations": d["observations"][:, :3],
                    "next_observations": d["next_observations"][:, :3],
                }
            )
        )


@pytest.mark.skipif(
    __import__("importlib").util.find_spec("safety_gymnasium") is None,
    reason="safety-gymnasium not installed",
)
def test_safety_gymnasium_optional():  # pragma: no cover - optional extra
    from iclr25.fosp import make_safety_gymnasium

    env = make_safety_gymnasium("SafetyPointGoal1-v0")
    env.reset(seed=0)
    assert len(env.step(env.action_space.sample())) == 6
