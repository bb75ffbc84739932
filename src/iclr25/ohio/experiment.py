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

import time
from collections.abc import Callable
from pathlib import Path

from iclr25.common.claims import Claim, all_of, explain_failures, make_claim
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import seed_everything
from iclr25.harness.rundir import RunDir, RunResult

from . import real
from .config import PRESETS, Config, RealConfig
from .lite import ABLATION, network_lite, reacher_lite
from .report import figure, report_md

__all__ = [
    "Config",
    "PRESETS",
    "RealConfig",
    "claims",
    "one_seed",
    "required_keys",
    "run",
]  # the config names re-exported for the registry


def one_seed(cfg: Config, seed: int) -> dict:
    if isinstance(cfg, RealConfig):  # MuJoCo Reacher-v5 (real.py)
        return real.one_seed(cfg, seed)
    seed_everything(seed)
    t0 = time.perf_counter()
    r = {"reacher": reacher_lite(cfg, seed)}
    t1 = time.perf_counter()
    r["network"] = network_lite(cfg, seed)
    r["reacher"].setdefault("timing", {})["reacher_s"] = t1 - t0
    r["network"]["timing_s"] = time.perf_counter() - t1
    return r


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The keys ``build_claims`` reads; with the inverse ablation, also its numerical arms under every variant; the
    real preset's are real.py's (:data:`real.REQUIRED`)."""
    if isinstance(cfg, RealConfig):
        return real.REQUIRED
    claim_keys = ("reacher/ohio_numerical", "reacher/e2e_bc", "reacher/hr_observed_state")
    claim_keys += ("reacher/hr_ohio_numerical", "reacher/me_ohio_numerical", "reacher/me_ohio_analytic")
    claim_keys += ("network/ohio_loss", "network/e2e_loss")
    tags = ABLATION if cfg.inverse_ablation else ()
    return claim_keys + tuple(f"reacher/ablation/{tag}/{name}" for tag in tags for name in NUMERICAL_ARMS)


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


def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The four claims (ids and thresholds fixed); a failed claim carries its measured reason. The real preset's
    are real.py's."""
    if isinstance(cfg, RealConfig):  # MuJoCo Reacher-v5 (real.py)
        return real.claims(cfg, per_seed)
    return explain_failures(build_claims(lambda k: values(per_seed, k)), _NOTES)


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg, required=required_keys(cfg))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    if isinstance(cfg, RealConfig):  # MuJoCo Reacher-v5 (real.py)
        return real.result(cfg, per_seed, claims(cfg, per_seed), rd.figures)
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
