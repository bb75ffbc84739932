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

import copy
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import Claim, all_of, make_claim
from iclr25.common.device import get_device
from iclr25.common.lm import n_params, tiny_causal_lm
from iclr25.common.progress import log
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import derive_seed, seed_everything, torch_generator
from iclr25.common.train import LMTrainConfig, train_lm
from iclr25.harness.rundir import RunDir, RunResult

from . import full as F
from . import real as R
from . import skills as S
from .adaptation import few_shot_adapt
from .config import PRESETS, Config, FullConfig, RealConfig
from .dispatch import expert_dispatch, prompt_dispatch, two_pass
from .lora_baseline import lora_trainable_params, make_lora
from .reinforce import ReinforceConfig, train_reinforce
from .report import figure, report_md
from .svf import (
    apply_svf,
    count_svf_params,
    get_expert,
    reset_svf,
    save_expert,
    svf_disabled,
    svf_parameters,
    using_expert,
    using_scales,
)

__all__ = [
    "Config",
    "FullConfig",
    "PRESETS",
    "RealConfig",
    "claims",
    "one_seed",
    "run",
]  # the config names re-exported for the registry

MATCH = {"A": "A", "B": "B", "C": "C", "D": "B"}  # the expert whose skill the (shifted / unseen) task needs


# ----------------------------------------------------------------------------------------------------------------
class Symbols:
    """Maps toy symbol ids to the model's token ids (identity for the tiny model)."""

    # ids 0–21: digits, instructions A–D, Q, S, second-wording instructions, category labels (skills.py)
    CHARS = [str(d) for d in range(10)] + ["A", "B", "C", "D", "?", "=", "E", "F", "G", "a", "b", "c"]

    def __init__(self, tokenizer=None):
        if tokenizer is None:
            self.table = torch.arange(S.VOCAB_SIZE)
        else:
            ids = []
            for ch in self.CHARS:
                t = tokenizer(ch, add_special_tokens=False)["input_ids"]
                if len(t) != 1:
                    raise ValueError(f"model_path tokenizer must encode {ch!r} as one token, got {t}")
                ids.append(t[0])
            self.table = torch.tensor(ids)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return self.table[x]


def _base_model(cfg: Config, seed: int, device: torch.device):
    if cfg.model_path:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        model = AutoModelForCausalLM.from_pretrained(cfg.model_path, torch_dtype=torch.float32)
        return model.to(device), Symbols(AutoTokenizer.from_pretrained(cfg.model_path))
    model = tiny_causal_lm(
        cfg.arch,
        seed=derive_seed(seed, "init"),
        vocab_size=S.VOCAB_SIZE,
        hidden=cfg.hidden,
        layers=cfg.layers,
        heads=cfg.heads,
        intermediate=cfg.intermediate,
        max_positions=16,
    )
    return model.to(device), Symbols()


def _pretrain(cfg: Config, model, sym: Symbols, seed: int, device) -> None:
    if cfg.pretrain_steps == 0:
        return
    n_cls = max(1, int(round(cfg.cls_fraction * cfg.pretrain_per_task * len(S.SKILLS))))
    bs = cfg.pretrain_per_task * len(S.SKILLS) + n_cls

    def batch_fn(step, g):
        x, y = S.pretrain_batch(cfg.pretrain_per_task, g, cfg.cls_fraction)
        return sym(x), torch.where(y >= 0, sym(y.clamp_min(0)), y)

    lm_cfg = LMTrainConfig(
        steps=cfg.pretrain_steps,
        batch_size=bs,
        seq_len=S.N_DIGITS + 3,
        lr=cfg.pretrain_lr,
        warmup_steps=0,
        min_lr_ratio=1.0,
        weight_decay=0.0,
        eval_every=0,
        seed=derive_seed(seed, "pretrain"),
    )
    train_lm(model, cfg=lm_cfg, batch_fn=batch_fn, device=device, desc="pretrain")
    model.eval()


def _acc(model, data, device) -> float:
    ids, a = data
    return S.accuracy(model, ids.to(device), a.to(device))


