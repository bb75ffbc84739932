"""Two-pass inference (Sec. 3.2): pass 1 picks an expert for each prompt, pass 2 answers with that expert.

* prompt-based dispatch: the *base* model answers a classification prompt; a label outside the experts' names
  is routed to ``"other"``, which is answered with the base weights (the official evaluation left the previously
  loaded expert in place for "other" prompts; here the route resets to the base weights);
* classification-expert dispatch: the same prompt, answered with a classification expert z_c trained by RL;
* few-shot mixture: see :mod:`iclr25.transformer2.adaptation` (one mixed expert for the whole target task).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch import nn

from .svf import svf_disabled, using_expert, using_scales

OTHER = "other"
_BOXED = re.compile(r"\\boxed\{([^}]*)\}")
ClassifyFn = Callable[[nn.Module, Any], Sequence[str | None]]  # (model, prompts) -> raw label per prompt
AnswerFn = Callable[[nn.Module, Any], Any]  # (model, prompts) -> answers (tensor (N, ...) or list)

# own wording (not the official prompt): the three expert domains of the paper plus "other"
CLASSIFICATION_PROMPT = (
    "Decide which kind of skill the question below needs. Choose exactly one category:\n"
    "- code: writing or completing a program;\n"
    "- math: arithmetic, algebra or any computation with numbers;\n"
    "- reasoning: common-sense or science questions, usually multiple choice;\n"
    "- other: anything else.\n"
    "Reply with the category only, written as \\boxed{{category}}.\n\nQuestion: {question}"
)


def parse_boxed(text: str) -> str | None:
    """The content of the last ``\\boxed{...}`` in ``text`` (stripped, lower-case), or ``None``."""
    found = _BOXED.findall(text)
    return found[-1].strip().lower() if found else None


def to_routes(raw: Sequence[str | None], known: Sequence[str]) -> list[str]:
    """Map raw classifier outputs to expert names; anything unknown (or ``None``) becomes ``"other"``."""
    known_set = set(known)
    return [r if r in known_set else OTHER for r in raw]


def prompt_dispatch(model: nn.Module, classify: ClassifyFn, prompts: Any, known: Sequence[str]) -> list[str]:
    """Pass 1 with the base weights (SVF modules disabled)."""
    with svf_disabled(model), torch.no_grad():
        return to_routes(classify(model, prompts), known)


def expert_dispatch(
    model: nn.Module,
    cls_expert: Mapping[str, torch.Tensor],
    classify: ClassifyFn,
    prompts: Any,
    known: Sequence[str],
) -> list[str]:
    """Pass 1 with the classification expert z_c loaded."""
    with using_expert(model, cls_expert), torch.no_grad():
        return to_routes(classify(model, prompts), known)


def _take(prompts: Any, idx: list[int]) -> Any:
    if isinstance(prompts, torch.Tensor):
        return prompts[torch.as_tensor(idx, dtype=torch.long, device=prompts.device)]
    if isinstance(prompts, tuple):  # e.g. (input_ids, attention_mask)
        return tuple(_take(p, idx) for p in prompts)
    return [prompts[i] for i in idx]


def two_pass(
    model: nn.Module,
    prompts: Any,
    routes: Sequence[str],
    experts: Mapping[str, Mapping[str, torch.Tensor]],
    answer: AnswerFn,
    scales: Mapping[str, Mapping[str, torch.Tensor]] | None = None,
) -> list[Any]:
    """Pass 2: answer each group of prompts with its routed expert; ``"other"``/unknown routes use the base weights.

    ``experts`` maps a route to a z-expert; ``scales`` optionally maps a route to fixed effective scales (a mixed
    expert). Returns the answers in the original prompt order.
    """
    n = len(routes)
    out: list[Any] = [None] * n
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(routes):
        groups.setdefault(r, []).append(i)
    for r, idx in groups.items():
        if scales is not None and r in scales:
            ctx = using_scales(model, scales[r])
        elif r in experts:
            ctx = using_expert(model, experts[r])
        else:
            ctx = svf_disabled(model)  # "other" → base weights W
        with ctx, torch.no_grad():
            ans = answer(model, _take(prompts, idx))
        for j, i in enumerate(idx):
            out[i] = ans[j]
    return out


def hf_classify_fn(
    tokenizer: Any,
    labels: Sequence[str] = ("code", "math", "reasoning"),
    template: str = CLASSIFICATION_PROMPT,
    max_new_tokens: int = 16,
) -> ClassifyFn:
    """A classify function for an HF causal LM + tokenizer: the classification prompt (through the chat template
    when the tokenizer has one), greedy ``generate``, ``\\boxed{label}`` parsing. ``prompts`` is a list of questions.
    """

    def classify(model: nn.Module, questions: Sequence[str]) -> list[str | None]:
        texts = [template.format(question=q) for q in questions]
        if getattr(tokenizer, "chat_template", None):
            texts = [
                tokenizer.apply_chat_template(
                    [{"role": "user", "content": t}], tokenize=False, add_generation_prompt=True
                )
                for t in texts
            ]
        side = tokenizer.padding_side
        tokenizer.padding_side = "left"
        enc = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        tokenizer.padding_side = side
        dev = next(model.parameters()).device
        out = model.generate(
            input_ids=enc["input_ids"].to(dev),
            attention_mask=enc["attention_mask"].to(dev),
            max_new_tokens=max_new_tokens,
            do_sample=False,
            pad_token_id=tokenizer.pad_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
        dec = tokenizer.batch_decode(out[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
        return [parse_boxed(t) for t in dec]

    return classify
