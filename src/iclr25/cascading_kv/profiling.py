"""Prefill / decode timing of the cascading cache against StreamingLLM (C = 1) and full attention.

Used by the experiment's ``prefill_linear`` claim and by ``benchmarks/bench_cascading_kv.py``. Times are the
minimum over ``repeats`` runs (robust to a shared machine); full attention is one forward over the whole prompt
with a ``DynamicCache`` (quadratic), the cascading caches use the strided prefill (linear).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

import torch
from transformers import DynamicCache

from .attention import ATTN_NAME, enable_cascade_attention
from .cache import CascadingKVCache
from .streaming import strided_prefill

METHODS = ("cascade", "streaming", "full")


@contextmanager
def attn_implementation(model: torch.nn.Module, name: str):
    """Temporarily switch ``model`` to attention implementation ``name``."""
    old = model.config._attn_implementation
    if name != old:
        model.set_attn_implementation(name)
    try:
        yield model
    finally:
        if model.config._attn_implementation != old:
            model.set_attn_implementation(old)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def make_cache(model, method: str, cache_size: int, sink_tokens: int, cascades: int, beta: float = 0.9999):
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "full":
        return DynamicCache(config=model.config)
    c = cascades if method == "cascade" else 1
    return CascadingKVCache(model, sink_tokens=sink_tokens, cache_size=cache_size, cascades=c, beta=beta)


@torch.no_grad()
def prefill_once(model, input_ids: torch.Tensor, method: str, cache_size: int, sink_tokens: int, cascades: int,
                 stride: int, full_impl: str = "eager"):  # fmt: skip
    """Run one prefill of ``input_ids`` and return ``(seconds, cache)``."""
    dev = next(model.parameters()).device
    ids = input_ids.to(dev)
    cache = make_cache(model, method, cache_size, sink_tokens, cascades)
    if method == "full":
        with attn_implementation(model, full_impl):
            _sync(dev)
            t = time.perf_counter()
            model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
            _sync(dev)
            return time.perf_counter() - t, cache
    enable_cascade_attention(model)
    _sync(dev)
    t = time.perf_counter()
    strided_prefill(model, ids, cache, stride=stride)
    _sync(dev)
    return time.perf_counter() - t, cache


def time_prefill(model, input_ids, method, cache_size, sink_tokens, cascades, stride, repeats: int = 3,
                 full_impl: str = "eager") -> float:  # fmt: skip
    """Minimum wall time of ``repeats`` prefills (seconds)."""
    return min(
        prefill_once(model, input_ids, method, cache_size, sink_tokens, cascades, stride, full_impl)[0]
        for _ in range(max(1, repeats))
    )


@torch.no_grad()
def decode_tokens_per_s(model, cache, n_tokens: int, vocab: int, full_impl: str = "eager") -> float:
    """Greedy-free decode throughput: ``n_tokens`` single-token forwards against a pre-filled ``cache``."""
    dev = next(model.parameters()).device
    tok = torch.zeros(1, 1, dtype=torch.long, device=dev) + 1
    impl = full_impl if not isinstance(cache, CascadingKVCache) else ATTN_NAME
    with attn_implementation(model, impl):
        _sync(dev)
        t = time.perf_counter()
        for _ in range(n_tokens):
            logits = model(input_ids=tok, cache=cache, use_cache=True).logits
            tok = logits[:, -1:].argmax(-1) % vocab
        _sync(dev)
    return n_tokens / (time.perf_counter() - t)
