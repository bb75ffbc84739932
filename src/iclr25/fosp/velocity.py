"""Safety-Gymnasium's velocity tasks rebuilt on gymnasium's MuJoCo locomotion (issue #53).

Safety-Gymnasium does not import on Python 3.11 (a dataclass error in its assets), but its velocity tasks are plain
gymnasium MuJoCo locomotion plus a cost: ``SafetyHalfCheetahVelocity-v1`` is HalfCheetah with

    x_velocity = (x_after − x_before) / dt,      c_t = 1[x_velocity > 3.2096 m/s]

(``safety_gymnasium/tasks/safe_velocity/safety_half_cheetah_velocity_v1.py``: threshold 3.2096; the signed forward
velocity of the root's x position over one env step, as in ``..._v0.py``'s ``step``). :class:`VelocityCost` adds that
cost, computed from the simulator state (``data.qpos[0]`` before and after the step), to any gymnasium MuJoCo env
as ``info["cost"]`` (the Safety-Gymnasium gymnasium convention, which :class:`~iclr25.fosp.env.VectorCostEnv`
reads). The underlying env is gymnasium's ``HalfCheetah-v5`` (Safety-Gymnasium builds on ``-v4``; v5 has the same
model, reward and observation by default), loaded through :func:`iclr25.assets.make_env`.

Offline data for these tasks (:func:`collect_velocity_dataset`): the paper's D mixes safe, unsafe and random behaviour
(for Safety-Gymnasium's velocity tasks, DSRL / OmniSafe's offline collector log trained constrained and unconstrained
agents plus noise). No trained agent exists here, so the behaviour policies are scripted, state-independent and
vectorised over environments: ``"fast"`` runs :data:`CHEETAH_GAIT` (an open-loop sinusoidal gait, the best of a short
cross-entropy search on this env's forward velocity, mean ≈ 3.5 m/s without noise) with Gaussian action noise, so a
large share of its steps exceed the threshold (unsafe); ``"slow"`` runs the same gait at half amplitude (≈ 1 m/s,
safe, still rewarded for moving forward); ``"random"`` draws uniform actions (≈ 0 m/s). Every environment starts the
gait at its own random phase. :func:`make_velocity_vec` steps N wrapped envs as one ``SyncVectorEnv`` behind
:class:`~iclr25.fosp.env.VectorCostEnv`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from .data import FIELDS, OfflineDataset
from .env import VectorCostEnv

# Safety-Gymnasium id -> (the gymnasium MuJoCo env it wraps, its velocity threshold in m/s)
VELOCITY_TASKS = {"SafetyHalfCheetahVelocity-v1": ("HalfCheetah-v5", 3.2096)}


class VelocityCost(gym.Wrapper):
    """``info["cost"] = 1[x_velocity > threshold]`` with x_velocity = Δ qpos[0] / dt over the step (state-based).

    ``info["x_velocity"]`` is set to the same number. ``threshold`` (m/s, finite, > 0) defaults to the task's.
    """

    def __init__(self, env: gym.Env, threshold: float):
        if not isinstance(env, gym.Env):
            raise ValueError(f"env must be a gymnasium Env, got {type(env).__name__}")
        data = getattr(env.unwrapped, "data", None)
        if data is None or not hasattr(data, "qpos") or not hasattr(env.unwrapped, "dt"):
            raise ValueError(
                f"env must be a gymnasium MuJoCo env (unwrapped.data.qpos and unwrapped.dt), got "
                f"{type(env.unwrapped).__name__}"
            )
        if (
            isinstance(threshold, bool)
            or not isinstance(threshold, (int, float))
            or not np.isfinite(threshold)
        ):
            raise ValueError(f"threshold must be a finite velocity in m/s, got {threshold!r}")
        if threshold <= 0:
            raise ValueError(f"threshold must be > 0 m/s, got {threshold!r}")
        super().__init__(env)
        self.threshold = float(threshold)

    def step(self, action: Any):
        u = self.env.unwrapped
        x_before = float(u.data.qpos[0])
        obs, r, term, trunc, info = self.env.step(action)
        v = (float(u.data.qpos[0]) - x_before) / float(u.dt)
        return obs, r, term, trunc, {**info, "x_velocity": v, "cost": float(v > self.threshold)}


def make_velocity_env(env_id: str = "SafetyHalfCheetahVelocity-v1", **kwargs: Any) -> VelocityCost:
    """The Safety-Gymnasium velocity task ``env_id`` as gymnasium MuJoCo + :class:`VelocityCost` (``kwargs`` go to
    ``gymnasium.make``)."""
    if env_id not in VELOCITY_TASKS:
        raise ValueError(f"env_id must be one of {sorted(VELOCITY_TASKS)}, got {env_id!r}")
    from iclr25.assets import make_env

    base, threshold = VELOCITY_TASKS[env_id]
    return VelocityCost(make_env(base, **kwargs), threshold)


def make_velocity_vec(
    env_id: str = "SafetyHalfCheetahVelocity-v1", num_envs: int = 1, max_steps: int = 1000
) -> VectorCostEnv:
    """``num_envs`` velocity envs (episodes cut at ``max_steps``) in a ``SyncVectorEnv``, as FOSP's vectorised
    interface (``reset(seed) -> obs (N, ·)``, ``step(a) -> (obs, r, c, term, trunc, info)``)."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
    make_velocity_env(env_id)  # refuses an unknown id here, before any worker env is built
    fns = [lambda: make_velocity_env(env_id, max_episode_steps=max_steps)] * num_envs
    return VectorCostEnv(gym.vector.SyncVectorEnv(fns))


# an open-loop HalfCheetah gait a_j(t) = clip(offset_j + amp_j·sin(2π·freq·t·dt + phase_j), −1, 1), joints in the
# action order (bthigh, bshin, bfoot, fthigh, fshin, ffoot); freq in Hz, dt = 0.05 s. Found once by a cross-entropy
# search (18 rounds × 30 candidates, 250-step rollouts, score = mean Δx/dt); on 1000-step episodes with action noise
# 0.1 it averages 1.8–3.2 m/s with 32–58 % of steps above 3.2096 m/s, at half amplitude ≈ 0.95 m/s and none.
CHEETAH_GAIT = {
    "freq": 3.139,
    "phase": np.array([-0.174, 1.178, -0.892, 2.626, -3.078, -3.383]),
    "amp": np.array([0.92, 1.068, 0.791, 0.735, 0.82, 1.046]),
    "offset": np.array([-0.833, 0.022, -0.763, -0.219, -1.182, 0.0]),
}
GAITS = {"SafetyHalfCheetahVelocity-v1": CHEETAH_GAIT}
# behaviour name -> gait amplitude scale (None: uniform random actions)
VELOCITY_BEHAVIOURS = {"fast": 1.0, "slow": 0.5, "random": None}


def gait_actions(
    t: np.ndarray, gait: dict, dt: float, amp_scale: float, noise: float, rng: np.random.Generator
) -> np.ndarray:
    """Actions (N, act_dim) of the open-loop gait at per-env step counters ``t`` (N,), plus N(0, noise²) noise."""
    t = np.asarray(t, dtype=np.float64)[:, None]  # (N, 1)
    a = gait["offset"] + amp_scale * gait["amp"] * np.sin(2 * np.pi * gait["freq"] * t * dt + gait["phase"])
    return np.clip(a + noise * rng.standard_normal(a.shape), -1.0, 1.0)


