"""SafeNav2D: a numpy point-mass navigation CMDP with hazards and a hazard lidar (Safety-Gymnasium style).

The paper evaluates on Safety-Gymnasium "Goal"-type tasks (SafetyPointGoal1 ...): a point robot collects goals
(reward = progress towards the goal + a bonus on arrival) while circular hazards cost 1 per step inside them, and
the robot perceives hazards through a lidar. ``SafeNav2D`` keeps exactly that structure at laptop scale:

* dynamics: double integrator, dt = 0.1, velocity damping 0.9, action a ∈ [-1, 1]² is a force (clipped);
* reward: 10 × (previous − current distance to goal) + 1 on reaching it (radius 0.3, then a new goal is drawn);
* cost: 1 per step while inside any hazard (radius 0.35);
* observation (22): position, velocity, goal vector and a 16-bin hazard lidar (value 1 − d/3 of the closest
  hazard centre in each angular bin, as Safety-Gymnasium's linear lidar);
* episodes: 200 steps, truncation only.

Spawn is on the left strip of the [-2, 2]² arena and goals alternate between the right and left strips, so the
robot crosses the middle. ``layout="shifted"`` adds two hazards on the straight line between the strips: the
"unseen safety layout" of the paper's fine-tuning phase.

``SafeNav2DVec`` steps N environments at once in numpy (the hot path for data collection, evaluation and online
training). ``SafeNav2D`` is the single-environment view with the Safety-Gymnasium step convention
``(obs, reward, cost, terminated, truncated, info)``; :class:`SafetyToGymnasium` turns it (or any
Safety-Gymnasium env) into a plain gymnasium env with ``info["cost"]``; :class:`GymnasiumToSafety` goes back and
refuses environments that carry no cost signal. ``gymnasium.make("SafeNav2D-v0", layout="shifted")`` returns the
gymnasium view.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

BASE_HAZARDS = np.array([[-0.75, 0.55], [0.75, -0.55], [0.05, 1.3], [0.0, -1.45]], dtype=np.float64)
SHIFT_HAZARDS = np.array([[0.0, 0.3], [0.0, -0.55]], dtype=np.float64)  # on the spawn→goal straight line
LAYOUTS = ("base", "shifted")
OBS_DIM = 22
ACT_DIM = 2
LIDAR_BINS = 16
LIDAR_RANGE = 3.0
ARENA = 2.0


def hazards_for(layout: str) -> np.ndarray:
    """Hazard centres (K, 2) of a named layout."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    return BASE_HAZARDS if layout == "base" else np.concatenate([BASE_HAZARDS, SHIFT_HAZARDS])


def lidar(
    pos: np.ndarray, hazards: np.ndarray, bins: int = LIDAR_BINS, max_dist: float = LIDAR_RANGE
) -> np.ndarray:
    """Safety-Gymnasium-style linear lidar: per angular bin, max over hazards of max(0, 1 − d / max_dist).

    pos: (N, 2); hazards: (K, 2) → (N, bins).
    """
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 1:
        raise ValueError(f"bins must be an int >= 1, got {bins!r}")
    if isinstance(max_dist, bool) or not (np.isfinite(max_dist) and max_dist > 0):
        raise ValueError(f"max_dist must be a finite number > 0, got {max_dist!r}")
    pos, hazards = np.asarray(pos, dtype=float), np.asarray(hazards, dtype=float)
    if pos.ndim != 2 or pos.shape[1] != 2 or hazards.ndim != 2 or hazards.shape[1] != 2:
        raise ValueError(
            f"pos and hazards must be (N, 2) and (K, 2) positions, got {pos.shape} and {hazards.shape}"
        )
    if not (np.isfinite(pos).all() and np.isfinite(hazards).all()):
        raise ValueError("pos and hazards must be finite, got NaN/inf")
    rel = hazards[None, :, :] - pos[:, None, :]  # (N, K, 2)
    d = np.linalg.norm(rel, axis=-1)
    ang = np.mod(np.arctan2(rel[..., 1], rel[..., 0]), 2 * np.pi)
    b = np.minimum((ang / (2 * np.pi) * bins).astype(np.int64), bins - 1)  # (N, K)
    val = np.maximum(0.0, 1.0 - d / max_dist)
    onehot = b[..., None] == np.arange(bins)  # (N, K, bins)
    return np.where(onehot, val[..., None], 0.0).max(axis=1)


