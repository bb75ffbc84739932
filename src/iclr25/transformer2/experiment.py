"""Reproduction of Transformer² on the "skills" toy (method card, README "Reproduction"): SVF experts trained with RL, LoRA (PEFT) baselines,
two-pass dispatch and few-shot CEM adaptation to shifted tasks — all on a tiny Llama pre-trained inside the run.

Per seed:
1. pre-train a tiny ``LlamaForCausalLM`` (``iclr25.common.lm``) on skills A/B/C + the classification format,
   deliberately under-trained so RL has headroom;
2. SVF (official sigmoid form) on all 7 matrices of every block; one expert per skill by REINFORCE (±1 rewards,
   λ·KL(π_ref‖π), best-validation checkpoint), plus a classification expert;
3. LoRA r=4 through PEFT on the same matrices, trained with the same RL loss and with SFT;
4. task × expert accuracy matrix, shuffled-coordinate control, prompt / classification-expert dispatch;
5. few-shot CEM mixtures of the three experts on shifted tasks (digits 3–7) and on an unseen task token.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from iclr25.common.claims import Claim, all_of, make_claim
from iclr25.common.device import get_device
from iclr25.common.lm import n_params
from iclr25.common.progress import log
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import seed_everything
from iclr25.harness.rundir import RunDir, RunResult

from . import full as F
from . import real as R
from . import skills as S
from .config import PRESETS, Config, FullConfig, RealConfig
from .report import figure, report_md
from .stages import adaptation_stage, dispatch_stage, experts_stage, lora_stage, pretrain_stage

__all__ = [
    "Config",
    "FullConfig",
    "PRESETS",
    "RealConfig",
    "claims",
    "one_seed",
    "run",
]  # the config names re-exported for the registry


# ---- one seed: the stages in order --------------------------------------------------------------------------
def one_seed(cfg: Config, seed: int, expert_dir: Path | None = None) -> dict:
    """One seed: the stages in order (``stages.py``); the experts are saved to ``expert_dir`` when given (``run``
    passes ``<out>/experts/seed_<s>``). A ``RealConfig`` runs ``real.one_seed`` (a pretrained LM on real tasks)."""
    if isinstance(cfg, RealConfig):
        return R.one_seed(cfg, seed)
    t0 = time.perf_counter()
    seed_everything(seed)
    dev = get_device(cfg.device)
    model, sym, test, shifted = pretrain_stage(cfg, seed, dev)
    ex = experts_stage(cfg, seed, model, sym, test, shifted, dev, expert_dir)
    dispatch = dispatch_stage(cfg, seed, model, sym, ex["experts"], dev)
    adapt = adaptation_stage(cfg, seed, model, sym, ex, shifted, dev)
    lora = lora_stage(cfg, seed, ex["base_copy"], sym, test, dev)

    base, matrix = ex["base"], ex["matrix"]
    gain = {t: matrix[t][t] - base[t] for t in S.SKILLS}
    r = {
        "base": base,
        "expert": {t: matrix[t][t] for t in S.SKILLS},
        "gain": gain,
        "matrix": matrix,
        "best_step": ex["best_steps"],
        "n_tasks_gain_3pt": int(sum(g >= 0.03 for g in gain.values())),
        "min_own_gain": float(min(gain.values())),
        "specificity_A": float(gain["A"] - max(abs(matrix["A"][t] - base[t]) for t in ("B", "C"))),
        "diag_dominant_cells": int(
            sum(all(matrix[t][t] > matrix[o][t] for o in S.SKILLS if o != t) for t in S.SKILLS)
        ),
        "shuffle_hurts_cases": int(
            sum(adapt[t]["shuffled_matching"] < adapt[t]["matching"] for t in cfg.shift_tasks)
        ),
        "params": {"svf": ex["n_svf"], "lora": lora["params"], "model": n_params(ex["base_copy"])},
        "lora": lora,
        "dispatch": dispatch,
        "adapt": adapt,
        "cem_minus_best_single": float(
            np.mean([adapt[t]["cem"] - adapt[t]["best_single"] for t in cfg.shift_tasks])
        ),
        "cem_minus_base_min": float(min(adapt[t]["cem"] - adapt[t]["base"] for t in cfg.shift_tasks)),
        "cem_argmax_matching": int(sum(adapt[t]["argmax_is_matching"] for t in cfg.shift_tasks)),
        "seconds": time.perf_counter() - t0,
    }
    log(f"[transformer2] seed {seed}: gains {r['gain']}, {r['seconds']:.1f} s")
    return r


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The keys the claims and their notes read: task-A experts and LoRA, counts of the expert diagnostics, the
    dispatch routing (per prompt wording) and the CEM adaptation on every shifted task (a ``RealConfig``: real.py's
    declaration)."""
    if isinstance(cfg, RealConfig):
        return R.required_keys(cfg)
    required = ("base/A", "expert/A", "lora/rl_A", "lora/sft_A", "params/lora", "params/svf", "specificity_A")
    required += ("n_tasks_gain_3pt", "diag_dominant_cells", "shuffle_hurts_cases")
    required += ("cem_minus_best_single", "cem_minus_base_min", "cem_argmax_matching")
    required += ("dispatch/prompt_routing_acc", "dispatch/expert_routing_acc")
    required += tuple(f"dispatch/two_pass_gain_{k}" for k in ("prompt", "expert", "oracle"))
    required += tuple(f"dispatch/{k}_routing_acc_w{w}" for k in ("prompt", "expert") for w in S.WORDINGS)
    required += tuple(
        f"adapt/{t}/{k}" for t in cfg.shift_tasks for k in ("base", "cem", "best_single", "matching")
    )
    return required


