"""FOSP reproduction at laptop scale on SafeNav2D (offline safe pretraining, shifted-layout transfer, PEX).

Per seed:
1. Offline data D on the base layout: safe (potential field), unsafe (greedy) and random behaviour policies,
   ``episodes_per_policy`` episodes each (200 steps).
2. One world model per seed, pre-trained on D, is shared (frozen) by the four offline arms, which differ only in
   their critic/policy objective: FOSP; SafeDreamer-offline (Lagrangian backprop actor, no in-sample term, no REF);
   DreamerV3-offline (no cost); FOSP without REF (u ≡ 1). Every arm gets the same number of updates.
3. Evaluation: 10 episodes (deterministic policy) on the base and on the shifted layout (two extra hazards on the
   spawn→goal line), with the same evaluation seeds for every arm.
4. Online on the shifted layout, equal budget (env steps, vectorised envs, updates per step) for every arm:
   FOSP + PEX (frozen π_off), FOSP direct fine-tuning, SafeDreamer from scratch (no offline data). Replay of the
   offline arms = D ∪ online. Cumulative training cost is summed over all online env steps.

On a velocity task (``env_id`` in ``velocity.VELOCITY_TASKS``, the ``full`` preset) the same pipeline runs on the
gymnasium-MuJoCo rebuild: D from the scripted fast (costly), slow (safe) and random behaviours
(``velocity.collect_velocity_dataset``), the offline arms evaluated on the task itself ("task"), online fine-tuning
offline-to-online on the task itself (no layout shift). ``ref_helps_shift`` needs an unseen layout and is
SafeNav2D-only (``config.SAFENAV_ONLY_CLAIMS``): it is not computed there, and the report says so.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from pathlib import Path

import numpy as np

from iclr25.common.claims import Claim, all_of, explain_failures, make_claim
from iclr25.common.device import get_device
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import derive_seed, seed_everything
from iclr25.harness.rundir import RunDir, RunResult

from . import report
from .agent import FOSPAgent, evaluate, finetune_online, train_offline, train_world_model
from .config import FLOOR, OFFLINE_ARMS, PRESETS, SAFENAV_ONLY_CLAIMS, Config
from .data import OfflineDataset, collect_dataset
from .env import ACT_DIM, OBS_DIM, SafeNav2DVec
from .velocity import VELOCITY_TASKS, collect_velocity_dataset, make_velocity_env, make_velocity_vec

__all__ = ["Config", "PRESETS", "claims", "one_seed", "run"]  # the config names re-exported for the registry

SAFETY_EXTRA = "safety"  # pip install 'iclr25[safety]' (safety-gymnasium)


def require_env(cfg: Config) -> None:
    """Refuse a Safety-Gymnasium run, with the extra to install, when the package cannot be imported."""
    if cfg.env_id == "SafeNav2D":
        return
    if cfg.env_id in VELOCITY_TASKS:  # rebuilt on gymnasium MuJoCo (velocity.py): no Safety-Gymnasium needed
        return
    try:
        import safety_gymnasium  # noqa: F401
    except ImportError as e:
        raise RuntimeError(
            f"env_id={cfg.env_id!r} needs the optional Safety-Gymnasium extra: pip install 'iclr25[{SAFETY_EXTRA}]' "
            "(safety-gymnasium; on Python 3.11 see src/iclr25/fosp/README.md, 'Safety-Gymnasium'); "
            f"import failed: {e}. The SafeNav2D presets (smoke, quick) need no extra."
        ) from e
    raise NotImplementedError(
        f"env_id={cfg.env_id!r}: safety-gymnasium imports, but this reproduction's behaviour-policy data "
        f"collectors exist for SafeNav2D and the velocity tasks {sorted(VELOCITY_TASKS)} only; build the agent on "
        "make_safety_gymnasium_vec(...) with the library API (OfflineDataset, FOSPAgent(action_space=...), finetune_online, evaluate(env=...))"
    )


def one_seed(cfg: Config, seed: int) -> dict:
    require_env(cfg)
    seed_everything(seed)
    cfg = dataclasses.replace(cfg, device=str(get_device(cfg.device)))  # "auto" resolved once, for every arm
    t0, c0 = time.perf_counter(), time.process_time()
    data, out = offline_data(cfg, seed)
    out["timing"] = {}
    shape, act_dim, space = (
        (data.obs_shape, data.act_dim, make_velocity_env(cfg.env_id).action_space)
        if cfg.velocity
        else ((OBS_DIM,), ACT_DIM, None)
    )

    def new_agent(kind: str, name: str) -> FOSPAgent:
        return FOSPAgent(
            shape, act_dim, cfg.agent_config(kind), seed=derive_seed(seed, name), action_space=space
        )

    def ev(ag, setting):
        if not cfg.velocity:
            return evaluate(ag, setting, cfg.eval_episodes, derive_seed(seed, "eval", setting), cfg.max_steps)
        env = task_env(cfg, setting, cfg.eval_episodes)
        return evaluate(ag, env=env, seed=derive_seed(seed, "eval", setting), max_steps=cfg.max_steps)

    wm = new_agent("fosp", "wm")
    losses = train_world_model(wm, data, cfg.wm_updates)
    out["wm_loss_first"], out["wm_loss_last"] = float(np.mean(losses[:10])), float(np.mean(losses[-10:]))
    out["timing"]["world_model_s"] = time.perf_counter() - t0
    agents = {}
    arms = OFFLINE_ARMS + (("official",) if cfg.official_arm else ())
    for arm in arms:
        t = time.perf_counter()
        ag = new_agent(arm, arm)
        ag.load_world_model(wm)
        logs = train_offline(ag, data, cfg.offline_updates, train_wm=False)
        out[arm] = {setting: ev(ag, setting) for setting in cfg.settings}
        if "constraint_g" in logs[-1]:
            out[arm]["multiplier"] = logs[-1]["multiplier"]
        if "feasible_frac" in logs[-1]:
            out[arm]["feasible_frac"] = logs[-1]["feasible_frac"]
        out["timing"][f"{arm}_s"] = time.perf_counter() - t
        agents[arm] = ag
    # ---- online on the shifted layout (a velocity task: the task itself), equal budgets
    online = {
        "pex": (copy.deepcopy(agents["fosp"]), True, data),
        "direct": (copy.deepcopy(agents["fosp"]), False, data),
        "scratch": (new_agent("safedreamer", "scratch"), False, None),
    }
    for arm, (ag, pex, off) in online.items():
        t = time.perf_counter()
        env = task_env(cfg, cfg.online_setting, cfg.online_envs)
        r = finetune_online(
            ag,
            env,
            cfg.online_env_steps,
            offline=off,
            pex=pex,
            updates_per_step=cfg.updates_per_step,
            seed=derive_seed(seed, "online", arm),
        )
        out[arm] = {
            "cum_cost": r["cum_cost"],
            "cum_return": r["cum_return"],
            "final": ev(ag, cfg.online_setting),
        }
        if pex:
            out[arm]["pex_off_frac"] = r["pex_off_frac"]
        out["timing"][f"{arm}_s"] = time.perf_counter() - t
    out["timing"]["total_s"] = time.perf_counter() - t0
    out["timing"]["cpu_s"] = time.process_time() - c0  # CPU seconds of this seed (load-independent budget)
    return out


# the keys the claims read (offline arms on the base and shifted layouts, online fine-tuning arms)
REQUIRED = (
    "fosp/base/cost",
    "dreamerv3/base/cost",
    "fosp/base/return",
    "safedreamer/base/return",
    "fosp/shifted/cost",
    "fosp_noref/shifted/cost",
    "fosp/shifted/return",
    "pex/cum_cost",
    "direct/cum_cost",
    "scratch/cum_cost",
    "pex/final/return",
    "pex/cum_return",
    "direct/cum_return",
    "scratch/cum_return",
    "fosp_noref/shifted/return",
)
# a velocity task: the same claims on the task itself, ref_helps_shift (SafeNav2D-only) left out
REQUIRED_VELOCITY = (
    "fosp/task/cost",
    "dreamerv3/task/cost",
    "fosp/task/return",
    "safedreamer/task/return",
    "pex/cum_cost",
    "direct/cum_cost",
    "scratch/cum_cost",
    "pex/final/return",
    "pex/cum_return",
    "direct/cum_return",
    "scratch/cum_return",
)


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The '/'-joined per-seed keys the claims always read: SafeNav2D's base/shifted layouts, or on a velocity task
    the task itself ("task"; no shifted layout, no FOSP-without-REF comparison there)."""
    return REQUIRED_VELOCITY if cfg.velocity else REQUIRED