# ---- helpers shared by the stages --------------------------------------------------------------------------
def _encode(sym: Symbols, batch: tuple) -> tuple:
    """Toy ids -> model token ids (float tensors pass through)."""
    return tuple(sym(b) if b.dtype == torch.long else b for b in batch)


def _rl_config(cfg: Config, seed: int, steps: int, lr: float, tag: str) -> ReinforceConfig:
    return replace(cfg.rl, steps=steps, lr=lr, seed=derive_seed(seed, "rl", tag))


def _skill_prompts(cfg: Config, sym: Symbols, task: str, dev):
    """REINFORCE prompt source: fresh ``rl.batch_size`` prompts of ``task`` per step."""

    def pf(step, g):
        ids, a = _encode(sym, S.skill_batch(task, cfg.rl.batch_size, g))
        return ids.to(dev), None, a.to(dev)

    return pf


def _reward(comp, cmask, target):
    """r = +1 if the answer token is right, else -1 (one-token rollouts)."""
    return (comp[:, 0] == target).float() * 2 - 1


def _shuffled(z: dict, seed: int, tag: str) -> dict:
    """Control: an expert with each z vector's coordinates randomly permuted."""
    g = torch_generator(derive_seed(seed, "shuffle", tag))
    return {n: v[torch.randperm(v.numel(), generator=g)] for n, v in z.items()}


# ---- stage 1: pre-train the base model and draw the evaluation sets ----------------------------------------
def pretrain_stage(cfg: Config, seed: int, dev) -> tuple:
    """The base model (pre-trained in the run unless ``model_path``), its symbol map, test and shifted sets."""
    model, sym = _base_model(cfg, seed, dev)
    _pretrain(cfg, model, sym, seed, dev)
    model.eval()
    g_test = torch_generator(derive_seed(seed, "test"))
    test = {t: _encode(sym, S.skill_batch(t, cfg.n_test, g_test)) for t in S.SKILLS}
    shifted = {
        t: _encode(sym, S.skill_batch(t, cfg.n_test, g_test, cfg.shift_lo, cfg.shift_hi))
        for t in cfg.shift_tasks
    }
    shifted["D"] = _encode(
        sym, S.skill_batch("D", cfg.n_test, g_test)
    )  # unseen task token (rule = max, like B)
    return model, sym, test, shifted


# ---- stage 2: SVF experts trained with REINFORCE (paper §3.2, Eq. 1) --------------------------------------
def experts_stage(
    cfg: Config, seed: int, model, sym: Symbols, test: dict, shifted: dict, dev, expert_dir
) -> dict:
    """Wraps ``model`` with SVF, measures the base, trains one expert per skill, fills the task × expert matrix."""
    base_copy = copy.deepcopy(model)  # the un-wrapped base, for LoRA and parameter counts
    apply_svf(model, cfg.targets, mode=cfg.svf_mode, seed=derive_seed(seed, "svf"))
    n_svf = count_svf_params(base_copy, cfg.targets)
    assert n_svf == sum(p.numel() for p in svf_parameters(model))
    with svf_disabled(model):
        base = {t: _acc(model, test[t], dev) for t in S.SKILLS}
        base_shift = {t: _acc(model, d, dev) for t, d in shifted.items()}

    experts, best_steps = {}, {}
    for task in S.SKILLS:
        reset_svf(model, derive_seed(seed, "z0", task))
        val = _encode(sym, S.skill_batch(task, cfg.n_val, torch_generator(derive_seed(seed, "val", task))))
        h = train_reinforce(
            model,
            svf_parameters(model),
            _skill_prompts(cfg, sym, task, dev),
            _reward,
            _rl_config(cfg, seed, cfg.rl.steps, cfg.rl.lr, task),
            reference=lambda: svf_disabled(model),
            val_fn=lambda v=val: _acc(model, v, dev),
            desc=f"SVF expert {task}",
        )
        experts[task] = get_expert(model)
        best_steps[task] = h["best_step"]
        if expert_dir is not None:
            save_expert(
                experts[task], expert_dir / f"expert_{task}.safetensors", {"task": task, "mode": cfg.svf_mode}
            )

    matrix = {}  # matrix[expert][task] = greedy accuracy
    for e, z in experts.items():
        with using_expert(model, z):
            matrix[e] = {t: _acc(model, test[t], dev) for t in S.SKILLS}
            matrix[e].update({f"shift_{t}": _acc(model, d, dev) for t, d in shifted.items()})
    return {
        "base_copy": base_copy,
        "n_svf": n_svf,
        "base": base,
        "base_shift": base_shift,
        "experts": experts,
        "best_steps": best_steps,
        "matrix": matrix,
    }


