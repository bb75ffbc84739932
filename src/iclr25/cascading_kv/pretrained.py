"""The pretrained mode's inputs (``mode="pretrained"``, ``experiment.one_seed``): the checkpoint and its tokenizer
(:func:`load_pretrained`; ``model_name="tiny"`` is a random tiny Llama with the byte tokenizer) and the passkey
prompt (:func:`passkey_ids`). ``cfg`` is the reproduction's ``Config`` (``config.py``) or any object with its
fields."""

from __future__ import annotations

import torch

from iclr25.common.lm import tiny_causal_lm


def load_pretrained(cfg, dev: torch.device):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from iclr25.common.lm import byte_tokenizer

    if cfg.model_name == "tiny":
        tok = byte_tokenizer()
        model = tiny_causal_lm("llama", seed=0, vocab_size=len(tok), hidden=64, layers=2, heads=4, kv_heads=2,
                               max_positions=8192)  # fmt: skip
        return model.to(dev).eval(), tok
    dtype = getattr(torch, cfg.dtype)
    tok = AutoTokenizer.from_pretrained(cfg.model_name)
    model = AutoModelForCausalLM.from_pretrained(cfg.model_name, dtype=dtype, attn_implementation="sdpa")
    return model.to(dev).eval(), tok


def passkey_ids(tok, length: int, distance: int, key: str, g: torch.Generator) -> torch.Tensor:
    """Filler sentences with "The pass key is KEY." about ``distance`` tokens before the question."""
    filler = tok(" The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.",
                 add_special_tokens=False)["input_ids"]  # fmt: skip
    needle = tok(f" The pass key is {key}. Remember it. {key} is the pass key.", add_special_tokens=False)[
        "input_ids"
    ]
    question = tok(" What is the pass key? The pass key is", add_special_tokens=False)["input_ids"]
    body = length - len(question)
    hay = (filler * (body // len(filler) + 2))[:body]
    at = max(0, body - distance)
    ids = hay[:at] + needle + hay[at : body - len(needle)]
    bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
    return torch.tensor(bos + ids + question)[None]
