"""Strided ("linear") prefill (Algorithm 1 of the paper) and streaming generation.

The prompt is cut into chunks of ``stride`` tokens; each chunk runs through the whole model against the current
cache and is then inserted. Per chunk the cost is O(stride·(S + N + stride)), so a prompt of length L costs
O(L·(N + stride)) and the memory stays constant — unlike full attention (O(L²)) or compress-after-prefill methods.

Padded batches (an ``attention_mask`` with zeros): pads never enter the cache, and both functions cut each row's
*own* tokens into the chunks it would get alone (rows are realigned so chunk ``k`` holds tokens
``k·stride … (k+1)·stride − 1`` of every row), so every row's result equals running it alone.
"""

from __future__ import annotations

import torch

from .attention import cascade_attention
from .cache import CascadingKVCache

# generate() arguments that verify draft tokens and roll the rejected ones back (a cache crop)
ROLLBACK_KWARGS = ("assistant_model", "prompt_lookup_num_tokens", "assistant_early_exit", "custom_generate")


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


def _check_cache(cache, input_ids: torch.Tensor) -> None:
    if not isinstance(cache, CascadingKVCache):
        raise ValueError(f"cache must be a CascadingKVCache, got {type(cache).__name__}")
    layer = cache.layers[0]
    if layer.is_initialized and layer.get_seq_length() > 0 and layer.batch_size != input_ids.shape[0]:
        raise ValueError(
            f"cache holds a stream of batch size {layer.batch_size} but input_ids has batch size "
            f"{input_ids.shape[0]}: call cache.reset() to start a new stream"
        )


def _real_tokens(attention_mask, input_ids: torch.Tensor) -> torch.Tensor | None:
    """``(B, L)`` bool of the real tokens, or ``None`` when there is no padding."""
    if attention_mask is None:
        return None
    if not isinstance(attention_mask, torch.Tensor):
        raise ValueError(
            f"attention_mask must be a torch.Tensor or None, got {type(attention_mask).__name__}"
        )
    am = attention_mask if attention_mask.ndim == 2 else attention_mask[None]
    if tuple(am.shape) != tuple(input_ids.shape):
        raise ValueError(
            f"attention_mask must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(am.shape)}"
        )
    if not bool(((am == 0) | (am == 1)).all()):
        raise ValueError("attention_mask must hold only 0 (padding) and 1 (real token)")
    real = (am == 1).to(input_ids.device)
    if not bool(real.any(1).all()):
        rows = torch.nonzero(~real.any(1)).reshape(-1).tolist()
        raise ValueError(f"attention_mask: rows {rows} have no real token (every row needs at least one)")
    return None if bool(real.all()) else real


