"""LQR gains, the analytic and numerical inverses, and the arm dynamics."""

import numpy as np
import pytest
import scipy.linalg
import torch

from iclr25.ohio import ArmModel, ArmParams, LinearModel, LQRLowLevel, arm_step, finite_horizon_lqr, linearize

D = torch.float64


def _random_system(seed: int, n: int = 4, m: int = 2):
    g = np.random.default_rng(seed)
    A = g.normal(size=(n, n))
    A = 0.95 * A / np.abs(np.linalg.eigvals(A)).max()  # stable
    B = g.normal(size=(n, m))
    return torch.tensor(A, dtype=D), torch.tensor(B, dtype=D)


def test_riccati_long_horizon_matches_scipy_dare():
    A, B = _random_system(0)
    Q, R = torch.diag(torch.tensor([10.0, 10.0, 1.0, 1.0], dtype=D)), 0.1 * torch.eye(2, dtype=D)
    K = finite_horizon_lqr(A, B, Q, R, N=500)[0]
    P = scipy.linalg.solve_discrete_are(A.numpy(), B.numpy(), Q.numpy(), R.numpy())
    K_ref = -np.linalg.solve(R.numpy() + B.numpy().T @ P @ B.numpy(), B.numpy().T @ P @ A.numpy())
    np.testing.assert_allclose(K.numpy(), K_ref, atol=1e-6)


def test_riccati_short_horizon_matches_brute_force_qp():
    A, B = _random_system(1)
    Q, R, N = torch.diag(torch.tensor([10.0, 10.0, 1.0, 1.0], dtype=D)), 0.1 * torch.eye(2, dtype=D), 5
    K = finite_horizon_lqr(A, B, Q, R, N)
    A_, B_, Q_, R_ = (t.numpy() for t in (A, B, Q, R))
    x0 = np.random.default_rng(2).normal(size=4)
    # x_l = Φ_l x0 + Σ Γ a: minimise Σ_{l=1..N} x_lᵀQx_l + Σ a_lᵀRa_l as one least-squares problem
    n, m = 4, 2
    Phi = [np.linalg.matrix_power(A_, l) for l in range(N + 1)]
    rows_x, rhs = [], []
    sQ, sR = np.linalg.cholesky(Q_).T, np.linalg.cholesky(R_).T
    for l in range(1, N + 1):
        G = np.zeros((n, N * m))
        for j in range(l):
            G[:, j * m : (j + 1) * m] = Phi[l - 1 - j] @ B_
        rows_x.append(sQ @ G)
        rhs.append(-sQ @ Phi[l] @ x0)
    rows_u = np.kron(np.eye(N), sR)
    Amat = np.vstack(rows_x + [rows_u])
    b = np.concatenate(rhs + [np.zeros(N * m)])
    a_opt = np.linalg.lstsq(Amat, b, rcond=None)[0]
    np.testing.assert_allclose(K[0].numpy() @ x0, a_opt[:m], atol=1e-9)


def _planted(low: LQRLowLevel, s: torch.Tensor, z: torch.Tensor, model) -> np.ndarray:
    K = low.gains(s)
    xs, _ = low.rollout(s, z, K, model=model)
    obs = xs.numpy()[:, :, [0, 1, 1, 0, 2, 3]]  # embed x in a 6-d observation at STATE_IDX = (0, 1, 4, 5)
    return obs


def test_analytic_inverse_exact_without_clipping():
    A, B = _random_system(3)
    lin = LinearModel(A, B)
    low = LQRLowLevel(lin, max_ctrl=1e9)
    g = torch.Generator().manual_seed(0)
    s, z = torch.randn(64, 4, generator=g, dtype=D), torch.randn(64, 4, generator=g, dtype=D)
    obs = _planted(low, s, z, lin)
    z_hat, resid = low.invert(obs, None, method="analytic")
    np.testing.assert_allclose(z_hat, z.numpy(), atol=1e-8)
    assert resid.max() < 1e-20


