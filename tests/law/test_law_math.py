"""Closed form, constraint, upper bound, best-iterate switch (paper §5 / official update_upd_matrix)."""

import math

import pytest
import torch

from iclr25.law import (
    c_ratio,
    check_covariance,
    constrained_ascent,
    memit_closed_form,
    objective_upper_bound,
    wash_objective,
)


def _spd(d, n, seed):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(d, n, generator=g, dtype=torch.float64)
    return X @ X.t() / n


def _data(d=6, dk=10, n=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    R = torch.randn(d, n, generator=g, dtype=torch.float64)
    K = torch.randn(dk, n, generator=g, dtype=torch.float64)
    return R, K, _spd(dk, 3 * dk, seed + 1)


@pytest.mark.parametrize("lam", [0.1, 3.0, 1e4])
def test_closed_form_zeroes_gradient(lam):
    R, K, C = _data()
    D = memit_closed_form(R, K, C, lam)
    grad = 2 * lam * D @ C + 2 * (D @ K - R) @ K.t()  # d/dΔ [λ tr(ΔCΔᵀ) + ‖ΔK − R‖²]
    scale = (2 * lam * (D @ C).norm() + 2 * (R @ K.t()).norm()).item()
    assert grad.norm().item() <= 1e-8 * scale


def test_closed_form_small_lambda_interpolates():
    R, K, C = _data(n=5)
    D = memit_closed_form(R, K, C, 1e-12)
    assert torch.allclose(D @ K, R, atol=1e-6)


def test_closed_form_matches_naive_inverse():
    R, K, C = _data()
    D = memit_closed_form(R, K, C, 2.0)
    naive = R @ K.t() @ torch.linalg.inv(2.0 * C + K @ K.t())
    assert torch.allclose(D, naive, atol=1e-10)


def test_closed_form_bad_inputs():
    R, K, C = _data()
    with pytest.raises(ValueError, match="lam"):
        memit_closed_form(R, K, C, float("nan"))
    with pytest.raises(ValueError, match="lam"):
        memit_closed_form(R, K, C, -1.0)
    Cn = C.clone()
    Cn[0, 0] = float("nan")
    with pytest.raises(ValueError, match="cov"):
        memit_closed_form(R, K, Cn, 1.0)
    with pytest.raises(ValueError, match="shapes"):
        memit_closed_form(R, K[:-1], C, 1.0)
    # singular λC + KKᵀ (λ = 0, fewer facts than key dims): regularised with a warning naming lam
    with pytest.warns(UserWarning, match="lam=0"):
        D = memit_closed_form(R, K, C, 0.0)
    assert torch.isfinite(D).all()


def test_check_covariance():
    C = _spd(5, 20, 0)
    with pytest.raises(ValueError, match="positive semi-definite"):
        check_covariance(C - 2 * torch.linalg.eigvalsh(C)[-1] * torch.eye(5))
    with pytest.raises(ValueError, match="NaN"):
        check_covariance(torch.full((3, 3), float("nan")))
    with pytest.raises(ValueError, match="symmetric"):
        check_covariance(torch.triu(torch.ones(3, 3)))
    with pytest.warns(UserWarning, match="singular"):
        check_covariance(_spd(5, 2, 0))


def test_constraint_holds_after_every_step_and_bound():
    _, K, C = _data(d=5, dk=8, n=3, seed=3)
    g = torch.Generator().manual_seed(0)
    D0 = 0.1 * torch.randn(5, 8, generator=g, dtype=torch.float64)
    beta = 1.1 * c_ratio(D0, C)
    res = constrained_ascent(D0, K, C, beta, steps=400, lr=0.05)
    assert res.hit_boundary_at is not None
    assert max(res.ratios) <= beta * (1 + 1e-9)
    assert res.ratio <= beta * (1 + 1e-9)
    ub = objective_upper_bound(K, C, beta)
    assert res.objective <= ub * (1 + 1e-9) + 1e-9
    assert res.objective >= res.init_objective
    # learning signal: the ascent moves the washed keys' outputs well beyond the initialisation (Adam with
    # rescaling is not an exact projected method, so it need not reach the bound)
    assert res.objective >= 2 * res.init_objective


def test_upper_bound_is_attained_by_generalised_eigenvector():
    _, K, C = _data(d=4, dk=6, n=3, seed=5)
    beta = 0.3
    ev, U = torch.linalg.eigh(C)
    Cih = (U / ev.sqrt()) @ U.t()
    w, V = torch.linalg.eigh(Cih @ K @ K.t() @ Cih)
    v = Cih @ V[:, -1]  # generalised eigenvector of (KKᵀ, C)
    u = torch.zeros(4, dtype=torch.float64)
    u[0] = 1
    D = torch.outer(u, v)
    D = D * math.sqrt(beta / c_ratio(D, C))
    assert math.isclose(wash_objective(D, K), objective_upper_bound(K, C, beta), rel_tol=1e-9)


def test_best_iterate_includes_start_point():
    _, K, C = _data(seed=7)
    D0 = memit_closed_form(*_data(seed=7)[:2], C, 1.0)
    res = constrained_ascent(D0, K, C, c_ratio(D0, C) * 1.1, steps=0, lr=1e-3)
    assert torch.equal(res.delta, D0)
    res = constrained_ascent(D0, K, C, c_ratio(D0, C) * 1.1, steps=5, lr=0.0)
    assert torch.equal(res.delta, D0) and res.objective == res.init_objective


def _released_ascent(D0, K, C, beta, steps, lr, lr_after_boundary=None):
    """Transcription of the released ``update_upd_matrix`` loop (l2 loss, all keys, no projection / alpha), in its
    own orientation U = Δᵀ (d_k, d). Returns (what it returns, the final live parameter), both as Δ (d, d_k)."""
    U = D0.t().double().clone()
    U.requires_grad = True
    opt = torch.optim.Adam([U], lr=lr)
    best, best_loss, lr_updated = None, 0, False
    for _ in range(steps):
        opt.zero_grad()
        loss = -torch.sum((U.T @ K) ** 2)  # measured before the step
        loss.backward()
        opt.step()  # in place: an alias taken earlier sees this step
        ratio = torch.trace(U.T @ C @ U) / torch.trace(C)
        if ratio > beta:
            U.data = (U / torch.sqrt(ratio / beta)).detach()  # new storage: an earlier alias stops following
            if lr_after_boundary is not None and not lr_updated:
                for g in opt.param_groups:
                    g["lr"] = lr_after_boundary
                lr_updated = True
        if -loss.item() > best_loss:
            best_loss = -loss.item()
            best = U.detach()  # an alias of the live parameter, not a copy
    out = best if best is not None else U
    return out.detach().clone().t(), U.detach().clone().t()


def _tiny(seed, d=3, dk=5, n=2):
    g = torch.Generator().manual_seed(seed)
    K = torch.randn(dk, n, generator=g, dtype=torch.float64)
    D0 = 0.3 * torch.randn(d, dk, generator=g, dtype=torch.float64)
    return D0, K, _spd(dk, 3 * dk, seed + 1)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(("lr", "lr_after"), [(0.05, None), (0.5, None), (0.2, 0.02)])
def test_official_best_iterate_matches_released_loop_with_rescales(seed, lr, lr_after):
    """β = 1.1 × the start's ratio (as ``wash``): the ascent rescales, and "official" returns exactly the released
    loop's tensor (alias semantics included), whichever of its cases applies."""
    D0, K, C = _tiny(seed)
    beta = 1.1 * c_ratio(D0, C)
    ref, final = _released_ascent(D0, K, C, beta, 40, lr, lr_after)
    off = constrained_ascent(
        D0, K, C, beta, steps=40, lr=lr, lr_after_boundary=lr_after, best_iterate="official"
    )
    assert off.hit_boundary_at is not None  # the rescale really happens
    torch.testing.assert_close(off.delta, ref, rtol=0, atol=1e-12)
    assert math.isclose(off.ratio, c_ratio(ref, C), rel_tol=1e-10)
    pap = constrained_ascent(D0, K, C, beta, steps=40, lr=lr, lr_after_boundary=lr_after)
    assert pap.ratio <= beta * (1 + 1e-12)  # the paper's best iterate is always feasible
    assert pap.objective == max([pap.init_objective] + pap.objectives)
    if not torch.equal(ref, final):  # the alias was cut by a rescale: the released Δ is a pre-rescale iterate
        assert off.ratio > beta


def test_official_best_iterate_can_leave_the_constraint():
    """The case the switch exists for: the released loop returns a post-step, pre-rescale Δ (ratio > β), which is
    neither the final iterate nor the paper's best one."""
    D0, K, C = _tiny(0)
    beta = 1.1 * c_ratio(D0, C)
    ref, final = _released_ascent(D0, K, C, beta, 40, 0.2)
    off = constrained_ascent(D0, K, C, beta, steps=40, lr=0.2, best_iterate="official")
    pap = constrained_ascent(D0, K, C, beta, steps=40, lr=0.2, best_iterate="paper")
    torch.testing.assert_close(off.delta, ref, rtol=0, atol=1e-12)
    assert off.ratio > 1.5 * beta
    assert not torch.allclose(off.delta, final) and not torch.allclose(off.delta, pap.delta)


def test_official_best_iterate_alias_reproduced():
    """Without a rescale (huge β) the alias is never cut: "official" returns the live (last) iterate, even when an
    earlier iterate had a larger objective; the paper mode returns the best one."""
    _, K, C = _data(d=3, dk=5, n=2, seed=11)
    D0 = torch.ones(3, 5, dtype=torch.float64)
    beta = 1e12  # an lr that overshoots and oscillates, never reaching the boundary
    off = constrained_ascent(D0, K, C, beta, steps=30, lr=0.5, best_iterate="official")
    pap = constrained_ascent(D0, K, C, beta, steps=30, lr=0.5, best_iterate="paper")
    ref, final = _released_ascent(D0, K, C, beta, 30, 0.5)
    assert off.hit_boundary_at is None and torch.equal(ref, final)
    torch.testing.assert_close(off.delta, ref, rtol=0, atol=1e-12)
    assert pap.objective == max([pap.init_objective] + pap.objectives)


def test_official_best_iterate_zero_objective_and_no_steps():
    """No pre-step objective > 0 (zero start: zero gradient) → the released fallback, the live parameter; 0 steps →
    the start."""
    _, K, C = _data(d=3, dk=5, n=2, seed=3)
    Z = torch.zeros(3, 5, dtype=torch.float64)
    off = constrained_ascent(Z, K, C, 0.1, steps=5, lr=0.1, best_iterate="official")
    ref, _ = _released_ascent(Z, K, C, 0.1, 5, 0.1)
    assert torch.equal(off.delta, ref) and torch.equal(off.delta, Z)
    D0 = torch.ones(3, 5, dtype=torch.float64)
    off = constrained_ascent(D0, K, C, 1e3, steps=0, best_iterate="official")
    assert torch.equal(off.delta, D0)


def test_ascent_bad_inputs():
    _, K, C = _data()
    D0 = torch.zeros(6, 10, dtype=torch.float64)
    with pytest.raises(ValueError, match="beta"):
        constrained_ascent(D0, K, C, float("nan"))
    with pytest.raises(ValueError, match="best_iterate"):
        constrained_ascent(D0, K, C, 1.0, best_iterate="x")
    with pytest.raises(ValueError, match="lr"):
        constrained_ascent(D0, K, C, 1.0, lr=float("nan"))
