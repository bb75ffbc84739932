"""Tiny causal LMs built from Hugging Face configs (no downloads) and tokenisers built locally.

``tiny_causal_lm`` builds a Llama / Qwen2 / Mistral model of any size (GQA via ``kv_heads``) from a config,
initialised deterministically from ``seed``. ``byte_tokenizer`` and ``train_bpe`` return
``transformers.PreTrainedTokenizerFast`` objects, so they work wherever a hub tokenizer would.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from transformers import PreTrainedTokenizerFast

ARCHS = ("llama", "qwen2", "mistral")
SPECIAL_TOKENS = ("<pad>", "<bos>", "<eos>", "<unk>")


def tiny_config(
    arch: str = "llama",
    vocab_size: int = 256,
    hidden: int = 64,
    layers: int = 2,
    heads: int = 4,
    kv_heads: int | None = None,
    intermediate: int | None = None,
    max_positions: int = 4096,
    rope_theta: float = 10000.0,
    attn_implementation: str = "eager",
    tie_embeddings: bool = True,
    **extra,
):
    """A ``LlamaConfig`` / ``Qwen2Config`` / ``MistralConfig`` for a tiny decoder.

    ``kv_heads < heads`` gives grouped-query attention. ``attn_implementation='eager'`` is the default
    because it supports forward-mode AD and returns attention weights; use ``'sdpa'`` for speed.
    """
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    kv_heads = heads if kv_heads is None else kv_heads
    if hidden % heads:
        raise ValueError(f"hidden ({hidden}) must be divisible by heads ({heads})")
    if heads % kv_heads:
        raise ValueError(f"heads ({heads}) must be divisible by kv_heads ({kv_heads})")
    for name, v in (("vocab_size", vocab_size), ("hidden", hidden), ("layers", layers), ("heads", heads)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    common = dict(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=intermediate or 4 * hidden,
        max_position_embeddings=max_positions,
        tie_word_embeddings=tie_embeddings,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        **extra,
    )
    if arch == "llama":
        from transformers import LlamaConfig as C
    elif arch == "qwen2":
        from transformers import Qwen2Config as C
    else:
        from transformers import MistralConfig as C
    cfg = C(**common)
    cfg.rope_parameters = {"rope_type": "default", "rope_theta": float(rope_theta)}
    cfg._attn_implementation = attn_implementation
    return cfg


def tiny_causal_lm(arch: str = "llama", seed: int = 0, dtype: torch.dtype = torch.float32, **config_kwargs):
    """A randomly initialised ``AutoModelForCausalLM`` from :func:`tiny_config`, same seed ⇒ same weights."""
    from transformers import AutoModelForCausalLM

    cfg = tiny_config(arch, **config_kwargs)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation=cfg._attn_implementation)
    return model.to(dtype)


def n_params(model: torch.nn.Module, trainable_only: bool = False) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad or not trainable_only)


def byte_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level tokenizer: the 256 bytes (ids 4..259) plus 4 specials (pad, bos, eos, unk = 0..3).

    Every string round-trips exactly; ``vocab_size`` is 260.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()  # the 256 printable stand-ins for bytes
    vocab = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
    for ch in sorted(alphabet):
        vocab[ch] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return _wrap(tok)


def train_bpe(
    texts: Iterable[str], vocab_size: int = 1024, min_frequency: int = 2
) -> PreTrainedTokenizerFast:
    """Byte-level BPE trained with the ``tokenizers`` library on local text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    if vocab_size < 260 + 1:
        raise ValueError(f"vocab_size must exceed 260 (bytes + specials), got {vocab_size}")
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    return _wrap(tok)


def _wrap(tok) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )
