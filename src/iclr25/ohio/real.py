"""The ``real`` preset of the OHIO reproduction: the paper's robot-arm setting on gymnasium's MuJoCo ``Reacher-v5``
(issue #53; the env and the low level are in :mod:`iclr25.ohio.reacher`).

Per seed (the env, its physics and its reward are fixed; a seed changes the episodes' start states and targets,
the behaviour noise, every network's initialisation and minibatches):

1. **Flat data**: ``n_expert`` episodes of the scripted PD expert (:func:`~iclr25.ohio.reacher.expert_action`,
   ω = ``expert_omega``) with N(0, ``expert_noise``²) added to every torque, plus ``n_noisy`` episodes in which each
   torque is, with probability ``random_frac``, replaced by a uniform random one (Reacher-v5's own 50-step
   episodes; torques clipped to ±1).
2. **HR data** (the paper's hierarchical behaviour): every k = 5 steps the sub-goal z = (q*, g (q* − q)) + N(0, σ²)
   (g = ``hr_velocity_gain``, σ = ``hr_noise``) — in the ``n_noisy`` episodes replaced with probability
   ``random_frac`` by a random one — tracked by the LQR low level with gains from MuJoCo's linearisation.
3. **P̃**: the paper's state-dependent linear model (MLP s ↦ (A(s), B(s)), official ``learn_A_B_dynamics``)
   fitted on the dataset being relabelled, the inverse's dynamics for every OHIO arm (as in the official reacher
   code; the LQR's gains come from ``mjd_transitionFD``).
4. Relabel (OHIO-numerical: the official Adam loop; OHIO-analytic; Observed-State), BC on each, E2E BC on the flat
   torques; deploy every arm on 20 evaluation episodes.
5. **Model error**: the deployed LQR (and the inverse's gains) designed on the arm with every inertial parameter
   ×``model_error_mass`` (link masses, inertias, joint armature); the inverse through P̃.

Score: normalised return = (R − R_zero) / (R_expert − R_zero) on the same evaluation episodes, R_zero the return
of zero torque (the arm stays where it starts: Reacher-v5's reward is −distance − ‖a‖², so a random policy's
large control cost would make "do nothing" score ~0.9 on the usual random-to-expert scale).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ..common.claims import Claim, all_of, explain_failures, make_claim
from ..common.device import get_device
from ..common.fmt import fmt_num
from ..common.results import aggregate, values
from ..common.seeding import derive_seed, seed_everything
from ..common.stats import mean_std
from ..harness.rundir import RunResult
from .config import RealConfig
from .dynamics import LearnedLinearModel
from .learners import train_bc
from .reacher import (
    ReacherModel,
    expert_action,
    hierarchical_expert_goal,
    link_lengths,
    reacher_low_level,
    reacher_state,
    run_flat,
    run_hierarchical,
)
from .relabel import OfflineDataset, relabel

REACH_DIST = 0.02  # m: fingertip (radius 0.01) touching the target (radius 0.009)


def _episode_seed(seed: int, tag: str) -> int:
    return derive_seed(seed, tag) % 2**31


def _relative(obs: np.ndarray, z: np.ndarray) -> np.ndarray:
    """The learner's target: the sub-goal relative to the current joint angles, z − (q, 0)."""
    x = reacher_state(obs)
    return z - np.concatenate([x[:, :2], np.zeros_like(x[:, 2:])], 1)


def _absolute(obs: np.ndarray, rel: np.ndarray) -> np.ndarray:
    x = reacher_state(obs)
    return rel + np.concatenate([x[:, :2], np.zeros_like(x[:, 2:])], 1)


def fit_model(ds: OfflineDataset, epochs: int, seed: int) -> tuple[LearnedLinearModel, dict]:
    """P̃ on a flat dataset: (x, a, x') with x' unwrapped onto x's branch of q1 (q1 is an unlimited hinge)."""
    x, x2 = reacher_state(ds.observations), reacher_state(ds.next_observations)
    x2[:, 0] = x[:, 0] + (x2[:, 0] - x[:, 0] + np.pi) % (2 * np.pi) - np.pi
    model = LearnedLinearModel()
    return model, model.fit(x, ds.actions, x2, epochs=epochs, seed=seed)