def offline_data(cfg: Config, seed: int) -> tuple[OfflineDataset, dict]:
    """Phase 1: the behaviour-policy mixture D of ``cfg.env_id`` and its per-seed statistics (per behaviour on a
    velocity task: episode return and cost of the fast, slow and random policies)."""
    if not cfg.velocity:
        data = collect_dataset(
            cfg.episodes_per_policy, "base", derive_seed(seed, "data"), max_steps=cfg.max_steps
        )
        return data, {"data": data.episode_stats()}
    data, info = collect_velocity_dataset(
        cfg.env_id,
        cfg.episodes_per_policy,
        derive_seed(seed, "data"),
        max_steps=cfg.max_steps,
        with_info=True,
    )
    by = {}
    for name in dict.fromkeys(info["policy"].tolist()):
        m = info["policy"] == name
        ep = np.concatenate([[0], np.cumsum((data.terminations | data.truncations)[m])[:-1]])
        by[name] = {
            "return": float(np.bincount(ep, data.rewards[m]).mean()),
            "cost": float(np.bincount(ep, data.costs[m]).mean()),
            "mean_x_velocity": float(info["x_velocity"][m].mean()),
        }
    return data, {"data": {**data.episode_stats(), **by}}


def task_env(cfg: Config, setting: str, n: int):
    """``n`` vectorised environments of one evaluation / fine-tuning setting (SafeNav2D layout or the velocity task)."""
    if cfg.velocity:
        return make_velocity_vec(cfg.env_id, n, cfg.max_steps)
    return SafeNav2DVec(n, layout=setting, max_steps=cfg.max_steps)


