"""Network-lite: vehicle rebalancing on a small graph with an LP low level and its exact inverse (the paper's LP instantiation, at the scale of README "Reproduction").

High level: u ∈ Δ^N, a desired distribution of idle vehicles. Low level (min-cost rebalancing LP, HiGHS):

    d = counts(u · Σ_j acc_j)                       (largest-remainder rounding, so Σ d = Σ acc)
    min_x Σ_{i≠j} c_ij x_ij   s.t.  acc_i + Σ_j (x_ji − x_ij) ≥ d_i,   Σ_j x_ij ≤ acc_i,   x ≥ 0

Inverse (exact): desired_i = acc_i − Σ_j x_ij + Σ_j x_ji, û = desired / Σ acc (uniform if Σ acc = 0), then
zeros → ε and renormalise so a Dirichlet log-probability is finite.

Environment (gymnasium): a fleet on N nodes; each step the agent rebalances idle vehicles (flows, cost
Σ c_ij x_ij), then Poisson trip requests λ_ij are served from the vehicles at their origin (price per trip),
and served vehicles end the step at the destination. Observation: idle vehicles per node; reward: revenue −
rebalancing cost.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
from scipy.optimize import linprog

from ..common.checks import need_callable, need_int, need_real, need_seed, need_type
from ..common.fields import bounded, check_fields
from .relabel import OfflineDataset

EPS_SIMPLEX = 1e-3


def _check_cost(cost: np.ndarray, n: int) -> None:
    if cost.shape != (n, n) or n < 1 or not np.isfinite(cost).all() or (cost < 0).any():
        raise ValueError(f"cost must be a finite non-negative ({n}, {n}) matrix, got shape {cost.shape}")


def largest_remainder_counts(u: np.ndarray, total: int) -> np.ndarray:
    """Integer counts ≈ u · total summing exactly to ``total`` (Hamilton rounding)."""
    u = np.asarray(u, dtype=float)
    if u.ndim != 1 or len(u) == 0 or not np.isfinite(u).all() or np.any(u < -1e-12):
        raise ValueError(f"u must be a non-empty 1-d finite non-negative vector, got {u!r}")
    need_int("total", total, 0)
    s = u.sum()
    if s <= 0:
        u, s = np.ones_like(u), float(len(u))
    raw = u / s * total
    base = np.floor(raw + 1e-9).astype(int)
    rest = int(total - base.sum())
    if rest > 0:
        order = np.argsort(-(raw - base), kind="stable")
        base[order[:rest]] += 1
    return base


def solve_rebalancing_lp(acc: np.ndarray, desired: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Min-cost flows x (N, N) (zero diagonal) reaching at least ``desired`` vehicles per node (HiGHS)."""
    acc, desired, cost = np.asarray(acc, float), np.asarray(desired, float), np.asarray(cost, float)
    if acc.ndim != 1 or not np.isfinite(acc).all() or (acc < 0).any():
        raise ValueError(f"acc must be a 1-d finite vector of vehicle counts >= 0, got {acc!r:.80}")
    for name, v in (("desired", desired), ("cost", cost)):
        if not np.isfinite(v).all() or (v < 0).any():
            raise ValueError(f"{name} must be finite and >= 0, got {v!r:.80}")
    n = len(acc)
    if desired.shape != (n,) or cost.shape != (n, n):
        raise ValueError(f"desired must be ({n},) and cost ({n}, {n}), got {desired.shape} and {cost.shape}")
    if desired.sum() > acc.sum() + 1e-9:
        raise ValueError(f"desired must sum to at most Σ acc = {acc.sum()}, got {desired.sum()}")
    off = ~np.eye(n, dtype=bool)
    ii, jj = np.nonzero(off)  # variable e ↔ edge (ii[e] → jj[e])
    m = len(ii)
    # acc_i − out_i + in_i ≥ d_i   ⇔   out_i − in_i ≤ acc_i − d_i
    A_bal = np.zeros((n, m))
    A_bal[ii, np.arange(m)] += 1.0
    A_bal[jj, np.arange(m)] -= 1.0
    A_out = np.zeros((n, m))
    A_out[ii, np.arange(m)] = 1.0
    res = linprog(
        cost[ii, jj],
        A_ub=np.vstack([A_bal, A_out]),
        b_ub=np.concatenate([acc - desired, acc]),
        bounds=(0, None),
        method="highs",
    )
    if not res.success:
        raise RuntimeError(f"rebalancing LP failed: {res.message}")
    x = np.zeros((n, n))
    x[ii, jj] = np.round(res.x, 9)
    return x


