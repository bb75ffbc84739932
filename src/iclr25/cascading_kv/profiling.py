"""Prefill / decode timing of the cascading cache against StreamingLLM (C = 1) and full attention.

Used by the experiment's ``prefill_linear`` claim and by ``benchmarks/bench_cascading_kv.py``. Full attention is
one forward over the whole prompt with a ``DynamicCache`` (quadratic), the cascading caches use the strided prefill
(linear). Timing ratios must survive a shared machine, so :func:`time_prefills` measures every configuration
``repeats`` times in interleaved rounds (a slow spell of the machine hits all configurations alike, not one), keeps
the best (minimum) time of each, and on CPU reads the process CPU clock (``time.process_time``: time other
processes take from this one does not count) instead of the wall clock (:mod:`iclr25.common.timing`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager

import torch
from transformers import DynamicCache

from iclr25.common.timing import best_times

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


def default_clock(device: torch.device) -> Callable[[], float]:
    """Process CPU time on CPU (robust to other processes' load), wall time (after a sync) on an accelerator."""
    return time.process_time if torch.device(device).type == "cpu" else time.perf_counter


def make_cache(model, method: str, cache_size: int, sink_tokens: int, cascades: int, beta: float = 0.9999):
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if method == "full":
        return DynamicCache(config=model.config)
    c = cascades if method == "cascade" else 1
    return CascadingKVCache(model, sink_tokens=sink_tokens, cache_size=cache_size, cascades=c, beta=beta)


@torch.no_grad()
def prefill_once(model, input_ids: torch.Tensor, method: str, cache_size: int, sink_tokens: int, cascades: int,
                 stride: int, full_impl: str = "eager", clock: Callable[[], float] | None = None):  # fmt: skip
    """Run one prefill of ``input_ids`` and return ``(seconds, cache)``; ``clock`` defaults to wall time."""
    dev = next(model.parameters()).device
    clock = clock or time.perf_counter
    ids = input_ids.to(dev)
    cache = make_cache(model, method, cache_size, sink_tokens, cascades)
    if method == "full":
        with attn_implementation(model, full_impl):
            _sync(dev)
            t = clock()
            model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
            _sync(dev)
            return clock() - t, cache
    enable_cascade_attention(model)  # stays on: the caller may decode with the cache next
    _sync(dev)
    t = clock()
    strided_prefill(model, ids, cache, stride=stride)
    _sync(dev)
    return clock() - t, cache


def time_prefill(model, input_ids, method, cache_size, sink_tokens, cascades, stride, repeats: int = 3,
                 full_impl: str = "eager", clock: Callable[[], float] | None = None) -> float:  # fmt: skip
    """Minimum time of ``repeats`` prefills (seconds; ``clock`` defaults to :func:`default_clock`)."""
    clock = clock or default_clock(next(model.parameters()).device)
    return min(
        prefill_once(model, input_ids, method, cache_size, sink_tokens, cascades, stride, full_impl, clock)[0]
        for _ in range(max(1, repeats))
    )


def time_prefills(model, runs: Sequence[tuple[str, torch.Tensor]], cache_size: int, sink_tokens: int,
                  cascades: int, stride: int, repeats: int = 5, full_impl: str = "eager",
                  clock: str | None = None, warmup: int = 1) -> list[float]:  # fmt: skip
    """Best time (seconds) of each ``(method, input_ids)`` in ``runs`` over ``repeats`` interleaved rounds.

    :func:`iclr25.common.timing.best_times`: every round runs every configuration once, in an order rotated from
    round to round, so drifts and load spikes of a shared machine are spread over all configurations instead of
    landing on one; the minimum of each configuration is its least-disturbed run; ``warmup`` untimed rounds come
    first. ``clock``: ``"process"`` (CPU time, the default on CPU) or ``"wall"`` (the default on an accelerator).
    """
    if not runs:
        raise ValueError("runs must list at least one (method, input_ids) pair")
    if clock is None:
        clock = "process" if next(model.parameters()).device.type == "cpu" else "wall"
    fns = {
        str(i): (
            lambda m=m, ids=ids: prefill_once(
                model, ids, m, cache_size, sink_tokens, cascades, stride, full_impl
            )
        )
        for i, (m, ids) in enumerate(runs)
    }
    best = best_times(fns, repeats=repeats, clock=clock, warmup=warmup)
    return [best[str(i)] for i in range(len(runs))]


@torch.no_grad()
def decode_tokens_per_s(model, cache, n_tokens: int, vocab: int, full_impl: str = "eager",
                        clock: Callable[[], float] | None = None) -> float:  # fmt: skip
    """Decode throughput: ``n_tokens`` single-token forwards against a pre-filled ``cache`` (greedy feedback).

    ``clock`` defaults to :func:`default_clock` (process CPU time on CPU, wall time on an accelerator).
    """
    dev = next(model.parameters()).device
    clock = clock or default_clock(dev)
    tok = torch.zeros(1, 1, dtype=torch.long, device=dev) + 1
    impl = full_impl if not isinstance(cache, CascadingKVCache) else ATTN_NAME
    with attn_implementation(model, impl):
        _sync(dev)
        t = clock()
        for _ in range(n_tokens):
            logits = model(input_ids=tok, cache=cache, use_cache=True).logits
            tok = logits[:, -1:].argmax(-1) % vocab
        _sync(dev)
    return n_tokens / (clock() - t)