_DIAG = (
    "Fails at the quick budget (after the issue-32 harness fixes: image scaling, action rescaling, tuned AWR "
    "temperature/gate, return floors, the budget used); the method card gives this claim's margin at 1× and 3× the "
    "training budget and the paired per-seed differences with 95 % intervals (report)."
)
_NOTES = {  # attached when a claim fails; the measured diagnosis is in the method card (1× vs 3× budget)
    "offline_safe": _DIAG,
    "ref_helps_shift": _DIAG,
    "online_safe_expansion": _DIAG
    + " Each cost comparison carries a return floor: an arm that stops moving cannot win it.",
    "no_collapse": _DIAG,
}
_VELOCITY_NOTES = {  # a velocity-task run (the full preset): no diagnosis measured on this task yet
    k: "Fails on the velocity task at this run's budget; the card's diagnosis (1x vs 3x budget) is for SafeNav2D's "
    "quick preset, none is measured on the velocity task yet."
    for k in ("offline_safe", "online_safe_expansion", "no_collapse")
}
_HELD = "Held at this scale; see the report for per-seed values."


def _floor(per_seed: dict, claim_id: str, winner: str, other: str, what: str) -> object:
    """Return-floor part paired with a cost comparison: an arm that stopped moving cannot win a cost claim.

    Per seed: return(winner) − FLOOR·max(return(other), 0) ≥ 0 (mean over seeds), so a collapsed policy (return
    ≈ 0 or negative) fails it while a cheaper arm with comparable return passes.
    """
    m = values(per_seed, winner)
    b = [FLOOR * max(x, 0.0) for x in values(per_seed, other)]
    return make_claim(
        claim_id,
        f"return floor: {what} ≥ {FLOOR:g} × max(other arm's return, 0)",
        "return floor difference",
        method=m,
        baseline=b,
        threshold=0.0,
        direction=">=",
        compare="difference",
    )


