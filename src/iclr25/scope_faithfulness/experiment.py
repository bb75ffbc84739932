"""Reproduction: SCOPE preference tuning cuts hallucinations of an SFT data-to-text model (synthetic biographies).

Pipeline (the paper's method, its Fig. 1, at toy scale): pre-train the base LM p_LM on prior-driven biographies (once per run, shared
by the seeds: it is not what is compared) → per seed, draw D (records with divergent references) and split it in
halves D₁/D₂ → SFT p_LM on D₁ (p_θ₀) → noisy samples y⁻ on D₂ (α ∈ ``alphas``, T = 0.6, top-p 0.9, first 2
tokens untouched) → DPO with TRL (β = 0.1, π_ref = p_θ₀) → greedy decoding on faithful test records.
Baselines: p_θ₀ (SFT), p_θ₀ + continued SFT on D₂ (same data and optimiser steps as DPO, no negatives) and
context-aware decoding (CAD) on p_θ₀. Metrics are exact: hallucination rate and field recall; SacreBLEU.
"""

from __future__ import annotations

import copy
import math
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import Claim, make_claim
from iclr25.common.device import get_device
from iclr25.common.io import atomic_write_json, read_json
from iclr25.common.progress import log
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import derive_seed, seed_everything
from iclr25.common.stats import interval_note, sign_note
from iclr25.harness.rundir import RunDir, RunResult

from . import report
from .biographies import World, hallucination_and_recall, pretraining_corpus, records_dataset
from .config import ARCHS, PRESETS, Config
from .decoding import greedy, sampled, scores
from .preference import build_preference_pairs, independent_copy, scope_dpo, split_halves
from .training import build_model, fit_lm, lm_prompt, load_tokenizer, padded_batch, stage_config, trl_config

__all__ = [
    "ARCHS",
    "Config",
    "PRESETS",
    "claims",
    "one_seed",
    "required_keys",
    "run",
]  # config names re-exported for the registry


def pretrain_lm(cfg: Config, out: Path, world: World, tok, device):
    """p_LM, the pre-trained base LM of the paper's Fig. 1 (here pre-trained once per run on prior-driven sentences,
    so that it holds spurious "knowledge"), cached in ``out/p_lm`` (safetensors)."""
    from transformers import AutoModelForCausalLM

    from iclr25.common.results import config_hash

    key = config_hash(
        {k: getattr(cfg, k) for k in ("n_pretrain", "prior_strength", "arch", "hidden", "layers", "heads",
                                      "pretrain", "seed", "base_model_path")}
    )  # fmt: skip
    path = out / "p_lm"
    if (path / "done.json").exists() and read_json(path / "done.json").get("key") == key:
        return AutoModelForCausalLM.from_pretrained(path, local_files_only=True).to(device).eval()
    corpus = pretraining_corpus(world, cfg.n_pretrain, derive_seed(cfg.seed, "pretrain"), cfg.prior_strength)
    ids, lab = padded_batch(tok, [""] * len(corpus), corpus, mask_prompt=False)
    if cfg.base_model_path:
        lm = AutoModelForCausalLM.from_pretrained(
            cfg.base_model_path, local_files_only=True, dtype=torch.float32
        )
    else:
        lm = build_model(cfg.arch, len(tok), cfg.hidden, cfg.layers, cfg.heads, derive_seed(cfg.seed, "init"))
    fit_lm(lm, ids, lab, stage_config(cfg.pretrain, cfg.seed), device, "pretrain p_LM")
    lm.save_pretrained(path)
    atomic_write_json(path / "done.json", {"key": key})
    return lm.eval()


def shared_context(cfg: Config, out: Path) -> dict:
    """What every seed of a run shares: the world, the tokenizer, the device and p_LM, pre-trained once and cached
    in ``out/p_lm`` (:func:`pretrain_lm`; a resumed run reads it back). ``one_seed(cfg, s, **ctx)`` takes it."""
    try:
        from datasets.utils.logging import disable_progress_bar
        from transformers.utils import logging as hf_logging

        disable_progress_bar()
        hf_logging.disable_progress_bar()  # model save/load bars
    except ImportError:  # pragma: no cover
        pass
    world, device = World(), get_device(cfg.device)
    tok = load_tokenizer(cfg.base_model_path, world)
    return {
        "p_lm": pretrain_lm(cfg, Path(out), world, tok, device),
        "world": world,
        "tok": tok,
        "device": device,
    }


def one_seed(
    cfg: Config,
    seed: int,
    p_lm=None,
    world: World | None = None,
    tok=None,
    device: torch.device | None = None,
) -> dict:
    """One seed of the paper's two-stage pipeline (Fig. 1): draw D and split it into halves D₁/D₂; stage 1, SFT of
    p_LM on D₁ gives p_θ₀; noisy generation of y⁻ on D₂ at every α of ``cfg.alphas``; stage 2, DPO of p_θ₀ on
    (x, y, y⁻) with π_ref = p_θ₀; greedy (and T-sampled) decoding on faithful test records. Also the baselines
    (p_θ₀, continued SFT on D₂, CAD) and the α = 0 control of the negatives.

    ``p_lm``, ``world``, ``tok`` and ``device`` are the context a run shares across its seeds
    (:func:`shared_context`); each one not given is built here — p_LM pre-trained in a temporary folder (removed
    afterwards), the same weights as in a run of ``cfg`` (its pre-training depends on ``cfg`` alone, not on
    ``seed``)."""
    world = World() if world is None else world
    tok = load_tokenizer(cfg.base_model_path, world) if tok is None else tok
    device = get_device(cfg.device) if device is None else device
    if p_lm is None:
        with tempfile.TemporaryDirectory(prefix="scope-p_lm-") as tmp:  # the trained model stays in memory
            p_lm = pretrain_lm(cfg, Path(tmp), world, tok, device)
    t0 = time.perf_counter()
    seed_everything(seed)
    data = records_dataset(world, cfg.n_data, derive_seed(seed, "data"), cfg.year_absent, cfg.divergent)
    test = records_dataset(world, cfg.n_test, derive_seed(seed, "test"), cfg.year_absent, faithful=True)
    d1, d2 = split_halves(data, seed=seed)
    test_prompts = [r["prompt"] for r in test]
    res: dict = {"n_d1": len(d1), "n_d2": len(d2)}
    gen = dict(batch_size=cfg.gen_batch, max_new_tokens=cfg.max_new_tokens)
    samp = dict(gen, temperature=cfg.temperature, top_p=cfg.top_p)
    # stage 1: SFT p_θ₀ on D₁ (initialised from p_LM, as in the paper)
    sft = copy.deepcopy(p_lm)
    ids, lab = padded_batch(tok, [r["prompt"] for r in d1], [r["reference"] for r in d1], mask_prompt=True)
    fit_lm(sft, ids, lab, stage_config(cfg.sft, derive_seed(seed, "sft")), device, "SFT D1")
    s_seed = derive_seed(seed, "sampled_eval")  # the same sampling seed for every arm
    res["sft"] = scores(greedy(sft, tok, test_prompts, device, **gen), test, world)
    res["sft"].update(sampled(sft, tok, test, device, s_seed, **samp))
    res["cad"] = scores(greedy(sft, tok, test_prompts, device, cad_alpha=cfg.cad_alpha, **gen), test, world)
    # continued SFT on D₂: the same pairs' references, the same number of optimiser steps as DPO, no negatives
    tune_steps = cfg.tune_epochs * math.ceil(len(d2) / cfg.tune_batch)
    cont = copy.deepcopy(sft)
    ids2, lab2 = padded_batch(tok, [r["prompt"] for r in d2], [r["reference"] for r in d2], mask_prompt=True)
    warmup = math.ceil(cfg.warmup_ratio * tune_steps)
    tc = trl_config(tune_steps, cfg.tune_batch, cfg.tune_lr, warmup, derive_seed(seed, "cont"))
    fit_lm(cont, ids2, lab2, tc, device, "SFT D2")
    res["cont_sft"] = scores(greedy(cont, tok, test_prompts, device, **gen), test, world)
    res["cont_sft"].update(sampled(cont, tok, test, device, s_seed, **samp))
    res["tune_steps"] = tune_steps
    # α = 0 control: p_θ₀'s own samples on D₂ at the same temperature / top-p
    gen_kw = dict(
        tokenizer=tok, lm_tokenizer=tok, batch_size=cfg.gen_batch, n_untouched=cfg.n_untouched, temperature=cfg.temperature,
        top_p=cfg.top_p, max_new_tokens=cfg.max_new_tokens, lm_prompt_ids=lm_prompt(tok),
    )  # fmt: skip
    ctrl = build_preference_pairs(sft, p_lm, d2, 0.0, seed=derive_seed(seed, "neg", 0), **gen_kw)
    res["neg_halluc_alpha0"] = float(
        hallucination_and_recall(ctrl["rejected"], d2, world)["hallucinated"].mean()
    )
    for a in cfg.alphas:
        pairs = build_preference_pairs(sft, p_lm, d2, a, seed=derive_seed(seed, "neg", str(a)), **gen_kw)
        neg = hallucination_and_recall(pairs["rejected"], d2, world)
        differs = float(
            np.mean([c.strip() != r.strip() for c, r in zip(pairs["chosen"], pairs["rejected"], strict=True)])
        )
        pol = independent_copy(sft)
        _, hist = scope_dpo(
            pol, pairs, tok, ref_model=None, beta=cfg.beta, learning_rate=cfg.tune_lr, num_train_epochs=cfg.tune_epochs,
            per_device_train_batch_size=cfg.tune_batch, warmup_steps=cfg.warmup_ratio,
            seed=derive_seed(seed, "dpo", str(a)) % (2**31), logging_steps=max(1, tune_steps // 4),
            use_cpu=device.type == "cpu", bf16=False,
        )  # fmt: skip
        logs = [h for h in hist if "loss" in h]
        res[f"scope@{a:g}"] = {
            **scores(greedy(pol, tok, test_prompts, device, **gen), test, world),
            **sampled(pol, tok, test, device, s_seed, **samp),
            "neg_halluc": float(neg["hallucinated"].mean()),
            "neg_recall": float(neg["recall"].mean()),
            "rejected_differs": differs,
            "dpo_last_loss": float(logs[-1]["loss"]) if logs else float("nan"),
            "dpo_last_reward_acc": float(logs[-1].get("rewards/accuracies", float("nan")))
            if logs
            else float("nan"),
        }
        if a == cfg.alpha:
            res["example_pair"] = {k: pairs[0][k] for k in ("prompt", "chosen", "rejected")}
    res["runtime_s"] = time.perf_counter() - t0
    return res


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The per-seed keys the claims and their notes read: SFT / continued SFT, the α = 0 control, and SCOPE at
    α = 0.1, the claimed α and the largest α (Config checks that 0.1 and alpha are in alphas)."""
    scope_arms = [f"scope@{x:g}" for x in sorted({0.1, cfg.alpha, max(cfg.alphas)})]
    return (
        tuple(f"{arm}/{k}" for arm in ("sft", "cont_sft", *scope_arms) for k in ("halluc", "recall"))
        + ("neg_halluc_alpha0", f"scope@{cfg.alpha:g}/neg_halluc")
        + (f"scope@{cfg.alpha:g}/recall_sampled", "cont_sft/recall_sampled")
        + tuple(
            f"scope@{x:g}/{k}"
            for x in sorted({0.1, cfg.alpha})
            for k in ("halluc_sampled", "rejected_differs", "dpo_last_reward_acc")
        )
    )


# recall_kept is a check, not a claim: field recall saturates at 1 on this task (README, "Reproduction")
RECALL_KEPT_CHECK = "saturated: field recall is 1.000 for every arm and seed"


def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The four claims (ids and thresholds fixed): SCOPE at α = ``cfg.alpha`` halves the better SFT baseline's
    hallucination rate and keeps field recall (the paper's headline); its negatives y⁻ are unfaithful (the noisy
    generation's purpose, paper Fig. 1); α = 0.5 beats α = 0.1 (the paper's α sensitivity). Each note carries the
    numbers behind the verdict, with paired per-seed intervals where two arms are compared."""
    a = f"scope@{cfg.alpha:g}"
    sft_h, cont_h = values(per_seed, "sft/halluc"), values(per_seed, "cont_sft/halluc")
    best_name, best = ("SFT", sft_h) if np.mean(sft_h) <= np.mean(cont_h) else ("continued SFT", cont_h)
    scope_h = values(per_seed, f"{a}/halluc")
    small = cfg.n_data < 3000 or cfg.sft.steps < 700
    note_small = " Smoke-scale run: too small for the claim." if small else ""
    hi = f"scope@{max(cfg.alphas):g}"
    recall_cost = np.mean(values(per_seed, "cont_sft/recall")) - np.mean(values(per_seed, f"{hi}/recall"))
    mv = lambda k: float(np.mean(values(per_seed, k)))  # noqa: E731
    lo, mid = "scope@0.1", a
    trend_note = (
        f"Greedy hallucination α = 0.1: {mv(lo + '/halluc'):.3f}, α = {cfg.alpha:g}: {mv(mid + '/halluc'):.3f}; "
        f"sampled (T = {cfg.temperature:g}): {mv(lo + '/halluc_sampled'):.3f} vs {mv(mid + '/halluc_sampled'):.3f}. "
        f"The noise level shows in the negatives: y⁻ ≠ y in {mv(lo + '/rejected_differs'):.0%} vs "
        f"{mv(mid + '/rejected_differs'):.0%} of pairs, final DPO reward accuracy {mv(lo + '/dpo_last_reward_acc'):.2f} "
        f"vs {mv(mid + '/dpo_last_reward_acc'):.2f}."
    )
    d = np.asarray(values(per_seed, mid + "/halluc")) - np.asarray(values(per_seed, lo + "/halluc"))
    trend_note += (
        f" Paired per-seed differences (α = {cfg.alpha:g} − α = 0.1): {', '.join(f'{x:+.3f}' for x in d)}; "
        f"{int((d < 0).sum())} of {len(d)} seeds lower, {int((d == 0).sum())} tied; 95 % paired t interval "
        f"{interval_note(d, 3)} — sign {sign_note(d)}; when it is not decided the verdict (the mean's) is not a "
        "finding."
    )
    rk = np.asarray(values(per_seed, f"{a}/recall_sampled")) - np.asarray(
        values(per_seed, "cont_sft/recall_sampled")
    )
    if mv(lo + "/halluc") == 0 and mv(mid + "/halluc") == 0:
        trend_note += (
            " Both reach 0 greedy hallucinations: on this toy task even weak negatives remove the single "
            "hallucination mode (an unsupported 'born in' clause), so the metric saturates and the trend cannot "
            "show; the paper's α sensitivity is measured on real data where α = 0.1 negatives are too close to y."
        )
    return [
        make_claim(
            "halluc_halved",
            "SCOPE (α = 0.5) at least halves the hallucination rate of the better SFT baseline",
            f"mean hallucination(SCOPE) / min(mean SFT, mean continued SFT) [better: {best_name}]",
            method=scope_h,
            baseline=best,
            threshold=0.5,
            direction="<=",
            compare="ratio",
            note="ratio of means over seeds; undefined (fails) if the better baseline never hallucinates."
            + note_small,
        ),
        make_claim(
            "recall_kept",
            "SCOPE keeps field recall within 0.03 of continued SFT",
            f"mean field recall of T = {cfg.temperature:g} samples, SCOPE − continued SFT",
            method=values(per_seed, f"{a}/recall_sampled"),
            baseline=values(per_seed, "cont_sft/recall_sampled"),
            threshold=-0.03,
            direction=">=",
            compare="difference",
            check=RECALL_KEPT_CHECK,
            note=(
                f"field recall of temperature samples (T = {cfg.temperature:g}, top-p {cfg.top_p:g}, the sampling "
                "of y⁻): "
                + ", ".join(f"{k} {mv(k + '/recall_sampled'):.3f}" for k in ("sft", "cont_sft", mid, hi))
                + (
                    " — saturated at 1 here too (a sanity check, not a test)."
                    if mv(mid + "/recall_sampled") == 1 and mv("cont_sft/recall_sampled") == 1
                    else "."
                )
                + " Greedy field recall (the earlier metric) is a sanity check only: "
                + ", ".join(f"{k} {mv(k + '/recall'):.3f}" for k in ("sft", "cont_sft", mid, hi))
                + (
                    " — saturated at 1 for every arm, it cannot fail at this scale."
                    if mv(mid + "/recall") == 1
                    else "."
                )
                + f" Paired per-seed differences {interval_note(rk, 3)} (95 % t interval)."
                + note_small
            ),
        ),
        make_claim(
            "negatives_unfaithful",
            "Noisy samples y⁻ (α = 0.5) contradict or add to the record more often than p_θ₀'s own samples (α = 0)",
            "share of unfaithful y⁻ on D₂, α = 0.5 − α = 0 (every seed)",
            method=values(per_seed, f"{a}/neg_halluc"),
            baseline=values(per_seed, "neg_halluc_alpha0"),
            threshold=1e-9,
            direction=">=",
            compare="difference",
            reduce="all",
            note="strict '>' tested as a difference ≥ 1e-9 on every seed (pipeline sanity check)."
            + note_small,
        ),
        make_claim(
            "alpha_trend",
            "Stronger noise gives more useful negatives: hallucination at α = 0.5 is below that at α = 0.1",
            "mean hallucination(SCOPE α=0.5) − mean hallucination(SCOPE α=0.1)",
            method=scope_h,
            baseline=values(per_seed, "scope@0.1/halluc"),
            threshold=-1e-9,
            direction="<=",
            compare="difference",
            note=(
                f"strict '<' tested as a difference ≤ −1e-9 (equal rates, e.g. both 0, fail). {trend_note} "
                f"Recall cost at α = {max(cfg.alphas):g} vs continued SFT: {recall_cost:+.3f}." + note_small
            ),
        ),
    ]


def summary(cfg: Config, per_seed: dict) -> str:
    """One log line: mean greedy hallucination of SFT, continued SFT and SCOPE (α = ``cfg.alpha``)."""
    m = {k: np.mean(values(per_seed, f"{k}/halluc")) for k in ("sft", "cont_sft", f"scope@{cfg.alpha:g}")}
    return "scope_faithfulness: hallucination SFT {:.3f} / cont {:.3f} / SCOPE {:.3f}".format(*m.values())


def precondition(per_seed: dict) -> str:
    """Why the run is not meaningful, or ``""``: when neither SFT baseline hallucinates, the task gives SCOPE
    nothing to fix (the claims' baseline is then 0)."""
    if max(np.mean(values(per_seed, "sft/halluc")), np.mean(values(per_seed, "cont_sft/halluc"))) == 0:
        return "neither SFT baseline hallucinates: the task gives SCOPE nothing to fix"
    return ""


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(Path(out), cfg, required=required_keys(cfg))
    ctx = shared_context(cfg, rd.path)  # p_LM: pre-trained once per run, before (and shared by) the seeds
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s, **ctx), cfg.seed_list)
    log(summary(cfg, per_seed))
    reason = precondition(per_seed)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[report.figure(cfg, per_seed, rd.figures / "scope_faithfulness.png")],
        report_md=report.report_md(cfg, per_seed),
        valid=not reason,
        invalid_reason=reason,
    )
