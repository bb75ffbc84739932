"""Offline datasets (Minari/D4RL field names) and OHIO relabelling (the paper's inverse problem: the most likely high-level action of each transition).

A flat low-level dataset D = {(s_τ, a_τ, r_τ, s_{τ+1})} holds episodes back to back; an episode ends at a row
whose ``terminations`` or ``truncations`` flag is set. :func:`relabel` cuts every episode into windows
t = 0, k, 2k, … (only whole windows), inverts the low level on each window and returns

    D̃ = {(s_t, û_t, R_t = Σ_{j<k} r_{t+j}, s_{t+k}, done_{t+k−1})}

dropping exactly the windows whose re-simulation residual exceeds ``threshold`` (official reacher: 0.2).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ..common.checks import need_int, need_real, need_type


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
    meta: dict[str, Any] = field(
        default_factory=dict
    )  # dataset-level facts (e.g. relabel's masked-window count)

    def __post_init__(self) -> None:
        for name in ("observations", "actions", "next_observations"):
            if np.ndim(getattr(self, name)) != 2:
                raise ValueError(f"{name} must be (n, dim), got shape {np.shape(getattr(self, name))}")
        if np.ndim(self.rewards) != 1:
            raise ValueError(f"rewards must be (n,), got shape {np.shape(self.rewards)}")
        if np.shape(self.next_observations)[1] != np.shape(self.observations)[1]:
            raise ValueError(
                f"next_observations must have observations' dim {np.shape(self.observations)[1]}, "
                f"got shape {np.shape(self.next_observations)}"
            )
        n = len(self.observations)
        for name in ("actions", "rewards", "next_observations", "terminations", "truncations"):
            v = getattr(self, name)
            if len(v) != n:
                raise ValueError(f"{name} must have {n} rows like observations, got {len(v)}")
        for key, v in self.infos.items():
            if len(v) != n:
                raise ValueError(f"infos[{key!r}] must have {n} rows like observations, got {len(v)}")
        self.terminations = np.asarray(self.terminations, dtype=bool)
        self.truncations = np.asarray(self.truncations, dtype=bool)

    def __len__(self) -> int:
        return len(self.observations)

    def subset(self, mask: np.ndarray) -> OfflineDataset:
        m = np.asarray(mask)
        if m.dtype == bool and m.shape != (len(self),):
            raise ValueError(f"mask must be a bool ({len(self)},) array or row indices, got shape {m.shape}")
        return OfflineDataset(
            self.observations[mask],
            self.actions[mask],
            self.rewards[mask],
            self.next_observations[mask],
            self.terminations[mask],
            self.truncations[mask],
            {k: v[mask] for k, v in self.infos.items()},
            dict(self.meta),
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
        observations, actions, rewards = np.asarray(observations), np.asarray(actions), np.asarray(rewards)
        if rewards.ndim != 2 or observations.ndim != 3 or actions.ndim != 3:
            raise ValueError(
                f"observations must be (E, T+1, o), actions (E, T, a) and rewards (E, T), got shapes "
                f"{observations.shape}, {actions.shape} and {rewards.shape}"
            )
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
    need_type("ds", ds, OfflineDataset)
    need_int("k", k, 1)
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
    Windows with NaN/inf observations, actions or rewards (or a non-finite inverse) are masked out, counted in the
    result's ``meta["n_nonfinite"]`` and reported by a ``RuntimeWarning``; the other windows are unaffected.
    The result's ``infos`` hold ``residual`` and ``start_index`` (row of s_t in ``ds``).
    """
    if threshold is not None:
        need_real("threshold", threshold, 0.0)
    need_type("ds", ds, OfflineDataset)
    if not (isinstance(getattr(low_level, "k", None), int) and callable(getattr(low_level, "invert", None))):
        raise ValueError(
            f"low_level must have an int k and invert(obs_windows, act_windows, method), got {low_level!r:.80}"
        )
    idx = windows(ds, low_level.k)  # (n, k)
    if len(idx) == 0:
        raise ValueError(f"ds has no whole window of k={low_level.k} steps")
    obs_w = np.concatenate([ds.observations[idx], ds.next_observations[idx[:, -1:]]], 1)  # (n, k+1, o)
    act_w = ds.actions[idx]  # (n, k, a)
    rew_w = np.asarray(ds.rewards, dtype=float)[idx]  # (n, k)
    finite = (
        np.isfinite(obs_w).all((1, 2))
        & np.isfinite(act_w.reshape(len(idx), -1)).all(1)
        & np.isfinite(rew_w).all(1)
    )
    if finite.all():
        u, residual = low_level.invert(obs_w, act_w, method=method, **inverse_kw)
        u, residual = np.asarray(u, dtype=float), np.asarray(residual, dtype=float)
    else:  # invert only the finite windows: one NaN must not poison the batched solve of the others
        if not finite.any():
            raise ValueError(
                f"every one of the {len(idx)} windows of ds holds NaN/inf observations or actions"
            )
        u_f, r_f = low_level.invert(obs_w[finite], act_w[finite], method=method, **inverse_kw)
        u_f = np.asarray(u_f, dtype=float)
        u = np.full((len(idx), *u_f.shape[1:]), np.nan)
        residual = np.full(len(idx), np.nan)
        u[finite], residual[finite] = u_f, np.asarray(r_f, dtype=float)
    ok = finite & np.isfinite(u.reshape(len(idx), -1)).all(1) & np.isfinite(residual)
    n_bad = int((~ok).sum())
    if n_bad:
        warnings.warn(
            f"relabel: {n_bad} of {len(idx)} windows were masked (NaN/inf in the data or in the inverse); "
            "their count is in the result's meta['n_nonfinite']",
            RuntimeWarning,
            stacklevel=2,
        )
    keep = ok if threshold is None else ok & (np.where(ok, residual, np.inf) <= threshold)
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
    out = out.subset(keep)
    out.meta = {"n_windows": len(idx), "n_nonfinite": n_bad, "n_over_threshold": int((ok & ~keep).sum())}
    return out


def to_d3rlpy(ds: OfflineDataset) -> Any:
    """The dataset as a ``d3rlpy.dataset.MDPDataset`` (optional dependency: ``pip install d3rlpy``).

    Lets any d3rlpy learner (IQL, CQL, TD3+BC, Cal-QL …) train on relabelled data: OHIO's "off-the-shelf" step.
    Relabelled windows are independent transitions, so each row is its own episode end when needed.
    """
    need_type("ds", ds, OfflineDataset)
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
