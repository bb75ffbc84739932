"""OHIO reproduction at small scale: "reacher-LQR-lite" (README, "Reproduction") and "network-lite".

Reacher-LQR-lite, per seed:
1. Flat data on the numpy 2-link arm: 150 computed-torque expert episodes with N(0, 0.1²) noise + 50 episodes
   with 30 % random actions (200 steps each, 40k steps, 8k windows of k = 5).
2. Relabel for the LQR low level (exact model): OHIO-numerical, OHIO-analytic, Observed-State.
3. BC on each relabelled set; E2E BC on the raw torques; (IQL on the numerical set, report only).
4. Deploy: every 5 steps z = π_h(s), LQR gains at s_t, 5 clipped LQR steps. Normalised return = return /
   flat-expert return on the same 20 evaluation episodes.
5. Model error: the deployed LQR is designed with link masses ×1.3 and the inverse uses a learned (A, B) MLP.
6. Low-level change (report only): the same data re-inverted for an LQR with R = 1.0·I.

Network-lite: 6-node rebalancing, LP low level (HiGHS), exact LP inverse + BC with a Dirichlet head vs E2E BC on
36-d flows; at test time the cheap corridors move (costs swapped) and we measure each method's relative loss.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import Claim, all_of, explain_failures, make_claim
from iclr25.common.device import get_device
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import derive_seed, seed_everything
from iclr25.harness.rundir import RunDir, RunResult

from . import real
from .arm import flat_expert_action
from .config import PRESETS, Config, RealConfig
from .dynamics import ArmModel, LearnedLinearModel
from .learners import train_bc, train_iql
from .lqr import LQRLowLevel
from .network import LPLowLevel, collect_network_dataset, evaluate_network
from .relabel import OfflineDataset, relabel
from .report import figure, report_md
from .rollouts import (
    collect_flat_dataset,
    collect_hierarchical_dataset,
    evaluate_flat,
    evaluate_hierarchical,
    hierarchical_expert_goal,
)

__all__ = [
    "Config",
    "PRESETS",
    "RealConfig",
    "claims",
    "one_seed",
    "run",
]  # the config names re-exported for the registry


# ---------------------------------------------------------------- high-level action/observation transforms
def features(obs: np.ndarray) -> np.ndarray:
    """Learner input: (cos q, sin q, to_target, q̇) — joint angles are unbounded, so periodic features."""
    return np.concatenate([np.cos(obs[:, :2]), np.sin(obs[:, :2]), obs[:, 2:]], 1)


def goal_base(obs: np.ndarray) -> np.ndarray:
    """The learner predicts z − (q, 0) (a relative goal); deployment adds it back."""
    return np.concatenate([obs[:, :2], np.zeros_like(obs[:, 4:6])], 1)


def _learner_set(hd: OfflineDataset) -> OfflineDataset:
    return OfflineDataset(
        features(hd.observations),
        hd.actions - goal_base(hd.observations),
        hd.rewards,
        features(hd.next_observations),
        hd.terminations,
        hd.truncations,
    )


# the numerical-inverse variants of the ablation (issue #16): the official Adam loop and the converged LM solver at
# three ridge strengths λ (0 = the paper's unregularised objective)
ABLATION = {
    "adam_official": ("adam", 0.0),
    "lm_lambda_0": ("lm", 0.0),
    "lm_lambda_1e-6": ("lm", 1e-6),
    "lm_lambda_1e-4": ("lm", 1e-4),
}


def numerical_kw(cfg: Config) -> dict:
    """Keyword arguments of the numerical inverse under ``cfg`` (solver, ridge prior λ, budget)."""
    if cfg.solver == "adam":
        return {"solver": "adam", "prior": cfg.prior, "iters": cfg.adam_iters, "lr": cfg.adam_lr}
    return {"solver": "lm", "prior": cfg.prior, "iters": cfg.lm_iters}


def _reacher(cfg: Config, seed: int) -> dict:
    p = cfg.arm
    rng = np.random.default_rng(derive_seed(seed, "data"))
    ds = collect_flat_dataset(cfg.n_expert, cfg.n_noisy, p, rng, horizon=cfg.horizon)
    ev_seed = derive_seed(seed, "eval")
    ev = dict(params=p, n_episodes=cfg.eval_episodes, seed=ev_seed, horizon=cfg.horizon)
    expert = evaluate_flat(lambda o: flat_expert_action(o, p), **ev).mean()
    dev = get_device(cfg.device)  # the learners train there; rollouts run on the CPU
    bc = dict(steps=cfg.bc_steps, hidden=cfg.bc_hidden, lr=cfg.bc_lr, batch_size=cfg.batch_size, device=dev)
    out: dict = {"expert_return": float(expert), "n_windows": len(ds) // cfg.k}

    def hier_score(low: LQRLowLevel, pi: torch.nn.Module) -> float:
        r = evaluate_hierarchical(lambda o: pi.act(features(o)) + goal_base(o), low, **ev)
        return float(r.mean() / expert)

    def arm(
        name: str,
        low: LQRLowLevel,
        method: str,
        learner: str = "bc",
        data: OfflineDataset | None = None,
        inv_cfg: Config = cfg,
        dest: dict | None = None,
    ) -> OfflineDataset:
        t0 = time.perf_counter()
        thr = None if method == "observed_state" else cfg.threshold
        kw = numerical_kw(inv_cfg) if method == "numerical" else {}
        hd = relabel(ds if data is None else data, low, method, threshold=thr, **kw)
        t_inv = time.perf_counter() - t0
        sub = _learner_set(hd)
        s = derive_seed(seed, name)
        if learner == "iql":
            pi, _ = train_iql(sub, cfg.iql, seed=s, device=dev)
        else:
            pi = train_bc(sub, seed=s, **bc)
        d = out if dest is None else dest
        d[name] = hier_score(low, pi)
        d[f"{name}_kept_frac"] = len(hd) / (len(ds) // cfg.k)
        d[f"{name}_median_residual"] = float(np.median(hd.infos["residual"])) if len(hd) else float("nan")
        d.setdefault("timing", {})[f"{name}_inverse_s"] = t_inv
        return hd

    exact = LQRLowLevel(ArmModel(p), R=cfg.lqr_R, k=cfg.k)
    e2e = train_bc(
        OfflineDataset(
            features(ds.observations),
            ds.actions,
            ds.rewards,
            features(ds.next_observations),
            ds.terminations,
            ds.truncations,
        ),
        seed=derive_seed(seed, "e2e"),
        **bc,
    )
    out["e2e_bc"] = float(evaluate_flat(lambda o: e2e.act(features(o)), **ev).mean() / expert)
    arm("ohio_numerical", exact, "numerical")
    arm("ohio_analytic", exact, "analytic")
    arm("observed_state", exact, "observed_state")  # flat data: report only (the claim uses HR data)
    # HR dataset (paper, Table 1): a hierarchical behaviour policy, sub-goal every k steps, the exact LQR tracks it
    hr = collect_hierarchical_dataset(
        cfg.n_expert,
        cfg.n_noisy,
        exact,
        p,
        np.random.default_rng(derive_seed(seed, "hr_data")),
        horizon=cfg.horizon,
        noise_std=cfg.hr_noise,
        velocity_gain=cfg.hr_velocity_gain,
    )
    hr_high = lambda o: hierarchical_expert_goal(o, p, velocity_gain=cfg.hr_velocity_gain)  # noqa: E731
    out["hr_behaviour"] = float(evaluate_hierarchical(hr_high, exact, **ev).mean() / expert)
    for name, method in (
        ("hr_ohio_numerical", "numerical"),
        ("hr_ohio_analytic", "analytic"),
        ("hr_observed_state", "observed_state"),
    ):
        hd = arm(name, exact, method, data=hr)
        # how far the relabels are from the sub-goals the behaviour really used (diagnostic, never trained on)
        err = np.abs(hd.actions - hr.infos["z"][hd.infos["start_index"]])
        out[f"{name}_goal_err_pos"] = float(np.median(err[:, :2])) if len(hd) else float("nan")
        out[f"{name}_goal_err_vel"] = float(np.median(err[:, 2:])) if len(hd) else float("nan")
    if cfg.iql.steps > 0:
        arm("ohio_numerical_iql", exact, "numerical", learner="iql")
    # model error: LQR designed with masses ×1.3, inverse through a learned (A, B) MLP
    model = LearnedLinearModel()
    fit = model.fit(
        ds.observations[:, [0, 1, 4, 5]],
        ds.actions,
        ds.next_observations[:, [0, 1, 4, 5]],
        epochs=cfg.model_epochs,
        seed=derive_seed(seed, "model"),
    )
    out["learned_model_val_mse"] = fit["val_mse"]
    wrong = LQRLowLevel(
        ArmModel(p.scaled_masses(cfg.model_error_mass)), inverse_model=model, R=cfg.lqr_R, k=cfg.k
    )
    arm("me_ohio_numerical", wrong, "numerical")
    arm("me_ohio_analytic", wrong, "analytic")
    # low-level change: re-invert the same data for an LQR with R = changed_R·I
    if cfg.lowlevel_change:
        arm("lowlevel_R_ohio_numerical", LQRLowLevel(ArmModel(p), R=cfg.changed_R, k=cfg.k), "numerical")
    # inverse ablation (report only; after every other arm so their numbers do not change): the numerical arms
    # of all three claims that use them, re-run with each variant; same BC seeds, only the labels differ
    if cfg.inverse_ablation:
        for tag, (solver, lam) in ABLATION.items():
            dest = out.setdefault("ablation", {}).setdefault(tag, {})
            vcfg = dataclasses.replace(cfg, solver=solver, prior=lam)
            same = numerical_kw(vcfg) == numerical_kw(cfg)  # the run's own variant: reuse its arms
            for name, low, data in (
                ("ohio_numerical", exact, ds),
                ("hr_ohio_numerical", exact, hr),
                ("me_ohio_numerical", wrong, ds),
            ):
                if same:
                    dest.update({k: out[k] for k in (name, f"{name}_kept_frac", f"{name}_median_residual")})
                else:
                    arm(name, low, "numerical", data=data, inv_cfg=vcfg, dest=dest)
    return out


def _network(cfg: Config, seed: int) -> dict:
    P = cfg.network
    c_train, c_test = P.cost(), P.swapped_cost()
    ds = collect_network_dataset(P, c_train, cfg.net_episodes, derive_seed(seed, "net_data"))
    hd = relabel(ds, LPLowLevel(c_train), "analytic", threshold=0.0)  # exact inverse: residual must be 0
    kw = dict(steps=cfg.net_bc_steps, hidden=cfg.net_hidden, lr=cfg.bc_lr, batch_size=cfg.batch_size)
    kw["device"] = get_device(cfg.device)  # training only; the LP low level and rollouts run on the CPU
    pi = train_bc(hd, policy="dirichlet", seed=derive_seed(seed, "net_ohio"), **kw)
    e2e = train_bc(ds, seed=derive_seed(seed, "net_e2e"), **kw)
    ev_seed = derive_seed(seed, "net_eval")
    out: dict = {"kept_frac": len(hd) / len(ds)}
    for tag, c in (("train", c_train), ("test", c_test)):
        low = LPLowLevel(c)  # the deployed low level knows the current costs
        out[f"ohio_{tag}"] = float(
            evaluate_network(
                lambda o, low=low: low.flows(o, pi.act(o[None])[0]), P, c, cfg.net_eval_episodes, ev_seed
            ).mean()
        )
        out[f"e2e_{tag}"] = float(
            evaluate_network(lambda o: e2e.act(o[None])[0], P, c, cfg.net_eval_episodes, ev_seed).mean()
        )
    out["ohio_loss"] = 1 - out["ohio_test"] / out["ohio_train"]
    out["e2e_loss"] = 1 - out["e2e_test"] / out["e2e_train"]
    return out


def one_seed(cfg: Config, seed: int) -> dict:
    seed_everything(seed)
    t0 = time.perf_counter()
    r = {"reacher": _reacher(cfg, seed)}
    t1 = time.perf_counter()
    r["network"] = _network(cfg, seed)
    r["reacher"].setdefault("timing", {})["reacher_s"] = t1 - t0
    r["network"]["timing_s"] = time.perf_counter() - t1
    return r


NUMERICAL_ARMS = ("ohio_numerical", "hr_ohio_numerical", "me_ohio_numerical")


def build_claims(v: Callable[[str], list[float]]) -> list[Claim]:
    """The four claims (fixed ids and thresholds) from a per-seed getter ``v(metric key)``."""
    num, e2e = v("reacher/ohio_numerical"), v("reacher/e2e_bc")
    claims = [
        all_of(
            "ohio_parity",
            "OHIO-numerical recovers a hierarchical policy from flat E2E data on par with E2E BC "
            "(≥ 0.85 normalised return, within 0.1 of E2E BC)",
            [
                make_claim(
                    "ohio_parity",
                    "OHIO-numerical normalised return ≥ 0.85",
                    "normalised return",
                    method=num,
                    threshold=0.85,
                    direction=">=",
                ),
                make_claim(
                    "ohio_parity",
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
            "observed_state_fails",
            "On the HR dataset (hierarchical behaviour policy), Observed-State relabelling reaches "
            "≤ 0.5 × OHIO-numerical's return",
            "normalised return ratio",
            method=v("reacher/hr_observed_state"),
            baseline=v("reacher/hr_ohio_numerical"),
            threshold=0.5,
            direction="<=",
            compare="ratio",
        ),
        make_claim(
            "model_error_robust",
            "With a mis-specified LQR model (masses ×1.3) and a learned (A,B) inverse "
            "model, OHIO-numerical ≥ OHIO-analytic + 0.05",
            "normalised return",
            method=v("reacher/me_ohio_numerical"),
            baseline=v("reacher/me_ohio_analytic"),
            threshold=0.05,
            direction=">=",
            compare="difference",
        ),
        all_of(
            "network_transfer",
            "When edge costs change at test time OHIO (LP low level) loses ≤ 10 % of its "
            "return while E2E BC on flows loses ≥ 30 %",
            [
                make_claim(
                    "network_transfer",
                    "OHIO relative loss ≤ 0.10",
                    "1 − R_test/R_train",
                    method=v("network/ohio_loss"),
                    threshold=0.10,
                    direction="<=",
                ),
                make_claim(
                    "network_transfer",
                    "E2E relative loss ≥ 0.30",
                    "1 − R_test/R_train",
                    method=v("network/e2e_loss"),
                    threshold=0.30,
                    direction=">=",
                ),
            ],
        ),
    ]
    return claims


def ablation_claims(per_seed: dict, tag: str) -> list[Claim]:
    """The same claims with every numerical arm taken from inverse-ablation variant ``tag`` (report only)."""

    def v(key: str) -> list[float]:
        sec, _, name = key.partition("/")
        if sec == "reacher" and name in NUMERICAL_ARMS:
            return values(per_seed, f"reacher/ablation/{tag}/{name}")
        return values(per_seed, key)

    return build_claims(v)


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The keys ``build_claims`` reads; with the inverse ablation, also its numerical arms under every variant."""
    claim_keys = ("reacher/ohio_numerical", "reacher/e2e_bc", "reacher/hr_observed_state")
    claim_keys += ("reacher/hr_ohio_numerical", "reacher/me_ohio_numerical", "reacher/me_ohio_analytic")
    claim_keys += ("network/ohio_loss", "network/e2e_loss")
    tags = ABLATION if cfg.inverse_ablation else ()
    return claim_keys + tuple(f"reacher/ablation/{tag}/{name}" for tag in tags for name in NUMERICAL_ARMS)