def behaviour_data(cfg: RealConfig, seed: int, low) -> tuple[OfflineDataset, OfflineDataset]:
    """(flat data, HR data) of one seed (module docstring, steps 1 and 2)."""
    L = link_lengths(cfg.env_id)
    n = cfg.n_expert + cfg.n_noisy
    noisy = np.arange(n) >= cfg.n_expert
    rng = np.random.default_rng(derive_seed(seed, "behaviour"))

    def flat(o: np.ndarray) -> np.ndarray:
        a = expert_action(o, L, cfg.expert_omega) + rng.normal(0.0, cfg.expert_noise, (len(o), 2))
        rand = noisy & (rng.random(n) < cfg.random_frac)
        return np.where(rand[:, None], rng.uniform(-1.0, 1.0, (n, 2)), a)

    def high(o: np.ndarray) -> np.ndarray:
        z = hierarchical_expert_goal(o, L, cfg.hr_velocity_gain) + rng.normal(0.0, cfg.hr_noise, (n, 4))
        q = reacher_state(o)[:, :2]
        r = cfg.hr_random_reach
        zr = np.concatenate([q + rng.uniform(-r, r, (n, 2)), rng.uniform(-r, r, (n, 2))], 1)
        rand = noisy & (rng.random(n) < cfg.random_frac)
        return np.where(rand[:, None], zr, z)

    _, ds, _ = run_flat(flat, n, _episode_seed(seed, "flat_data"), cfg.env_id)
    _, hr, _ = run_hierarchical(high, low, n, _episode_seed(seed, "hr_data"), cfg.env_id)
    return ds, hr