def test_numerical_equals_analytic_when_clipping_inactive():
    A, B = _random_system(4)
    lin = LinearModel(A, B)
    low = LQRLowLevel(lin, max_ctrl=1e9)
    g = torch.Generator().manual_seed(1)
    s, z = 0.1 * torch.randn(32, 4, generator=g, dtype=D), 0.1 * torch.randn(32, 4, generator=g, dtype=D)
    obs = _planted(low, s, z, lin)
    z_a, _ = low.invert(obs, None, method="analytic")
    xs = low.state(obs)
    K = low.gains(xs[:, 0])
    z_n = low.invert_numerical(
        xs[:, 0], xs[:, -1], K, xs=None, solver="lm", prior=0.0, iters=200
    ).numpy()  # from x_k
    np.testing.assert_allclose(z_n, z_a, atol=1e-3)
    endpoint = low.resimulate(xs[:, 0], torch.as_tensor(z_n), xs[:, -1], K)
    assert endpoint.max() < 1e-8


def test_numerical_beats_analytic_when_clipping_active_on_the_arm():
    p = ArmParams()
    low = LQRLowLevel(ArmModel(p))
    g = torch.Generator().manual_seed(2)
    s = torch.cat([torch.rand(48, 2, generator=g, dtype=D) * 4 - 2, torch.zeros(48, 2, dtype=D)], 1)
    z = s + torch.cat(
        [torch.rand(48, 2, generator=g, dtype=D) * 2 - 1, torch.rand(48, 2, generator=g, dtype=D) * 8 - 4], 1
    )
    K = low.gains(s)
    _, acts = low.rollout(s, z, K)
    assert (acts.abs() >= 1.0 - 1e-12).any(), "the planted goals must saturate the controls"
    obs = _planted(low, s, z, low.model)
    _, r_a = low.invert(obs, None, method="analytic")
    z_n, r_n = low.invert(obs, None, method="numerical", solver="lm", prior=1e-6)
    # judged by re-simulated outcomes: the numerical goals reproduce the planted endpoints
    assert np.median(r_n) < 1e-8 and r_n.max() < 1e-4
    sat = r_a > 1e-6
    assert sat.any() and np.all(r_n[sat] < r_a[sat])


def test_official_adam_budget_converges_less_than_lm():
    p = ArmParams()
    low = LQRLowLevel(ArmModel(p))
    s = torch.tensor([[0.3, 1.0, 0.0, 0.0]], dtype=D)
    z = torch.tensor([[0.6, 0.8, 0.0, 0.0]], dtype=D)
    xs = low.state(_planted(low, s, z, low.model))
    K = low.gains(xs[:, 0])
    z_adam = low.invert_numerical(xs[:, 0], xs[:, -1], K, solver="adam", iters=40, lr=0.01, prior=0.0)
    z_lm = low.invert_numerical(xs[:, 0], xs[:, -1], K, xs=xs, solver="lm", prior=0.0)
    r_adam = low.resimulate(xs[:, 0], z_adam, xs[:, -1], K)
    r_lm = low.resimulate(xs[:, 0], z_lm, xs[:, -1], K)
    assert r_lm.item() < 1e-12 and r_adam.item() > r_lm.item()


def test_default_numerical_inverse_is_the_official_adam_loop_without_ridge_prior():
    """Regression (issue #16): the default must be a documented behaviour, not the undocumented λ = 1e-4 ridge."""
    import inspect

    from iclr25.ohio.config import PRESETS
    from iclr25.ohio.lite import numerical_kw

    sig = inspect.signature(LQRLowLevel.invert_numerical).parameters
    assert sig["solver"].default == "adam" and sig["prior"].default == 0.0 and sig["lr"].default == 0.01
    for preset in ("quick", "full"):
        kw = numerical_kw(PRESETS[preset])
        assert kw == {"solver": "adam", "prior": 0.0, "iters": 1000, "lr": 0.01}


