"""Offline datasets (Minari / D4RL field names), behaviour policies and sequence sampling.

The paper's offline data D mixes trajectories of safe, unsafe and random behaviour policies. ``collect_dataset``
rolls out such a mixture on a (vectorised) SafeNav2D; ``OfflineDataset`` holds any user's data with the standard
field names — ``observations, actions, rewards, costs, next_observations, terminations, truncations`` (Minari; DSRL
adds ``costs``) — and also accepts D4RL's ``terminals``/``timeouts``. ``SequenceStore`` samples windows of T
consecutive transitions that never cross an episode boundary, as the world model trains on sequences.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .env import LIDAR_BINS, SafeNav2DVec

FIELDS = ("observations", "actions", "rewards", "costs", "next_observations", "terminations", "truncations")


@dataclass
class OfflineDataset:
    """Flat transitions (N, ·) in storage order; an episode ends where ``terminations | truncations``."""

    observations: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    costs: np.ndarray
    next_observations: np.ndarray
    terminations: np.ndarray
    truncations: np.ndarray

    def __post_init__(self) -> None:
        for f in FIELDS:
            setattr(self, f, np.asarray(getattr(self, f)))
        n = len(self.observations)
        if n == 0:
            raise ValueError("observations must hold at least one transition, got 0")
        for f in FIELDS:
            if len(getattr(self, f)) != n:
                raise ValueError(f"{f} must have {n} rows like observations, got {len(getattr(self, f))}")
        if self.next_observations.shape != self.observations.shape:
            raise ValueError(
                f"next_observations must have the shape of observations {self.observations.shape}, "
                f"got {self.next_observations.shape}"
            )
        if self.observations.ndim < 2:
            raise ValueError(
                f"observations must be (N, obs_dim...) with a feature axis, got {self.observations.shape}"
            )
        for f in ("terminations", "truncations"):
            x = getattr(self, f)
            if x.dtype != bool and not np.isin(x, (0, 1)).all():
                raise ValueError(f"{f} must be booleans (or 0/1), got other values")
        if self.actions.ndim != 2:
            raise ValueError(f"actions must be (N, act_dim), got shape {self.actions.shape}")
        for f in ("rewards", "costs", "terminations", "truncations"):
            if getattr(self, f).ndim != 1:
                raise ValueError(f"{f} must be (N,), got shape {getattr(self, f).shape}")
        for f in ("observations", "actions", "rewards", "costs", "next_observations"):
            if not np.isfinite(getattr(self, f)).all():
                raise ValueError(f"{f} must be finite, got NaN/inf")
        if (self.costs < 0).any():
            raise ValueError(f"costs must be >= 0, got min {self.costs.min()!r}")
        self.observations = self.observations.astype(np.float32)
        self.next_observations = self.next_observations.astype(np.float32)
        self.actions = self.actions.astype(np.float32)
        self.rewards = self.rewards.astype(np.float32)
        self.costs = self.costs.astype(np.float32)
        self.terminations = self.terminations.astype(bool)
        self.truncations = self.truncations.astype(bool)

    def __len__(self) -> int:
        return len(self.observations)

    @property
    def obs_shape(self) -> tuple[int, ...]:
        return tuple(self.observations.shape[1:])

    @property
    def act_dim(self) -> int:
        return int(self.actions.shape[1])

    def episode_ids(self) -> np.ndarray:
        done = self.terminations | self.truncations
        return np.concatenate([[0], np.cumsum(done)[:-1]]).astype(np.int64)

    def episode_stats(self) -> dict[str, float]:
        ids = self.episode_ids()
        ret = np.bincount(ids, self.rewards)
        cost = np.bincount(ids, self.costs)
        return {"episodes": float(len(ret)), "return": float(ret.mean()), "cost": float(cost.mean())}

    def to_dict(self) -> dict[str, np.ndarray]:
        return {f: getattr(self, f) for f in FIELDS}

    @classmethod
    def from_dict(cls, d: dict[str, np.ndarray]) -> OfflineDataset:
        """From Minari/DSRL field names, or D4RL's (``terminals``/``timeouts``); ``costs`` is required."""
        if not isinstance(d, Mapping):
            raise ValueError(f"d must be a mapping of field name -> array, got {type(d).__name__}")
        d = dict(d)
        if "terminations" not in d and "terminals" in d:
            d["terminations"] = d.pop("terminals")
        if "truncations" not in d and "timeouts" in d:
            d["truncations"] = d.pop("timeouts")
        missing = [f for f in FIELDS if f not in d]
        if missing:
            hint = " (an offline safe-RL dataset needs a per-step cost signal)" if "costs" in missing else ""
            raise ValueError(f"dataset is missing fields {missing}{hint}; got {sorted(d)}")
        return cls(**{f: d[f] for f in FIELDS})

    def save(self, path: str | Path) -> Path:
        from iclr25.common.io import atomic_write_with

        return atomic_write_with(path, lambda tmp: np.savez_compressed(open(tmp, "wb"), **self.to_dict()))

    @classmethod
    def load(cls, path: str | Path) -> OfflineDataset:
        with np.load(path, allow_pickle=False) as z:
            return cls.from_dict({k: z[k] for k in z.files})

    def concat(self, other: OfflineDataset) -> OfflineDataset:
        if not isinstance(other, OfflineDataset):
            raise ValueError(f"other must be an OfflineDataset, got {type(other).__name__}")
        if other.obs_shape != self.obs_shape or other.act_dim != self.act_dim:
            raise ValueError(
                f"cannot concatenate datasets with observation/action shapes {self.obs_shape}/{self.act_dim} and "
                f"{other.obs_shape}/{other.act_dim}"
            )
        return OfflineDataset(**{f: np.concatenate([getattr(self, f), getattr(other, f)]) for f in FIELDS})


