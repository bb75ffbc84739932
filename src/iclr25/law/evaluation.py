"""Washing and reasoning metrics: washed / retained fact accuracy, an in-context associative-recall suite (a
reasoning task that needs no stored fact) and the language-modelling loss on generic text."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from . import checks as check
from .facts import Fact, check_facts
from .memories import encode_for, length_groups, logits_at


@torch.no_grad()
def fact_known(model, tokenizer, facts: Sequence[Fact], batch_size: int = 512) -> torch.Tensor:
    """Bool (N,): the model's greedy continuation of each prompt starts with the fact's target tokens.

    Teacher-forced, one forward pass per group of equal-length facts (at most ``batch_size`` rows): every target
    token is the arg-max given the prompt and the previous target tokens — exactly when greedy decoding would emit the
    target first. (The official test decodes 10 tokens and looks for the answer as a substring, which also counts
    answers that appear later.) The groups run without padding, and the LM head projects only the positions that
    predict a target token (:func:`~iclr25.law.memories.logits_at`).
    """
    facts = check_facts(facts)
    check.batch_size(batch_size)
    if not facts:
        return torch.zeros(0, dtype=torch.bool)
    was = model.training
    model.eval()
    b = encode_for(model, tokenizer, facts, ("{}",), target="answer")
    lens = b.attention_mask.sum(1)
    ok = torch.zeros(len(facts), dtype=torch.bool)
    for g in length_groups(lens, batch_size):
        L = int(lens[g[0]])
        ids = b.input_ids[g, :L]
        pos = torch.arange(int(b.prompt_len[g].min()) - 1, L - 1, device=ids.device)
        pred = logits_at(model, ids, pos).argmax(-1)
        hit = (pred == ids[:, pos + 1]) | ~b.target_mask[g][:, pos + 1]
        ok[g.cpu()] = hit.all(1).cpu()
    model.train(was)
    return ok


def fact_accuracy(model, tokenizer, facts: Sequence[Fact], batch_size: int = 512) -> float:
    """Share of facts whose target the model produces greedily (see :func:`fact_known`); NaN for no facts."""
    k = fact_known(model, tokenizer, facts, batch_size)
    return float(k.float().mean()) if k.numel() else float("nan")


def associative_recall_facts(
    keys: Sequence[str],
    values: Sequence[str],
    n: int,
    n_pairs: int = 4,
    seed: int = 0,
    query_word: str | None = None,
    sep: str = " ",
) -> list[Fact]:
    """In-context associative recall: ``k₁ v₁ … k_p v_p [query_word] k_j`` → ``v_j`` with fresh random pairs
    (distinct keys).

    A reasoning probe that needs no stored fact (the answer is in the context). ``keys``/``values`` are words
    of the model's vocabulary (single tokens for a clean probe).
    """
    for name, words in (("keys", keys), ("values", values)):
        if isinstance(words, str) or not all(isinstance(w, str) and w for w in words) or not len(words):
            raise ValueError(f"{name} must be a non-empty sequence of non-empty words, got {words!r}")
    check.int_at_least("n", n, 1)
    check.int_at_least("n_pairs", n_pairs, 1)
    check.seed(seed)
    if not isinstance(sep, str) or not sep:
        raise ValueError(f"sep must be a non-empty str (it separates the words), got {sep!r}")
    if n_pairs > len(keys):
        raise ValueError(f"n_pairs ({n_pairs}) must be <= len(keys) ({len(keys)})")
    rng = np.random.default_rng(seed)
    kidx = np.argsort(rng.random((n, len(keys))), axis=1)[:, :n_pairs]  # distinct keys per row
    vidx = rng.integers(0, len(values), (n, n_pairs))
    q = rng.integers(0, n_pairs, n)
    out = []
    for i in range(n):
        ctx = sep.join(f"{keys[k]}{sep}{values[v]}" for k, v in zip(kidx[i], vidx[i]))
        qw = f"{sep}{query_word}" if query_word else ""
        out.append(Fact(f"{ctx}{qw}{sep}{keys[kidx[i, q[i]]]}", sep + values[vidx[i, q[i]]]))
    return out


@torch.no_grad()
def generic_loss(
    model, tokenizer=None, texts: Sequence[str] | torch.Tensor | None = None, batch_size: int = 64
) -> float:
    """Mean next-token NLL (nats/token) over ``texts`` (strings with ``tokenizer``, or a (n, L) id tensor)."""
    if texts is None:
        raise ValueError("texts must be given")
    check.batch_size(batch_size)
    if isinstance(texts, torch.Tensor):
        emb = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
        check.token_ids("texts", texts, None if emb is None else int(emb.weight.shape[0]))
        if texts.shape[0] == 0 or texts.shape[1] < 2:
            raise ValueError(
                f"texts must hold at least one sequence of >= 2 tokens, got shape {tuple(texts.shape)}"
            )
    else:
        if isinstance(texts, str) or not len(texts) or not all(isinstance(t, str) for t in texts):
            raise ValueError("texts must be a non-empty sequence of strings or an (n, L) tensor of token ids")
        if tokenizer is None or not callable(tokenizer):
            raise ValueError("tokenizer is required when texts are strings")
    dev = next(model.parameters()).device
    was = model.training
    model.eval()
    tot, cnt = 0.0, 0
    n = texts.shape[0] if isinstance(texts, torch.Tensor) else len(texts)
    for s in range(0, n, batch_size):
        if isinstance(texts, torch.Tensor):
            ids = texts[s : s + batch_size].to(dev)
            am = torch.ones_like(ids)
        else:
            enc = tokenizer(list(texts[s : s + batch_size]), return_tensors="pt", padding=True)
            ids, am = enc["input_ids"].to(dev), enc["attention_mask"].to(dev)
        lg = model(input_ids=ids, attention_mask=am).logits[:, :-1].float()
        m = am[:, 1:].bool()
        nll = F.cross_entropy(lg.flatten(0, 1), ids[:, 1:].flatten(), reduction="none").view_as(m)
        tot += float(nll[m].double().sum())
        cnt += int(m.sum())
    model.train(was)
    return tot / max(cnt, 1)


@torch.no_grad()
def fact_known_generate(
    model, tokenizer, facts: Sequence[Fact], max_new_tokens: int = 10, batch_size: int = 128
) -> torch.Tensor:
    """Bool (N,): the official "known" test (``util/get_predictions.py``): the lower-cased answer (stripped) is a
    substring of the lower-cased text of ``max_new_tokens`` greedy tokens after the prompt.

    Batched greedy decoding with left padding (the prompts' tokens and positions are those of an unpadded run)."""
    facts = check_facts(facts)
    check.batch_size(batch_size)
    check.int_at_least("max_new_tokens", max_new_tokens, 1)
    if not facts:
        return torch.zeros(0, dtype=torch.bool)
    dev = next(model.parameters()).device
    was, side = model.training, tokenizer.padding_side
    model.eval()
    tokenizer.padding_side = "left"
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    out = []
    try:
        for s in range(0, len(facts), batch_size):
            chunk = facts[s : s + batch_size]
            enc = tokenizer([f.prompt for f in chunk], return_tensors="pt", padding=True).to(dev)
            gen = model.generate(
                **enc, max_new_tokens=max_new_tokens, do_sample=False, pad_token_id=pad, num_beams=1,
                eos_token_id=None,
            )  # fmt: skip
            texts = tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1] :], skip_special_tokens=True)
            out += [f.target.strip().lower() in t.lower() for f, t in zip(chunk, texts)]
    finally:
        tokenizer.padding_side = side
        model.train(was)
    return torch.tensor(out, dtype=torch.bool)
