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
from .memories import encode_for

TOKENS = ("sequence", "answer")


@dataclass
class FTReport:
    steps: int
    accuracies: list[float] = field(default_factory=list)  # washed accuracy after every step
    stopped_at_target: bool = False


OPTIMIZERS = ("adam", "sgd")


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
    acc = fact_accuracy(model, tokenizer, facts)
    if stop_at is not None and acc <= stop_at:
        rep.stopped_at_target = True
        return rep
    for step in range(max_steps):
        model.train()
        idx = torch.randperm(n, generator=g)[:bs].to(b.input_ids.device)
        ids, am, m = b.input_ids[idx], b.attention_mask[idx], lmask[idx]
        lg = model(input_ids=ids, attention_mask=am).logits[:, :-1].float()
        nll = F.cross_entropy(lg.flatten(0, 1), ids[:, 1:].flatten(), reduction="none").view_as(m)
        loss = sign * (nll * m).sum() / m.sum().clamp_min(1)
        opt.zero_grad()
        loss.backward()
        opt.step()
        rep.steps = step + 1
        acc = fact_accuracy(model, tokenizer, facts)
        rep.accuracies.append(acc)
        if stop_at is not None and acc <= stop_at:
            rep.stopped_at_target = True
            break
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
