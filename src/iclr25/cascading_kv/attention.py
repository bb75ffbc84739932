"""Cascade attention, registered in ``transformers``' attention interface as ``"cascade"`` (the paper's EMA attention scores; ``transformers.AttentionInterface``).

The model's attention module computes q/k/v, applies RoPE at whatever ``position_ids`` it was given and calls
``cache.update`` then the attention function. For a :class:`~iclr25.cascading_kv.cache.CascadingKVCache` this
function

1. undoes the model's rotation (exact inverse, HF ``rotate_half``) to get pre-RoPE q/k of the chunk,
2. re-rotates the chunk at its cache positions ``P = n_held + arange(q)`` and the stored keys at theirs,
3. computes ``A = softmax(Q Kᵀ/√d + mask)`` over ``[sinks | cascade slots | chunk]`` (empty slots masked, causal
   inside the chunk only) and ``out = A V``,
4. turns ``A`` into EMA scores (:mod:`~iclr25.cascading_kv.scores`), reduced over query heads, and commits the chunk.

For any other cache (``DynamicCache``, none) it is ``transformers``' own SDPA attention, so a model switched to
``"cascade"`` behaves as before with other caches.
"""

from __future__ import annotations

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
from transformers.models.llama.modeling_llama import repeat_kv, rotate_half

from .cache import CascadingLayer, take_pending
from .scores import cached_token_contribution, new_token_scores, reduce_heads

ATTN_NAME = "cascade"


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF RoPE ``x·cos + rotate_half(x)·sin`` with ``cos, sin`` ``(b, L, D)`` from the model's rotary module."""
    return x * cos.unsqueeze(1) + rotate_half(x) * sin.unsqueeze(1)


def unrope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Exact inverse of :func:`rope` (also when ``cos, sin`` carry an ``attention_scaling`` factor ``a``)."""
    c, s = cos.unsqueeze(1), sin.unsqueeze(1)
    return (x * c - rotate_half(x) * s) / (c * c + s * s)


def _cos_sin(
    layer: CascadingLayer, like: torch.Tensor, positions: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    pos = positions.to(like.device)
    if pos.ndim == 1:
        pos = pos[None]
    return layer.rotary_emb(like, pos)


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
    """Attention over ``[sinks | cascades | chunk]`` with EMA scoring and commit; SDPA for other caches."""
    layer = take_pending(getattr(module, "layer_idx", None))
    if layer is None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
        )
    key, value = layer.pop_pending()
    B, Hq, q, D = query.shape
    Hkv = key.shape[1]
    scaling = D**-0.5 if scaling is None else scaling
    dev = query.device
    n_held = layer.get_seq_length()
    p_cache = n_held + torch.arange(q, device=dev)  # the chunk's cache positions

    # 1-2. pre-RoPE chunk, re-rotated at cache positions (model may have used other position_ids, e.g. generate's)
    pos_given = kwargs.get("position_ids")
    if pos_given is None:
        pos_given = p_cache[None]
    cos_g, sin_g = _cos_sin(layer, query, pos_given)
    k_pre = unrope(key, cos_g, sin_g)
    if pos_given.shape[-1] == q and bool((pos_given.to(dev) == p_cache).all()):
        q_rot, k_rot = query, key
    else:
        cos_c, sin_c = _cos_sin(layer, query, p_cache)
        q_rot, k_rot = rope(unrope(query, cos_g, sin_g), cos_c, sin_c), rope(k_pre, cos_c, sin_c)

    stored = layer.read()  # pre-RoPE sinks + slots with their cache positions
    cos_s, sin_s = _cos_sin(layer, query, stored["positions"])
    K = torch.cat([rope(stored["keys"], cos_s, sin_s), k_rot], dim=2)  # (B, Hkv, M + q, D)
    V = torch.cat([stored["values"], value], dim=2)
    M = stored["keys"].shape[2]

    # 3. A = softmax(Q Kᵀ · scaling + mask): empty slots masked, causal inside the chunk only
    allowed = torch.cat(
        [stored["valid"][None, :].expand(q, M), torch.ones(q, q, dtype=torch.bool, device=dev).tril()], dim=1
    )
    logits = torch.matmul(q_rot, repeat_kv(K, Hq // Hkv).transpose(2, 3)) * scaling
    logits = logits.masked_fill(~allowed, torch.finfo(logits.dtype).min)
    A = torch.softmax(logits, dim=-1, dtype=torch.float32)
    out = torch.matmul(A.to(V.dtype), repeat_kv(V, Hq // Hkv))

    # 4. EMA scores (sinks never scored) reduced over query heads, then insert the chunk
    ns = layer.n_sinks
    with torch.no_grad():
        beta = layer.beta
        cache_add = cached_token_contribution(A[..., ns:M], beta)  # (B, Hq, N)
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
    """Switch ``model`` to the ``"cascade"`` attention implementation (needed by :class:`CascadingKVCache`)."""
    register_cascade_attention()
    if getattr(model.config, "_attn_implementation", None) != ATTN_NAME:
        model.set_attn_implementation(ATTN_NAME)
    return model