def one_seed(cfg: RealConfig, seed: int) -> dict:
    seed_everything(seed)
    t0 = time.perf_counter()
    L = link_lengths(cfg.env_id)
    true_model = ReacherModel(1.0, cfg.env_id)
    behaviour_low = reacher_low_level(true_model, R=cfg.lqr_R, k=cfg.k)
    ds, hr = behaviour_data(cfg, seed, behaviour_low)
    timing = {"data_s": time.perf_counter() - t0}
    ev_seed, E = _episode_seed(seed, "eval"), cfg.eval_episodes
    R_exp, _, d_exp = run_flat(lambda o: expert_action(o, L, cfg.expert_omega), E, ev_seed, cfg.env_id)
    R_zero, _, _ = run_flat(lambda o: np.zeros((len(o), 2)), E, ev_seed, cfg.env_id)
    scale = R_exp.mean() - R_zero.mean()

    def norm(R: np.ndarray) -> float:
        return float((R.mean() - R_zero.mean()) / scale)

    out: dict = {
        "expert_return": float(R_exp.mean()),
        "zero_return": float(R_zero.mean()),
        "expert_reach_frac": float((d_exp < REACH_DIST).mean()),
        "n_windows": len(ds) // cfg.k,
    }
    dev = get_device(cfg.device)
    bc = dict(steps=cfg.bc_steps, hidden=cfg.bc_hidden, lr=cfg.bc_lr, batch_size=cfg.batch_size, device=dev)
    models = {}
    for tag, data in (("flat", ds), ("hr", hr)):
        models[tag], fit = fit_model(data, cfg.model_epochs, derive_seed(seed, f"model_{tag}"))
        out[f"model_{tag}_val_mse"] = fit["val_mse"]
    timing["model_s"] = time.perf_counter() - t0 - timing["data_s"]
    lows = {
        "": reacher_low_level(true_model, models["flat"], R=cfg.lqr_R, k=cfg.k),
        "hr_": reacher_low_level(true_model, models["hr"], R=cfg.lqr_R, k=cfg.k),
        "me_": reacher_low_level(
            ReacherModel(cfg.model_error_mass, cfg.env_id), models["flat"], R=cfg.lqr_R, k=cfg.k
        ),
    }

    def arm(prefix: str, method: str, data: OfflineDataset) -> OfflineDataset:
        name = f"{prefix}{'ohio_' if method != 'observed_state' else ''}{method}"
        t = time.perf_counter()
        low = lows[prefix]
        thr = None if method == "observed_state" else cfg.threshold
        kw = {"solver": "adam", "iters": cfg.adam_iters, "lr": cfg.adam_lr} if method == "numerical" else {}
        hd = relabel(data, low, method, threshold=thr, **kw)
        timing[f"{name}_inverse_s"] = time.perf_counter() - t
        sub = OfflineDataset(
            hd.observations,
            _relative(hd.observations, hd.actions),
            hd.rewards,
            hd.next_observations,
            hd.terminations,
            hd.truncations,
        )
        pi = train_bc(sub, seed=derive_seed(seed, name), **bc)
        R, _, dist = run_hierarchical(lambda o: _absolute(o, pi.act(o)), low, E, ev_seed, cfg.env_id)
        out[name] = norm(R)
        out[f"{name}_reach_frac"] = float((dist < REACH_DIST).mean())
        out[f"{name}_kept_frac"] = len(hd) / (len(data) // cfg.k)
        out[f"{name}_median_residual"] = float(np.median(hd.infos["residual"])) if len(hd) else float("nan")
        timing[f"{name}_s"] = time.perf_counter() - t
        return hd

    e2e = train_bc(ds, seed=derive_seed(seed, "e2e"), **bc)
    R, _, dist = run_flat(lambda o: e2e.act(o), E, ev_seed, cfg.env_id)
    out["e2e_bc"], out["e2e_bc_reach_frac"] = norm(R), float((dist < REACH_DIST).mean())
    for method in ("numerical", "analytic", "observed_state"):
        arm("", method, ds)
    R, _, dist = run_hierarchical(
        lambda o: hierarchical_expert_goal(o, L, cfg.hr_velocity_gain), behaviour_low, E, ev_seed, cfg.env_id
    )
    out["hr_behaviour"], out["hr_behaviour_reach_frac"] = norm(R), float((dist < REACH_DIST).mean())
    for method in ("numerical", "analytic", "observed_state"):
        hd = arm("hr_", method, hr)
        # distance of the relabels from the sub-goals the behaviour really used (diagnostic, never trained on)
        name = f"hr_{'ohio_' if method != 'observed_state' else ''}{method}"
        err = np.abs(hd.actions - hr.infos["z"][hd.infos["start_index"]])
        out[f"{name}_goal_err_pos"] = float(np.median(err[:, :2])) if len(hd) else float("nan")
        out[f"{name}_goal_err_vel"] = float(np.median(err[:, 2:])) if len(hd) else float("nan")
    for method in ("numerical", "analytic"):
        arm("me_", method, ds)
    timing["seed_s"] = time.perf_counter() - t0
    out["timing"] = timing
    return out


REQUIRED = (
    "ohio_numerical",
    "e2e_bc",
    "hr_observed_state",
    "hr_ohio_numerical",
    "me_ohio_numerical",
    "me_ohio_analytic",
    "expert_reach_frac",
    "hr_behaviour",
)

_NOTES = {
    "real_ohio_parity": "Measured with a faithful implementation (no tuning to the threshold); see the card's "
    "'Real inputs' section for the margin at 1x and 3x the budget.",
    "real_observed_state_fails": "Observed-State's labels x_{t+5} lie close to the behaviour's sub-goals "
    "z = (q*, 3 (q* − q)) wherever the arm rests near its target (report: the relabels' median distance from the "
    "true sub-goals); see the card for the margin at 1x and 3x the budget.",
    "real_model_error_robust": "Reacher-v5's arm is nearly linear (the joint armature dominates its inertia), so "
    "the analytic and numerical inverses differ only where controls saturate; see the card for the margin at 1x "
    "and 3x the budget.",
}


def build_claims(v) -> list[Claim]:
    """The three claims (ids: the quick preset's with ``real_``; the quick thresholds) and the preconditions."""
    num, e2e = v("ohio_numerical"), v("e2e_bc")
    return [
        all_of(
            "real_ohio_parity",
            "On Reacher-v5, OHIO-numerical recovers a hierarchical policy from flat expert data on par with E2E BC "
            "(≥ 0.85 normalised return, within 0.1 of E2E BC)",
            [
                make_claim(
                    "real_ohio_parity",
                    "OHIO-numerical normalised return ≥ 0.85",
                    "normalised return",
                    method=num,
                    threshold=0.85,
                    direction=">=",
                ),
                make_claim(
                    "real_ohio_parity",
                    "OHIO-numerical − E2E BC ≥ −0.1",
                    "normalised return",
                    method=num,
                    baseline=e2e,
                    threshold=-0.1,
                    direction=">=",
                    compare="difference",
                ),
            ],
        ),
        make_claim(
            "real_observed_state_fails",
            "On Reacher-v5's HR dataset (hierarchical behaviour policy), Observed-State relabelling reaches "
            "≤ 0.5 × OHIO-numerical's return",
            "normalised return ratio",
            method=v("hr_observed_state"),
            baseline=v("hr_ohio_numerical"),
            threshold=0.5,
            direction="<=",
            compare="ratio",
        ),
        make_claim(
            "real_model_error_robust",
            "On Reacher-v5 with a mis-specified LQR model (inertia ×1.3) and a learned (A,B) inverse model, "
            "OHIO-numerical ≥ OHIO-analytic + 0.05",
            "normalised return",
            method=v("me_ohio_numerical"),
            baseline=v("me_ohio_analytic"),
            threshold=0.05,
            direction=">=",
            compare="difference",
        ),
        make_claim(
            "real_expert_reaches",
            "Precondition: the scripted expert ends ≥ 90 % of evaluation episodes touching the target",
            f"fraction of episodes ending within {REACH_DIST} m",
            method=v("expert_reach_frac"),
            threshold=0.9,
            direction=">=",
            check="precondition of every claim: the expert whose data is relabelled reaches its targets",
        ),
        make_claim(
            "real_hr_behaviour_competent",
            "Precondition: the HR behaviour policy (its sub-goals tracked by the MuJoCo LQR) reaches ≥ 0.8 "
            "normalised return",
            "normalised return",
            method=v("hr_behaviour"),
            threshold=0.8,
            direction=">=",
            check="precondition of real_observed_state_fails: the hierarchical data comes from a competent policy",
        ),
    ]


def claims(cfg: RealConfig, per_seed: dict) -> list[Claim]:
    return explain_failures(build_claims(lambda k: values(per_seed, k)), _NOTES)


ARMS = (
    "e2e_bc",
    "ohio_numerical",
    "ohio_analytic",
    "observed_state",
    "hr_behaviour",
    "hr_ohio_numerical",
    "hr_ohio_analytic",
    "hr_observed_state",
    "me_ohio_numerical",
    "me_ohio_analytic",
)


def report_md(cfg: RealConfig, per_seed: dict) -> str:
    seeds = sorted(per_seed)
    lines = [
        "## Reacher-v5 (MuJoCo), normalised return per arm",
        "",
        "(R − R_zero) / (R_expert − R_zero) on the same evaluation episodes; 1 = the scripted expert, 0 = zero "
        "torque. `reach` = fraction of episodes ending within 0.02 m of the target.",
        "",
        "| arm | " + " | ".join(f"seed {s}" for s in seeds) + " | mean ± std | reach | kept windows |",
        "|---|" + "---|" * (len(seeds) + 3),
    ]
    for a in ARMS:
        vals = [per_seed[s][a] for s in seeds]
        reach = np.mean([per_seed[s].get(f"{a}_reach_frac", np.nan) for s in seeds])
        kept = np.mean([per_seed[s].get(f"{a}_kept_frac", np.nan) for s in seeds])
        lines.append(
            f"| {a} | "
            + " | ".join(fmt_num(v) for v in vals)
            + f" | {mean_std(vals)} | {fmt_num(reach)} | {fmt_num(kept)} |"
        )
    lines += [
        "",
        "| seed | expert return | zero-torque return | expert reach | P̃ val MSE (flat / HR) | "
        "HR relabel error pos/vel (numerical; Observed-State) |",
        "|---|---|---|---|---|---|",
    ]
    for s in seeds:
        d = per_seed[s]
        lines.append(
            f"| {s} | {fmt_num(d['expert_return'])} | {fmt_num(d['zero_return'])} | "
            f"{fmt_num(d['expert_reach_frac'])} | {d['model_flat_val_mse']:.2e} / {d['model_hr_val_mse']:.2e} | "
            f"{fmt_num(d['hr_ohio_numerical_goal_err_pos'])}/{fmt_num(d['hr_ohio_numerical_goal_err_vel'])}; "
            f"{fmt_num(d['hr_observed_state_goal_err_pos'])}/{fmt_num(d['hr_observed_state_goal_err_vel'])} |"
        )
    return "\n".join(lines) + "\n"


def figure(cfg: RealConfig, per_seed: dict, path: Path) -> Path:
    from ..common.figures import subplots
    from ..common.io import atomic_savefig

    fig, ax = subplots(1, 1, figsize=(9, 3.6))
    m = [np.mean([d[a] for d in per_seed.values()]) for a in ARMS]
    s = [np.std([d[a] for d in per_seed.values()]) for a in ARMS]
    ax.bar(range(len(ARMS)), m, yerr=s, color=["gray"] + ["C0"] * (len(ARMS) - 1))
    ax.set_xticks(range(len(ARMS)), [a.replace("_", "\n", 1) for a in ARMS], fontsize=7)
    ax.axhline(0.85, ls="--", c="k", lw=0.8)
    ax.set_ylabel("normalised return")
    ax.set_title("OHIO on MuJoCo Reacher-v5")
    return atomic_savefig(fig, path)


def result(cfg: RealConfig, per_seed: dict, claim_list: list[Claim], figures: Path) -> RunResult:
    """The real preset's run result from its per-seed results (experiment.run computes them through
    ``experiment.one_seed``) and its claims (``claim_list``, :func:`claims`); the figure is written under
    ``figures``."""
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claim_list,
        per_seed=per_seed,
        figures=[figure(cfg, per_seed, figures / "ohio_reacher_v5.png")],
        report_md=report_md(cfg, per_seed),
    )
