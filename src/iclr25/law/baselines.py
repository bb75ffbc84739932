"""Fine-tuning baselines on the same API (paper §6 baselines): FT-UL (gradient ascent on prompt + answer),
SeUL-style ascent on the answer tokens only, and FT→EOS (fine-tune the prompt to emit EOS). Each can stop at a
matched forgetting level: after every step the washed-fact accuracy is measured and training stops once it is
≤ ``stop_at`` — the protocol used to compare methods at equal forgetting."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from . import checks as check
from .evaluation import fact_accuracy as _fact_accuracy
from .facts import Fact, check_facts
from .memit import _target_ids
from .memories import encode_for, length_groups

TOKENS = ("sequence", "answer")


@dataclass
class FTReport:
    steps: int
    accuracies: list[float] = field(default_factory=list)  # washed accuracy after every step
    stopped_at_target: bool = False


OPTIMIZERS = ("adam", "sgd")
_DROPOUT_KEYS = ("attention_dropout", "hidden_dropout", "hidden_dropout_prob", "attention_probs_dropout_prob",
                 "resid_pdrop", "embd_pdrop", "attn_pdrop", "dropout", "activation_dropout")  # fmt: skip


def _has_dropout(model) -> bool:
    """Whether a forward pass in train mode can differ from eval mode: an ``nn.Dropout`` with p > 0 or a config
    dropout rate > 0 (HF attention implementations read ``config.attention_dropout`` directly)."""
    if any(isinstance(m, torch.nn.Dropout) and m.p > 0 for m in model.modules()):
        return True
    cfg = getattr(model, "config", None)
    return any(isinstance(getattr(cfg, k, 0), (int, float)) and getattr(cfg, k, 0) > 0 for k in _DROPOUT_KEYS)


def _ft(
    model,
    tokenizer,
    facts,
    *,
    lr,
    max_steps,
    stop_at,
    sign,
    target,
    tokens,
    params,
    optimizer,
    batch_size,
    seed,
    known_fn=None,
):
    facts = check_facts(facts)

    def fact_accuracy(m, t, fs):  # the washed accuracy that decides the stop (default: fact_known's rule)
        if known_fn is None:
            return _fact_accuracy(m, t, fs)
        return float(known_fn(m, t, fs).float().mean())

    if not facts:
        raise ValueError("facts must hold at least one Fact, got an empty list")
    check.number("lr", lr, 0.0, open_lo=True)
    check.int_at_least("max_steps", max_steps, 0)
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
    if batch_size is not None:
        check.batch_size(batch_size)
    check.seed(seed)
    if stop_at is not None and not (0 <= stop_at <= 1):
        raise ValueError(f"stop_at must be in [0, 1] or None, got {stop_at!r}")
    if tokens not in TOKENS:
        raise ValueError(f"tokens must be one of {TOKENS}, got {tokens!r}")
    b = encode_for(model, tokenizer, facts, ("{}",), target=target)
    if tokens == "sequence":
        lmask = b.attention_mask[:, 1:].bool()
    else:
        lmask = b.target_mask[:, 1:]
    params = list(params) if params is not None else [p for p in model.parameters() if p.requires_grad]
    opt = (torch.optim.Adam if optimizer == "adam" else torch.optim.SGD)(params, lr=lr)
    rep = FTReport(0)
    g = torch.Generator().manual_seed(int(seed))
    n = b.input_ids.shape[0]
    bs = n if batch_size is None else min(batch_size, n)
    lens = b.attention_mask.sum(1)
    # the stop test read off each step's own forward pass: with the default rule on the full batch the teacher-forced
    # arg-max of the step's logits (the weights before the step) is fact_known of those weights — one forward pass
    # per step saved. Not with a custom known_fn, minibatches, EOS targets or active dropout (train-mode logits differ)
    fused = known_fn is None and bs == n and target == "answer" and not _has_dropout(model)

    def step_grads(idx: torch.Tensor, backward: bool = True) -> float:
        """Gradients of the loss on rows ``idx`` accumulated group by group (rows of equal length run unpadded;
        one group's graph alive at a time) and, when fused, the share of facts known before this step.
        ``backward=False``: the test alone (a pass whose gradients would be discarded: the step cap is reached)."""
        total = lmask[idx].sum().clamp_min(1)
        ok = torch.zeros(n, dtype=torch.bool)
        opt.zero_grad()
        for grp in length_groups(lens[idx]):
            r = idx[grp]
            L = int(lens[r[0]])
            ids, m = b.input_ids[r, :L], lmask[r, : L - 1]
            with torch.set_grad_enabled(backward and torch.is_grad_enabled()):
                lg = model(input_ids=ids).logits[:, :-1].float()
            if backward:
                nll = F.cross_entropy(lg.flatten(0, 1), ids[:, 1:].flatten(), reduction="none").view_as(m)
                (sign * (nll * m).sum() / total).backward()
            if fused:
                hit = (lg.detach().argmax(-1) == ids[:, 1:]) | ~b.target_mask[r, 1:L]
                ok[r.cpu()] = hit.all(1).cpu()
        return float(ok.float().mean())

    if not fused:
        acc = fact_accuracy(model, tokenizer, facts)
        if stop_at is not None and acc <= stop_at:
            rep.stopped_at_target = True
            return rep
    for step in range(max_steps + fused):
        model.train()
        idx = torch.randperm(n, generator=g)[:bs].to(b.input_ids.device)
        acc_before = step_grads(idx, backward=not (fused and step == max_steps))
        if fused:  # the test of the weights after `step` steps; a stop discards this pass's gradients
            if step > 0:
                rep.accuracies.append(acc_before)
            if stop_at is not None and acc_before <= stop_at:
                rep.stopped_at_target = True
                break
            if step == max_steps:
                break
        opt.step()
        rep.steps = step + 1
        if not fused:
            acc = fact_accuracy(model, tokenizer, facts)
            rep.accuracies.append(acc)
            if stop_at is not None and acc <= stop_at:
                rep.stopped_at_target = True
                break
    opt.zero_grad()
    model.eval()
    return rep


def ft_unlearn(
    model,
    tokenizer,
    facts: Sequence[Fact],
    *,
    lr: float = 1e-6,
    max_steps: int = 100,
    stop_at: float | None = None,
    tokens: str = "sequence",
    params=None,
    optimizer: str = "adam",
    batch_size: int | None = None,
    seed: int = 0,
    known_fn=None,
) -> FTReport:
    """FT-UL: gradient *ascent* on the NLL of ``prompt + answer`` (``tokens="answer"``: answer tokens only, as
    SeUL). Default lr = the official GPT2-XL FT-UL one. ``params``: the tensors to train (default: all; pass a PEFT
    model to train LoRA weights only). Stops early once washed accuracy ≤ ``stop_at`` (``known_fn(model, tokenizer,
    facts)`` → bool per fact decides it; default :func:`~iclr25.law.evaluation.fact_known`)."""
    return _ft(
        model, tokenizer, facts, lr=lr, max_steps=max_steps, stop_at=stop_at, sign=-1.0, target="answer",
        tokens=tokens, params=params, optimizer=optimizer, batch_size=batch_size, seed=seed, known_fn=known_fn,
    )  # fmt: skip


def ft_to_eos(
    model,
    tokenizer,
    facts: Sequence[Fact],
    *,
    lr: float = 1e-5,
    max_steps: int = 100,
    stop_at: float | None = None,
    edit_target=None,
    params=None,
    optimizer: str = "adam",
    batch_size: int | None = None,
    seed: int = 0,
) -> FTReport:
    """FT: fine-tune every prompt to emit EOS (``edit_target`` default: the tokenizer's EOS) by gradient descent
    on the target tokens. Default lr = the official GPT2-XL FT one. Stops once washed accuracy ≤ ``stop_at``."""
    tids = _target_ids(tokenizer, edit_target)
    rep = _ft(
        model, tokenizer, facts, lr=lr, max_steps=max_steps, stop_at=stop_at, sign=1.0, target=tids,
        tokens="answer", params=params, optimizer=optimizer, batch_size=batch_size, seed=seed,
    )  # fmt: skip
    return rep