# ------------------------------------------------------------------------------------------ behaviour policies
def _check_policy_args(obs, rng, noise) -> np.ndarray:
    obs = np.asarray(obs)
    if obs.ndim != 2 or obs.shape[1] < 6 + LIDAR_BINS:
        raise ValueError(
            f"obs must be SafeNav2D state observations (N, {6 + LIDAR_BINS}), got shape {obs.shape}"
        )
    if not isinstance(rng, np.random.Generator):
        raise ValueError(
            f"rng must be a numpy Generator (np.random.default_rng(seed)), got {type(rng).__name__}"
        )
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise < np.inf:
        raise ValueError(f"noise must be a finite number >= 0 (action noise std), got {noise!r}")
    return obs


def _goal_dir(obs: np.ndarray) -> np.ndarray:
    g = obs[:, 4:6]
    return g / np.maximum(np.linalg.norm(g, axis=1, keepdims=True), 1e-6)


def greedy_policy(obs: np.ndarray, rng: np.random.Generator, noise: float = 0.3) -> np.ndarray:
    """Unsafe: straight to the goal with velocity damping, ignores hazards."""
    obs = _check_policy_args(obs, rng, noise)
    a = 2.0 * _goal_dir(obs) - 1.0 * obs[:, 2:4]
    return np.clip(a + noise * rng.standard_normal(a.shape), -1, 1)


_BIN_DIR = np.stack(
    [
        np.cos((np.arange(LIDAR_BINS) + 0.5) * 2 * np.pi / LIDAR_BINS),
        np.sin((np.arange(LIDAR_BINS) + 0.5) * 2 * np.pi / LIDAR_BINS),
    ],
    -1,
)


def safe_policy(obs: np.ndarray, rng: np.random.Generator, noise: float = 0.3) -> np.ndarray:
    """Safe: potential field — goal attraction plus repulsion from lidar-detected hazards (and a tangent term)."""
    obs = _check_policy_args(obs, rng, noise)
    lid = obs[:, 6 : 6 + LIDAR_BINS]
    strength = np.clip((lid - 0.7) / 0.2, 0, None) ** 2  # active within ~0.9 of a hazard centre
    rep = -(strength[..., None] * _BIN_DIR[None]).sum(1)  # push away
    tang = np.stack([-rep[:, 1], rep[:, 0]], -1)
    gd = _goal_dir(obs)
    tang = tang * np.sign((tang * gd).sum(1, keepdims=True) + 1e-9)  # slide around towards the goal
    a = 1.5 * gd + 3.0 * rep + 1.5 * tang - 1.0 * obs[:, 2:4]
    return np.clip(a + noise * rng.standard_normal(a.shape), -1, 1)


