"""Math of FOSP's value learning: expectile sign convention, λ-returns, REF targets and DP agreement,
augmented Lagrangian, REF-weighted policy weights, PEX selection."""

import math

import numpy as np
import pytest
import torch

from iclr25.fosp import (
    AugmentedLagrangian,
    awr_weights,
    expectile_loss,
    lambda_return,
    pex_probs,
    pex_select,
    reachability_dp,
    ref_targets,
)


def test_expectile_half_is_half_squared_error():
    q, v = torch.randn(100), torch.randn(100)
    assert torch.allclose(expectile_loss(q, v, 0.5), 0.5 * (q - v) ** 2)


@pytest.mark.parametrize("tau,target", [(0.8, 0.549), (0.2, -0.549)])
def test_expectile_converges_to_the_tau_expectile(tau, target):
    """u = Q − V convention: τ = 0.8 gives the upper expectile of N(0, 1) (≈ +0.549)."""
    g = torch.Generator().manual_seed(0)
    q = torch.randn(100_000, generator=g)
    v = torch.zeros((), requires_grad=True)
    opt = torch.optim.Adam([v], lr=0.05)
    for _ in range(400):
        opt.zero_grad()
        expectile_loss(q, v, tau).mean().backward()
        opt.step()
    assert abs(float(v.detach()) - target) < 0.01
    # and the exact expectile of the sample (solve the first-order condition) agrees
    lo, hi = -2.0, 2.0
    for _ in range(60):
        m = (lo + hi) / 2
        u = q - m
        grad = (torch.where(u < 0, 1 - tau, tau) * u).mean()
        lo, hi = (m, hi) if grad > 0 else (lo, m)
    assert abs(float(v.detach()) - m) < 0.005


def test_expectile_rejects_bad_tau():
    with pytest.raises(ValueError, match="tau"):
        expectile_loss(torch.zeros(1), torch.zeros(1), 1.0)


def _naive_lambda_return(r, v, c, gamma, lam):
    H = r.shape[0]
    g = np.zeros_like(r)
    nxt = v[H]
    for t in range(H - 1, -1, -1):
        nxt = r[t] + gamma * c[t] * ((1 - lam) * v[t + 1] + lam * nxt)
        g[t] = nxt
    return g


def test_lambda_return_recursion_and_limits():
    rng = np.random.default_rng(0)
    H, N = 7, 5
    r, v, c = rng.normal(size=(H, N)), rng.normal(size=(H + 1, N)), rng.uniform(size=(H, N))
    T = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    got = lambda_return(T(r), T(v), T(c), 0.97, 0.9).numpy()
    assert np.allclose(got, _naive_lambda_return(r, v, c, 0.97, 0.9), atol=1e-6)
    ones = np.ones((H, N))
    g1 = lambda_return(T(r), T(v), T(ones), 0.97, 1.0).numpy()
    disc = sum(0.97**t * r[t] for t in range(H)) + 0.97**H * v[H]
    assert np.allclose(g1[0], disc, atol=1e-6)
    g0 = lambda_return(T(r), T(v), T(ones), 0.97, 0.0).numpy()
    assert np.allclose(g0, r + 0.97 * v[1:], atol=1e-6)
    with pytest.raises(ValueError, match="values"):
        lambda_return(T(r), T(v[:-1]), T(c), 0.97, 0.9)


def test_ref_targets_example_and_bounds():
    h = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0])
    assert torch.allclose(ref_targets(h, 0.99, 0.0), torch.tensor([0.9801, 0.99, 1.0, 0.0, 0.0]))
    g = torch.Generator().manual_seed(1)
    hh = (torch.rand(20, 64, generator=g) < 0.1).float()
    out = ref_targets(hh, 0.95, torch.rand(64, generator=g))
    assert out.min() >= 0 and out.max() <= 1
    # a violation anywhere ahead at distance k gives at least μ^k
    assert torch.all(out[hh > 0] == 1)