def raster(pos: np.ndarray, goal: np.ndarray, hazards: np.ndarray, size: int = 16) -> np.ndarray:
    """Top-down (N, size, size, 3) uint8 image: hazards blue, goal green, agent red (the "vision" observation)."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ValueError(f"size must be an int >= 1 (pixels), got {size!r}")
    pos, goal, hazards = (np.asarray(x, dtype=float) for x in (pos, goal, hazards))
    if (
        pos.ndim != 2
        or pos.shape[1] != 2
        or goal.shape != pos.shape
        or hazards.ndim != 2
        or hazards.shape[1] != 2
    ):
        raise ValueError(
            f"pos and goal must be (N, 2) and hazards (K, 2), got {pos.shape}, {goal.shape}, {hazards.shape}"
        )
    g = (np.arange(size) + 0.5) / size * 2 * ARENA - ARENA
    xx, yy = np.meshgrid(g, g, indexing="xy")
    pts = np.stack([xx, yy], -1).reshape(1, -1, 2)  # (1, P, 2)
    img = np.zeros((pos.shape[0], size * size, 3), dtype=np.uint8)
    hz = (np.linalg.norm(pts[:, :, None, :] - hazards[None, None], axis=-1) < 0.35).any(-1)  # (1, P)
    img[..., 2] = np.where(hz, 255, 0)
    img[..., 1] = np.where(np.linalg.norm(pts - goal[:, None], axis=-1) < 0.3, 255, 0)
    img[..., 0] = np.where(np.linalg.norm(pts - pos[:, None], axis=-1) < 0.25, 255, 0)
    return img.reshape(pos.shape[0], size, size, 3)


class SafeNav2DVec:
    """N synchronised SafeNav2D environments stepped together in numpy (no auto-reset: all truncate at once)."""

    single_action_space = gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
    dt = 0.1
    damping = 0.9
    goal_radius = 0.3
    hazard_radius = 0.35

    def __init__(
        self, num_envs: int = 1, layout: str = "base", max_steps: int = 200, seed: int | None = None
    ):
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs must be an int >= 1, got {num_envs!r}")
        if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
            raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
        self.num_envs, self.layout, self.max_steps = num_envs, layout, max_steps
        self.hazards = hazards_for(layout)
        self.rng = np.random.default_rng(seed)
        self.pos = np.zeros((num_envs, 2))
        self.vel = np.zeros((num_envs, 2))
        self.goal = np.zeros((num_envs, 2))
        self.side = np.ones(num_envs)  # +1: current goal on the right strip, −1: left strip
        self.t = 0

    def _strip(self, side: np.ndarray) -> np.ndarray:
        x = side * self.rng.uniform(1.3, 1.7, size=side.shape)
        return np.stack([x, self.rng.uniform(-1.0, 1.0, size=side.shape)], -1)

    def seed(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def obs(self) -> np.ndarray:
        return np.concatenate(
            [self.pos, self.vel, self.goal - self.pos, lidar(self.pos, self.hazards)], 1
        ).astype(np.float32)

    def in_hazard(self, pos: np.ndarray | None = None) -> np.ndarray:
        p = self.pos if pos is None else pos
        return (np.linalg.norm(p[:, None] - self.hazards[None], axis=-1) < self.hazard_radius).any(-1)

    def reset(self, seed: int | None = None) -> np.ndarray:
        if seed is not None:
            self.seed(seed)
        self.pos = self._strip(-np.ones(self.num_envs))
        self.vel = np.zeros((self.num_envs, 2))
        self.side = np.ones(self.num_envs)
        self.goal = self._strip(self.side)
        self.t = 0
        return self.obs()

    def step(self, action: np.ndarray):
        a = np.asarray(action, dtype=np.float64)
        if a.shape != (self.num_envs, ACT_DIM):
            raise ValueError(f"action must have shape ({self.num_envs}, {ACT_DIM}), got {a.shape}")
        if not np.isfinite(a).all():
            raise ValueError("action must be finite, got NaN/inf")
        a = np.clip(a, -1.0, 1.0)
        d0 = np.linalg.norm(self.goal - self.pos, axis=1)
        self.vel = self.damping * self.vel + self.dt * a
        self.pos = self.pos + self.dt * self.vel  # terminal speed 1 unit/s = 0.1 per step
        out = np.abs(self.pos) > ARENA
        self.pos = np.clip(self.pos, -ARENA, ARENA)
        self.vel = np.where(out, 0.0, self.vel)
        d1 = np.linalg.norm(self.goal - self.pos, axis=1)
        reached = d1 < self.goal_radius
        reward = 10.0 * (d0 - d1) + reached.astype(np.float64)
        if reached.any():
            self.side = np.where(reached, -self.side, self.side)
            self.goal = np.where(reached[:, None], self._strip(self.side), self.goal)
        cost = self.in_hazard().astype(np.float64)
        self.t += 1
        term = np.zeros(self.num_envs, dtype=bool)
        trunc = np.full(self.num_envs, self.t >= self.max_steps)
        return (
            self.obs(),
            reward.astype(np.float32),
            cost.astype(np.float32),
            term,
            trunc,
            {"goal_reached": reached},
        )


class SafeNav2D(gym.Env):
    """One SafeNav2D environment with the Safety-Gymnasium step convention.

    ``step`` returns ``(obs, reward, cost, terminated, truncated, info)``; wrap it with :class:`SafetyToGymnasium`
    (or use ``gymnasium.make("SafeNav2D-v0")``) for the plain gymnasium 5-tuple.
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def __init__(
        self,
        layout: str = "base",
        max_steps: int = 200,
        obs_type: str = "state",
        render_mode: str | None = None,
    ):
        if obs_type not in ("state", "vision"):
            raise ValueError(f"obs_type must be 'state' or 'vision', got {obs_type!r}")
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode must be None or 'rgb_array', got {render_mode!r}")
        self.vec = SafeNav2DVec(1, layout=layout, max_steps=max_steps)
        self.obs_type, self.render_mode = obs_type, render_mode
        self.action_space = gym.spaces.Box(-1.0, 1.0, (ACT_DIM,), np.float32)
        if obs_type == "state":
            hi = np.array([ARENA] * 2 + [1.0] * 2 + [2 * ARENA] * 2 + [1.0] * LIDAR_BINS, np.float32)
            lo = np.where(np.arange(OBS_DIM) < 6, -hi, 0.0).astype(np.float32)
            self.observation_space = gym.spaces.Box(lo, hi, (OBS_DIM,), np.float32)
        else:
            self.observation_space = gym.spaces.Box(0, 255, (16, 16, 3), np.uint8)

    def _obs(self) -> np.ndarray:
        if self.obs_type == "state":
            return self.vec.obs()[0]
        return raster(self.vec.pos, self.vec.goal, self.vec.hazards)[0]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.vec.rng = self.np_random
        self.vec.reset()
        return self._obs(), {}

    def step(self, action):
        a = np.asarray(action, dtype=np.float64)
        if a.shape not in ((ACT_DIM,), (1, ACT_DIM)):
            raise ValueError(f"action must have shape ({ACT_DIM},), got {a.shape}")
        _, r, c, term, trunc, info = self.vec.step(a.reshape(1, ACT_DIM))
        info = {k: bool(v[0]) for k, v in info.items()}
        return self._obs(), float(r[0]), float(c[0]), bool(term[0]), bool(trunc[0]), info

    def render(self):
        return raster(self.vec.pos, self.vec.goal, self.vec.hazards, size=64)[0]