def random_policy(obs: np.ndarray, rng: np.random.Generator, noise: float = 0.0) -> np.ndarray:
    """Uniform actions in [-1, 1]² (``noise`` is accepted for a common signature and unused)."""
    obs = _check_policy_args(obs, rng, noise)
    return rng.uniform(-1, 1, size=(obs.shape[0], 2))


BEHAVIOURS: dict[str, Callable] = {"safe": safe_policy, "unsafe": greedy_policy, "random": random_policy}


def rollout(
    env: SafeNav2DVec, policy: Callable[[np.ndarray], np.ndarray], seed: int
) -> dict[str, np.ndarray]:
    """One synchronised episode of all ``env.num_envs`` environments; arrays (num_envs, steps, ·)."""
    o = env.reset(seed=seed)
    cols: dict[str, list] = {f: [] for f in FIELDS}
    while True:
        a = policy(o)
        o2, r, c, term, trunc, _ = env.step(a)
        for f, v in zip(FIELDS, (o, a, r, c, o2, term, trunc)):
            cols[f].append(v)
        o = o2
        if (term | trunc).all():
            break
    return {f: np.stack(v, 1) for f, v in cols.items()}


def collect_dataset(
    episodes_per_policy: int = 60,
    layout: str = "base",
    seed: int = 0,
    policies: tuple[str, ...] = ("safe", "unsafe", "random"),
    noise: float = 0.3,
    max_steps: int = 200,
) -> OfflineDataset:
    """The offline mixture D: ``episodes_per_policy`` episodes of each behaviour policy (vectorised rollouts)."""
    if (
        isinstance(episodes_per_policy, bool)
        or not isinstance(episodes_per_policy, int)
        or episodes_per_policy < 1
    ):
        raise ValueError(f"episodes_per_policy must be an int >= 1, got {episodes_per_policy!r}")
    if not isinstance(policies, (tuple, list)) or len(policies) == 0:
        raise ValueError(
            f"policies must be a non-empty tuple of names among {sorted(BEHAVIOURS)}, got {policies!r}"
        )
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not 0 <= noise < np.inf:
        raise ValueError(f"noise must be a finite number >= 0, got {noise!r}")
    if isinstance(max_steps, bool) or not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(f"max_steps must be an int >= 1, got {max_steps!r}")
    parts = []
    for k, name in enumerate(policies):
        if name not in BEHAVIOURS:
            raise ValueError(f"policies must be among {sorted(BEHAVIOURS)}, got {name!r}")
        env = SafeNav2DVec(episodes_per_policy, layout=layout, max_steps=max_steps)
        rng = np.random.default_rng([seed, k])
        ep = rollout(env, lambda o, f=BEHAVIOURS[name], g=rng: f(o, g, noise), seed=int(rng.integers(2**31)))
        parts.append({f: v.reshape(-1, *v.shape[2:]) for f, v in ep.items()})
    return OfflineDataset(**{f: np.concatenate([p[f] for p in parts]) for f in FIELDS})