def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The four claims (ids and thresholds fixed; cost comparisons paired with return floors; on a velocity task the
    three that apply there, ``_not_applicable``), each with its note:
    a held claim says so, a failed one carries the diagnosis of ``_NOTES``. A ratio against a zero baseline needs
    no note of its own: the claim machinery marks it undefined and says why (``undefined_reason``)."""
    v = lambda k: values(per_seed, k)  # noqa: E731
    off, on = cfg.settings[0], cfg.online_setting  # SafeNav2D: base / shifted layout; a velocity task: "task"
    where_off = cfg.env_id if cfg.velocity else "base layout"
    where_final = cfg.env_id if cfg.velocity else "the shifted layout"
    where_on = f"{cfg.env_id} (offline-to-online, no layout shift)" if cfg.velocity else where_final
    cs = [
        all_of(
            "offline_safe",
            f"Offline ({where_off}): cost(FOSP) ≤ 0.5 × cost(DreamerV3-offline) and return(FOSP) ≥ 0.8 × "
            "return(SafeDreamer-offline)",
            [
                make_claim(
                    "offline_safe",
                    "cost(FOSP) / cost(DreamerV3-offline) ≤ 0.5",
                    "episode cost ratio",
                    method=v(f"fosp/{off}/cost"),
                    baseline=v(f"dreamerv3/{off}/cost"),
                    threshold=0.5,
                    direction="<=",
                    compare="ratio",
                ),
                make_claim(
                    "offline_safe",
                    "return(FOSP) / return(SafeDreamer-offline) ≥ 0.8",
                    "episode return ratio",
                    method=v(f"fosp/{off}/return"),
                    baseline=v(f"safedreamer/{off}/return"),
                    threshold=0.8,
                    direction=">=",
                    compare="ratio",
                ),
            ],
        ),
    ]
    if "ref_helps_shift" not in _not_applicable(cfg):
        cs.append(
            all_of(
                "ref_helps_shift",
                "Shifted layout, no fine-tuning: cost(FOSP) − cost(FOSP without REF) ≤ 0, with FOSP's return above "
                "the floor",
                [
                    make_claim(
                        "ref_helps_shift",
                        "cost(FOSP) − cost(FOSP without REF) ≤ 0 (shifted layout)",
                        "episode cost difference",
                        method=v("fosp/shifted/cost"),
                        baseline=v("fosp_noref/shifted/cost"),
                        threshold=0.0,
                        direction="<=",
                        compare="difference",
                    ),
                    _floor(
                        per_seed,
                        "ref_helps_shift.return_floor",
                        "fosp/shifted/return",
                        "fosp_noref/shifted/return",
                        "return(FOSP, shifted)",
                    ),
                ],
            )
        )
    cs += [
        all_of(
            "online_safe_expansion",
            f"Online on {where_on}: cumulative training cost PEX ≤ 0.8 × direct fine-tuning, and direct "
            "fine-tuning < SafeDreamer from scratch",
            [
                make_claim(
                    "online_safe_expansion",
                    "cum. cost PEX / direct ≤ 0.8",
                    "cumulative training cost ratio",
                    method=v("pex/cum_cost"),
                    baseline=v("direct/cum_cost"),
                    threshold=0.8,
                    direction="<=",
                    compare="ratio",
                ),
                _floor(
                    per_seed,
                    "online_safe_expansion.pex_return_floor",
                    "pex/cum_return",
                    "direct/cum_return",
                    "cum. training return PEX",
                ),
                make_claim(
                    "online_safe_expansion",
                    "cum. cost direct − scratch ≤ 0 (strictly < 0 required)",
                    "cumulative training cost difference",
                    method=v("direct/cum_cost"),
                    baseline=v("scratch/cum_cost"),
                    threshold=-1e-9,
                    direction="<=",
                    compare="difference",
                ),
                _floor(
                    per_seed,
                    "online_safe_expansion.direct_return_floor",
                    "direct/cum_return",
                    "scratch/cum_return",
                    "cum. training return direct",
                ),
            ],
        ),
        make_claim(
            "no_collapse",
            f"Final eval return with PEX ≥ offline FOSP return on {where_final}",
            "episode return difference",
            method=v("pex/final/return"),
            baseline=v(f"fosp/{on}/return"),
            threshold=0.0,
            direction=">=",
            compare="difference",
        ),
    ]
    # a failed claim carries its diagnosis (_NOTES); a claim whose measured number passes gets the "held at this
    # scale" note only when it is decided (holds); one that passes without being decided keeps the note make_claim
    # gave it (the interval and seeds to decide)
    notes = _VELOCITY_NOTES if cfg.velocity else _NOTES
    return [dataclasses.replace(c, note=_HELD) if c.holds else c for c in explain_failures(cs, notes)]


def _not_applicable(cfg: Config) -> dict[str, str]:
    """Claim id -> why it is not computed for ``cfg.env_id`` (the SafeNav2D-only claims on a velocity task)."""
    return dict(SAFENAV_ONLY_CLAIMS) if cfg.velocity else {}


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg, required=required_keys(cfg))
    require_env(cfg)
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[report.figure(cfg, per_seed, rd.figures / "fosp_arms.png")],
        report_md=report.report_md(cfg, per_seed),
    )