def flows_to_distribution(acc: np.ndarray, flows: np.ndarray, eps: float = EPS_SIMPLEX) -> np.ndarray:
    """The exact LP inverse: û ∝ acc − out + in (batched over leading dims), ε-smoothed on the simplex."""
    acc, flows = np.asarray(acc, float), np.asarray(flows, float)
    need_real("eps", eps, 0.0, lo_open=True)
    if acc.ndim == 0 or eps * acc.shape[-1] >= 1:
        raise ValueError(f"eps must be < 1/N (N = {acc.shape[-1] if acc.ndim else '?'} nodes), got {eps!r}")
    if flows.shape != (*acc.shape, acc.shape[-1]):
        raise ValueError(f"flows must be (..., N, N) matching acc {acc.shape}, got {flows.shape}")
    if not (np.isfinite(acc).all() and np.isfinite(flows).all()):
        raise ValueError("acc and flows must be finite, got NaN/inf entries")
    desired = acc - flows.sum(-1) + flows.sum(-2)  # acc_i − Σ_j x_ij + Σ_j x_ji
    tot = acc.sum(-1, keepdims=True)
    u = np.where(tot > 0, desired / np.where(tot > 0, tot, 1.0), 1.0 / acc.shape[-1])
    u = np.maximum(u, eps)  # zeros → ε, renormalise
    return u / u.sum(-1, keepdims=True)


@dataclass(frozen=True)
class NetworkParams:
    """A 6-node city: downtown nodes 0–2 attract trips from residential nodes 3–5 (vehicles pile up downtown).

    ``cost`` is the rebalancing cost per vehicle on each edge; ``swapped_cost`` moves each downtown node's cheap
    corridor to a different residential node (road works): the cheapest achievable rebalancing cost is
    unchanged, so a policy that adapts its routing loses nothing.
    """

    n_nodes: int = bounded(6, choices=(6,))  # the built-in city has 6 nodes
    fleet: int = bounded(60, lo=1)
    horizon: int = bounded(20, lo=1)
    price: float = bounded(1.0, lo=0)
    cheap: float = bounded(0.2, lo=0)
    expensive: float = bounded(1.0, lo=0)
    within: float = bounded(0.3, lo=0)
    rate_in: float = bounded(2.0, lo=0)  # residential → each downtown node
    rate_out: float = bounded(0.5, lo=0)  # downtown → each residential node
    rate_within: float = bounded(0.3, lo=0)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above

    def demand_rates(self) -> np.ndarray:
        n, h = self.n_nodes, self.n_nodes // 2
        lam = np.full((n, n), self.rate_within)
        lam[h:, :h] = self.rate_in
        lam[:h, h:] = self.rate_out
        np.fill_diagonal(lam, 0.0)
        return lam

    def cost(self, shift: int = 0) -> np.ndarray:
        """Edge costs; downtown node k's cheap corridor goes to residential node 3 + (k + shift) mod 3."""
        if isinstance(shift, bool) or not isinstance(shift, int):
            raise ValueError(f"shift must be an int, got {shift!r}")
        n, h = self.n_nodes, self.n_nodes // 2
        c = np.full((n, n), self.within)
        c[:h, h:] = self.expensive
        c[h:, :h] = self.expensive
        for k in range(h):
            j = h + (k + shift) % h
            c[k, j] = c[j, k] = self.cheap
        np.fill_diagonal(c, 0.0)
        return c

    def swapped_cost(self) -> np.ndarray:
        return self.cost(shift=1)