class SafetyToGymnasium(gym.Wrapper):
    """Safety-Gymnasium 6-tuple ``(obs, r, c, term, trunc, info)`` → gymnasium 5-tuple with ``info["cost"]``."""

    def step(self, action):
        out = self.env.step(action)
        if len(out) != 6:
            raise ValueError(
                f"env.step must return the 6-tuple (obs, reward, cost, terminated, truncated, info), "
                f"got a {len(out)}-tuple"
            )
        obs, r, c, term, trunc, info = out
        return obs, r, term, trunc, {**info, "cost": float(c)}


class GymnasiumToSafety(gym.Wrapper):
    """Gymnasium env with ``info["cost"]`` → Safety-Gymnasium 6-tuple; refuses envs without a cost signal."""

    def __init__(self, env: gym.Env, cost_key: str = "cost"):
        if not isinstance(cost_key, str):
            raise ValueError(f"cost_key must be a str (the info key of the cost), got {cost_key!r}")
        super().__init__(env)
        self.cost_key = cost_key

    def step(self, action):
        out = self.env.step(action)
        if len(out) == 6:
            return out
        obs, r, term, trunc, info = out
        if self.cost_key not in info:
            raise ValueError(
                f"env {self.env.spec.id if self.env.spec else type(self.env.unwrapped).__name__} has no cost signal: "
                f"info has no key {self.cost_key!r} (keys: {sorted(info)}); FOSP needs a per-step cost c_t ≥ 0"
            )
        c = float(info[self.cost_key])
        if not np.isfinite(c) or c < 0:
            raise ValueError(f"info[{self.cost_key!r}] must be a finite cost >= 0, got {c!r}")
        return obs, r, c, term, trunc, info


