"""The paper's robot-arm setting on gymnasium's MuJoCo ``Reacher-v5`` (the ``real`` preset, issue #53).

Pieces (all through :func:`iclr25.assets.make_env`, headless):

- :class:`ReacherModel`: the arm as a :class:`~iclr25.ohio.dynamics.DynamicsModel` for the LQR low level. Its
  ``linear_terms`` are **MuJoCo's own linearisation** (``mujoco.mjd_transitionFD``, centred differences), as the
  official reacher code builds its LQR (§4.1: gains from the model linearised at the current s_t). Reacher-v5
  integrates with RK4, which ``mjd_transitionFD`` refuses, so the derivatives are taken on a copy of the model with
  the Euler integrator and a 1e-5 s step, i.e. the continuous-time Jacobians A_c ≈ (A_h − I)/h, B_c ≈ B_h/h, and
  discretised exactly over the env's control period (frame_skip × timestep = 0.02 s) with a zero-order hold:
  exp([[A_c, B_c], [0, 0]]·T) = [[A, B], [0, I]]. ``step`` is the env's own RK4 step (frame_skip substeps).
  ``inertia_scale`` ≠ 1 mis-specifies the model: every inertial parameter of the arm (link masses, link inertias
  and the joint armature, which dominates this arm's inertia) is multiplied by it.
- :func:`reacher_state`: observation (10-d) → LQR state x = (q1, q2, q̇1, q̇2), angles from (cos, sin); q1 is an
  unlimited hinge, so the low level treats dimension 0 as periodic.
- :func:`expert_action`: the scripted flat expert, a joint-space PD controller towards the inverse-kinematics
  angles of the target (elbow nearest the current q), critically damped at natural frequency ω on the nominal
  joint inertia: K_p = ω² I/g, K_d = (2ωI − b)/g (I = armature + link inertia, b = joint damping, g = gear).
- :class:`ReacherBatch`: n Reacher-v5 envs stepped in lockstep (one batched policy / LQR call per step).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from ..common.checks import need_array, need_int, need_real, need_seed
from .lqr import LQRLowLevel
from .relabel import OfflineDataset

ENV_ID = "Reacher-v5"
ARM_DOFS = (0, 1)  # the two hinge joints; dofs 2, 3 are the target's slide joints
LIN_STEP = 1e-5  # Euler step (s) of the model copy that mjd_transitionFD differentiates
FD_EPS = 1e-6  # mjd_transitionFD's finite-difference step (as the official code)


def _make(env_id: str = ENV_ID, **kw):
    from iclr25.assets import make_env

    return make_env(env_id, **kw)


def reacher_state(obs: np.ndarray) -> np.ndarray:
    """Reacher-v5 observation (…, 10) = (cos q, sin q, target, q̇, fingertip − target) → x = (q1, q2, q̇1, q̇2)."""
    obs = need_array("obs", obs, last=10, finite=False)
    q = np.arctan2(obs[..., 2:4], obs[..., 0:2])
    return np.concatenate([q, obs[..., 6:8]], -1)


class ReacherModel:
    """Reacher-v5's arm for the LQR: MuJoCo's linearisation (``linear_terms``) and the env's step (``step``).

    Args:
        inertia_scale: multiplies every inertial parameter of the arm (masses, inertias, armature); 1 = the env.
        env_id: the gymnasium MuJoCo env whose model is used (default Reacher-v5).
    """

    state_dim, action_dim = 4, 2

    def __init__(self, inertia_scale: float = 1.0, env_id: str = ENV_ID):
        import mujoco

        need_real("inertia_scale", inertia_scale, 0.0, lo_open=True)
        env = _make(env_id)
        u = env.unwrapped
        if u.model.nu != 2 or u.model.nv != 4:
            raise ValueError(f"env_id must be a reacher (2 actuators, 4 dofs), got {env_id!r}")
        self._mj = mujoco
        self.frame_skip = int(u.frame_skip)
        self.sim = mujoco.MjModel.from_xml_path(u.fullpath)  # the env's model (RK4)
        self.lin = mujoco.MjModel.from_xml_path(u.fullpath)  # Euler copy for mjd_transitionFD
        for m in (self.sim, self.lin):
            arm_bodies = [i for i in range(1, m.nbody) if m.body(i).name != "target"]
            m.body_mass[arm_bodies] *= inertia_scale
            m.body_inertia[arm_bodies] *= inertia_scale
            m.dof_armature[list(ARM_DOFS)] *= inertia_scale
        self.lin.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
        self.lin.opt.timestep = LIN_STEP
        self.dt = float(self.sim.opt.timestep) * self.frame_skip
        self.inertia_scale = float(inertia_scale)
        self._dsim, self._dlin = mujoco.MjData(self.sim), mujoco.MjData(self.lin)
        env.close()

    def _set(self, m, d, x: np.ndarray, a: np.ndarray) -> None:
        self._mj.mj_resetData(m, d)
        d.qpos[list(ARM_DOFS)] = x[:2]
        d.qvel[list(ARM_DOFS)] = x[2:]
        d.ctrl[:] = a

    def step(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """The env's transition (RK4, frame_skip substeps, controls clamped to ±1 by MuJoCo), batched over rows."""
        xs = np.asarray(torch.as_tensor(x).detach(), dtype=float).reshape(-1, 4)
        acts = np.asarray(torch.as_tensor(a).detach(), dtype=float).reshape(-1, 2)
        out = np.empty_like(xs)
        m, d = self.sim, self._dsim
        for i, (xi, ai) in enumerate(zip(xs, acts)):
            self._set(m, d, xi, ai)
            self._mj.mj_step(m, d, nstep=self.frame_skip)
            out[i] = np.r_[d.qpos[list(ARM_DOFS)], d.qvel[list(ARM_DOFS)]]
        return torch.as_tensor(out.reshape(*np.shape(x)[:-1], 4), dtype=torch.float64)

    def continuous_jacobians(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(A_c (n, 4, 4), B_c (n, 4, 2)) of ẋ = f(x, a) at (x, a = 0) from ``mjd_transitionFD`` (centred, ε = 1e-6)."""
        x = need_array("x", x, ndim=2, last=4)
        nv = self.lin.nv
        idx = list(ARM_DOFS) + [nv + i for i in ARM_DOFS]
        Ac, Bc = np.empty((len(x), 4, 4)), np.empty((len(x), 4, 2))
        A, B = np.zeros((2 * nv, 2 * nv)), np.zeros((2 * nv, self.lin.nu))
        for i, xi in enumerate(x):
            self._set(self.lin, self._dlin, xi, np.zeros(2))
            self._mj.mjd_transitionFD(self.lin, self._dlin, FD_EPS, True, A, B, None, None)
            Ac[i] = (A[np.ix_(idx, idx)] - np.eye(4)) / LIN_STEP
            Bc[i] = B[idx] / LIN_STEP
        return Ac, Bc

    def linear_terms(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(A, B, d) with x' ≈ A x + B a + d over one env step: zero-order-hold discretisation of MuJoCo's
        continuous Jacobians at x; d = step(x, 0) − A x (the exact transition at the linearisation point)."""
        xt = torch.as_tensor(x, dtype=torch.float64)
        if xt.ndim != 2 or xt.shape[-1] != 4:
            raise ValueError(f"x must be (n, 4) = (q1, q2, dq1, dq2), got shape {tuple(xt.shape)}")
        Ac, Bc = self.continuous_jacobians(xt.detach().numpy())
        M = torch.zeros(len(xt), 6, 6, dtype=torch.float64)
        M[:, :4, :4], M[:, :4, 4:] = torch.as_tensor(Ac), torch.as_tensor(Bc)
        E = torch.linalg.matrix_exp(M * self.dt)
        A, B = E[:, :4, :4], E[:, :4, 4:]
        d = self.step(xt, torch.zeros(len(xt), 2, dtype=torch.float64)) - (A @ xt[..., None])[..., 0]
        return A, B, d


def reacher_low_level(model: ReacherModel, inverse_model=None, *, R: float = 0.1, k: int = 5) -> LQRLowLevel:
    """The paper's reacher low level on Reacher-v5: Q = diag(10, 10, 1, 1), R·I, horizon k, controls clipped to ±1,
    state from :func:`reacher_state`, q1 periodic."""
    return LQRLowLevel(
        model, inverse_model, R=R, k=k, max_ctrl=1.0, state_map=reacher_state, periodic_dims=[0]
    )


def link_lengths(env_id: str = ENV_ID) -> tuple[float, float]:
    """(l1, l2) of the arm from the MuJoCo model: body1's offset on link 0 and the fingertip's on link 1."""
    env = _make(env_id)
    m = env.unwrapped.model
    l1, l2 = float(m.body("body1").pos[0]), float(m.body("fingertip").pos[0])
    env.close()
    return l1, l2


def _wrap(a: np.ndarray) -> np.ndarray:
    return (a + np.pi) % (2 * np.pi) - np.pi


def target_angles(obs: np.ndarray, lengths: tuple[float, float], q2_max: float = 2.95) -> np.ndarray:
    """Inverse kinematics (…, 2) of the target in ``obs``: the elbow solution nearest the current q; a target
    closer than the arm can fold (|q2| > ``q2_max``, inside the joint range ±3) is approached with q2 = ±q2_max."""
    obs = need_array("obs", obs, ndim=2, last=10)
    l1, l2 = lengths
    q = reacher_state(obs)[:, :2]
    tgt = obs[:, 4:6]
    r2 = (tgt**2).sum(-1)
    c2 = np.clip((r2 - l1**2 - l2**2) / (2 * l1 * l2), np.cos(q2_max), 1.0)
    best = np.zeros_like(q)
    best_cost = np.full(len(q), np.inf)
    for sgn in (1.0, -1.0):
        q2 = sgn * np.arccos(c2)
        q1 = np.arctan2(tgt[:, 1], tgt[:, 0]) - np.arctan2(l2 * np.sin(q2), l1 + l2 * np.cos(q2))
        cand = np.stack([q[:, 0] + _wrap(q1 - q[:, 0]), q2], -1)  # q1* on q1's branch
        cost = np.abs(cand - q).sum(-1)
        better = cost < best_cost
        best[better], best_cost[better] = cand[better], cost[better]
    return best


def expert_action(
    obs: np.ndarray,
    lengths: tuple[float, float],
    omega: float,
    inertia: float = 1.0,
    damping: float = 1.0,
    gear: float = 200.0,
) -> np.ndarray:
    """The scripted flat expert: clip(K_p (q* − q) − K_d q̇, −1, 1), critically damped at ``omega`` (rad/s)."""
    need_real("omega", omega, 0.0, lo_open=True)
    x = reacher_state(obs)
    kp = omega**2 * inertia / gear
    kd = max(2 * omega * inertia - damping, 0.0) / gear
    return np.clip(kp * (target_angles(obs, lengths) - x[:, :2]) - kd * x[:, 2:], -1.0, 1.0)


def hierarchical_expert_goal(
    obs: np.ndarray, lengths: tuple[float, float], velocity_gain: float
) -> np.ndarray:
    """The HR behaviour high level (noise-free): z = (q*, g (q* − q)), q* the target's IK angles."""
    q_star = target_angles(obs, lengths)
    return np.concatenate([q_star, velocity_gain * (q_star - reacher_state(obs)[:, :2])], -1)


_POOL: dict[
    str, list
] = {}  # envs made once per process and reused (every episode starts with a seeded reset)


class ReacherBatch:
    """``n`` Reacher-v5 envs in lockstep; episode i of a batch is reset with ``seed + i``."""

    def __init__(self, n: int, env_id: str = ENV_ID):
        need_int("n", n, 1)
        pool = _POOL.setdefault(env_id, [])
        pool.extend(_make(env_id) for _ in range(n - len(pool)))
        self.envs = pool[:n]
        self.horizon = int(self.envs[0].spec.max_episode_steps)

    def reset(self, seed: int) -> np.ndarray:
        need_seed("seed", seed)
        return np.stack([e.reset(seed=seed + i)[0] for i, e in enumerate(self.envs)])

    def step(self, a: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(observations, rewards, fingertip-to-target distances) after one step of every env."""
        outs = [e.step(np.asarray(ai, dtype=np.float32)) for e, ai in zip(self.envs, a)]
        obs = np.stack([o[0] for o in outs])
        rew = np.array([o[1] for o in outs], dtype=float)
        return obs, rew, np.linalg.norm(obs[:, 8:10], axis=-1)


def run_flat(
    policy: Callable[[np.ndarray], np.ndarray], n: int, seed: int, env_id: str = ENV_ID
) -> tuple[np.ndarray, OfflineDataset, np.ndarray]:
    """Roll out a flat policy obs (n, 10) ↦ torques (n, 2) on ``n`` episodes (seeds ``seed`` … ``seed + n − 1``)
    for the env's whole horizon; returns (returns (n,), the flat dataset, final distances (n,))."""
    batch = ReacherBatch(n, env_id)
    o = batch.reset(seed)
    obs, acts, rews = [o], [], []
    for _ in range(batch.horizon):
        a = np.clip(np.asarray(policy(o), dtype=float), -1.0, 1.0)
        o, r, dist = batch.step(a)
        obs.append(o)
        acts.append(a)
        rews.append(r)
    R = np.stack(rews, 1)
    return R.sum(1), OfflineDataset.from_episodes(np.stack(obs, 1), np.stack(acts, 1), R), dist


def run_hierarchical(
    high: Callable[[np.ndarray], np.ndarray], low: LQRLowLevel, n: int, seed: int, env_id: str = ENV_ID
) -> tuple[np.ndarray, OfflineDataset, np.ndarray]:
    """The hierarchical policy on ``n`` episodes: every k steps z = high(obs) and gains from MuJoCo's
    linearisation at s_t, then k steps of clip(K_l (x_l − z), −1, 1). Returns (returns, the flat dataset with
    ``infos["z"]`` = the sub-goal in force at each step, final distances)."""
    batch = ReacherBatch(n, env_id)
    o = batch.reset(seed)
    obs, acts, rews, goals = [o], [], [], []
    t = 0
    while t < batch.horizon:
        z_np = np.asarray(high(o), dtype=float)
        if z_np.shape != (n, 4) or not np.isfinite(z_np).all():
            raise ValueError(f"high(obs) must give ({n}, 4) finite sub-goals, got shape {z_np.shape}")
        z = torch.as_tensor(z_np, dtype=torch.float64)
        K = low.gains(low.state(o))
        for ell in range(min(low.k, batch.horizon - t)):
            a = low.control(low.state(o), z, K[:, ell]).numpy()
            o, r, dist = batch.step(a)
            obs.append(o)
            acts.append(a)
            rews.append(r)
            goals.append(z_np)
            t += 1
    R = np.stack(rews, 1)
    ds = OfflineDataset.from_episodes(np.stack(obs, 1), np.stack(acts, 1), R)
    ds.infos["z"] = np.stack(goals, 1).reshape(n * batch.horizon, -1)
    return R.sum(1), ds, dist