def _adam_reference(low, s, x_k, K, iters, lr, stop_tol):
    """One window at a time with torch.optim.Adam and the official stopping rule (loss moved < stop_tol on two
    consecutive 10-iteration checks)."""
    out = []
    for i in range(len(s)):
        z = x_k[i : i + 1].clone().requires_grad_(True)
        opt = torch.optim.Adam([z], lr=lr)
        last, streak = float("inf"), 0
        for it in range(1, iters + 1):
            loss = ((low._endpoint(s[i : i + 1], z, K[i : i + 1]) - x_k[i : i + 1]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            if stop_tol > 0 and it % 10 == 0:
                streak = streak + 1 if abs(loss.item() - last) < stop_tol else 0
                last = loss.item()
                if streak >= 2:
                    break
        out.append(z.detach()[0])
    return torch.stack(out)


@pytest.mark.parametrize("stop_tol", [0.0, 1e-6])
def test_batched_adam_equals_torch_adam_per_window(stop_tol):
    p = ArmParams()
    low = LQRLowLevel(ArmModel(p))
    g = torch.Generator().manual_seed(7)
    s = torch.cat([torch.rand(5, 2, generator=g, dtype=D) * 2 - 1, torch.zeros(5, 2, dtype=D)], 1)
    z = s + 0.3 * torch.randn(5, 4, generator=g, dtype=D)
    z[0] = s[0]  # this window is already solved at x_k = s: it stops early under the official rule
    xs = low.state(_planted(low, s, z, low.model))
    K = low.gains(xs[:, 0])
    got = low.invert_numerical(xs[:, 0], xs[:, -1], K, iters=40, stop_tol=stop_tol)  # default: adam, λ = 0
    ref = _adam_reference(low, xs[:, 0], xs[:, -1], K, 40, 0.01, stop_tol)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-12)
    moved = (got - xs[:, -1]).abs().amax(-1)
    assert moved[1:].min() > 1e-4  # the others really moved away from x_k


def test_numerical_inverse_rejects_bad_settings():
    low = LQRLowLevel(ArmModel())
    x = torch.zeros(1, 4, dtype=D)
    K = low.gains(x)
    for kw, name in (
        ({"prior": float("nan")}, "prior"),
        ({"prior": -1.0}, "prior"),
        ({"solver": "sgd"}, "solver"),
        ({"iters": 0}, "iters"),
        ({"lr": float("nan")}, "lr"),
    ):
        with pytest.raises(ValueError, match=name):
            low.invert_numerical(x, x, K, **kw)


def test_arm_numpy_and_torch_agree_and_fd_linearisation_matches_autograd():
    p = ArmParams()
    g = np.random.default_rng(5)
    x, a = g.normal(size=(16, 4)), g.uniform(-1, 1, size=(16, 2))
    np.testing.assert_allclose(
        arm_step(x, a, p), ArmModel(p).step(torch.tensor(x), torch.tensor(a)).numpy(), atol=1e-14
    )
    xt = torch.tensor(x)
    A, B, d = linearize(ArmModel(p), xt)
    J = torch.func.vmap(torch.func.jacrev(lambda xx: ArmModel(p).step(xx, torch.zeros(2, dtype=D))))(xt)
    np.testing.assert_allclose(A.numpy(), J.numpy(), atol=1e-7)
    np.testing.assert_allclose(
        (A @ xt[..., None])[..., 0] + d, ArmModel(p).step(xt, torch.zeros(16, 2, dtype=D)), atol=1e-12
    )


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="k must"):
        LQRLowLevel(ArmModel(), k=0)
    with pytest.raises(ValueError, match="method must"):
        LQRLowLevel(ArmModel()).invert(np.zeros((2, 6, 6)), None, method="magic")
    with pytest.raises(ValueError, match="obs_windows"):
        LQRLowLevel(ArmModel()).invert(np.zeros((2, 5, 6)), None)
    with pytest.raises(ValueError, match="m1"):
        ArmParams(m1=-1.0)
