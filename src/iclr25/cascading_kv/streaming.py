"""Strided ("linear") prefill (Algorithm 1 of the paper) and streaming generation.

The prompt is cut into chunks of ``stride`` tokens; each chunk runs through the whole model against the current
cache and is then inserted. Per chunk the cost is O(stride·(S + N + stride)), so a prompt of length L costs
O(L·(N + stride)) and the memory stays constant — unlike full attention (O(L²)) or compress-after-prefill methods.
"""

from __future__ import annotations

import torch

from .attention import cascade_attention
from .cache import CascadingKVCache


def _check_ids(input_ids: torch.Tensor) -> torch.Tensor:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dtype not in (torch.long, torch.int32):
        raise ValueError(f"input_ids must be an integer torch.Tensor, got {type(input_ids).__name__}")
    if input_ids.ndim == 1:
        input_ids = input_ids[None]
    if input_ids.ndim != 2 or input_ids.shape[1] < 1:
        raise ValueError(f"input_ids must have shape (batch, length >= 1), got {tuple(input_ids.shape)}")
    return input_ids.long()


def _check_stride(stride: int) -> int:
    if isinstance(stride, bool) or not isinstance(stride, int) or stride < 1:
        raise ValueError(f"stride must be an int >= 1, got {stride!r}")
    return stride


@torch.no_grad()
def strided_prefill(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    cache: CascadingKVCache,
    stride: int = 1024,
    return_logits: str = "last",
) -> torch.Tensor:
    """Feed ``input_ids`` ``(B, L)`` chunk by chunk (``stride`` tokens) into ``model`` with ``cache``.

    Returns the logits of the last position ``(B, vocab)`` (``return_logits="last"``) or of every position
    ``(B, L, vocab)`` (``"all"``). The model runs with the ``"cascade"`` attention implementation and gets its
    previous one back on return (:func:`~iclr25.cascading_kv.attention.cascade_attention`). A non-empty ``cache``
    continues its stream; call ``cache.reset()`` to start a new one.
    """
    input_ids = _check_ids(input_ids)
    stride = _check_stride(stride)
    if return_logits not in ("last", "all"):
        raise ValueError(f"return_logits must be 'last' or 'all', got {return_logits!r}")
    if not isinstance(cache, CascadingKVCache):
        raise ValueError(f"cache must be a CascadingKVCache, got {type(cache).__name__}")
    _check_cache_batch(cache, input_ids)
    dev = next(model.parameters()).device
    outs = []
    with cascade_attention(model):
        for chunk in input_ids.to(dev).split(stride, dim=1):
            keep = 0 if return_logits == "all" else 1
            logits = model(input_ids=chunk, cache=cache, use_cache=True, logits_to_keep=keep).logits
            outs.append(logits if return_logits == "all" else logits[:, -1])
    return torch.cat(outs, dim=1) if return_logits == "all" else outs[-1]


def _check_cache_batch(cache: CascadingKVCache, input_ids: torch.Tensor) -> None:
    layer = cache.layers[0]
    if layer.is_initialized and layer.get_seq_length() > 0 and layer.kbuf.shape[0] != input_ids.shape[0]:
        raise ValueError(
            f"cache holds a stream of batch size {layer.kbuf.shape[0]} but input_ids has batch size "
            f"{input_ids.shape[0]}: call cache.reset() to start a new stream"
        )


def _check_attention_mask(attention_mask, input_ids: torch.Tensor) -> None:
    if attention_mask is None:
        return
    if not isinstance(attention_mask, torch.Tensor):
        raise ValueError(
            f"attention_mask must be a torch.Tensor or None, got {type(attention_mask).__name__}"
        )
    am = attention_mask if attention_mask.ndim == 2 else attention_mask[None]
    if tuple(am.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(am.shape)}"
        )
    if not bool((am == 1).all()):
        raise ValueError(
            "attention_mask must be all ones: padded (left- or right-padded) batches are not supported by the "
            "cascading cache, which assigns its own positions; run the prompts one by one or unpadded"
        )


@torch.no_grad()
def generate_streaming(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    cache: CascadingKVCache,
    stride: int = 1024,
    max_new_tokens: int = 32,
    attention_mask: torch.Tensor | None = None,
    **generate_kwargs,
) -> torch.Tensor:
    """Strided prefill of ``input_ids`` then token-by-token decoding, through ``model.generate``.

    ``generate``'s own chunked prefill (``prefill_chunk_size=stride``) is exactly Algorithm 1 here, so the usual
    arguments (``do_sample``, ``temperature``, ``top_k``, ``eos_token_id``, ``logits_processor`` …) work.
    Beam search, assisted decoding and left-padded batches are not supported (a cascading cache cannot be
    rolled back and assigns its own positions): ``attention_mask`` (e.g. from ``**tokenizer(...)``) is accepted
    when it is all ones. ``cache`` must be empty (a new one, or ``cache.reset()``): generating from a prompt needs
    the prompt to start the stream. Returns ``(B, L + new)`` token ids.
    """
    input_ids = _check_ids(input_ids)
    stride = _check_stride(stride)
    if not isinstance(cache, CascadingKVCache):
        raise ValueError(f"cache must be a CascadingKVCache, got {type(cache).__name__}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    if generate_kwargs.get("num_beams", 1) != 1:
        raise ValueError(f"num_beams must be 1 with a cascading cache, got {generate_kwargs['num_beams']!r}")
    _check_attention_mask(attention_mask, input_ids)
    if cache.get_seq_length() > 0:
        raise ValueError(
            f"cache already holds {cache.get_seq_length()} tokens of an earlier stream: call cache.reset() (or pass "
            "a new CascadingKVCache) before generating from a new prompt"
        )
    dev = next(model.parameters()).device
    generate_kwargs.setdefault("do_sample", False)
    generate_kwargs.setdefault("pad_token_id", getattr(model.generation_config, "pad_token_id", None) or 0)
    with cascade_attention(model):
        return model.generate(
            input_ids.to(dev),
            attention_mask=torch.ones_like(input_ids, device=dev),
            cache=cache,
            use_cache=True,
            prefill_chunk_size=stride,
            max_new_tokens=max_new_tokens,
            **generate_kwargs,
        )
