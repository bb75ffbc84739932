"""Tiny random GPT-2 and Llama models over the synthetic biographies' word vocabulary (two HF families)."""

from __future__ import annotations

import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from iclr25.common.lm import tiny_causal_lm
from iclr25.scope_faithfulness import World, word_tokenizer

FAMILIES = ("gpt2", "llama")


@pytest.fixture(scope="session")
def tok():
    return word_tokenizer(World())


def make_model(family: str, vocab: int, seed: int, peaky: float = 1.0):
    """Random tiny model in eval mode; ``peaky`` scales the output head so distributions are far from uniform."""
    if family == "gpt2":
        cfg = GPT2Config(
            vocab_size=vocab, n_embd=32, n_layer=2, n_head=4, n_positions=64, bos_token_id=1, eos_token_id=2,
            pad_token_id=0, tie_word_embeddings=False,
        )  # fmt: skip
        torch.manual_seed(seed)
        m = GPT2LMHeadModel(cfg)
    else:
        m = tiny_causal_lm(
            "llama", seed=seed, vocab_size=vocab, hidden=32, layers=2, heads=4, tie_embeddings=False
        )
    if peaky != 1.0:
        with torch.no_grad():
            m.get_output_embeddings().weight.mul_(peaky)
    return m.eval()


@pytest.fixture(params=FAMILIES)
def pair(request, tok):
    """(grounded model, context-free noise LM) of one family, different random weights."""
    return make_model(request.param, len(tok), 0), make_model(request.param, len(tok), 1)