class VectorCostEnv:
    """Any gymnasium env with a per-step cost, as the vectorised interface FOSP's loops use.

    ``env``: a ``gymnasium.vector.VectorEnv`` (e.g. ``SyncVectorEnv``) or a single ``gymnasium.Env`` (seen as
    one environment). Its ``step`` may return the gymnasium 5-tuple with the cost in ``info[cost_key]``
    (Safety-Gymnasium's gymnasium convention) or the Safety-Gymnasium 6-tuple. Then
    ``reset(seed) -> obs (N, ·)`` and ``step(a) -> (obs, reward, cost, terminated, truncated, info)`` with arrays
    of length N, like :class:`SafeNav2DVec`. Under ``SAME_STEP`` autoreset the returned next observation of a
    finished environment is its ``info["final_obs"]``. The action space must be a bounded 1-D ``Box``.
    """

    def __init__(self, env: Any, cost_key: str = "cost"):
        if not isinstance(cost_key, str):
            raise ValueError(f"cost_key must be a str (the info key of the cost), got {cost_key!r}")
        if isinstance(env, gym.vector.VectorEnv):
            self.vector, self.num_envs = True, int(env.num_envs)
            act_space, obs_space = env.single_action_space, env.single_observation_space
        elif isinstance(env, gym.Env):
            self.vector, self.num_envs = False, 1
            act_space, obs_space = env.action_space, env.observation_space
        else:
            raise TypeError(
                f"env must be a gymnasium Env or VectorEnv (or a SafeNav2DVec), got {type(env).__name__}"
            )
        if not isinstance(act_space, gym.spaces.Box) or len(act_space.shape) != 1:
            raise ValueError(f"env must have a 1-D Box action space (continuous actions), got {act_space!r}")
        if not (np.isfinite(act_space.low).all() and np.isfinite(act_space.high).all()):
            raise ValueError(
                f"env action bounds must be finite to rescale the policy's [-1, 1] actions, got "
                f"low={act_space.low.tolist()}, high={act_space.high.tolist()}"
            )
        self.env, self.cost_key = env, cost_key
        self.single_action_space, self.single_observation_space = act_space, obs_space

    def reset(self, seed: int | None = None) -> np.ndarray:
        obs, _ = self.env.reset(seed=seed)
        obs = np.asarray(obs)
        return obs if self.vector else obs[None]

    def step(self, action: np.ndarray):
        a = np.asarray(action, dtype=self.single_action_space.dtype)
        if a.shape != (self.num_envs, *self.single_action_space.shape):
            raise ValueError(
                f"action must have shape ({self.num_envs}, {self.single_action_space.shape[0]}), got {a.shape}"
            )
        out = self.env.step(a if self.vector else a[0])
        if len(out) == 6:
            obs, r, c, term, trunc, info = out
        elif len(out) == 5:
            obs, r, term, trunc, info = out
            if self.cost_key not in info:
                name = getattr(getattr(self.env, "spec", None), "id", None) or type(self.env).__name__
                raise ValueError(
                    f"env {name} has no cost signal: info has no key {self.cost_key!r} (keys: {sorted(info)}); "
                    "FOSP needs a per-step cost c_t >= 0 (Safety-Gymnasium convention: info['cost'])"
                )
            c = info[self.cost_key]
            mask = info.get("_" + self.cost_key)
            if mask is not None and not np.all(mask):
                raise ValueError(f"info[{self.cost_key!r}] is missing for some environments (mask {mask})")
        else:
            raise ValueError(f"env.step must return a 5- or 6-tuple, got a {len(out)}-tuple")
        n = self.num_envs
        obs = np.asarray(obs) if self.vector else np.asarray(obs)[None]
        cost = np.asarray(c, dtype=np.float64).reshape(n)
        if not (np.isfinite(cost).all() and (cost >= 0).all()):
            raise ValueError(f"info[{self.cost_key!r}] must hold finite costs >= 0, got {cost.tolist()}")
        term = np.asarray(term, dtype=bool).reshape(n)
        trunc = np.asarray(trunc, dtype=bool).reshape(n)
        if self.vector and "final_obs" in info:  # SAME_STEP autoreset: obs of a finished env is its reset obs
            fm = np.asarray(info.get("_final_obs", term | trunc), bool)
            obs = obs.copy()
            for i in np.nonzero(fm)[0]:
                obs[i] = info["final_obs"][i]
        return (
            obs,
            np.asarray(r, dtype=np.float32).reshape(n),
            cost.astype(np.float32),
            term,
            trunc,
            info,
        )


def as_vector_env(env: Any, cost_key: str = "cost") -> Any:
    """``SafeNav2DVec`` / an already adapted env as is; a gymnasium (vector) env wrapped in :class:`VectorCostEnv`."""
    if isinstance(env, (SafeNav2DVec, VectorCostEnv)):
        return env
    return VectorCostEnv(env, cost_key)


def make_safety_gymnasium_vec(env_id: str, num_envs: int, **kw: Any) -> VectorCostEnv:
    """``num_envs`` Safety-Gymnasium envs (6-tuple convention → gymnasium ``info["cost"]``) in a SyncVectorEnv."""
    fns = [lambda: SafetyToGymnasium(_SafetyGymWrapper(make_safety_gymnasium(env_id, **kw)))] * num_envs
    return VectorCostEnv(gym.vector.SyncVectorEnv(fns))


class _SafetyGymWrapper(gym.Env):
    """A Safety-Gymnasium env seen as a ``gymnasium.Env`` (its own gymnasium may be another version)."""

    def __init__(self, env: Any):
        self.inner = env
        lo, hi = np.asarray(env.action_space.low), np.asarray(env.action_space.high)
        self.action_space = gym.spaces.Box(lo.astype(np.float32), hi.astype(np.float32), dtype=np.float32)
        shp = env.observation_space.shape
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, shp, np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.inner.reset(seed=seed)
        return np.asarray(obs, np.float32), info

    def step(self, action):
        obs, r, c, term, trunc, info = self.inner.step(action)
        return np.asarray(obs, np.float32), float(r), float(c), bool(term), bool(trunc), info


def _make_gym(**kw: Any) -> gym.Env:
    return SafetyToGymnasium(SafeNav2D(**kw))


def register_envs() -> None:
    """Register ``SafeNav2D-v0`` with gymnasium (idempotent)."""
    if "SafeNav2D-v0" not in gym.registry:
        gym.register(id="SafeNav2D-v0", entry_point="iclr25.fosp.env:_make_gym", max_episode_steps=None)


def make_safety_gymnasium(env_id: str = "SafetyPointGoal1-v0", **kw: Any):
    """Optional: a Safety-Gymnasium env (6-tuple convention). Needs the ``safety-gymnasium`` package (README)."""
    try:
        import safety_gymnasium
    except ImportError as e:  # pragma: no cover - depends on the optional extra
        raise ImportError(
            "safety-gymnasium is not installed; see src/iclr25/fosp/README.md ('Safety-Gymnasium') for the "
            "Python-3.11 install route, or use SafeNav2D-v0"
        ) from e
    return safety_gymnasium.make(env_id, **kw)


register_envs()
