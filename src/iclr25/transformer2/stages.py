"""The stages of the toy Transformer² run (``experiment.one_seed`` calls them in order), one per part of the paper:
pre-train the base model and draw the evaluation sets (:func:`pretrain_stage`), SVF experts trained with REINFORCE
(:func:`experts_stage`, §3.2 Eq. 1), the classification expert and two-pass dispatch (:func:`dispatch_stage`,
strategies A and B), few-shot CEM adaptation on shifted tasks (:func:`adaptation_stage`, strategy C, App. A.4) and the
LoRA baselines (:func:`lora_stage`, App. A.2). ``cfg`` is the toy ``Config`` (``config.py``) or any object with its
fields."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import torch

from iclr25.common.lm import tiny_causal_lm
from iclr25.common.seeding import derive_seed, torch_generator
from iclr25.common.train import LMTrainConfig, train_lm

from . import skills as S
from .adaptation import few_shot_adapt
from .dispatch import expert_dispatch, prompt_dispatch, two_pass
from .lora_baseline import lora_trainable_params, make_lora
from .reinforce import ReinforceConfig, train_reinforce
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


def _base_model(cfg, seed: int, device: torch.device):
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


def _pretrain(cfg, model, sym: Symbols, seed: int, device) -> None:
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


def _rl_config(cfg, seed: int, steps: int, lr: float, tag: str) -> ReinforceConfig:
    return replace(cfg.rl, steps=steps, lr=lr, seed=derive_seed(seed, "rl", tag))


def _skill_prompts(cfg, sym: Symbols, task: str, dev):
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
def pretrain_stage(cfg, seed: int, dev) -> tuple:
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
def experts_stage(cfg, seed: int, model, sym: Symbols, test: dict, shifted: dict, dev, expert_dir) -> dict:
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
def dispatch_stage(cfg, seed: int, model, sym: Symbols, experts: dict, dev) -> dict:
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
def adaptation_stage(cfg, seed: int, model, sym: Symbols, ex: dict, shifted: dict, dev) -> dict:
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
def lora_stage(cfg, seed: int, base_copy, sym: Symbols, test: dict, dev) -> dict:
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


def _lora_sft(cfg, seed: int, pm, sym: Symbols, task: str, dev) -> None:
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
