"""LQR low level (the paper's reacher instantiation, temporal abstraction k = 5) with its forward map and its inverses.

Low level, every k = 5 steps with gains from the finite-horizon LQR linearised at the current s_t:

    ctrl_l = clip(K_l (x_l − z), −1, 1),   l = 0 … k−1,      z ∈ R⁴ the high-level reference state

Gains (backward Riccati, terminal P_N = Q; sign convention a = K x):

    K_l = −(R + Bᵀ P_{l+1} B)⁻¹ Bᵀ P_{l+1} A,     P_l = Q + Aᵀ P_{l+1} (A + B K_l)

Inverses of one high-level step (s_t, a_{t:t+k}, s_{t:t+k+1}) ↦ ẑ:

- **analytic** (pseudo-inverse, ignores clipping): with local models x_{l+1} = A_l x_l + B_l a_l + d_l,
  F_l = A_l + B_l K_l, G_l = B_l K_l the unclipped rollout is x_{l+1} = c_l − M_l z with
  M_l = F_l M_{l−1} + G_l, c_l = F_l c_{l−1} + d_l (M_{−1} = 0, c_{−1} = s); ẑ = pinv(M_{k−1}) (c_{k−1} − x_k).
- **numerical**: ẑ = argmin_z ‖x̂_k(z) − x_k‖²/n + λ ‖z − z₀‖² through the *clipped* closed-loop rollout of
  the model P̃, z₀ = x_k. Default ``solver="adam"`` with λ = 0: the official loop (Adam, lr 0.01, at most
  1000 iterations from z₀ = x_k, a window stops once its loss moved < 1e-6 on two consecutive 10-iteration
  checks), batched over all windows with a per-window active set. Its finite budget from x_k is an implicit
  prior towards x_k. ``solver="lm"``: batched Levenberg–Marquardt (Jacobians by central differences),
  started from the analytic solution and from z₀, keeping the better; it converges, so at λ = 0 it solves the
  paper's unregularised objective exactly. λ > 0 is an optional ridge prior (a Gaussian log p(u) centred on
  x_k), not a setting of the paper.
- **observed_state**: ẑ = x_k (the paper's Observed-State baseline).

The residual of every method is its re-simulation error: endpoint MSE of the clipped rollout of ẑ under P̃.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from ..common.checks import need_int, need_real
from .arm import STATE_IDX
from .dynamics import DynamicsModel, linearize

INVERSE_METHODS = ("analytic", "numerical", "observed_state")


def finite_horizon_lqr(
    A: torch.Tensor,
    B: torch.Tensor,
    Q: torch.Tensor,
    R: torch.Tensor,
    N: int,
    P_N: torch.Tensor | None = None,
) -> torch.Tensor:
    """Gains K_0 … K_{N−1} (…, N, m, n) of the finite-horizon LQR x' = A x + B a, cost Σ xᵀQx + aᵀRa + x_NᵀP_N x_N.

    Optimal control a_l = K_l x_l. ``A`` (…, n, n) and ``B`` (…, n, m) may carry a batch dimension.
    """
    need_int("N", N, 1)
    for name, t in (("A", A), ("B", B), ("Q", Q), ("R", R)) + ((("P_N", P_N),) if P_N is not None else ()):
        if not isinstance(t, torch.Tensor) or t.ndim < 2:
            raise ValueError(f"{name} must be a torch tensor (..., rows, cols), got {type(t).__name__}")
    n, m = A.shape[-1], B.shape[-1]
    if A.shape[-2] != n or B.shape[-2] != n:
        raise ValueError(
            f"A must be (..., n, n) and B (..., n, m), got A {tuple(A.shape)}, B {tuple(B.shape)}"
        )
    if Q.shape[-2:] != (n, n) or (P_N is not None and P_N.shape[-2:] != (n, n)):
        raise ValueError(f"Q and P_N must be ({n}, {n}), got Q {tuple(Q.shape)}")
    if R.shape[-2:] != (m, m):
        raise ValueError(f"R must be ({m}, {m}), got {tuple(R.shape)}")
    P = (Q if P_N is None else P_N).expand(*A.shape[:-2], *Q.shape).clone()
    At, Bt = A.transpose(-1, -2), B.transpose(-1, -2)
    gains = []
    for _ in range(N):
        BtP = Bt @ P
        K = -torch.linalg.solve(R + BtP @ B, BtP @ A)  # K_l = −(R + BᵀPB)⁻¹ BᵀPA
        P = Q + At @ P @ (A + B @ K)  # P_l = Q + Aᵀ P (A + B K_l)
        P = 0.5 * (P + P.transpose(-1, -2))
        gains.append(K)
    return torch.stack(gains[::-1], dim=-3)


class LQRLowLevel:
    """The LQR tracking low level π_l(s, z) and its inverses.

    Args:
        model: dynamics the LQR is designed with (its gains K_l come from ``linearize(model, s_t)``).
        inverse_model: the approximate dynamics P̃ used by the inverse (default: ``model``).
        Q, R: LQR weights (paper: diag(10, 10, 1, 1) and 0.1·I).
        k: temporal abstraction = LQR horizon N (paper: 5).
        max_ctrl: control clipping bound (±1).
        state_idx: observation indices of the LQR state x.
        state_map: instead of ``state_idx``, a callable observations (..., obs_dim) → states (..., state_dim)
            (numpy in, numpy out), e.g. angles from (cos θ, sin θ) observations.
        periodic_dims: state dimensions that are angles (period 2π): the tracking error x − z is wrapped to
            [−π, π) and every inverted window is unwrapped along time, so a window crossing ±π is not read as a
            2π jump. Empty (the arm's default) leaves everything as before.
    """

    def __init__(
        self,
        model: DynamicsModel,
        inverse_model: DynamicsModel | None = None,
        Q: Sequence[float] = (10.0, 10.0, 1.0, 1.0),
        R: Sequence[float] | float = 0.1,
        k: int = 5,
        max_ctrl: float = 1.0,
        state_idx: Sequence[int] = STATE_IDX,
        state_map: Callable[[np.ndarray], np.ndarray] | None = None,
        periodic_dims: Sequence[int] = (),
    ):
        if state_map is not None and not callable(state_map):
            raise ValueError(f"state_map must be a callable obs -> state, got {type(state_map).__name__}")
        need_int("k", k, 1)
        need_real("max_ctrl", max_ctrl, 0.0, lo_open=True)
        if not (
            isinstance(getattr(model, "state_dim", None), int) and callable(getattr(model, "step", None))
        ):
            raise ValueError(
                f"model must be a dynamics model (state_dim, action_dim, step), got {model!r:.80}"
            )
        for name, v in (("Q", Q), ("R", R)):
            arr = np.asarray(v, dtype=float)
            if not (np.isfinite(arr).all() and (arr >= 0).all()):
                raise ValueError(f"{name} must hold finite weights >= 0, got {v!r}")
        if not np.all(np.asarray(R, dtype=float) > 0):
            raise ValueError(f"R must be > 0 (positive definite control cost), got {R!r}")
        if any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) or i < 0 for i in state_idx):
            raise ValueError(f"state_idx must list non-negative observation indices, got {list(state_idx)!r}")
        self.model, self.inverse_model = model, inverse_model if inverse_model is not None else model
        n, m = model.state_dim, model.action_dim
        self.Q = torch.diag(torch.as_tensor(Q, dtype=torch.float64))
        Rv = torch.as_tensor(R, dtype=torch.float64)
        self.R = Rv * torch.eye(m, dtype=torch.float64) if Rv.ndim == 0 else torch.diag(Rv)
        if self.Q.shape != (n, n) or self.R.shape != (m, m):
            raise ValueError(f"Q must have {n} entries and R {m} (or be a scalar), got Q {Q!r}, R {R!r}")
        self.k, self.max_ctrl, self.state_idx = k, float(max_ctrl), list(state_idx)
        self.state_map = state_map
        self.periodic_dims = [int(i) for i in periodic_dims]
        if any(not 0 <= i < n for i in self.periodic_dims):
            raise ValueError(
                f"periodic_dims must be state dimensions in [0, {n}), got {list(periodic_dims)!r}"
            )

    # ---------------------------------------------------------------- forward map
    def state(self, obs: np.ndarray | torch.Tensor) -> torch.Tensor:
        """The LQR state x of observations (..., obs_dim): ``state_map(obs)`` or ``obs[..., state_idx]``."""
        if self.state_map is None:
            o = np.asarray(obs)
            if o.ndim == 0 or o.shape[-1] <= max(self.state_idx):
                raise ValueError(
                    f"obs must have > {max(self.state_idx)} entries on its last axis (state_idx), got {o.shape}"
                )
            return torch.as_tensor(o[..., self.state_idx], dtype=torch.float64)
        x = np.asarray(self.state_map(np.asarray(obs, dtype=float)), dtype=float)
        if x.shape != (*np.shape(obs)[:-1], self.model.state_dim):
            raise ValueError(
                f"state_map must map observations {np.shape(obs)} to states (..., {self.model.state_dim}), "
                f"got {x.shape}"
            )
        return torch.as_tensor(x, dtype=torch.float64)

    def gains(self, x: torch.Tensor) -> torch.Tensor:
        """K_0 … K_{k−1} (n, k, m, state_dim) from the LQR linearised at x (n, state_dim)."""
        A, B, _ = linearize(self.model, torch.as_tensor(x, dtype=torch.float64))
        return finite_horizon_lqr(A, B, self.Q, self.R, self.k)

    def control(self, x: torch.Tensor, z: torch.Tensor, K_l: torch.Tensor, clip: bool = True) -> torch.Tensor:
        """ctrl = clip(K_l (x − z), −max_ctrl, max_ctrl)."""
        e = x - z
        if self.periodic_dims:  # angles: the shortest way round
            pd = self.periodic_dims
            e = e.clone()
            e[..., pd] = torch.remainder(e[..., pd] + torch.pi, 2 * torch.pi) - torch.pi
        a = (K_l @ e[..., None])[..., 0]
        return a.clamp(-self.max_ctrl, self.max_ctrl) if clip else a

    def rollout(
        self,
        s: torch.Tensor,
        z: torch.Tensor,
        K: torch.Tensor,
        model: DynamicsModel | None = None,
        clip: bool = True,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Closed-loop k-step rollout under ``model``: states (n, k+1, d) with x_0 = s, controls (n, k, m)."""
        model = self.inverse_model if model is None else model
        xs, acts, x = [s], [], s
        for ell in range(self.k):
            a = self.control(x, z, K[:, ell], clip)
            x = model.step(x, a)
            xs.append(x)
            acts.append(a)
        return torch.stack(xs, 1), torch.stack(acts, 1)

    def resimulate(
        self, s: torch.Tensor, z: torch.Tensor, x_k: torch.Tensor, K: torch.Tensor
    ) -> torch.Tensor:
        """Re-simulation check of recovered goals: endpoint MSE ‖x̂_k(z) − x_k‖²/d (clipped, under P̃)."""
        with torch.no_grad():
            xs, _ = self.rollout(s, z, K)
        return ((xs[:, -1] - x_k) ** 2).mean(-1)

    # ---------------------------------------------------------------- inverses
    def invert(
        self, obs_windows: np.ndarray, act_windows: np.ndarray | None = None, method: str = "numerical", **kw
    ) -> tuple[np.ndarray, np.ndarray]:
        """Recover ẑ for each window of k+1 observations (n, k+1, obs_dim); returns (ẑ (n, 4), residual (n,)).

        ``act_windows`` is accepted for the common low-level interface (the state-matching inverse of the
        paper's reacher does not use it).
        """
        if method not in INVERSE_METHODS:
            raise ValueError(f"method must be one of {INVERSE_METHODS}, got {method!r}")
        obs_windows = np.asarray(obs_windows, dtype=float)
        if obs_windows.ndim != 3 or obs_windows.shape[1] != self.k + 1:
            raise ValueError(f"obs_windows must be (n, k+1={self.k + 1}, obs_dim), got {obs_windows.shape}")
        if not np.isfinite(obs_windows).all():
            raise ValueError("obs_windows must be finite, got NaN/inf entries (relabel masks such windows)")
        xs = self.state(obs_windows)  # (n, k+1, d)
        if self.periodic_dims:  # continuous angles inside each window
            xs = xs.clone()
            xs[..., self.periodic_dims] = torch.as_tensor(
                np.unwrap(xs[..., self.periodic_dims].numpy(), axis=1)
            )
        s, x_k = xs[:, 0], xs[:, -1]
        K = self.gains(s)
        if method == "observed_state":
            z = x_k.clone()
        elif method == "analytic":
            z = self.invert_analytic(xs, K)
        else:
            z = self.invert_numerical(s, x_k, K, xs=xs, **kw)
        return z.numpy(), self.resimulate(s, z, x_k, K).numpy()

    def unrolled_map(self, xs: torch.Tensor, K: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(M_{k−1}, c_{k−1}) of the unclipped rollout x_k = c − M z, with local models at the observed x_l."""
        n, _, d = xs.shape
        M = torch.zeros(n, d, d, dtype=torch.float64)
        c = xs[:, 0]
        for ell in range(self.k):
            A, B, dd = linearize(self.inverse_model, xs[:, ell])
            G = B @ K[:, ell]  # G_l = B_l K_l
            F = A + G  # F_l = A_l + B_l K_l
            M = F @ M + G  # M_l = F_l M_{l−1} + G_l
            c = (F @ c[..., None])[..., 0] + dd  # c_l = F_l c_{l−1} + d_l
        return M, c

    def invert_analytic(self, xs: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
        """ẑ = pinv(M_{k−1}) (c_{k−1} − x_k)  (exact when no control saturates and the model is exact)."""
        M, c = self.unrolled_map(xs, K)
        return (torch.linalg.pinv(M) @ (c - xs[:, -1])[..., None])[..., 0]

    def invert_numerical(
        self,
        s: torch.Tensor,
        x_k: torch.Tensor,
        K: torch.Tensor,
        *,
        xs: torch.Tensor | None = None,
        solver: str = "adam",
        prior: float = 0.0,
        iters: int | None = None,
        lr: float = 0.01,
        tol: float = 1e-12,
        stop_tol: float = 1e-6,
    ) -> torch.Tensor:
        """Batched ẑ = argmin_z ‖x̂_k(z) − x_k‖²/d + λ‖z − x_k‖² through the clipped rollout under P̃ (λ = ``prior``).

        ``solver="adam"`` (default, the official loop): Adam(``lr`` = 0.01) from z₀ = x_k for at most ``iters``
        (default 1000) steps; every 10 steps each window's loss is checked and the window stops after two
        consecutive checks that moved it by < ``stop_tol`` (1e-6; 0 disables stopping). Per window this is
        exactly ``torch.optim.Adam`` on that window alone.
        ``solver="lm"``: Levenberg–Marquardt, ``iters`` (default 60) iterations, per-item damping and acceptance;
        started from the analytic ẑ (needs ``xs``), and again from x_k where that fit is not near-perfect; the
        lower objective is kept.
        """
        if solver not in ("lm", "adam"):
            raise ValueError(f"solver must be 'lm' or 'adam', got {solver!r}")
        if not (isinstance(prior, (int, float)) and prior >= 0 and np.isfinite(prior)):
            raise ValueError(f"prior must be a finite number >= 0, got {prior!r}")
        if iters is not None and (not isinstance(iters, int) or iters < 1):
            raise ValueError(f"iters must be an int >= 1 or None, got {iters!r}")
        if not (lr > 0 and np.isfinite(lr)):
            raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
        if not stop_tol >= 0:
            raise ValueError(f"stop_tol must be >= 0, got {stop_tol!r}")
        s, x_k, z0 = s.detach(), x_k.detach(), x_k.detach()

        def objective(z: torch.Tensor, idx: torch.Tensor | slice = slice(None)) -> torch.Tensor:
            with torch.no_grad():
                fit = self._endpoint(s[idx], z, K[idx]).sub(x_k[idx]).pow(2).mean(-1)
                return fit + prior * (z - z0[idx]).pow(2).sum(-1)

        if solver == "adam":
            return self._adam(s, x_k, z0, K, prior, 1000 if iters is None else iters, lr, stop_tol)

        n_it = 60 if iters is None else iters
        if xs is None:
            return self._lm(s, x_k, z0, z0.clone(), K, prior, n_it, tol)
        za = self.invert_analytic(xs, K)
        best_z = self._lm(s, x_k, z0, torch.where(torch.isfinite(za), za, z0), K, prior, n_it, tol)
        best_f = objective(best_z)
        # second start from z₀ = x_k, only where the analytic start did not reach a near-perfect fit
        redo = torch.nonzero(best_f > 1e-6).flatten()
        if len(redo):
            z2 = self._lm(s[redo], x_k[redo], z0[redo], z0[redo].clone(), K[redo], prior, n_it, tol)
            f2 = objective(z2, redo)
            better = f2 < best_f[redo]
            best_z[redo[better]] = z2[better]
        return best_z

    def _adam(
        self,
        s: torch.Tensor,
        x_k: torch.Tensor,
        z0: torch.Tensor,
        K: torch.Tensor,
        prior: float,
        iters: int,
        lr: float,
        stop_tol: float,
        check_every: int = 10,
        patience: int = 2,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
    ) -> torch.Tensor:
        """The official per-window Adam loop, batched: Adam's update is element-wise, so one moment buffer per
        window reproduces ``torch.optim.Adam`` on each window alone; stopped windows leave the active set."""
        n = len(z0)
        z, m, v = z0.clone(), torch.zeros_like(z0), torch.zeros_like(z0)
        b1, b2 = betas
        active = torch.arange(n)
        last = torch.full((n,), float("inf"), dtype=z0.dtype)
        streak = torch.zeros(n, dtype=torch.long)
        for it in range(1, iters + 1):
            za = z[active].clone().requires_grad_(True)
            fit = ((self._endpoint(s[active], za, K[active]) - x_k[active]) ** 2).mean(-1)
            loss = fit + prior * ((za - z0[active]) ** 2).sum(-1)  # (n_active,)
            (g,) = torch.autograd.grad(loss.sum(), za)
            with torch.no_grad():
                m[active] = b1 * m[active] + (1 - b1) * g
                v[active] = b2 * v[active] + (1 - b2) * g * g
                denom = (v[active] / (1 - b2**it)).sqrt() + eps
                z[active] = za.detach() - lr * (m[active] / (1 - b1**it)) / denom
                if stop_tol > 0 and it % check_every == 0:  # the official stopping rule
                    lo = loss.detach()
                    small = (lo - last[active]).abs() < stop_tol
                    streak[active] = torch.where(small, streak[active] + 1, torch.zeros_like(streak[active]))
                    last[active] = lo
                    active = active[streak[active] < patience]
                    if len(active) == 0:
                        break
        return z

    def _endpoint(self, s: torch.Tensor, z: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
        x = s
        for ell in range(self.k):
            x = self.inverse_model.step(x, self.control(x, z, K[:, ell]))
        return x

    def _lm(
        self,
        s: torch.Tensor,
        x_k: torch.Tensor,
        z0: torch.Tensor,
        z: torch.Tensor,
        K: torch.Tensor,
        prior: float,
        iters: int,
        tol: float,
        fd_eps: float = 1e-7,
    ) -> torch.Tensor:
        """Batched Levenberg–Marquardt on ρ(z) = [(x̂_k(z) − x_k)/√d ; √λ (z − z₀)].

        Jacobians by central differences of the clipped rollout (one stacked forward pass for all items and
        directions); every step is accepted only if it lowers the exact objective, and items that converged
        leave the active set.
        """
        n, d = z.shape
        sq_p = prior**0.5
        z = z.clone()

        def residual(idx: torch.Tensor, zz: torch.Tensor, reps: int = 1) -> torch.Tensor:
            ss, xk, kk, zc = s[idx], x_k[idx], K[idx], z0[idx]
            if reps > 1:
                ss, xk, kk, zc = (t.repeat(reps, *([1] * (t.ndim - 1))) for t in (ss, xk, kk, zc))
            return torch.cat([(self._endpoint(ss, zz, kk) - xk) / d**0.5, sq_p * (zz - zc)], -1)

        with torch.no_grad():
            active = torch.arange(n)
            mu = torch.full((n,), 1e-3, dtype=z.dtype)
            r_all = residual(active, z)
            cost = (r_all**2).sum(-1)
            eye_eps = torch.eye(d, dtype=z.dtype) * fd_eps
            for _ in range(iters):
                if len(active) == 0:
                    break
                za, ra, na = z[active], r_all[active], len(active)
                # Jacobian J (na, d_res, d) by central differences, all 2d perturbations in one pass
                zp = (za[None] + eye_eps[:, None, :]).reshape(-1, d)
                zm = (za[None] - eye_eps[:, None, :]).reshape(-1, d)
                rp = residual(active, zp, reps=d).reshape(d, na, -1)
                rm = residual(active, zm, reps=d).reshape(d, na, -1)
                J = ((rp - rm) / (2 * fd_eps)).permute(1, 2, 0)
                JtJ = J.transpose(1, 2) @ J
                g = (J.transpose(1, 2) @ ra[..., None])[..., 0]
                diag = torch.diagonal(JtJ, dim1=1, dim2=2).clamp_min(1e-12)
                step = -torch.linalg.solve(JtJ + mu[active, None, None] * torch.diag_embed(diag), g)
                z_new = za + step
                r_new = residual(active, z_new)
                cost_new = (r_new**2).sum(-1)
                ok = cost_new < cost[active]
                z[active] = torch.where(ok[:, None], z_new, za)
                r_all[active] = torch.where(ok[:, None], r_new, ra)
                gain = cost[active] - cost_new
                cost[active] = torch.where(ok, cost_new, cost[active])
                mu[active] = torch.where(ok, mu[active] / 3, mu[active] * 4).clamp(1e-9, 1e9)
                c = cost[active]
                done = (
                    (c < tol**2)
                    | (ok & (gain <= tol * c))
                    | (step.abs().amax(-1) < tol * (1 + za.abs().amax(-1)))
                )
                done |= mu[active] >= 1e9
                active = active[~done]
        return z