def _realign(input_ids: torch.Tensor, real: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's real tokens moved to the front, in order: ``(ids, valid, src)`` with ``src[b, j]`` the column of
    row ``b``'s ``j``-th real token (valid where ``valid``)."""
    src = torch.sort((~real).to(torch.uint8), dim=1, stable=True).indices
    valid = real.gather(1, src)
    width = int(real.sum(1).max())
    return input_ids.gather(1, src)[:, :width], valid[:, :width], src[:, :width]


@torch.no_grad()
def _prefill_realigned(model, ids, valid, cache, stride: int, keep: str):
    """Chunks of the realigned padded batch; ``keep``: ``"all"`` → ``(B, W, V)`` logits at the realigned places,
    ``"last"`` → ``(B, V)`` of each row's last real token."""
    B, W = ids.shape
    last = valid.sum(1) - 1  # (B,) realigned index of each row's last real token
    out_all, out_last = [], None
    for c0 in range(0, W, stride):
        chunk, am = ids[:, c0 : c0 + stride], valid[:, c0 : c0 + stride]
        logits = model(input_ids=chunk, attention_mask=am.long(), cache=cache, use_cache=True).logits
        if keep == "all":
            out_all.append(logits)
            continue
        here = (last >= c0) & (last < c0 + chunk.shape[1])
        if bool(here.any()):
            pick = logits[torch.arange(B, device=logits.device), (last - c0).clamp(0, chunk.shape[1] - 1)]
            out_last = pick if out_last is None else torch.where(here[:, None], pick, out_last)
    return torch.cat(out_all, dim=1) if keep == "all" else out_last


@torch.no_grad()
def strided_prefill(
    model: torch.nn.Module,
    input_ids: torch.Tensor,
    cache: CascadingKVCache,
    stride: int = 1024,
    return_logits: str = "last",
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Feed ``input_ids`` ``(B, L)`` chunk by chunk (``stride`` tokens) into ``model`` with ``cache``.

    Returns the logits of the last position ``(B, vocab)`` (``return_logits="last"``; of each row's last real token
    in a padded batch) or of every position ``(B, L, vocab)`` (``"all"``; zeros at pads). ``attention_mask`` ``(B, L)``
    (0 = padding, any placement) marks tokens to skip: each row's real tokens are chunked as if it ran alone. The
    model runs with the cascade attention (:func:`~iclr25.cascading_kv.attention.cascade_attention`). A non-empty
    ``cache`` continues its stream; call ``cache.reset()`` to start a new one.
    """
    input_ids = _check_ids(input_ids)
    stride = _check_stride(stride)
    if return_logits not in ("last", "all"):
        raise ValueError(f"return_logits must be 'last' or 'all', got {return_logits!r}")
    _check_cache(cache, input_ids)
    real = _real_tokens(attention_mask, input_ids)
    dev = next(model.parameters()).device
    input_ids = input_ids.to(dev)
    with cascade_attention(model):
        if real is not None:
            ids, valid, src = _realign(input_ids, real.to(dev))
            got = _prefill_realigned(model, ids, valid, cache, stride, return_logits)
            if return_logits == "last":
                return got
            out = got.new_zeros(*input_ids.shape, got.shape[-1])
            rows = torch.arange(ids.shape[0], device=dev)[:, None].expand_as(src)
            out[rows[valid], src[valid]] = got[valid]
            return out
        outs = []
        for chunk in input_ids.split(stride, dim=1):
            keep = 0 if return_logits == "all" else 1
            # the model rotates the chunk at its cache positions (the cascade undoes and redoes it exactly)
            held = cache.get_held_length() if cache.layers[0].parts is None else 0
            pos = torch.arange(held, held + chunk.shape[1], device=dev)[None]
            logits = model(
                input_ids=chunk, position_ids=pos, cache=cache, use_cache=True, logits_to_keep=keep
            ).logits
            outs.append(logits if return_logits == "all" else logits[:, -1])
    return torch.cat(outs, dim=1) if return_logits == "all" else outs[-1]


def _check_generate_kwargs(generate_kwargs: dict) -> None:
    for name in ROLLBACK_KWARGS:
        v = generate_kwargs.get(name)
        if v is not None:
            shown = repr(v) if isinstance(v, (int, float, str)) else f"<{type(v).__name__}>"
            raise ValueError(
                f"{name}={shown} is not supported with a cascading cache: assisted decoding and "
                "prompt lookup feed draft tokens and crop the rejected ones back out of the cache, but the cascade "
                "evicts and merges tokens irreversibly as they arrive, so it cannot be cropped"
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
    arguments (``do_sample``, ``temperature``, ``top_k``, ``eos_token_id``, ``num_beams``, ``logits_processor`` …)
    work. Assisted decoding and prompt lookup are refused (they crop the cache, which a cascade cannot).

    * A **left-padded** batch (``attention_mask`` from ``tokenizer(..., padding=True)`` with ``padding_side="left"``)
      gives every row the tokens it gets alone: each row's prompt is cut into its own ``stride`` chunks (its full
      chunks realigned, its last partial chunk fed with the other rows' at the end), pads never enter the cache.
    * A **filled cache** is continued: pass the whole sequence (the tokens it has seen, then the new ones), as with
      ``transformers``' caches; only the new tokens are fed. With :meth:`CascadingKVCache.copy` this answers several
      questions about one prefilled context.

    Returns ``(B, L + new)`` token ids.
    """
    input_ids = _check_ids(input_ids)
    stride = _check_stride(stride)
    _check_cache(cache, input_ids)
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an int >= 1, got {max_new_tokens!r}")
    _check_generate_kwargs(generate_kwargs)
    real = _real_tokens(attention_mask, input_ids)
    seen = cache.get_seq_length()
    if seen >= input_ids.shape[1]:
        raise ValueError(
            f"cache already holds a stream of {seen} tokens but input_ids has only {input_ids.shape[1]}: to continue "
            "the stream pass the whole sequence (its tokens, then the new ones); to start a new one call "
            "cache.reset() (or pass a new CascadingKVCache)"
        )
    dev = next(model.parameters()).device
    generate_kwargs.setdefault("do_sample", False)
    generate_kwargs.setdefault("pad_token_id", getattr(model.generation_config, "pad_token_id", None) or 0)
    input_ids = input_ids.to(dev)
    kw = dict(cache=cache, use_cache=True, max_new_tokens=max_new_tokens, **generate_kwargs)
    with cascade_attention(model):
        if real is None:
            return model.generate(
                input_ids, attention_mask=torch.ones_like(input_ids), prefill_chunk_size=stride, **kw
            )
        if seen:
            raise ValueError(
                f"a padded batch (attention_mask with zeros) must start from an empty cache, but the cache holds a "
                f"stream of {seen} tokens: call cache.reset() (or pass a new CascadingKVCache)"
            )
        real = real.to(dev)
        L = input_ids.shape[1]
        n_real = real.sum(1)
        cols = torch.arange(L, device=dev)[None]
        if not torch.equal(real, cols >= (L - n_real)[:, None]):
            raise ValueError(
                "attention_mask must be left-padded for generation (each row's real tokens last, contiguous): "
                "generate appends every row's next token at the end (tokenizer.padding_side = 'left')"
            )
        # the full stride-chunks of every row, realigned; then each row's last partial chunk (its last r_b tokens,
        # which left padding puts in the last columns) in one forward with the other rows' (earlier ones masked)
        full = (n_real - 1) // stride * stride  # (B,) tokens in full chunks
        r = n_real - full  # (B,) 1..stride
        if bool((full > 0).any()):
            ids, valid, _ = _realign(input_ids, real)
            valid = valid & (torch.arange(ids.shape[1], device=dev)[None] < full[:, None])
            w = int(full.max())
            _prefill_realigned(model, ids[:, :w], valid[:, :w], cache, stride, "last")
        R = int(r.max())
        am = (cols >= (L - r)[:, None]).long()  # (B, L): 1 on each row's last r_b tokens only
        out = model.generate(input_ids[:, L - R :], attention_mask=am, prefill_chunk_size=None, **kw)
        return torch.cat([input_ids[:, : L - R], out], dim=1)