# ---------------------------------------------------------------------------------------------- sequences
class SequenceStore:
    """Windows of T consecutive transitions inside one episode, from a flat dataset plus a growing online part.

    The online part is a preallocated (num_envs × capacity) block filled one vectorised step at a time; with
    ``online_frac=None`` windows are drawn uniformly over all valid windows (replay = D ∪ online), otherwise a
    fixed fraction of every batch comes from the online part once it has windows.
    """

    def __init__(self, seq_len: int, offline: OfflineDataset | None = None, online_frac: float | None = None):
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 2:
            raise ValueError(f"seq_len must be an int >= 2, got {seq_len!r}")
        if online_frac is not None and (
            isinstance(online_frac, bool)
            or not isinstance(online_frac, (int, float))
            or not 0.0 <= online_frac <= 1.0
        ):
            raise ValueError(f"online_frac must be None or in [0, 1], got {online_frac!r}")
        self.T, self.online_frac = seq_len, online_frac
        self.off = offline
        self.off_starts = (
            self._starts(offline.episode_ids()) if offline is not None else np.zeros(0, np.int64)
        )
        self.on: dict[str, np.ndarray] | None = None
        self.on_fill = 0

    def _starts(self, ep: np.ndarray) -> np.ndarray:
        n = len(ep)
        if n < self.T:
            return np.zeros(0, np.int64)
        i = np.arange(n - self.T + 1)
        return i[ep[i] == ep[i + self.T - 1]]

    # online part ------------------------------------------------------------------------------------
    def init_online(self, num_envs: int, capacity: int, obs_shape: tuple[int, ...], act_dim: int) -> None:
        for name, v in (("num_envs", num_envs), ("capacity", capacity), ("act_dim", act_dim)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        self.on_envs, self.on_cap = num_envs, capacity
        shp = {
            "observations": obs_shape,
            "next_observations": obs_shape,
            "actions": (act_dim,),
            "rewards": (),
            "costs": (),
            "terminations": (),
            "truncations": (),
        }
        dt = {"terminations": bool, "truncations": bool}
        self.on = {f: np.zeros((num_envs, capacity, *shp[f]), dt.get(f, np.float32)) for f in FIELDS}
        self.on_ep = np.zeros((num_envs, capacity), np.int64)
        self._ep_counter = np.zeros(num_envs, np.int64)
        self.on_fill = 0

    def add(self, obs, act, rew, cost, next_obs, term, trunc) -> None:
        if self.on is None:
            raise ValueError("call init_online(...) before add(...)")
        if self.on_fill >= self.on_cap:
            raise ValueError(f"online capacity {self.on_cap} exhausted")
        t = self.on_fill
        for f, v in zip(FIELDS, (obs, act, rew, cost, next_obs, term, trunc)):
            self.on[f][:, t] = v
        self.on_ep[:, t] = self._ep_counter
        self._ep_counter += np.asarray(term, bool) | np.asarray(trunc, bool)
        self.on_fill += 1

    def _on_starts(self) -> np.ndarray:
        if self.on is None or self.on_fill < self.T:
            return np.zeros(0, np.int64)
        t = np.arange(self.on_fill - self.T + 1)
        ok = self.on_ep[:, t] == self.on_ep[:, t + self.T - 1]  # (E, n)
        e, tt = np.nonzero(ok)
        return e * self.on_cap + tt  # flat index into the (E·cap) block

    @property
    def online_transitions(self) -> int:
        return 0 if self.on is None else self.on_fill * self.on_envs

    def sample(self, batch: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """A dict of (batch, T, ·) arrays plus ``source`` (batch,) = 1 for online windows."""
        if isinstance(batch, bool) or not isinstance(batch, (int, np.integer)) or batch < 1:
            raise ValueError(f"batch must be an int >= 1, got {batch!r}")
        on_starts = self._on_starts()
        n_off, n_on = len(self.off_starts), len(on_starts)
        if n_off + n_on == 0:
            raise ValueError(f"no window of seq_len={self.T} transitions inside one episode yet")
        if n_on == 0:
            k_on = 0
        elif n_off == 0:
            k_on = batch
        elif self.online_frac is None:
            k_on = int(rng.binomial(batch, n_on / (n_on + n_off)))
        else:
            k_on = int(round(batch * self.online_frac))
        out = []
        ar = np.arange(self.T)
        if batch - k_on > 0:
            idx = self.off_starts[rng.integers(0, n_off, batch - k_on)][:, None] + ar
            out.append({f: getattr(self.off, f)[idx] for f in FIELDS} | {"source": np.zeros(len(idx))})
        if k_on > 0:
            idx = on_starts[rng.integers(0, n_on, k_on)][:, None] + ar
            flat = {f: v.reshape(-1, *v.shape[2:]) for f, v in self.on.items()}
            out.append({f: flat[f][idx] for f in FIELDS} | {"source": np.ones(len(idx))})
        return {k: np.concatenate([o[k] for o in out]) for k in out[0]}