def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The four claims (ids and thresholds fixed); a failed claim carries its measured reason."""
    return explain_failures(build_claims(lambda k: values(per_seed, k)), _NOTES)


def run(cfg: Config, out: Path) -> RunResult:
    if isinstance(cfg, RealConfig):  # MuJoCo Reacher-v5 (real.py)
        return real.run(cfg, out)
    rd = RunDir(out, cfg, required=required_keys(cfg))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    ablation = {tag: ablation_claims(per_seed, tag) for tag in ABLATION} if cfg.inverse_ablation else {}
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[figure(cfg, per_seed, rd.figures / "ohio_returns.png")],
        report_md=report_md(cfg, per_seed, ablation),
    )


_NOTES = {
    "ohio_parity": "Small-scale BC (2–3k steps, 8k windows) limits every learner; the parity gap is the meaningful part.",
    "observed_state_fails": "Measured on the HR dataset, as in the paper. Our behaviour high level's sub-goals "
    "z = (q*, 3(q* − q)) lie close to the reached x_{t+5} in most windows (the arm rests near the target for much of "
    "an episode; report: median |z − x_{t+5}|), so Observed-State's labels are nearly right; the official Adam "
    "inverse's finite budget leaves its own labels off the true z by a similar amount. The paper's SAC high level "
    "picked sub-goals far beyond x_{t+5} (Observed-State 0.05 there).",
    "model_error_robust": "Analytic vs numerical differ only where controls saturate or the model is wrong; "
    "the learned (A,B) MLP is accurate on this smooth arm, so the gap can be small.",
    "network_transfer": "E2E's loss scales with the cost contrast of the swapped corridors (0.2 vs 1.0 here, "
    "not tuned); the LP low level re-routes and loses nothing.",
}