# ---- stage 3: classification expert and two-pass dispatch (paper §3.2, strategies A and B) -------------------
def dispatch_stage(cfg: Config, seed: int, model, sym: Symbols, experts: dict, dev) -> dict:
    """Trains the classification expert, then routes held-out questions by prompt and by that expert.

    Pass 1 sees ``[Q] + question`` and must answer a category label (a/b/c) that never appears in a question; the
    base model was pre-trained with labels for wording-1 questions only, so wording-2 questions (half of the
    held-out set) are routed only through what the model knows about the question. The classification expert is
    trained by RL on labelled questions of the expert tasks' own distribution (both wordings, fresh digits), as the
    paper trains it on the tasks' training questions.
    """
    reset_svf(model, derive_seed(seed, "z0", "cls"))
    known = list(S.SKILLS)

    def cls_prompts(step, g):
        ids, lab, _, _ = S.cls_batch(S.SKILLS, cfg.rl.batch_size, g)
        return sym(ids).to(dev), None, sym(lab).to(dev)

    cls_val = S.cls_batch(S.SKILLS, cfg.n_val, torch_generator(derive_seed(seed, "val", "cls")))
    cls_val = (sym(cls_val[0]), sym(cls_val[1]))
    train_reinforce(
        model,
        svf_parameters(model),
        cls_prompts,
        _reward,
        _rl_config(cfg, seed, cfg.cls_steps, cfg.rl.lr, "cls"),
        reference=lambda: svf_disabled(model),
        val_fn=lambda: _acc(model, cls_val, dev),
        desc="SVF classification expert",
    )
    cls_expert = get_expert(model)
    reset_svf(model, derive_seed(seed, "z0", "after"))
    label_of = {int(sym(torch.tensor(S.LABELS[t]))): t for t in S.SKILLS}

    def classify(m, ids):
        return [label_of.get(int(k)) for k in S.greedy_tokens(m, ids.to(dev))]

    g_route = torch_generator(derive_seed(seed, "route"))
    r_cls, _, r_task, r_word = S.cls_batch(S.SKILLS, cfg.n_route, g_route)
    r_truth = [S.SKILLS[i] for i in r_task.tolist()]
    # pass-2 prompts: the same question as a skill prompt ([S, instr, digits])
    r_skill = r_cls.clone()
    r_skill[:, 0] = S.S_TOKEN
    all_ans = torch.stack([S.answer(t, r_skill[:, 2:]) for t in S.SKILLS], 1)  # (N, 3)
    r_answer = all_ans.gather(1, r_task[:, None]).squeeze(1)
    r_cls, r_skill, r_answer = sym(r_cls), sym(r_skill), sym(r_answer)
    routes_prompt = prompt_dispatch(model, classify, r_cls, known)
    routes_expert = expert_dispatch(model, cls_expert, classify, r_cls, known)

    def answer_fn(m, ids):
        return S.greedy_tokens(m, ids.to(dev))

    def two_pass_acc(routes):
        ans = torch.stack(two_pass(model, r_skill, routes, experts, answer_fn))
        return float((ans == r_answer).float().mean())

    def routing_acc(routes, wording=None):
        ok = [a == b for a, b, w in zip(routes, r_truth, r_word.tolist()) if wording in (None, w)]
        return float(np.mean(ok)) if ok else float("nan")

    d_cls = r_cls.clone()
    d_cls[:, 1] = sym(torch.tensor(S.TOKENS["D"]))
    routes_unseen = prompt_dispatch(model, classify, d_cls, known)
    out = {
        "prompt_routing_acc": routing_acc(routes_prompt),
        "expert_routing_acc": routing_acc(routes_expert),
        "two_pass_prompt_acc": two_pass_acc(routes_prompt),
        "two_pass_expert_acc": two_pass_acc(routes_expert),
        "two_pass_oracle_acc": two_pass_acc(r_truth),
        "base_acc": two_pass_acc(["other"] * len(r_truth)),
        "unseen_token_to_other": float(np.mean([r == "other" for r in routes_unseen])),
    }
    for w in S.WORDINGS:  # wording 1 was labelled in pre-training, wording 2 never
        out[f"prompt_routing_acc_w{w}"] = routing_acc(routes_prompt, w)
        out[f"expert_routing_acc_w{w}"] = routing_acc(routes_expert, w)
    for k in ("prompt", "expert", "oracle"):
        out[f"two_pass_gain_{k}"] = out[f"two_pass_{k}_acc"] - out["base_acc"]
    return out


