"""Offline datasets (Minari/D4RL field names) and OHIO relabelling (the paper's inverse problem: the most likely high-level action of each transition).

A flat low-level dataset D = {(s_τ, a_τ, r_τ, s_{τ+1})} holds episodes back to back; an episode ends at a row
whose ``terminations`` or ``truncations`` flag is set. :func:`relabel` cuts every episode into windows
t = 0, k, 2k, … (only whole windows), inverts the low level on each window and returns

    D̃ = {(s_t, û_t, R_t = Σ_{j<k} r_{t+j}, s_{t+k}, done_{t+k−1})}

dropping exactly the windows whose re-simulation residual exceeds ``threshold`` (official reacher: 0.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np


@dataclass
class OfflineDataset:
    """Transitions in the field names of Minari / D4RL (``terminals`` ≙ ``terminations``, ``timeouts`` ≙
    ``truncations``). ``infos`` holds extra per-row arrays (e.g. the inverse residual)."""

    observations: np.ndarray  # (n, obs_dim)
    actions: np.ndarray  # (n, act_dim)
    rewards: np.ndarray  # (n,)
    next_observations: np.ndarray  # (n, obs_dim)
    terminations: np.ndarray  # (n,) bool
    truncations: np.ndarray  # (n,) bool
    infos: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.observations)
        for name in ("actions", "rewards", "next_observations", "terminations", "truncations"):
            v = getattr(self, name)
            if len(v) != n:
                raise ValueError(f"{name} must have {n} rows like observations, got {len(v)}")
        self.terminations = np.asarray(self.terminations, dtype=bool)
        self.truncations = np.asarray(self.truncations, dtype=bool)

    def __len__(self) -> int:
        return len(self.observations)

    def subset(self, mask: np.ndarray) -> OfflineDataset:
        return OfflineDataset(
            self.observations[mask],
            self.actions[mask],
            self.rewards[mask],
            self.next_observations[mask],
            self.terminations[mask],
            self.truncations[mask],
            {k: v[mask] for k, v in self.infos.items()},
        )

    def episode_ids(self) -> np.ndarray:
        """Episode index of every row (episodes end where terminations | truncations)."""
        ends = self.terminations | self.truncations
        return np.concatenate([[0], np.cumsum(ends[:-1])]).astype(int)

    @classmethod
    def from_episodes(
        cls,
        observations: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        terminations: np.ndarray | None = None,
    ) -> OfflineDataset:
        """From stacked equal-length episodes: observations (E, T+1, o), actions (E, T, a), rewards (E, T).
        The last step of each episode is a truncation unless ``terminations`` (E, T) says otherwise."""
        E, T = rewards.shape
        if observations.shape[:2] != (E, T + 1) or actions.shape[:2] != (E, T):
            raise ValueError(
                f"observations must be (E, T+1, o) and actions (E, T, a) for rewards (E, T)={rewards.shape}, "
                f"got {observations.shape} and {actions.shape}"
            )
        term = np.zeros((E, T), bool) if terminations is None else np.asarray(terminations, bool)
        trunc = np.zeros((E, T), bool)
        trunc[:, -1] = ~term[:, -1]
        return cls(
            observations[:, :-1].reshape(E * T, -1),
            actions.reshape(E * T, -1),
            rewards.reshape(-1),
            observations[:, 1:].reshape(E * T, -1),
            term.reshape(-1),
            trunc.reshape(-1),
        )


class LowLevel(Protocol):
    """What :func:`relabel` needs from a low-level policy: its period k and an inverse."""

    k: int

    def invert(
        self, obs_windows: np.ndarray, act_windows: np.ndarray, method: str = ..., **kw: Any
    ) -> tuple[np.ndarray, np.ndarray]: ...


def windows(ds: OfflineDataset, k: int) -> np.ndarray:
    """Row indices (n_windows, k) of the whole k-step windows t = 0, k, 2k, … inside each episode."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    ep = ds.episode_ids()
    starts = np.flatnonzero(np.r_[True, ep[1:] != ep[:-1]])
    lengths = np.diff(np.r_[starts, len(ds)])
    pos = np.arange(len(ds)) - np.repeat(starts, lengths)  # position of each row inside its episode
    ep_len = np.repeat(lengths, lengths)
    first = np.flatnonzero((pos % k == 0) & (pos + k <= ep_len))
    return first[:, None] + np.arange(k)[None, :]


def relabel(
    ds: OfflineDataset,
    low_level: LowLevel,
    method: str = "numerical",
    *,
    threshold: float | None = 0.2,
    **inverse_kw: Any,
) -> OfflineDataset:
    """Turn a flat low-level dataset into a high-level one D̃ by inverting ``low_level`` on every k-step window.

    ``method``: ``"analytic"``, ``"numerical"`` or ``"observed_state"`` (what the low level supports).
    ``threshold``: windows whose re-simulation residual is > threshold are dropped (None keeps all).
    The result's ``infos`` hold ``residual`` and ``start_index`` (row of s_t in ``ds``).
    """
    if threshold is not None and not threshold >= 0:
        raise ValueError(f"threshold must be >= 0 or None, got {threshold!r}")
    idx = windows(ds, low_level.k)  # (n, k)
    if len(idx) == 0:
        raise ValueError(f"ds has no whole window of k={low_level.k} steps")
    obs_w = np.concatenate([ds.observations[idx], ds.next_observations[idx[:, -1:]]], 1)  # (n, k+1, o)
    act_w = ds.actions[idx]  # (n, k, a)
    u, residual = low_level.invert(obs_w, act_w, method=method, **inverse_kw)
    residual = np.asarray(residual, dtype=float)
    keep = np.ones(len(idx), bool) if threshold is None else residual <= threshold
    last = idx[:, -1]
    out = OfflineDataset(
        observations=ds.observations[idx[:, 0]],
        actions=np.asarray(u, dtype=float),
        rewards=ds.rewards[idx].sum(1),  # R_t = Σ_{j<k} r_{t+j}
        next_observations=ds.next_observations[last],  # s' = s_{t+k}
        terminations=ds.terminations[last],
        truncations=ds.truncations[last],
        infos={"residual": residual, "start_index": idx[:, 0]},
    )
    return out.subset(keep)


def to_d3rlpy(ds: OfflineDataset) -> Any:
    """The dataset as a ``d3rlpy.dataset.MDPDataset`` (optional dependency: ``pip install d3rlpy``).

    Lets any d3rlpy learner (IQL, CQL, TD3+BC, Cal-QL …) train on relabelled data: OHIO's "off-the-shelf" step.
    Relabelled windows are independent transitions, so each row is its own episode end when needed.
    """
    try:
        from d3rlpy.dataset import MDPDataset
    except ImportError as e:  # pragma: no cover - optional
        raise ImportError("to_d3rlpy needs d3rlpy (pip install d3rlpy); it is an optional dependency") from e
    return MDPDataset(
        observations=ds.observations.astype(np.float32),
        actions=ds.actions.astype(np.float32),
        rewards=ds.rewards.astype(np.float32),
        terminals=ds.terminations.astype(np.float32),
        timeouts=ds.truncations.astype(np.float32),
    )
