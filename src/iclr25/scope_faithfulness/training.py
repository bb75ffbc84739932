"""The tiny language models of the reproduction and their training (README, "Reproduction"; the paper's Fig. 1
stages p_LM pre-training, SFT and continued SFT): model builder, tokenizer loader, padded batches and the
optimiser loop (``common.train.train_lm``)."""

from __future__ import annotations

import dataclasses

import torch

from iclr25.common.lm import tiny_causal_lm
from iclr25.common.train import IGNORE, LMTrainConfig, train_lm

from .biographies import World, word_tokenizer


def build_model(arch: str, vocab_size: int, hidden: int, layers: int, heads: int, seed: int):
    """A randomly initialised tiny GPT-2 (``arch="gpt2"``) or Llama (``"llama"``) over a word vocabulary (pad 0,
    bos 1, eos 2), 128 positions."""
    if arch == "llama":
        return tiny_causal_lm(
            "llama", seed=seed, vocab_size=vocab_size, hidden=hidden, layers=layers, heads=heads,
            max_positions=128, attn_implementation="sdpa",
        )  # fmt: skip
    from transformers import GPT2Config, GPT2LMHeadModel

    gcfg = GPT2Config(
        vocab_size=vocab_size, n_embd=hidden, n_layer=layers, n_head=heads, n_positions=128,
        bos_token_id=1, eos_token_id=2, pad_token_id=0,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return GPT2LMHeadModel(gcfg)


def padded_batch(
    tok, prompts: list[str], targets: list[str], mask_prompt: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded ``(input_ids, labels)``: prompt + target + EOS, labels −100 on pads (and prompts)."""
    full = tok([p + t for p, t in zip(prompts, targets, strict=True)], add_special_tokens=True)["input_ids"]
    plen = (
        [len(x) for x in tok(prompts, add_special_tokens=True)["input_ids"]]
        if mask_prompt
        else [1] * len(full)
    )
    seqs = [f + [tok.eos_token_id] for f in full]
    width = max(map(len, seqs))
    ids = torch.full((len(seqs), width), tok.pad_token_id, dtype=torch.long)
    lab = torch.full((len(seqs), width), IGNORE, dtype=torch.long)
    for i, (s, k) in enumerate(zip(seqs, plen, strict=True)):
        ids[i, : len(s)] = torch.tensor(s)
        lab[i, k : len(s)] = ids[i, k : len(s)]
    return ids, lab


def stage_config(tc: LMTrainConfig, seed: int) -> LMTrainConfig:
    """``tc`` as one stage of the reproduction trains with it (p_LM pre-training, SFT): ``min(50, steps // 10)``
    warm-up steps, no periodic evaluation, the stage's ``seed``."""
    return dataclasses.replace(tc, warmup_steps=min(50, tc.steps // 10), eval_every=0, seed=seed)


def trl_config(steps: int, batch: int, lr: float, warmup: int, seed: int) -> LMTrainConfig:
    """The same optimiser as TRL's DPO run (continued SFT compares against it): AdamW(0.9, 0.999), no weight
    decay, ``warmup`` warm-up steps, decay to 0, no periodic evaluation."""
    return LMTrainConfig(
        steps=steps, batch_size=batch, lr=lr, warmup_steps=warmup, eval_every=0, seed=seed, beta2=0.999,
        weight_decay=0.0, min_lr_ratio=0.0,
    )  # fmt: skip


def fit_lm(model, ids, lab, tc: LMTrainConfig, device, desc: str) -> float:
    """``tc.steps`` optimiser steps of ``common.train.train_lm`` (settings ``tc``) on random batches of
    ``tc.batch_size`` rows of ``(ids, lab)``, dropout masks seeded by ``tc.seed``; the model is left in eval mode
    and the final training loss returned."""

    def batch_fn(step: int, g: torch.Generator):
        idx = torch.randint(0, ids.shape[0], (tc.batch_size,), generator=g)
        return ids[idx], lab[idx]

    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        torch.manual_seed(tc.seed)  # dropout masks: a function of the seed, not of what ran before
        hist = train_lm(model, batch_fn=batch_fn, cfg=tc, device=device, desc=desc)
    model.eval()
    return float(hist["final_train_loss"])


def load_tokenizer(base_model_path: str, world: World):
    """The word-level tokenizer of ``world`` (no ``base_model_path``), or the local base model's own tokenizer
    (pad falls back to EOS)."""
    if not base_model_path:
        return word_tokenizer(world)
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base_model_path, local_files_only=True)
    if tok.eos_token_id is None:
        raise ValueError(f"base_model_path: the tokenizer at {base_model_path!r} has no EOS token")
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def lm_prompt(tok) -> list[int]:
    """p_LM's context-free prompt: BOS alone (the paper's empty prompt); EOS for tokenizers without a BOS."""
    return [tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id]