# ---- stage 4: few-shot CEM adaptation on shifted tasks (paper §3.2 strategy C, App. A.4) --------------------------
def adaptation_stage(cfg: Config, seed: int, model, sym: Symbols, ex: dict, shifted: dict, dev) -> dict:
    """CEM mixtures of the three experts fitted on a few shots of each shifted task, plus single-expert controls."""
    experts, matrix, base_shift = ex["experts"], ex["matrix"], ex["base_shift"]
    order = list(S.SKILLS)
    adapt = {}
    for t, data in shifted.items():
        lo, hi = (cfg.shift_lo, cfg.shift_hi) if t != "D" else (0, 9)
        shots = _encode(
            sym, S.skill_batch(t, cfg.shots, torch_generator(derive_seed(seed, "shots", t)), lo, hi)
        )
        sid, sans = shots[0].to(dev), shots[1].to(dev)
        res = few_shot_adapt(
            model,
            [experts[k] for k in order],
            lambda m, sid=sid, sans=sans: S.answer_stats(m, sid, sans),
            per_matrix=cfg.per_matrix,
            normalise=cfg.normalise,
            raw=cfg.raw_mixing,
            iters=cfg.cem_iters,
            pop_size=cfg.cem_pop,
            elite_ratio=cfg.cem_elite,
            seed=derive_seed(seed, "cem", t),
        )
        with using_scales(model, res.scales):
            cem_acc = _acc(model, data, dev)
        single = {k: matrix[k][f"shift_{t}"] for k in order}
        with using_expert(model, _shuffled(experts[MATCH[t]], seed, t)):
            shuf = _acc(model, data, dev)
        alpha = np.asarray(res.alpha)
        w = alpha if alpha.ndim == 1 else alpha.mean(1)
        adapt[t] = {
            "base": base_shift[t],
            "cem": cem_acc,
            "best_single": max(single.values()),
            "matching": single[MATCH[t]],
            "shuffled_matching": shuf,
            "shot_acc": res.shot_accuracy,
            "argmax_is_matching": float(order[int(np.argmax(w))] == MATCH[t]),
            **{f"alpha_{k}": float(w[i]) for i, k in enumerate(order)},
        }
    return adapt