class RebalancingEnv(gym.Env):
    """Fleet rebalancing (observation: idle vehicles per node; action: flows x (N·N), clipped to feasibility)."""

    metadata = {"render_modes": []}

    def __init__(self, params: NetworkParams = NetworkParams(), cost: np.ndarray | None = None):
        need_type("params", params, NetworkParams)
        self.p = params
        self.cost = params.cost() if cost is None else np.asarray(cost, float)
        n = params.n_nodes
        _check_cost(self.cost, n)
        self.lam = params.demand_rates()
        self.observation_space = gym.spaces.Box(0, params.fleet, (n,), np.float64)
        self.action_space = gym.spaces.Box(0, params.fleet, (n * n,), np.float64)
        self.acc = np.zeros(n)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        n = self.p.n_nodes
        self.acc = np.bincount(self.np_random.integers(0, n, self.p.fleet), minlength=n).astype(float)
        self.t = 0
        return self.acc.copy(), {}

    def feasible_flows(self, flows: np.ndarray) -> np.ndarray:
        """Integer, non-negative, zero-diagonal flows with Σ_j x_ij ≤ acc_i (rows scaled down, then floored)."""
        n = self.p.n_nodes
        if np.size(flows) != n * n:
            raise ValueError(f"flows must hold {n * n} entries ({n}x{n}), got shape {np.shape(flows)}")
        x = np.maximum(np.asarray(flows, float).reshape(n, n), 0.0)
        np.fill_diagonal(x, 0.0)
        out = x.sum(1)
        scale = np.where(out > self.acc, self.acc / np.maximum(out, 1e-12), 1.0)
        return np.floor(x * scale[:, None] + 1e-9)

    def step(self, action: np.ndarray) -> tuple[np.ndarray, float, bool, bool, dict]:
        n = self.p.n_nodes
        a = np.asarray(action, dtype=float)
        if a.size != n * n or a.shape not in ((n * n,), (n, n)):
            raise ValueError(f"action must be flows of shape ({n * n},) or ({n}, {n}), got shape {a.shape}")
        if not np.all(np.isfinite(a)):
            raise ValueError("action (flows) must be finite, got NaN/inf entries")
        x = self.feasible_flows(action)
        reb_cost = float((self.cost * x).sum())
        acc = self.acc - x.sum(1) + x.sum(0)  # after rebalancing
        demand = self.np_random.poisson(self.lam)  # (N, N) trip requests
        req = demand.sum(1)
        served_n = np.minimum(acc, req)
        # serve requests in a random order at each origin: served trips per destination ~ multivariate hypergeom.
        served = np.zeros_like(demand)
        for i in np.flatnonzero(served_n > 0):
            served[i] = self.np_random.multivariate_hypergeometric(demand[i], int(served_n[i]))
        revenue = self.p.price * float(served.sum())
        self.acc = acc - served.sum(1) + served.sum(0)
        self.t += 1
        info = {"flows": x, "revenue": revenue, "rebalancing_cost": reb_cost}
        return self.acc.copy(), revenue - reb_cost, False, self.t >= self.p.horizon, info