def collect_velocity_dataset(
    env_id: str = "SafetyHalfCheetahVelocity-v1",
    episodes_per_policy: int = 10,
    seed: int = 0,
    policies: tuple[str, ...] = ("fast", "slow", "random"),
    noise: float = 0.1,
    max_steps: int = 1000,
    batch_envs: int = 64,
    with_info: bool = False,
) -> OfflineDataset | tuple[OfflineDataset, dict[str, np.ndarray]]:
    """The offline mixture D on a velocity task: ``episodes_per_policy`` episodes (``max_steps`` steps) of each
    behaviour of :data:`VELOCITY_BEHAVIOURS`, ``batch_envs`` environments stepped together.

    Rows are transitions, each episode contiguous and ending with ``truncations`` (or ``terminations``). With
    ``with_info`` also returns ``{"x_velocity": (N,), "policy": (N,) names}`` row by row (the velocity the cost was
    computed from, and the behaviour that produced the row).
    """
    if env_id not in GAITS:
        raise ValueError(f"env_id must be one of {sorted(GAITS)}, got {env_id!r}")
    for name, v, lo in (
        ("episodes_per_policy", episodes_per_policy, 1),
        ("max_steps", max_steps, 1),
        ("batch_envs", batch_envs, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if not isinstance(policies, (tuple, list)) or len(policies) == 0:
        raise ValueError(
            f"policies must be a non-empty tuple of names among {sorted(VELOCITY_BEHAVIOURS)}, got {policies!r}"
        )
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise < np.inf:
        raise ValueError(f"noise must be a finite number >= 0 (action noise std), got {noise!r}")
    for name in policies:
        if name not in VELOCITY_BEHAVIOURS:
            raise ValueError(f"policies must be among {sorted(VELOCITY_BEHAVIOURS)}, got {name!r}")
    gait = GAITS[env_id]
    parts, xv, who = [], [], []
    for k, name in enumerate(policies):
        for chunk, start in enumerate(range(0, episodes_per_policy, batch_envs)):
            n = min(batch_envs, episodes_per_policy - start)
            rng = np.random.default_rng([seed, k, chunk])
            env = make_velocity_vec(env_id, n, max_steps)
            dt = float(env.env.envs[0].unwrapped.dt)
            period = max(1, int(round(1.0 / (gait["freq"] * dt))))
            t0 = rng.integers(0, period, n)  # each env starts the gait at its own phase
            ep = _rollout(
                env, max_steps, int(rng.integers(2**31)), _behaviour(name, gait, dt, t0, noise, rng)
            )
            env.env.close()
            live = ep.pop("live")
            parts.append({f: v[live] for f, v in ep.items()})
            xv.append(parts[-1].pop("x_velocity"))
            who.append(np.full(int(live.sum()), name))
    data = OfflineDataset(**{f: np.concatenate([p[f] for p in parts]) for f in FIELDS})
    if with_info:
        return data, {"x_velocity": np.concatenate(xv), "policy": np.concatenate(who)}
    return data


def _behaviour(
    name: str, gait: dict, dt: float, t0: np.ndarray, noise: float, rng: np.random.Generator
) -> Callable[[int], np.ndarray]:
    """Step t -> actions (N, act_dim) of one behaviour for N envs whose gaits start at phases ``t0`` (N,)."""
    scale = VELOCITY_BEHAVIOURS[name]
    if scale is None:
        return lambda t: rng.uniform(-1.0, 1.0, (len(t0), len(gait["amp"])))
    return lambda t: gait_actions(t0 + t, gait, dt, scale, noise, rng)


def _rollout(
    env: VectorCostEnv, max_steps: int, seed: int, policy: Callable[[int], np.ndarray]
) -> dict[str, np.ndarray]:
    """The first episode of every env: arrays (N, steps, ·) and ``live`` (N, steps), True up to and including each
    env's last step (later steps of an env that ended early — its autoreset — are masked out)."""
    o = env.reset(seed=seed)
    n = env.num_envs
    cols: dict[str, list] = {f: [] for f in (*FIELDS, "x_velocity", "live")}
    live = np.ones(n, bool)
    for t in range(max_steps):
        a = policy(t)
        o2, r, c, term, trunc, info = env.step(a)
        if t == max_steps - 1:
            trunc = trunc | ~term  # the episode is cut here in the data, whatever the env's own limit
        for f, v in zip(
            (*FIELDS, "x_velocity", "live"),
            (o, a, r, c, o2, term, trunc, np.asarray(info["x_velocity"], np.float64), live.copy()),
        ):
            cols[f].append(v)
        live &= ~(term | trunc)
        o = o2
        if not live.any():
            break
    return {f: np.stack(v, 1) for f, v in cols.items()}
