"""Decoding and scoring of the reproduction's arms on faithful test records (README, "Reproduction"): greedy
decoding (optionally context-aware, CAD), temperature samples with the warpers of the noisy generation, and the
exact hallucination rate, field recall and SacreBLEU of the outputs."""

from __future__ import annotations

import torch

from .biographies import World, hallucination_and_recall
from .metrics import corpus_bleu
from .noisy_generation import context_aware_generate, generate_unfaithful
from .training import lm_prompt


@torch.no_grad()
def greedy(
    model,
    tok,
    prompts: list[str],
    device,
    batch_size: int,
    max_new_tokens: int,
    cad_alpha: float | None = None,
) -> list[str]:
    """Greedy continuations of ``prompts`` in batches of ``batch_size`` (left padding), cut at the first EOS;
    with ``cad_alpha`` context-aware decoding (CAD) against the context-free prompt :func:`lm_prompt`."""
    tok.padding_side = "left"
    outs: list[str] = []
    for b0 in range(0, len(prompts), batch_size):
        enc = tok(prompts[b0 : b0 + batch_size], return_tensors="pt", padding=True).to(device)
        kw = dict(do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=tok.pad_token_id)
        if cad_alpha is not None:
            new = context_aware_generate(model, enc, cad_alpha, lm_prompt_ids=lm_prompt(tok), **kw)
        else:
            model.eval()
            new = model.generate(**enc, **kw)[:, enc["input_ids"].shape[1] :]
        outs.extend(cut_at_eos(tok, new))
    return outs


@torch.no_grad()
def sampled(
    model,
    tok,
    records: list[dict],
    device,
    seed: int,
    batch_size: int,
    temperature: float,
    top_p: float,
    max_new_tokens: int,
) -> dict:
    """Hallucination rate and field recall of temperature samples (T, top-p as for y⁻): a distribution-level
    view that greedy decoding hides (greedy field recall is 1.0 for every arm at this scale)."""
    tok.padding_side = "left"
    outs: list[str] = []
    prompts = [r["prompt"] for r in records]
    for b0 in range(0, len(prompts), batch_size):
        enc = tok(prompts[b0 : b0 + batch_size], return_tensors="pt", padding=True).to(device)
        new = generate_unfaithful(  # α = 0: plain sampling from `model` with the same warpers
            model, model, enc, 0.0, temperature=temperature, top_p=top_p,
            max_new_tokens=max_new_tokens, seed=seed + b0, pad_token_id=tok.pad_token_id,
        )  # fmt: skip
        outs.extend(cut_at_eos(tok, new))
    m = hallucination_and_recall(outs, records, World())
    return {"halluc_sampled": float(m["hallucinated"].mean()), "recall_sampled": float(m["recall"].mean())}


def cut_at_eos(tok, new: torch.Tensor) -> list[str]:
    """Each row of generated ids up to (not including) its first EOS, decoded without special tokens."""
    ids = new.cpu()
    is_eos = ids == tok.eos_token_id
    first = torch.where(is_eos.any(1), is_eos.int().argmax(1), torch.full((ids.shape[0],), ids.shape[1]))
    return tok.batch_decode(
        [r[: int(k)].tolist() for r, k in zip(ids, first, strict=True)], skip_special_tokens=True
    )


def scores(outputs: list[str], records: list[dict], world: World) -> dict:
    """Hallucination rate, field recall and corpus SacreBLEU of ``outputs`` against the records' references."""
    m = hallucination_and_recall(outputs, records, world)
    refs = [r["reference"].strip() for r in records]
    return {
        "halluc": float(m["hallucinated"].mean()),
        "recall": float(m["recall"].mean()),
        "bleu": corpus_bleu([o.strip() for o in outputs], refs),
    }
