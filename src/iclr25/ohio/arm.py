"""The planar 2-link arm of our "reacher-LQR-lite" (README, "Reproduction") (a numpy stand-in for dm_control reacher).

Rigid-body dynamics of two uniform rods in the horizontal plane (no gravity), joint damping ``b``,
semi-implicit Euler with ``dt = 0.02``:

    M(q) q̈ + C(q, q̇) q̇ + b q̇ = τ,      τ ∈ [−1, 1]²  (saturation is active)
    q̇' = q̇ + dt · q̈,   q' = q + dt · q̇'

The state used by the low level is x = (q1, q2, q̇1, q̇2); the observation (6-d, as in reacher) is
(q1, q2, target − fingertip (2), q̇1, q̇2), so ``STATE_IDX = [0, 1, 4, 5]``. Reward per step:
``1[dist < 0.05] − 0.1·dist``. :func:`arm_step` is written once against an array namespace ``xp``
(numpy or torch) so the environment and the differentiable inverse share the same equations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np

from ..common.checks import need_array, need_int, need_real, need_rng, need_type
from ..common.fields import bounded, check_fields

STATE_IDX = (0, 1, 4, 5)  # obs indices of x = (q1, q2, q̇1, q̇2)


@dataclass(frozen=True)
class ArmParams:
    """Physical parameters (uniform rods)."""

    m1: float = bounded(1.0, lo=0, lo_open=True)
    m2: float = bounded(1.0, lo=0, lo_open=True)
    l1: float = bounded(0.25, lo=0, lo_open=True)
    l2: float = bounded(0.25, lo=0, lo_open=True)
    damping: float = bounded(0.1, lo=0)
    dt: float = bounded(0.02, lo=0, lo_open=True)
    max_torque: float = bounded(1.0, lo=0, lo_open=True)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above

    def scaled_masses(self, factor: float) -> ArmParams:
        """The same arm with both link masses multiplied by ``factor`` (the reproduction's model error ×1.3)."""
        need_real("factor", factor, 0.0, lo_open=True)
        return replace(self, m1=self.m1 * factor, m2=self.m2 * factor)


def arm_step(x: Any, tau: Any, p: ArmParams, xp: Any = np) -> Any:
    """One semi-implicit Euler step. ``x`` (..., 4) = (q1, q2, q̇1, q̇2), ``tau`` (..., 2) (not clipped here)."""
    if x.shape[-1:] != (4,):
        raise ValueError(f"x must be (..., 4) = (q1, q2, dq1, dq2), got shape {tuple(x.shape)}")
    if tau.shape[-1:] != (2,) or tau.shape[:-1] != x.shape[:-1]:
        raise ValueError(
            f"tau must be (..., 2) with x's leading shape {tuple(x.shape[:-1])}, got {tuple(tau.shape)}"
        )
    q1, q2, dq1, dq2 = x[..., 0], x[..., 1], x[..., 2], x[..., 3]
    t1, t2 = tau[..., 0], tau[..., 1]
    lc1, lc2 = p.l1 / 2, p.l2 / 2
    i1, i2 = p.m1 * p.l1**2 / 12, p.m2 * p.l2**2 / 12
    c2, s2 = xp.cos(q2), xp.sin(q2)
    # M(q): inertia matrix of the 2-link arm
    m11 = i1 + i2 + p.m1 * lc1**2 + p.m2 * (p.l1**2 + lc2**2 + 2 * p.l1 * lc2 * c2)
    m12 = i2 + p.m2 * (lc2**2 + p.l1 * lc2 * c2)
    m22 = i2 + p.m2 * lc2**2
    h = p.m2 * p.l1 * lc2 * s2
    # right-hand side τ − C(q, q̇) q̇ − b q̇
    f1 = t1 + h * (2 * dq1 * dq2 + dq2**2) - p.damping * dq1
    f2 = t2 - h * dq1**2 - p.damping * dq2
    det = m11 * m22 - m12 * m12
    ddq1 = (m22 * f1 - m12 * f2) / det
    ddq2 = (m11 * f2 - m12 * f1) / det
    dq1n = dq1 + p.dt * ddq1
    dq2n = dq2 + p.dt * ddq2
    return xp.stack([q1 + p.dt * dq1n, q2 + p.dt * dq2n, dq1n, dq2n], -1)


def fingertip(q: np.ndarray, p: ArmParams) -> np.ndarray:
    """Fingertip position (..., 2) from joint angles q (..., 2)."""
    a, b = q[..., 0], q[..., 0] + q[..., 1]
    return np.stack([p.l1 * np.cos(a) + p.l2 * np.cos(b), p.l1 * np.sin(a) + p.l2 * np.sin(b)], -1)


def inverse_kinematics(target: np.ndarray, q_ref: np.ndarray, p: ArmParams) -> np.ndarray:
    """Joint angles reaching ``target`` (..., 2); of the two elbow solutions, the one nearest ``q_ref``
    (angles unwrapped to lie within π of ``q_ref``)."""
    x, y = target[..., 0], target[..., 1]
    c2 = np.clip((x**2 + y**2 - p.l1**2 - p.l2**2) / (2 * p.l1 * p.l2), -1.0, 1.0)
    best, best_d = None, None
    for sign in (1.0, -1.0):
        q2 = sign * np.arccos(c2)
        q1 = np.arctan2(y, x) - np.arctan2(p.l2 * np.sin(q2), p.l1 + p.l2 * np.cos(q2))
        q = np.stack([q1, q2], -1)
        q = q_ref + (q - q_ref + np.pi) % (2 * np.pi) - np.pi  # nearest equivalent angles
        d = np.abs(q - q_ref).sum(-1)
        if best is None:
            best, best_d = q, d
        else:
            pick = (d < best_d)[..., None]
            best, best_d = np.where(pick, q, best), np.minimum(d, best_d)
    return best


class ArmBatch:
    """``n`` independent arms stepped together (numpy): data collection and evaluation without Python loops
    over episodes. Targets are drawn uniformly (by area) in the reachable annulus."""

    def __init__(
        self, n: int, params: ArmParams = ArmParams(), horizon: int = 200, target_radius: float = 0.05
    ):
        need_int("n", n, 1)
        need_int("horizon", horizon, 1)
        need_real("target_radius", target_radius, 0.0, lo_open=True)
        need_type("params", params, ArmParams)
        self.n, self.p, self.horizon, self.target_radius = n, params, horizon, target_radius
        self.x = np.zeros((n, 4))
        self.target = np.zeros((n, 2))
        self.t = 0

    def reset(self, rng: np.random.Generator) -> np.ndarray:
        need_rng("rng", rng)
        p = self.p
        r_lo, r_hi = abs(p.l1 - p.l2) + 0.1 * (p.l1 + p.l2), 0.9 * (p.l1 + p.l2)
        r = np.sqrt(rng.uniform(r_lo**2, r_hi**2, self.n))
        ang = rng.uniform(-np.pi, np.pi, self.n)
        self.target = np.stack([r * np.cos(ang), r * np.sin(ang)], -1)
        self.x = np.concatenate([rng.uniform(-np.pi, np.pi, (self.n, 2)), np.zeros((self.n, 2))], -1)
        self.t = 0
        return self.obs()

    def obs(self) -> np.ndarray:
        to_target = self.target - fingertip(self.x[:, :2], self.p)
        return np.concatenate([self.x[:, :2], to_target, self.x[:, 2:]], -1)

    def distance(self) -> np.ndarray:
        return np.linalg.norm(self.target - fingertip(self.x[:, :2], self.p), axis=-1)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """Apply torques (clipped to ±max_torque); returns (obs, reward, truncated)."""
        a = np.asarray(action, dtype=float)
        if a.shape != (self.n, 2):
            raise ValueError(f"action must be ({self.n}, 2) torques, got shape {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError("action must be finite, got NaN/inf torques")
        a = np.clip(a, -self.p.max_torque, self.p.max_torque)
        self.x = arm_step(self.x, a, self.p)
        d = self.distance()
        reward = (d < self.target_radius).astype(float) - 0.1 * d
        self.t += 1
        return self.obs(), reward, self.t >= self.horizon


class TwoLinkArmEnv(gym.Env):
    """Gymnasium wrapper of one :class:`ArmBatch` arm (observation 6-d, action = torques in [−1, 1]²)."""

    metadata = {"render_modes": []}

    def __init__(self, params: ArmParams = ArmParams(), horizon: int = 200, target_radius: float = 0.05):
        need_type("params", params, ArmParams)
        self._arm = ArmBatch(1, params, horizon, target_radius)
        self.params = params
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (6,), np.float64)
        self.action_space = gym.spaces.Box(-params.max_torque, params.max_torque, (2,), np.float64)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        obs = self._arm.reset(self.np_random)
        return obs[0], {"target": self._arm.target[0].copy()}

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        """Apply torques; ``action`` must hold 2 finite numbers (values beyond ±max_torque are clipped)."""
        try:
            a = np.asarray(action, dtype=float)
        except (TypeError, ValueError) as err:
            raise ValueError(f"action must be 2 torques (shape (2,)), got {action!r}") from err
        if a.shape not in ((2,), (1, 2)):
            raise ValueError(f"action must have shape (2,) (two joint torques), got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError(f"action must be finite, got {a.ravel().tolist()}")
        obs, r, trunc = self._arm.step(a.reshape(1, 2))
        return obs[0], float(r[0]), False, bool(trunc), {"distance": float(self._arm.distance()[0])}


def flat_expert_action(
    obs: np.ndarray,
    p: ArmParams,
    kp: float = 30.0,
    kd: float = 8.0,
    rng: np.random.Generator | None = None,
    noise_std: float = 0.1,
) -> np.ndarray:
    """The flat behaviour policy: computed-torque PD towards the IK solution of the target, plus N(0, σ²).

    τ = M(q) (kp (q* − q) − kd q̇) + C(q, q̇) q̇ + b q̇, clipped to ±max_torque. Gains differ from the LQR's.
    """
    obs = need_array("obs", obs, ndim=2, last=6)
    need_real("kp", kp)
    need_real("kd", kd)
    need_real("noise_std", noise_std, 0.0)
    q, dq = obs[:, :2], obs[:, 4:]
    tip = fingertip(q, p)
    q_star = inverse_kinematics(tip + obs[:, 2:4], q, p)
    acc = kp * (q_star - q) - kd * dq
    x = np.concatenate([q, dq], -1)
    # M·acc + bias: evaluate via the dynamics: τ such that arm_step gives q̈ = acc (solve the 2x2 linear map)
    zero = arm_step(x, np.zeros_like(q), p)[:, 2:]
    e1 = arm_step(x, np.tile([1.0, 0.0], (len(q), 1)), p)[:, 2:] - zero
    e2 = arm_step(x, np.tile([0.0, 1.0], (len(q), 1)), p)[:, 2:] - zero
    jac = np.stack([e1, e2], -1) / p.dt  # (n, 2, 2) = M⁻¹
    need = acc - (zero - dq) / p.dt  # q̈ wanted minus the passive q̈
    tau = np.linalg.solve(jac, need[..., None])[..., 0]
    if rng is not None and noise_std > 0:
        tau = tau + rng.normal(0.0, noise_std, tau.shape)
    return np.clip(tau, -p.max_torque, p.max_torque)


ENV_ID = "iclr25/TwoLinkArm-v0"
if ENV_ID not in gym.registry:  # gym.make("iclr25/TwoLinkArm-v0") after importing iclr25.ohio
    gym.register(id=ENV_ID, entry_point="iclr25.ohio.arm:TwoLinkArmEnv")
