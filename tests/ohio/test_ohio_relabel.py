"""Relabelled dataset invariants and the arm environment."""

import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from iclr25.ohio import (
    ArmModel,
    ArmParams,
    LQRLowLevel,
    OfflineDataset,
    TwoLinkArmEnv,
    collect_flat_dataset,
    collect_hierarchical_dataset,
    relabel,
    windows,
)


class _StubLow:
    """Inverse that returns û = first observation of the window and residual = its first coordinate."""

    k = 3

    def invert(self, obs_windows, act_windows, method="analytic"):
        return obs_windows[:, 0, :2] * 10, obs_windows[:, 0, 0]


def _ragged_dataset():
    g = np.random.default_rng(0)
    lengths = [10, 7, 3, 2, 9]  # episodes of different lengths, some not multiples of k
    n = sum(lengths)
    obs = g.uniform(0, 1, (n, 3))
    nxt = g.uniform(0, 1, (n, 3))
    term = np.zeros(n, bool)
    trunc = np.zeros(n, bool)
    ends = np.cumsum(lengths) - 1
    term[ends[1]] = True
    trunc[np.delete(ends, 1)] = True
    return OfflineDataset(obs, g.normal(size=(n, 2)), g.normal(size=n), nxt, term, trunc), lengths


def test_relabel_invariants():
    ds, lengths = _ragged_dataset()
    low = _StubLow()
    idx = windows(ds, 3)
    assert len(idx) == sum(L // 3 for L in lengths)  # ≤ ⌊T/k⌋ windows per episode (here exactly)
    ep = ds.episode_ids()
    assert np.all(ep[idx[:, 0]] == ep[idx[:, -1]])  # windows never cross episodes
    full = relabel(ds, low, threshold=None)
    np.testing.assert_allclose(full.rewards, ds.rewards[idx].sum(1))  # R_t = Σ_{j<k} r_{t+j}
    np.testing.assert_allclose(full.next_observations, ds.next_observations[idx[:, -1]])  # s' = s_{t+k}
    np.testing.assert_allclose(full.observations, ds.observations[idx[:, 0]])
    thr = 0.5
    kept = relabel(ds, low, threshold=thr)
    np.testing.assert_array_equal(kept.infos["start_index"], idx[full.infos["residual"] <= thr, 0])
    assert np.all(kept.infos["residual"] <= thr) and len(kept) < len(full)
    # the terminating episode's last whole window ends at its termination row? only if it is whole
    assert full.terminations.sum() == int(lengths[1] % 3 == 0)


def test_relabel_arm_numerical_keeps_most_and_is_deterministic():
    p = ArmParams()
    ds = collect_flat_dataset(3, 1, p, np.random.default_rng(0), horizon=40)
    assert len(ds) == 160 and ds.truncations.sum() == 4
    low = LQRLowLevel(ArmModel(p))
    a = relabel(
        ds, low, "numerical", iters=300
    )  # the official Adam loop (λ = 0), shorter budget for test time
    b = relabel(ds, low, "numerical", iters=300)
    np.testing.assert_array_equal(a.actions, b.actions)
    assert len(a) >= 0.9 * 32 and np.median(a.infos["residual"]) < 1e-4  # a finite Adam budget: not exact
    # re-simulation on the true arm of the recovered goals reproduces the observed s_{t+k}
    xs0 = low.state(a.observations)
    K = low.gains(xs0)
    x_hat, _ = low.rollout(xs0, torch.as_tensor(a.actions), K, model=ArmModel(p))
    err = (x_hat[:, -1] - low.state(a.next_observations)).pow(2).mean(-1)
    assert float(err.max()) <= 0.2 and float(err.median()) < 1e-4


def test_arm_env_api_and_same_seed_same_numbers():
    env = TwoLinkArmEnv()
    check_env(env, skip_render_check=True)
    outs = []
    for _ in range(2):
        o, info = env.reset(seed=3)
        rs = [env.step(np.array([0.5, -0.5]))[1] for _ in range(10)]
        outs.append((o, rs))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    assert outs[0][1] == outs[1][1]


def test_hierarchical_dataset_goals_are_recovered_by_the_exact_inverse():
    """HR data (paper, Table 1): sub-goals held for whole k-step windows aligned with relabel's windows; where no
    control saturated, the analytic inverse recovers the behaviour's sub-goal exactly, while Observed-State's
    label x_{t+k} is not the sub-goal."""
    p = ArmParams()
    low = LQRLowLevel(ArmModel(p))
    ds = collect_hierarchical_dataset(4, 2, low, p, np.random.default_rng(0), horizon=40)
    assert len(ds) == 240 and ds.infos["z"].shape == (240, 4)
    idx = windows(ds, low.k)
    z_true = ds.infos["z"][idx]  # (n, k, 4): one sub-goal per window
    np.testing.assert_array_equal(z_true, np.repeat(z_true[:, :1], low.k, 1))
    unsat = np.abs(ds.actions[idx]).max((1, 2)) < 1.0 - 1e-9
    assert unsat.sum() >= 5
    hd = relabel(ds, low, "analytic", threshold=None)
    np.testing.assert_allclose(hd.actions[unsat], z_true[unsat, 0], atol=1e-6)
    obs = relabel(ds, low, "observed_state", threshold=None)
    assert np.median(np.abs(obs.actions - z_true[:, 0]).max(1)) > 0.1
    with pytest.raises(ValueError, match="horizon"):
        collect_hierarchical_dataset(1, 0, low, p, np.random.default_rng(0), horizon=42)
