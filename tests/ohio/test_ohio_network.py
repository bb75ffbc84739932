"""LP low level: forward LP, exact inverse round trip, gymnasium API."""

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from iclr25.ohio import (
    LPLowLevel,
    NetworkParams,
    RebalancingEnv,
    flows_to_distribution,
    largest_remainder_counts,
    nearest_surplus_flows,
    solve_rebalancing_lp,
)


def test_lp_inverse_round_trip_is_exact():
    g = np.random.default_rng(0)
    cost = NetworkParams().cost()
    low = LPLowLevel(cost)
    for _ in range(10):
        acc = g.integers(0, 15, 6).astype(float)
        u = g.dirichlet(np.ones(6) * 0.7)
        x = low.flows(acc, u)
        assert np.all(x >= -1e-9) and np.allclose(x, np.round(x))  # integral vertex solution
        assert np.all(x.sum(1) <= acc + 1e-9)
        achieved = acc - x.sum(1) + x.sum(0)
        d = largest_remainder_counts(u, int(acc.sum()))
        np.testing.assert_allclose(achieved, d)  # Σd = Σacc, so the ≥ constraints bind
        u_hat = flows_to_distribution(acc, x)
        assert abs(u_hat.sum() - 1) < 1e-12 and np.all(u_hat > 0)
        # rounded desired counts of û equal the LP's achieved distribution exactly
        np.testing.assert_allclose(
            largest_remainder_counts(np.where(u_hat <= 1.0001e-3, 0, u_hat), int(acc.sum())), achieved
        )
        u_w, resid = low.invert(np.stack([acc, achieved])[None], x.reshape(1, 1, -1))
        assert resid[0] == 0.0
        np.testing.assert_allclose(u_w[0], u_hat)


def test_lp_is_min_cost():
    acc = np.array([10.0, 10, 10, 0, 0, 0])
    d = np.array([0.0, 0, 0, 10, 10, 10])
    p = NetworkParams()
    x = solve_rebalancing_lp(acc, d, p.cost())
    assert (p.cost() * x).sum() == pytest.approx(30 * p.cheap)  # every vehicle takes its cheap corridor
    x2 = solve_rebalancing_lp(acc, d, p.swapped_cost())
    assert (p.swapped_cost() * x2).sum() == pytest.approx(30 * p.cheap)  # the LP re-routes after the swap
    greedy = nearest_surplus_flows(acc, d / d.sum(), p.cost())
    np.testing.assert_allclose(greedy, x)


def test_largest_remainder_and_errors():
    assert largest_remainder_counts(np.array([1 / 3, 1 / 3, 1 / 3]), 10).sum() == 10
    with pytest.raises(ValueError, match="desired"):
        solve_rebalancing_lp(np.ones(6), np.full(6, 2.0), NetworkParams().cost())
    with pytest.raises(ValueError, match="method"):
        LPLowLevel(NetworkParams().cost()).invert(
            np.zeros((1, 2, 6)), np.zeros((1, 1, 36)), method="numerical"
        )


def test_env_follows_gymnasium_api_and_conserves_fleet():
    env = RebalancingEnv()
    check_env(env, skip_render_check=True)
    o, _ = env.reset(seed=0)
    for _ in range(5):
        o, r, term, trunc, info = env.step(np.full(36, 3.0))
        assert o.sum() == NetworkParams().fleet
        assert r == pytest.approx(info["revenue"] - info["rebalancing_cost"])
