"""Cascading KV Cache — "Training-Free Exponential Context Extension via Cascading KV Cache".

Jeffrey Willette, Heejun Lee, Youngwan Lee, Myeongjae Jeon, Sung Ju Hwang (ICLR 2025),
https://arxiv.org/abs/2406.17808.

A fixed-size KV cache (``S`` attention sinks + ``N`` slots) is split into ``C`` cascading sub-caches of ``W = N/C``
slots. Cascade ``i`` accepts a new token only every ``2^i`` steps; otherwise the newcomer and the cascade's newest
entry compete on an exponential moving average of the attention they receive, and the evicted oldest token of
cascade ``i`` falls into cascade ``i+1``. The same memory then spans ≈ ``W·(2^C − 1)`` tokens instead of ``N``,
keeping important tokens far beyond a sliding window, with no retraining (keys are rotated at *cache positions*).
A strided prefill makes prompt processing linear in its length. ``C = 1`` is exactly StreamingLLM.

Works with the ``transformers`` v5 RoPE decoders in ``SUPPORTED_MODEL_TYPES`` (Llama, Mistral, Qwen2/3, Gemma/Gemma2,
Gemma 3 text, Phi/Phi-3, StableLM, GPT-NeoX, Cohere; GQA, partial and interleaved RoPE) through the ``Cache`` API and
the ``"cascade"`` attention implementation (others are refused with a ``ValueError``). Building a cache switches the
model to it (other caches keep the model's previous attention), so the ordinary calls work::

    cache = CascadingKVCache(model, sink_tokens=64, cache_size=4096, cascades=4)
    out = model.generate(**inputs, cache=cache, prefill_chunk_size=1024, max_new_tokens=64)
    out = generate_streaming(model, input_ids, cache.copy(), stride=1024, max_new_tokens=64)  # with input checks

Left-padded batches give each row its result alone; a filled cache is continued (pass the whole sequence) and
copied (``cache.copy()``) to answer several questions about one context; ``cache_size`` may be a per-layer list.

Needs ``transformers>=5.24`` (the release whose models take ``cache=``); an older one is refused at import with
an error naming the installed version (:mod:`._compat`).
"""

from ._compat import MIN_TRANSFORMERS, check_transformers

check_transformers()  # before anything else: an older release would run with an empty cache, silently

from .attention import (  # noqa: E402
    FALLBACKS,
    cascade_attention,
    cascade_attention_forward,
    cascade_name,
    disable_cascade_attention,
    enable_cascade_attention,
    is_cascade,
    register_cascade_attention,
)
from .cache import CascadingKVCache, CascadingLayer  # noqa: E402
from .cascade import EMPTY, CascadeState, PushResult  # noqa: E402
from .rope import SUPPORTED_MODEL_TYPES  # noqa: E402
from .scores import new_token_scores, reduce_heads, update_cached_scores  # noqa: E402
from .streaming import generate_streaming, strided_prefill  # noqa: E402

__all__ = [
    "EMPTY",
    "FALLBACKS",
    "MIN_TRANSFORMERS",
    "CascadeState",
    "CascadingKVCache",
    "CascadingLayer",
    "PushResult",
    "SUPPORTED_MODEL_TYPES",
    "cascade_attention",
    "cascade_attention_forward",
    "cascade_name",
    "check_transformers",
    "disable_cascade_attention",
    "enable_cascade_attention",
    "generate_streaming",
    "is_cascade",
    "new_token_scores",
    "reduce_heads",
    "register_cascade_attention",
    "strided_prefill",
    "update_cached_scores",
]
