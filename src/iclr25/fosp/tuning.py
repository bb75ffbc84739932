"""Held-out tuning of the AWR arms' advantage temperature β and cost-gate tolerance (one grid, every arm with them).

The REF-weighted regression (``actor_update="awr"``) weights dataset actions by exp(β·Â) behind the gate
1[Q_c ≤ d + tol]. Both knobs exist only in the two AWR arms (FOSP and FOSP without REF); the backprop arms
(SafeDreamer-, DreamerV3-offline) have neither. Every AWR arm is tuned with the **same** grid, on held-out seeds
that the reproduction never uses (its seeds are 0, 1, 2), at the preset's own budget, and each arm takes the grid
point with the best mean held-out score return − cost on the base layout (ties: the first in grid order).

    python -m iclr25.fosp.tuning --preset quick --out tuning.json --jobs 2
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from iclr25.common.fields import apply_overrides
from iclr25.common.seeding import derive_seed, seed_everything

from .agent import FOSPAgent, evaluate, train_offline, train_world_model
from .config import PRESETS, Config
from .data import collect_dataset
from .env import ACT_DIM, OBS_DIM

GRID: tuple[tuple[float, float], ...] = ((1.0, 0.05), (10.0, 0.05), (10.0, 0.5))  # (β, gate tolerance)
HELD_OUT_SEEDS: tuple[int, ...] = (100, 101)
ARMS: tuple[str, ...] = ("fosp", "fosp_noref")
_KNOBS = {  # where each arm's (β, tol) live in the experiment Config (dotted: inside the nested agent)
    "fosp": ("agent.adv_temperature", "agent.qc_tolerance"),
    "fosp_noref": ("noref_adv_temperature", "noref_qc_tolerance"),
}


def knobs(cfg: Config, arm: str) -> tuple[float, float]:
    """(β, gate tolerance) of one AWR arm in ``cfg``."""
    if arm not in _KNOBS:
        raise ValueError(f"arm must be one of {ARMS} (the arms with the AWR knobs), got {arm!r}")
    ac = cfg.agent_config(arm)
    return ac.adv_temperature, ac.qc_tolerance


def score(ev: dict[str, float]) -> float:
    """Selection score of one evaluation: episode return − episode cost (base layout)."""
    return float(ev["return"] - ev["cost"])


def with_knobs(cfg: Config, arm: str, beta: float, tol: float) -> Config:
    """``cfg`` with one AWR arm's temperature and gate tolerance set."""
    if arm not in _KNOBS:
        raise ValueError(f"arm must be one of {ARMS} (the arms with the AWR knobs), got {arm!r}")
    kb, kt = _KNOBS[arm]
    return apply_overrides(cfg, {kb: float(beta), kt: float(tol)})


def tune_seed(cfg: Config, seed: int, grid=GRID) -> dict[str, list[dict[str, float]]]:
    """One held-out seed: data and world model as in the reproduction, then every (arm, grid point)."""
    seed_everything(seed)
    data = collect_dataset(
        cfg.episodes_per_policy, "base", derive_seed(seed, "data"), max_steps=cfg.max_steps
    )
    wm = FOSPAgent((OBS_DIM,), ACT_DIM, cfg.agent_config("fosp"), seed=derive_seed(seed, "wm"))
    train_world_model(wm, data, cfg.wm_updates)
    out: dict[str, list[dict[str, float]]] = {}
    for arm in ARMS:
        rows = []
        for beta, tol in grid:
            c = with_knobs(cfg, arm, beta, tol)
            ag = FOSPAgent((OBS_DIM,), ACT_DIM, c.agent_config(arm), seed=derive_seed(seed, arm))
            ag.load_world_model(wm)
            train_offline(ag, data, cfg.offline_updates, train_wm=False)
            ev = evaluate(ag, "base", cfg.eval_episodes, derive_seed(seed, "eval", "base"), cfg.max_steps)
            rows.append(
                {"beta": beta, "tol": tol, "return": ev["return"], "cost": ev["cost"], "score": score(ev)}
            )
        out[arm] = rows
    return out


def choose(per_seed: dict[int, dict[str, list[dict[str, float]]]], grid=GRID) -> dict[str, dict[str, float]]:
    """Per arm, the grid point with the best mean held-out score (first in grid order on ties)."""
    res = {}
    for arm in ARMS:
        means = [float(np.mean([per_seed[s][arm][i]["score"] for s in per_seed])) for i in range(len(grid))]
        best = int(np.argmax(means))
        res[arm] = {"beta": grid[best][0], "tol": grid[best][1], "mean_score": means[best], "means": means}
    return res


def _tune_seed_worker(cfg: Config, seed: int, grid) -> dict[str, list[dict[str, float]]]:
    import torch

    torch.set_num_threads(1)
    return tune_seed(cfg, seed, grid)


def tune(cfg: Config, seeds=HELD_OUT_SEEDS, grid=GRID, jobs: int = 1) -> dict:
    """Every held-out seed at ``cfg``'s budget; ``jobs`` > 1 runs seeds in parallel processes (each seed seeds
    itself, so the numbers do not depend on ``jobs``)."""
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an int >= 1, got {jobs!r}")
    t0, load0 = time.perf_counter(), os.getloadavg()
    seeds = [int(s) for s in seeds]
    if jobs == 1 or len(seeds) == 1:
        per_seed = {s: tune_seed(cfg, s, grid) for s in seeds}
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(min(jobs, len(seeds)), mp_context=mp.get_context("spawn")) as pool:
            futs = {s: pool.submit(_tune_seed_worker, cfg, s, grid) for s in seeds}
            per_seed = {s: f.result() for s, f in futs.items()}
    return {
        "grid": [list(g) for g in grid],
        "held_out_seeds": [int(s) for s in seeds],
        "score": "base-layout episode return − episode cost, mean over held-out seeds",
        "budget": {
            "wm_updates": cfg.wm_updates,
            "offline_updates": cfg.offline_updates,
            "batch": cfg.agent.batch,
            "seq_len": cfg.agent.seq_len,
        },
        "per_seed": {str(k): v for k, v in per_seed.items()},
        "choice": choose(per_seed, grid),
        "wall_s": time.perf_counter() - t0,
        "jobs": jobs,
        "load_avg_start": list(load0),
        "load_avg_end": list(os.getloadavg()),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="quick", choices=sorted(PRESETS))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=list(HELD_OUT_SEEDS))
    ap.add_argument("--jobs", type=int, default=1, help="held-out seeds run in parallel processes")
    a = ap.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    res = tune(PRESETS[a.preset], a.seeds, jobs=a.jobs)
    res["preset"] = a.preset
    from iclr25.common.io import atomic_write_with

    atomic_write_with(a.out, lambda tmp: Path(tmp).write_text(json.dumps(res, indent=1)))
    print(json.dumps(res["choice"], indent=1))
    return res


if __name__ == "__main__":  # pragma: no cover
    main()