def test_ref_learned_on_a_chain_matches_dp():
    """1-D chain (7 cells, right w.p. 0.7, reflecting ends), cell 5 unsafe: a tabular φ regressed on sampled
    REF targets (4-step windows, bootstrapped with its own estimate) converges to the exact DP reachability."""
    n, p, mu = 7, 0.7, 0.9
    P = torch.zeros(n, n, dtype=torch.float64)
    for s in range(n):
        P[s, min(s + 1, n - 1)] += p
        P[s, max(s - 1, 0)] += 1 - p
    unsafe = torch.zeros(n, dtype=torch.float64)
    unsafe[5] = 1.0
    exact = reachability_dp(unsafe, P, mu)
    rng = np.random.default_rng(0)
    phi = torch.zeros(n, dtype=torch.float64)
    for _ in range(3000):
        s0 = rng.integers(0, n, 256)
        traj = [s0]
        for _ in range(4):
            s = traj[-1]
            traj.append(
                np.where(rng.uniform(size=s.shape) < p, np.minimum(s + 1, n - 1), np.maximum(s - 1, 0))
            )
        states = torch.as_tensor(np.stack(traj))  # (5, 256)
        h = unsafe[states[1:]]
        tgt = ref_targets(h, mu, phi[states[-1]])[0]
        phi = phi + 0.05 * (
            torch.bincount(states[0], tgt, n) - torch.bincount(states[0], phi[states[0]], n)
        ) / (torch.bincount(states[0], minlength=n).clamp_min(1))
    assert torch.max(torch.abs(phi - exact)) < 0.05
    assert exact[4] > exact[0]  # closer to the unsafe cell → more likely to reach it


def test_augmented_lagrangian_cases():
    al = AugmentedLagrangian(0.0, 1.0, growth=1e-5)
    assert float(al.step(torch.tensor(2.0))) == pytest.approx(2.0)
    assert float(al.multiplier) == pytest.approx(2.0)
    al = AugmentedLagrangian(1.0, 1.0, growth=1e-5)
    assert float(al.step(torch.tensor(-3.0))) == pytest.approx(-0.5)
    assert float(al.multiplier) == 0.0
    al = AugmentedLagrangian(1e-6, 0.5, growth=0.3)
    cs = []
    for g in np.random.default_rng(0).normal(size=50):
        al.step(torch.tensor(float(g)))
        cs.append(float(al.penalty))
    assert all(b >= a for a, b in zip(cs, cs[1:])) and max(cs) <= 1.0 and cs[-1] == 1.0
    g = torch.tensor(1.5, requires_grad=True)
    AugmentedLagrangian(0.5, 0.2).psi(g).backward()
    assert float(g.grad) == pytest.approx(0.5 + 0.2 * 1.5)  # dψ/dg = λ + c·g
    with pytest.raises(ValueError, match="penalty_init"):
        AugmentedLagrangian(0.0, 0.0)


def test_policy_weights_cases():
    ar, ac = torch.tensor([0.3, 0.3, 0.3]), torch.tensor([0.5, 0.5, 0.5])
    one, zero = torch.ones(3), torch.zeros(3)
    w = awr_weights(ar, ac, one, torch.tensor([-0.1, 0.0, 0.2]), cost_limit=0.0)
    assert torch.allclose(w[:2], torch.exp(ar[:2])) and float(w[2]) == 0.0
    assert torch.allclose(awr_weights(ar, ac, zero, zero), torch.exp(-ac))
    big = awr_weights(
        torch.tensor([50.0]), torch.tensor([0.0]), torch.tensor([1.0]), torch.tensor([0.0]), w_max=100
    )
    assert float(big) == 100.0 and math.isfinite(float(big))
    mix = awr_weights(ar, ac, torch.full((3,), 0.25), zero)
    assert torch.allclose(mix, 0.75 * torch.exp(-ac) + 0.25 * torch.exp(ar))


def test_pex_selection():
    q = torch.tensor([10.0], dtype=torch.float64)
    p_off = pex_probs(q, torch.zeros(1, dtype=torch.float64), 5.0)
    assert float(1 - p_off) < 1e-20 or float(torch.sigmoid(torch.tensor(-50.0, dtype=torch.float64))) < 1e-20
    assert (
        float(pex_probs(torch.zeros(1, dtype=torch.float64), q, 5.0)) < 1e-20
    )  # P(off) when π_on is far better
    g = torch.Generator().manual_seed(0)
    sel = pex_select(torch.zeros(10_000), torch.zeros(10_000), 5.0, g)
    assert abs(float(sel.float().mean()) - 0.5) < 0.02
    assert pex_select(torch.tensor([1.0, -1.0]), torch.zeros(2), 5.0, greedy=True).tolist() == [True, False]
