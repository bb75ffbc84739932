"""Cascade attention, registered in ``transformers``' attention interface as ``"cascade"`` (the paper's EMA attention scores; ``transformers.AttentionInterface``).

The model's attention module computes q/k/v, applies RoPE at whatever ``position_ids`` it was given and calls
``cache.update`` then the attention function. For a :class:`~iclr25.cascading_kv.cache.CascadingKVCache` this
function

1. undoes the model's rotation (exact inverse with the model's own cos/sin, half-split or interleaved layout,
   partial rotary included — :mod:`~iclr25.cascading_kv.rope`) to get pre-RoPE q/k of the chunk,
2. rotates the chunk at its cache positions ``P = n_held + arange(q)``; stored keys sit rotated at their slot's
   reference position, so a single decoded token rotates its *query* once per offset group instead of
   re-rotating the cache (a longer chunk rotates the ≤ S + N stored keys once),
3. computes ``A = softmax(Q Kᵀ/√d + mask)`` over ``[sinks | cascade slots | chunk]`` (empty slots masked, causal
   inside the chunk only) and ``out = A V``,
4. turns ``A`` into EMA scores (:mod:`~iclr25.cascading_kv.scores`), reduced over query heads, and commits the chunk.

For any other cache (``DynamicCache``, none) it is ``transformers``' SDPA attention (the model's eager attention
when it softcaps logits). :func:`cascade_attention` switches a model temporarily and restores it on exit.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from .cache import ATTN_NAME, take_pending
from .rope import rope, unrope
from .scores import cached_token_contribution, new_token_scores, reduce_heads

GROUPED_QUERY_MAX = 4  # chunks up to this many queries rotate the query per offset group instead of the keys

__all__ = [
    "ATTN_NAME",
    "cascade_attention",
    "cascade_attention_forward",
    "disable_cascade_attention",
    "enable_cascade_attention",
    "register_cascade_attention",
    "rope",
    "unrope",
]


def _gqa(x: torch.Tensor, kv_heads: int) -> torch.Tensor:
    """``(B, Hq, L, D)`` → ``(B, Hkv, (Hq/Hkv)·L, D)`` so one matmul serves a whole GQA group (no K/V copies)."""
    B, Hq, L, D = x.shape
    return x.reshape(B, kv_heads, (Hq // kv_heads) * L, D)


def _fallback(module, query, key, value, attention_mask, scaling, dropout, **kwargs):
    """Attention for caches other than the cascading one: the model's eager path when it softcaps, else SDPA."""
    if kwargs.get("softcap") is not None:
        eager = sys.modules[type(module).__module__].eager_attention_forward
        if attention_mask is not None and attention_mask.dtype == torch.bool:
            attention_mask = torch.zeros_like(attention_mask, dtype=query.dtype).masked_fill(
                ~attention_mask, torch.finfo(query.dtype).min
            )
        return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
    )