class LPLowLevel:
    """The LP low level π_l(acc, u) and its exact inverse (k = 1)."""

    k = 1

    def __init__(self, cost: np.ndarray, eps: float = EPS_SIMPLEX):
        self.cost, self.eps = np.asarray(cost, float), eps
        _check_cost(self.cost, len(self.cost) if self.cost.ndim else 0)
        need_real("eps", eps, 0.0, lo_open=True)
        if eps * len(self.cost) >= 1:
            raise ValueError(f"eps must be < 1/N = {1 / len(self.cost):g}, got {eps!r}")

    def flows(self, acc: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Forward map: flows from the LP for desired distribution ``u``."""
        u = np.asarray(u, dtype=float)
        if u.shape != (len(self.cost),):
            raise ValueError(f"u must be a ({len(self.cost)},) distribution, got shape {u.shape}")
        total = int(round(float(np.sum(acc))))
        return solve_rebalancing_lp(acc, largest_remainder_counts(u, total), self.cost)

    def invert(
        self, obs_windows: np.ndarray, act_windows: np.ndarray, method: str = "analytic"
    ) -> tuple[np.ndarray, np.ndarray]:
        """û from (acc_t, flows_t); residual = re-simulation check ‖LP-achieved distribution − observed one‖₁.

        ``method``: ``"analytic"`` (the exact inverse) or ``"observed_state"`` (û ∝ acc_{t+1}).
        """
        if method not in ("analytic", "observed_state"):
            raise ValueError(
                f"method must be 'analytic' or 'observed_state' for the LP low level, got {method!r}"
            )
        acc, nxt = obs_windows[:, 0], obs_windows[:, -1]
        n = acc.shape[-1]
        flows = act_windows[:, 0].reshape(len(acc), n, n)
        if method == "observed_state":
            u = np.maximum(nxt / np.maximum(nxt.sum(-1, keepdims=True), 1e-12), self.eps)
            u = u / u.sum(-1, keepdims=True)
        else:
            u = flows_to_distribution(acc, flows, self.eps)
        observed = acc - flows.sum(-1) + flows.sum(-2)
        resid = np.array(
            [np.abs(self._achieved(a, ui) - o).sum() for a, ui, o in zip(acc, u, observed, strict=True)]
        )
        return u, resid

    def _achieved(self, acc: np.ndarray, u: np.ndarray) -> np.ndarray:
        total = int(round(float(acc.sum())))
        # ε-smoothing moves at most ε·N of mass: undo it before rounding so counts are exact
        d = largest_remainder_counts(np.where(u <= self.eps * 1.0001, 0.0, u), total)
        x = solve_rebalancing_lp(acc, d, self.cost)
        return acc - x.sum(1) + x.sum(0)


def nearest_surplus_flows(
    acc: np.ndarray,
    target_share: np.ndarray,
    cost: np.ndarray,
    rng: np.random.Generator | None = None,
    concentration: float = 50.0,
) -> np.ndarray:
    """The flat behaviour heuristic: desired counts from ``target_share`` (Dirichlet-perturbed when ``rng`` is
    given), then each deficit node is filled greedily from the surplus node with the cheapest edge."""
    acc = np.asarray(acc, dtype=float)
    if acc.ndim != 1 or not np.isfinite(acc).all() or (acc < 0).any():
        raise ValueError(f"acc must be a 1-d finite vector of vehicle counts >= 0, got {acc!r:.80}")
    n = len(acc)
    target_share = np.asarray(target_share, dtype=float)
    if target_share.shape != (n,) or not np.isfinite(target_share).all() or (target_share < 0).any():
        raise ValueError(
            f"target_share must be a ({n},) finite non-negative vector, got {target_share!r:.80}"
        )
    _check_cost(np.asarray(cost, dtype=float), n)
    need_real("concentration", concentration, 0.0, lo_open=True)
    share = rng.dirichlet(concentration * target_share) if rng is not None else target_share
    d = largest_remainder_counts(share, int(acc.sum()))
    surplus, deficit = acc - d, d - acc
    x = np.zeros((n, n))
    for j in np.argsort(-deficit, kind="stable"):
        while deficit[j] > 0:
            donors = np.flatnonzero(surplus > 0)
            if len(donors) == 0:
                return x
            i = donors[np.argmin(cost[donors, j])]
            m = min(surplus[i], deficit[j])
            x[i, j] += m
            surplus[i] -= m
            deficit[j] -= m
    return x


def collect_network_dataset(
    params: NetworkParams, cost: np.ndarray, n_episodes: int, seed: int, concentration: float = 50.0
) -> OfflineDataset:
    """Flat data from :func:`nearest_surplus_flows` (target share ∝ outgoing demand), Minari field names;
    actions are the flattened N·N flows."""
    need_int("n_episodes", n_episodes, 1)
    need_seed("seed", seed)
    need_real("concentration", concentration, 0.0, lo_open=True)
    env = RebalancingEnv(params, cost)
    rng = np.random.default_rng(seed)
    share = params.demand_rates().sum(1)
    share = share / share.sum()
    obs, acts, rews = [], [], []
    for _ in range(n_episodes):
        o, _ = env.reset(seed=int(rng.integers(2**31)))
        eo, ea, er = [o], [], []
        for _ in range(params.horizon):
            x = nearest_surplus_flows(o, share, cost, rng, concentration)
            o, r, _, _, info = env.step(x.reshape(-1))
            eo.append(o)
            ea.append(info["flows"].reshape(-1))
            er.append(r)
        obs.append(eo)
        acts.append(ea)
        rews.append(er)
    return OfflineDataset.from_episodes(np.asarray(obs), np.asarray(acts), np.asarray(rews))


def evaluate_network(
    flows_fn: Callable[[np.ndarray], np.ndarray],
    params: NetworkParams,
    cost: np.ndarray,
    n_episodes: int,
    seed: int,
) -> np.ndarray:
    """Returns of a policy acc ↦ flows (N, N) on ``n_episodes`` episodes (demand and starts from ``seed``)."""
    need_callable("flows_fn", flows_fn, "obs -> flows")
    need_int("n_episodes", n_episodes, 1)
    need_seed("seed", seed)
    env = RebalancingEnv(params, cost)
    rets = np.zeros(n_episodes)
    for ep in range(n_episodes):
        o, _ = env.reset(seed=seed * 100_003 + ep)
        for _ in range(params.horizon):
            o, r, _, _, _ = env.step(flows_fn(o).reshape(-1))
            rets[ep] += r
    return rets


REBALANCING_ENV_ID = "iclr25/Rebalancing-v0"
if REBALANCING_ENV_ID not in gym.registry:  # gym.make("iclr25/Rebalancing-v0") after importing iclr25.ohio
    gym.register(id=REBALANCING_ENV_ID, entry_point="iclr25.ohio.network:RebalancingEnv")