# ---- stage 5: LoRA baselines (PEFT, paper App. A.2), RL and SFT --------------------------------------------
def lora_stage(cfg: Config, seed: int, base_copy, sym: Symbols, test: dict, dev) -> dict:
    """LoRA r=``lora_r`` on the SVF target matrices, trained with the same RL loss and with SFT."""
    lora = {}
    n_lora = 0
    for task in cfg.lora_tasks:
        for how in ("rl", "sft"):
            m = copy.deepcopy(base_copy)
            pm = make_lora(
                m,
                r=cfg.lora_r,
                alpha=cfg.lora_alpha,
                dropout=cfg.lora_dropout,
                target_modules=list(cfg.targets),
                seed=derive_seed(seed, "lora", task, how),
            )
            n_lora = lora_trainable_params(pm)
            if how == "rl":
                val = _encode(
                    sym, S.skill_batch(task, cfg.n_val, torch_generator(derive_seed(seed, "val", task)))
                )
                train_reinforce(
                    pm,
                    [p for p in pm.parameters() if p.requires_grad],
                    _skill_prompts(cfg, sym, task, dev),
                    _reward,
                    _rl_config(cfg, seed, cfg.lora_steps, cfg.lora_lr, f"lora_{task}"),
                    reference=pm.disable_adapter,
                    val_fn=lambda v=val, pm=pm: _acc(pm, v, dev),
                    desc=f"LoRA-RL {task}",
                )
            else:
                _lora_sft(cfg, seed, pm, sym, task, dev)
            pm.eval()
            lora[f"{how}_{task}"] = _acc(pm, test[task], dev)
    lora["params"] = n_lora
    return lora


def _lora_sft(cfg: Config, seed: int, pm, sym: Symbols, task: str, dev) -> None:
    def sft_batch(step, g):
        ids, a = _encode(sym, S.skill_batch(task, cfg.rl.batch_size, g))
        x = torch.cat([ids, a[:, None]], 1)
        y = torch.full_like(x, -100)
        y[:, -1] = x[:, -1]
        return x, y

    train_lm(
        pm,
        cfg=LMTrainConfig(
            steps=cfg.lora_steps,
            batch_size=cfg.rl.batch_size,
            seq_len=S.N_DIGITS + 3,
            lr=cfg.lora_lr,
            warmup_steps=0,
            min_lr_ratio=1.0,
            weight_decay=0.0,
            eval_every=0,
            seed=derive_seed(seed, "sft", task),
        ),
        batch_fn=sft_batch,
        device=dev,
        desc=f"LoRA-SFT {task}",
    )


# ---- one seed: the stages in order --------------------------------------------------------------------------
def one_seed(cfg: Config, seed: int, expert_dir: Path | None = None) -> dict:
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
    return {
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


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The keys the claims and their notes read: task-A experts and LoRA, counts of the expert diagnostics, the
    dispatch routing (per prompt wording) and the CEM adaptation on every shifted task."""
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


def validity(cfg: Config, per_seed: dict) -> tuple[bool, str]:
    """The experts need headroom: the base model must have learnt the skills, but not perfectly."""
    base_mean = float(np.mean([np.mean(list(per_seed[s]["base"].values())) for s in per_seed]))
    valid = 0.3 <= base_mean <= 0.97
    reason = (
        f"base model mean skill accuracy {base_mean:.3f} outside [0.3, 0.97]: no headroom for experts (or the base "
        "did not learn the skills)"
    )
    return valid, "" if valid else reason


def _logged_seed(cfg: Config, seed: int, expert_dir: Path) -> dict:
    r = one_seed(cfg, seed, expert_dir=expert_dir)
    log(f"[transformer2] seed {seed}: gains {r['gain']}, {r['seconds']:.1f} s")
    return r


def run(cfg: Config, out: Path) -> RunResult:
    if isinstance(cfg, RealConfig):  # a pretrained LM on real tasks (real.py; full.py refuses for now)
        return (F.run if isinstance(cfg, FullConfig) else R.run)(cfg, out)
    return _run_toy(cfg, out)


def _run_toy(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg)
    fn = lambda s: _logged_seed(cfg, s, rd.path / "experts" / f"seed_{s}")  # noqa: E731
    per_seed = rd.map_seeds(fn, cfg.seed_list, required=required_keys(cfg))
    valid, reason = validity(cfg, per_seed)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[figure(cfg, per_seed, rd.figures / "experts_and_adaptation.png")],
        report_md=report_md(cfg, per_seed),
        valid=valid,
        invalid_reason=reason,
    )
