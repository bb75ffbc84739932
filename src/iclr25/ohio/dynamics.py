"""Dynamics models P̃ used by the LQR low level and by the inverse (torch, batched, differentiable).

- :class:`ArmModel`: the exact nonlinear arm (:func:`iclr25.ohio.arm.arm_step` in torch), possibly with
  mis-specified parameters (the model-error experiment).
- :class:`LinearModel`: x' = A x + B a + d with fixed matrices (unit tests of the analytic inverse).
- :class:`LearnedLinearModel`: the paper's state-dependent local linear model, an MLP s ↦ (A(s), B(s)) trained
  so that s' = A(s) s + B(s) a (MSE, Adam 0.01, StepLR(10, 0.1), 20 epochs, 10 % validation).

Every model has ``step(x, a)``; :func:`linearize` returns (A, B, d) with x' ≈ A x + B a + d at a point
(the MLP's own A(s), B(s) when the model provides ``linear_terms``; central finite differences otherwise).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch import nn

from ..common.checks import need_array, need_int, need_real, need_seed
from .arm import ArmParams, arm_step


class DynamicsModel(Protocol):
    state_dim: int
    action_dim: int

    def step(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor: ...


class ArmModel:
    """The nonlinear 2-link arm in torch (float64), parameters possibly mis-specified."""

    state_dim, action_dim = 4, 2

    def __init__(self, params: ArmParams | None = None):
        if params is not None and not isinstance(params, ArmParams):
            raise ValueError(f"params must be ArmParams or None, got {params!r:.80}")
        self.params = ArmParams() if params is None else params

    def step(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return arm_step(x, a, self.params, xp=torch)


class LinearModel:
    """x' = A x + B a + d with constant A (n, n), B (n, m), d (n,) (or batched with a leading dim)."""

    def __init__(self, A: torch.Tensor, B: torch.Tensor, d: torch.Tensor | None = None):
        self.A, self.B = torch.as_tensor(A, dtype=torch.float64), torch.as_tensor(B, dtype=torch.float64)
        if (
            self.A.ndim < 2
            or self.B.ndim < 2
            or self.A.shape[-1] != self.A.shape[-2]
            or self.B.shape[-2] != self.A.shape[-1]
        ):
            raise ValueError(
                f"A must be (n, n) and B (n, m), got A {tuple(self.A.shape)}, B {tuple(self.B.shape)}"
            )
        self.d = (
            torch.zeros(self.A.shape[:-1], dtype=torch.float64) if d is None else torch.as_tensor(d).double()
        )
        if self.d.shape[-1:] != self.A.shape[-1:]:
            raise ValueError(f"d must be ({self.A.shape[-1]},), got {tuple(self.d.shape)}")
        for name, t in (("A", self.A), ("B", self.B), ("d", self.d)):
            if not bool(torch.isfinite(t).all()):
                raise ValueError(f"{name} must be finite, got NaN/inf entries")
        self.state_dim, self.action_dim = self.A.shape[-1], self.B.shape[-1]

    def step(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return (self.A @ x[..., None])[..., 0] + (self.B @ a[..., None])[..., 0] + self.d

    def linear_terms(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n = x.shape[:-1]
        return (
            self.A.expand(*n, *self.A.shape[-2:]),
            self.B.expand(*n, *self.B.shape[-2:]),
            self.d.expand(*n, -1),
        )


class LearnedLinearModel(nn.Module):
    """MLP s ↦ (A(s), B(s)); prediction s' = A(s) s + B(s) a (the official ``learn_A_B_dynamics``)."""

    def __init__(self, state_dim: int = 4, action_dim: int = 2, hidden: int = 128):
        super().__init__()
        for name, v in (("state_dim", state_dim), ("action_dim", action_dim), ("hidden", hidden)):
            need_int(name, v, 1)
        self.state_dim, self.action_dim = state_dim, action_dim
        n, m = state_dim, action_dim
        self.net = nn.Sequential(
            nn.Linear(n, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
            nn.Linear(hidden, n * n + n * m),
        )
        self.double()

    def linear_terms(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        n, m = self.state_dim, self.action_dim
        out = self.net(x)
        eye = torch.eye(n, dtype=x.dtype, device=x.device)
        A = eye + out[..., : n * n].reshape(*x.shape[:-1], n, n)  # residual parameterisation (identity + Δ)
        B = out[..., n * n :].reshape(*x.shape[:-1], n, m)
        return A, B, torch.zeros_like(x)

    def step(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        A, B, _ = self.linear_terms(x)
        return (A @ x[..., None])[..., 0] + (B @ a[..., None])[..., 0]

    def fit(
        self,
        x: np.ndarray,
        a: np.ndarray,
        x_next: np.ndarray,
        *,
        epochs: int = 20,
        lr: float = 0.01,
        batch_size: int = 256,
        val_frac: float = 0.1,
        seed: int = 0,
    ) -> dict[str, float]:
        """Train on (x, a, x') by MSE with Adam(lr) and StepLR(10, 0.1); returns train/validation MSE."""
        n, m = self.state_dim, self.action_dim
        x = need_array("x", x, ndim=2, last=n)
        a = need_array("a", a, ndim=2, last=m)
        x_next = need_array("x_next", x_next, ndim=2, last=n)
        if not len(x) == len(a) == len(x_next):
            raise ValueError(
                f"x, a and x_next must have the same rows, got {len(x)}, {len(a)}, {len(x_next)}"
            )
        need_int("epochs", epochs, 1)
        need_int("batch_size", batch_size, 1)
        need_real("lr", lr, 0.0, lo_open=True)
        need_real("val_frac", val_frac, 0.0)
        if val_frac >= 1:
            raise ValueError(f"val_frac must be in [0, 1), got {val_frac!r}")
        need_seed("seed", seed)
        g = torch.Generator().manual_seed(seed)
        X, U, Y = (torch.as_tensor(v, dtype=torch.float64) for v in (x, a, x_next))
        perm = torch.randperm(len(X), generator=g)
        n_val = max(1, int(val_frac * len(X)))
        va, tr = perm[:n_val], perm[n_val:]
        opt = torch.optim.Adam(self.parameters(), lr=lr)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.1)
        for _ in range(epochs):
            order = tr[torch.randperm(len(tr), generator=g)]
            for i in range(0, len(order), batch_size):
                b = order[i : i + batch_size]
                loss = ((self.step(X[b], U[b]) - Y[b]) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            sched.step()
        with torch.no_grad():
            return {
                "train_mse": float(((self.step(X[tr], U[tr]) - Y[tr]) ** 2).mean()),
                "val_mse": float(((self.step(X[va], U[va]) - Y[va]) ** 2).mean()),
            }


def linearize(
    model: DynamicsModel, x: torch.Tensor, eps: float = 1e-6
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(A, B, d) with f(x', a) ≈ A x' + B a + d around (x, a = 0). x: (n, state_dim).

    Uses ``model.linear_terms`` when the model has them (the learned A(s), B(s)); otherwise centred finite
    differences with step ``eps`` (as ``mujoco.mjd_transitionFD`` in the official code), batched.
    """
    need_real("eps", eps, 0.0, lo_open=True)
    x = torch.as_tensor(x, dtype=torch.float64)
    if x.ndim != 2 or x.shape[-1] != model.state_dim:
        raise ValueError(f"x must be (n, state_dim={model.state_dim}), got shape {tuple(x.shape)}")
    if hasattr(model, "linear_terms"):
        with torch.no_grad():
            return model.linear_terms(x)
    n, m = model.state_dim, model.action_dim
    batch = x.shape[0]
    a0 = torch.zeros(batch, m, dtype=x.dtype)
    with torch.no_grad():
        ex = torch.eye(n, dtype=x.dtype) * eps  # (n, n)
        ea = torch.eye(m, dtype=x.dtype) * eps
        xp_ = (x[:, None, :] + ex).reshape(-1, n)
        xm_ = (x[:, None, :] - ex).reshape(-1, n)
        a_rep = a0[:, None, :].expand(batch, n, m).reshape(-1, m)
        A = (model.step(xp_, a_rep) - model.step(xm_, a_rep)).reshape(batch, n, n) / (2 * eps)  # (b, j, i)
        x_rep = x[:, None, :].expand(batch, m, n).reshape(-1, n)
        ap_ = (a0[:, None, :] + ea).reshape(-1, m)
        am_ = (a0[:, None, :] - ea).reshape(-1, m)
        B = (model.step(x_rep, ap_) - model.step(x_rep, am_)).reshape(batch, m, n) / (2 * eps)
        A, B = A.transpose(1, 2), B.transpose(1, 2)  # (b, n, n), (b, n, m)
        d = model.step(x, a0) - (A @ x[..., None])[..., 0]
    return A, B, d
