"""The "skills" toy of the reproduction (README "Reproduction"): one-token-answer digit tasks for a tiny causal LM.

Vocabulary (22 ids): digits 0–9 are ids 0–9; instruction tokens A, B, C, D = 10–13 (wording 1); the classification
marker Q = 14; the solve marker S = 15; a second wording of the same three instructions A′, B′, C′ = 16–18; the
category labels a, b, c = 19–21 (the classifier's answers — never part of a question).

* skill prompt (a *question*) ``[S, instr, d1 … d6]`` → one answer token; A = number of digits ≥ 5, B = max digit,
  C = min digit; each task is asked in two wordings (``instr`` ∈ {A, A′}, …), drawn 50/50; D is an instruction never
  seen in pre-training whose rule is B's (max) — an "unseen task token";
* shifted task: the same rule with digits drawn from 3–7 only (a distribution shift, like GSM8K → MATH);
* classification prompt ``[Q, instr, d1 … d6]`` = the classification marker followed by the question → the category
  label (a/b/c; anything else = "other"). Pre-training labels wording-1 questions only, so a wording-2 question can
  be routed only through what the model knows about it (the skill it asks for) — as a base LLM classifies a question
  it never saw labelled (paper Sec. 3.2, prompt-based adaptation) — not by copying or looking up a trained label.

Because answers are one token, an RL rollout is one forward pass (a contextual bandit).
"""

from __future__ import annotations

import torch
from torch import nn

N_DIGITS = 6
TOKENS = {"A": 10, "B": 11, "C": 12, "D": 13}  # wording 1 (D: the unseen instruction)
TOKENS2 = {"A": 16, "B": 17, "C": 18}  # wording 2 of the same skills
LABELS = {"A": 19, "B": 20, "C": 21}  # the classifier's category labels
Q_TOKEN = 14
S_TOKEN = 15
VOCAB_SIZE = 22
SKILLS = ("A", "B", "C")
RULES = {"A": "count", "B": "max", "C": "min", "D": "max"}
WORDINGS = (1, 2)


def sample_digits(n: int, generator: torch.Generator, lo: int = 0, hi: int = 9) -> torch.Tensor:
    """(n, 6) digits uniform in [lo, hi]."""
    if not 0 <= lo <= hi <= 9:
        raise ValueError(f"need 0 <= lo <= hi <= 9, got lo={lo}, hi={hi}")
    return torch.randint(lo, hi + 1, (n, N_DIGITS), generator=generator)


def answer(task: str, digits: torch.Tensor) -> torch.Tensor:
    """The answer token (a digit id) of ``task`` for each row of ``digits`` (n, 6)."""
    rule = RULES.get(task)
    if rule == "count":
        return (digits >= 5).sum(1)
    if rule == "max":
        return digits.max(1).values
    if rule == "min":
        return digits.min(1).values
    raise ValueError(f"task must be one of {tuple(RULES)}, got {task!r}")


def _instructions(task: str, n: int, generator: torch.Generator, wordings: tuple[int, ...]) -> torch.Tensor:
    """(n,) instruction tokens of ``task``, the wording drawn uniformly from ``wordings`` (D has wording 1 only)."""
    if not wordings or any(w not in WORDINGS for w in wordings):
        raise ValueError(f"wordings must be a non-empty subset of {WORDINGS}, got {wordings!r}")
    table = torch.tensor([TOKENS[task] if w == 1 else TOKENS2[task] for w in wordings])
    if len(wordings) == 1:
        return table.expand(n).clone()
    return table[torch.randint(0, len(wordings), (n,), generator=generator)]


def skill_batch(
    task: str,
    n: int,
    generator: torch.Generator,
    lo: int = 0,
    hi: int = 9,
    wordings: tuple[int, ...] | None = None,
):
    """``(input_ids (n, 8), answers (n,))`` for ``[S, instr, d1..d6] → answer``; both wordings by default (D: one)."""
    if task not in RULES:
        raise ValueError(f"task must be one of {tuple(RULES)}, got {task!r}")
    wordings = wordings or ((1,) if task == "D" else WORDINGS)
    d = sample_digits(n, generator, lo, hi)
    ids = torch.cat([torch.full((n, 1), S_TOKEN), _instructions(task, n, generator, wordings)[:, None], d], 1)
    return ids, answer(task, d)


def cls_batch(
    tasks: tuple[str, ...],
    n: int,
    generator: torch.Generator,
    lo: int = 0,
    hi: int = 9,
    wordings: tuple[int, ...] = WORDINGS,
):
    """``(input_ids (n, 8), label tokens (n,), task index (n,), wording (n,))``: ``[Q, instr, d1..d6] → label``."""
    t = torch.randint(0, len(tasks), (n,), generator=generator)
    w = torch.tensor(wordings)[torch.randint(0, len(wordings), (n,), generator=generator)]
    instr = torch.tensor([[TOKENS[x], TOKENS2.get(x, TOKENS[x])] for x in tasks])  # (T, 2)
    tok = instr[t, w - 1]
    lab = torch.tensor([LABELS.get(x, TOKENS[x]) for x in tasks])[t]
    d = sample_digits(n, generator, lo, hi)
    ids = torch.cat([torch.full((n, 1), Q_TOKEN), tok[:, None], d], 1)
    return ids, lab, t, w


def pretrain_batch(n_per_task: int, generator: torch.Generator, cls_fraction: float = 0.25):
    """A pre-training batch mixing the three skills (both wordings) and the classification format (wording-1
    questions only): ``(input_ids, labels)`` (B, 9) with labels = -100 except on the answer (last) position."""
    xs = [skill_batch(task, n_per_task, generator) for task in SKILLS]
    n_cls = max(1, int(round(cls_fraction * n_per_task * len(SKILLS))))
    ids, lab, _, _ = cls_batch(SKILLS, n_cls, generator, wordings=(1,))
    x = torch.cat([torch.cat([i, a[:, None]], 1) for i, a in [*xs, (ids, lab)]])  # (B, 9)
    y = torch.full_like(x, -100)
    y[:, -1] = x[:, -1]
    return x, y


@torch.no_grad()
def answer_stats(model: nn.Module, input_ids: torch.Tensor, answers: torch.Tensor, batch: int = 2048):
    """Greedy correctness (N,) and the log-probability of the model's own greedy answer (N,) at the last position."""
    dev = next(model.parameters()).device
    correct, loglik = [], []
    for i in range(0, input_ids.shape[0], batch):
        logits = model(input_ids=input_ids[i : i + batch].to(dev)).logits[:, -1].float()
        lp = torch.log_softmax(logits, -1)
        pred = lp.argmax(-1)
        correct.append((pred == answers[i : i + batch].to(dev)).cpu())
        loglik.append(lp.gather(-1, pred[:, None]).squeeze(1).cpu())
    return torch.cat(correct), torch.cat(loglik)


def accuracy(model: nn.Module, input_ids: torch.Tensor, answers: torch.Tensor) -> float:
    return float(answer_stats(model, input_ids, answers)[0].float().mean())


@torch.no_grad()
def greedy_tokens(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    dev = next(model.parameters()).device
    return model(input_ids=input_ids.to(dev)).logits[:, -1].argmax(-1).cpu()