def cascade_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention over ``[sinks | cascades | chunk]`` with EMA scoring and commit; SDPA for other caches.

    Honours ``softcap`` (Gemma 2: ``cap·tanh(logits/cap)``) and ``sliding_window`` (keys whose cache-position
    distance to the query is ``≥ sliding_window`` are masked, sinks included, as in the model's own mask).
    """
    layer = take_pending(getattr(module, "layer_idx", None))
    if layer is None:
        return _fallback(module, query, key, value, attention_mask, scaling, dropout, **kwargs)
    key, value = layer.pop_pending()
    rot = layer.rotary
    B, Hq, q, D = query.shape
    Hkv = key.shape[1]
    rep = Hq // Hkv
    scaling = D**-0.5 if scaling is None else scaling
    dev, dt = query.device, query.dtype
    n_held = layer.get_seq_length()
    M = layer.sink_tokens + layer.cache_size
    rot.ensure(M + q + 1, dev)
    p_cache = torch.arange(n_held, n_held + q, device=dev)  # the chunk's cache positions

    # 1. pre-RoPE chunk (the model rotated it at its own position_ids: undo with the very same cos/sin)
    pos_given = kwargs.get("position_ids")
    if pos_given is None:
        raise RuntimeError(
            f"cascade attention needs the position_ids the model rotated with ({rot.model_type}: not passed to the "
            "attention function)"
        )
    cos_g, sin_g = rot.model_cos_sin(query, pos_given)
    cos_g, sin_g = cos_g.unsqueeze(1), sin_g.unsqueeze(1)
    q_pre = unrope(query, cos_g, sin_g, rot.interleaved)
    k_pre = unrope(key, cos_g, sin_g, rot.interleaved)
    cos_c, sin_c = rot.at(p_cache, dt)
    q_rot = rope(q_pre, cos_c, sin_c, rot.interleaved)
    k_rot = rope(k_pre, cos_c, sin_c, rot.interleaved)

    # 2. logits against the stored keys (each rotated at its slot's reference position ref; position = ref + offset)
    lay = layer.layout()
    kbuf, vbuf = layer.kbuf, layer.vbuf
    if q <= GROUPED_QUERY_MAX:
        # <R(P)q, R(ref + c)k> = <R(P − c)q, R(ref)k>: rotate the query once per distinct offset c (≤ 2C + 1)
        goff, gid = lay["group_offsets"], lay["group"]
        G = goff.shape[0]
        cg, sg = rot.at(p_cache[None, :] - goff[:, None], dt)  # (G, q, rd)
        qg = rope(q_pre.unsqueeze(2), cg, sg, rot.interleaved)  # (B, Hq, G, q, D)
        lg = torch.matmul(qg.reshape(B, Hkv, rep * G * q, D), kbuf.transpose(2, 3))
        lg = lg.reshape(B, Hkv, rep, G, q, M)
        idx = gid.view(1, 1, 1, 1, 1, M).expand(B, Hkv, rep, 1, q, M)
        l_cache = lg.gather(3, idx).reshape(B, Hq, q, M)
    else:
        cu, su = rot.at(lay["offset"], dt, unit=True)
        k_cache = rope(kbuf, cu, su, rot.interleaved)  # keys at their cache positions
        l_cache = torch.matmul(_gqa(q_rot, Hkv), k_cache.transpose(2, 3)).reshape(B, Hq, q, M)
    l_chunk = torch.matmul(_gqa(q_rot, Hkv), k_rot.transpose(2, 3)).reshape(B, Hq, q, q)
    logits = torch.cat([l_cache, l_chunk], dim=-1) * scaling

    # 3. A = softmax(logits + mask): empty slots masked, causal inside the chunk only (every cached token is older)
    softcap = kwargs.get("softcap")
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    allowed = torch.cat(
        [lay["valid"][None, :].expand(q, M), torch.ones(q, q, dtype=torch.bool, device=dev).tril()], dim=1
    )
    window = kwargs.get("sliding_window")
    if window is not None:
        kpos = torch.cat([lay["positions"], p_cache])
        allowed = allowed & (p_cache[:, None] - kpos[None, :] < int(window))
    logits = logits.masked_fill(~allowed, torch.finfo(logits.dtype).min)
    A = torch.softmax(logits, dim=-1, dtype=torch.float32)
    Av = A.to(vbuf.dtype)
    out = torch.matmul(_gqa(Av[..., :M], Hkv), vbuf) + torch.matmul(_gqa(Av[..., M:], Hkv), value)
    out = out.reshape(B, Hq, q, -1)

    # 4. EMA scores (sinks never scored) reduced over query heads, then insert the chunk
    S = layer.sink_tokens
    with torch.no_grad():
        beta = layer.beta
        cache_add = cached_token_contribution(A[..., S:M], beta)  # (B, Hq, N)
        new_s = new_token_scores(A[..., M:], beta)  # (B, Hq, q)
        red = dict(kv_heads=Hkv, reduction=layer.head_reduction, homogeneous=layer.homogeneous_heads)
        layer.commit(
            k_pre.detach(), value.detach(), reduce_heads(cache_add, **red), reduce_heads(new_s, **red)
        )
    return out.transpose(1, 2).contiguous(), A


def register_cascade_attention() -> None:
    """Register ``"cascade"`` in ``transformers``' attention (and mask) interfaces; idempotent."""
    AttentionInterface.register(ATTN_NAME, cascade_attention_forward)
    # masks for the SDPA fallback (other caches); the cascade path builds its own mask and ignores this one
    AttentionMaskInterface.register(ATTN_NAME, sdpa_mask)


def enable_cascade_attention(model: torch.nn.Module) -> torch.nn.Module:
    """Switch ``model`` to the ``"cascade"`` attention implementation (needed by :class:`CascadingKVCache`).

    Permanent until :func:`disable_cascade_attention`; prefer the context manager :func:`cascade_attention`.
    The implementation in use before is remembered and restored by :func:`disable_cascade_attention`.
    """
    from .rope import rotary_for

    rotary_for(model)  # refuse unsupported families up front (ValueError naming the model type)
    register_cascade_attention()
    old = getattr(model.config, "_attn_implementation", None)
    if old != ATTN_NAME:
        model._cascade_previous_attn = old
        model.set_attn_implementation(ATTN_NAME)
    take_pending()  # drop a chunk left over by an interrupted forward
    return model


def disable_cascade_attention(model: torch.nn.Module) -> torch.nn.Module:
    """Restore the attention implementation ``model`` used before :func:`enable_cascade_attention`."""
    take_pending()
    if getattr(model.config, "_attn_implementation", None) == ATTN_NAME:
        prev = getattr(model, "_cascade_previous_attn", None) or "sdpa"
        model.set_attn_implementation(prev)
    return model


@contextmanager
def cascade_attention(model: torch.nn.Module):
    """``with cascade_attention(model): ...`` — cascade attention inside, the model's previous one restored on exit.

    Nested use is fine (only the outermost switch restores).
    """
    was = getattr(model.config, "_attn_implementation", None) == ATTN_NAME
    enable_cascade_attention(model)
    try:
        yield model
    finally:
        if not was:
            disable_cascade_attention(model)
        else:
            take_pending()