# ----------------------------------------------------------------------------------------------------------------
def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The claims from per-seed results (ids and thresholds fixed)."""
    ps = per_seed
    n_shift = len(cfg.shift_tasks)
    lora_a = values(ps, "lora/rl_A")
    lora_sft_a = values(ps, "lora/sft_A")
    svf_a = values(ps, "expert/A")

    def shift_gain(kind: str) -> str:  # per shifted task: mean (kind − base) over seeds
        return ", ".join(
            f"shift-{t}: {np.mean(values(ps, f'adapt/{t}/{kind}')) - np.mean(values(ps, f'adapt/{t}/base')):+.3f}"
            for t in cfg.shift_tasks
        )

    def diff(t: str, a: str, b: str) -> list[float]:  # per seed, on shifted task t
        return [ps[k]["adapt"][t][a] - ps[k]["adapt"][t][b] for k in sorted(ps)]

    pooled_vs_base = [
        float(np.mean([diff(t, "cem", "base")[i] for t in cfg.shift_tasks])) for i in range(len(ps))
    ]
    gain = {k: np.mean(values(ps, f"dispatch/two_pass_gain_{k}")) for k in ("prompt", "expert", "oracle")}
    wacc = {
        (k, w): np.mean(values(ps, f"dispatch/{k}_routing_acc_w{w}"))
        for k in ("prompt", "expert")
        for w in S.WORDINGS
    }

    def below_base(t: str) -> str:  # seeds on which the matching expert is below base on shifted task t
        return f"{sum(d < 0 for d in diff(t, 'matching', 'base'))}/{len(ps)}"

    transfer_note = (
        f"matching expert − base on the shifted tasks (mean over seeds): {shift_gain('matching')}; seeds where the "
        f"matching expert is below base: {', '.join(f'shift-{t}: {below_base(t)}' for t in cfg.shift_tasks)}; "
        f"CEM − base: {shift_gain('cem')}. On a seed where no expert transfers to the shifted distribution (an "
        "expert trained on digits 0–9 is biased towards the answers common there, e.g. min ∈ {0, 1}), no mixture "
        "of the three experts can beat base and a shuffled expert has little to lose"
    )
    return [
        make_claim(
            "expert_gain",
            "An SVF expert improves its own task's greedy accuracy over base by ≥ 3 points on ≥ 2 of 3 tasks",
            "tasks (of 3) with own-task gain ≥ 0.03, mean over seeds",
            values(ps, "n_tasks_gain_3pt"),
            2,
            ">=",
        ),
        make_claim(
            "param_efficiency",
            "SVF uses ≥ 10× fewer trainable parameters than LoRA r=4 on the same matrices",
            "LoRA params / SVF params",
            values(ps, "params/lora"),
            10,
            ">=",
            baseline=values(ps, "params/svf"),
            compare="ratio",
            note=(
                f"task A accuracy (mean of seeds): SVF {np.mean(svf_a):.3f}, LoRA-RL {np.mean(lora_a):.3f}, "
                f"LoRA-SFT {np.mean(lora_sft_a):.3f}, base {np.mean(values(ps, 'base/A')):.3f} — with "
                "fresh data every step LoRA is expected to beat SVF in this toy; no claim that "
                "SVF beats LoRA is made"
            ),
        ),
        # The claims as stated (fixed ids) ...
        make_claim(
            "expert_specificity",
            "The A-expert improves A more than it changes B and C",
            "A-gain − max|ΔB|,|ΔC|",
            values(ps, "specificity_A"),
            0.0,
            ">=",
            note=transfer_note,
        ),
        all_of(
            "cem_adaptation",
            "On each shifted task the few-shot CEM mixture is ≥ best single expert − 1 point and ≥ base + 2 points "
            "(mean over seeds, per shifted task)",
            [
                part
                for t in cfg.shift_tasks
                for part in (
                    make_claim(
                        f"{t}_vs_best_single",
                        f"shifted {t}: CEM − best single expert (mean over seeds)",
                        "acc difference",
                        diff(t, "cem", "best_single"),
                        -0.01,
                        ">=",
                    ),
                    make_claim(
                        f"{t}_vs_base",
                        f"shifted {t}: CEM − base (mean over seeds)",
                        "acc difference",
                        diff(t, "cem", "base"),
                        0.02,
                        ">=",
                    ),
                )
            ],
            note=(
                "each shifted task is its own part (pooling the shifted tasks let a large gain on one hide a loss "
                f"on another; the pooled means were CEM − best single {np.mean(values(ps, 'cem_minus_best_single')):+.3f}, "
                f"CEM − base {np.mean(pooled_vs_base):+.3f}). The best single expert is the best of the three on "
                f"the shifted test set itself (an oracle choice) while CEM picks α on {cfg.shots} shots only, so "
                "the − 1 point margin is within the shot-selection noise of one bad seed. " + transfer_note
            ),
        ),
        # ... and the method card's stricter controls, reported as their own claims so they cannot change the
        # verdict of the claims in either direction.
        all_of(
            "expert_specificity_controls",
            "Stricter controls: on each skill the matching expert beats the other two (≥ 8/9 skill×seed cells); "
            "shuffling the matching expert's singular-value coordinates hurts (≥ 5/6 shifted-task×seed cases)",
            [
                make_claim(
                    "diagonal_dominance",
                    "diagonal-dominant cells per seed (of 3)",
                    "diag cells",
                    values(ps, "diag_dominant_cells"),
                    8 / 3,
                    ">=",
                ),
                make_claim(
                    "shuffle_hurts",
                    f"shuffle-hurts cases per seed (of {n_shift})",
                    "shuffle cases",
                    values(ps, "shuffle_hurts_cases"),
                    5 / 6 * n_shift,
                    ">=",
                ),
            ],
            note=transfer_note,
        ),
        all_of(
            "cem_adaptation_every_task",
            "Stricter controls: CEM ≥ base + 2 points on every shifted task and seed; its largest α is the matching "
            "expert (≥ 5/6 cases)",
            [
                make_claim(
                    "cem_vs_base_worst",
                    "CEM − base, worst shifted task, every seed",
                    "acc difference",
                    values(ps, "cem_minus_base_min"),
                    0.02,
                    ">=",
                    reduce="all",
                ),
                make_claim(
                    "argmax_matching",
                    f"argmax α = matching expert, cases per seed (of {n_shift})",
                    "cases",
                    values(ps, "cem_argmax_matching"),
                    5 / 6 * n_shift,
                    ">=",
                ),
            ],
            note=transfer_note,
        ),
        all_of(
            "dispatch",
            "Prompt-based and classification-expert dispatch route ≥ 90% of held-out prompts of known "
            "tasks to the right expert",
            [
                make_claim(
                    "prompt_based",
                    "prompt-based routing accuracy (base model classifies the question)",
                    "routing acc",
                    values(ps, "dispatch/prompt_routing_acc"),
                    0.9,
                    ">=",
                ),
                make_claim(
                    "classification_expert",
                    "classification-expert routing accuracy",
                    "routing acc",
                    values(ps, "dispatch/expert_routing_acc"),
                    0.9,
                    ">=",
                ),
            ],
            note=(
                "pass 1 sees only [Q] + the question and answers a category label that never occurs in a question; "
                "half of the held-out questions use a wording never labelled in pre-training. Routing accuracy by "
                f"wording (labelled / never labelled): prompt-based {wacc['prompt', 1]:.3f} / {wacc['prompt', 2]:.3f}, "
                f"classification expert {wacc['expert', 1]:.3f} / {wacc['expert', 2]:.3f}. Two-pass gain over the "
                f"base model (accuracy, same questions): prompt-based {gain['prompt']:+.3f}, classification expert "
                f"{gain['expert']:+.3f}, oracle routing {gain['oracle']:+.3f}"
            ),
        ),
    ]


def validity(cfg: Config, per_seed: dict) -> tuple[bool, str]:
    """The experts need headroom: the base model must have learnt the skills, but not perfectly."""
    base_mean = float(np.mean([np.mean(list(per_seed[s]["base"].values())) for s in per_seed]))
    valid = 0.3 <= base_mean <= 0.97
    reason = (
        f"base model mean skill accuracy {base_mean:.3f} outside [0.3, 0.97]: no headroom for experts (or the base "
        "did not learn the skills)"
    )
    return valid, "" if valid else reason


def run(cfg: Config, out: Path) -> RunResult:
    if isinstance(cfg, RealConfig):  # a pretrained LM on real tasks (real.py; full.py refuses for now)
        return (F.run if isinstance(cfg, FullConfig) else R.run)(cfg, out)
    rd = RunDir(out, cfg, required=required_keys(cfg))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s, rd.path / "experts" / f"seed_{s}"), cfg.seed_list)
    valid, reason = validity(cfg, per_seed)
    return RunResult(
        seeds=cfg.seed_list, metrics=aggregate(per_seed), claims=claims(cfg, per_seed), per_seed=per_seed,
        figures=[figure(cfg, per_seed, rd.figures / "experts_and_adaptation.png")],
        report_md=report_md(cfg, per_seed), valid=valid, invalid_reason=reason,
    )  # fmt: skip
