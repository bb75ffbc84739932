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

For any other cache (``DynamicCache``, none) it is the attention the model had before the switch: ``"cascade_eager"``
runs the model's eager attention, ``"cascade"`` SDPA (the eager one when it softcaps logits), each with its own
mask — so switching a model (as ``CascadingKVCache(model, ...)`` does) leaves its other forwards unchanged.
:func:`cascade_attention` switches a model temporarily and restores it on exit.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from functools import partial

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, eager_mask, sdpa_mask

from .handoff import take_pending, take_sizing
from .rope import rope, unrope  # noqa: F401  (re-exported)
from .scores import cached_token_contribution, new_token_scores, reduce_heads

ATTN_NAME = "cascade"  # the registered attention implementation (and "cascade_eager", see cascade_name)
GROUPED_DECODE = (
    True  # single-token chunks rotate the query per offset group (False: rotate the cache; tests compare)
)
# a chunk's (B, Hq, q, S + N + q) logits are scaled and masked in place, the mask only on the chunk's own block when
# the cache part is all zeros (a full cache without a sliding window): the same values with two fewer full-size
# temporaries per layer and chunk (False: the out-of-place ops; tests compare the two bit for bit)
INPLACE_PREFILL = True

# registered names -> the attention (and mask) the model had before, run for any cache that is not a cascading one
FALLBACKS: dict[str, str] = {ATTN_NAME: "sdpa", f"{ATTN_NAME}_eager": "eager"}

__all__ = [
    "ATTN_NAME",
    "FALLBACKS",
    "is_cascade",
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


def _fallback(module, query, key, value, attention_mask, scaling, dropout, fallback: str = "sdpa", **kwargs):
    """Attention for caches other than the cascading one: the implementation the model had before (``fallback``:
    eager, or SDPA — also when it was another one); the model's eager path whenever it softcaps logits."""
    if fallback == "eager" or kwargs.get("softcap") is not None:
        eager = sys.modules[type(module).__module__].eager_attention_forward
        if attention_mask is not None and attention_mask.dtype == torch.bool:
            attention_mask = torch.zeros_like(attention_mask, dtype=query.dtype).masked_fill(
                ~attention_mask, torch.finfo(query.dtype).min
            )
        return eager(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    return sdpa_attention_forward(
        module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs
    )


def is_cascade(attn_implementation: str | None) -> bool:
    """Whether ``attn_implementation`` is one of the registered cascade implementations (:data:`FALLBACKS`)."""
    return attn_implementation in FALLBACKS


def _query_rotation(lay: dict, rot, dt, B: int, Hkv: int, rep: int, scaling: float) -> tuple:
    """Per-offset-group query cos/sin (× the logit scale) and the slot → group gather index of one decode step,
    memoised in the step's layout (shared by every layer)."""
    qkey = ("qrot", dt, B, Hkv, rep, scaling)
    qr = lay.get(qkey)
    if qr is None:
        M = lay["group"].shape[0]
        cg, sg = rot.at(lay["n_held"] - lay["group_offsets"], dt)  # (G, rd)
        qr = lay[qkey] = (
            cg * scaling,
            sg * scaling,
            lay["group"].view(1, 1, 1, 1, M).expand(B, Hkv, rep, 1, M),
        )
    return qr


def cascade_attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    fallback: str = "sdpa",
    **kwargs,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention over ``[sinks | cascades | chunk]`` with EMA scoring and commit; the ``fallback`` attention (the
    model's previous one) for other caches.

    Honours ``softcap`` (Gemma 2: ``cap·tanh(logits/cap)``) and ``sliding_window`` (keys whose cache-position
    distance to the query is ``≥ sliding_window`` are masked, sinks included, as in the model's own mask). Padding
    (zeros in the 2-D ``attention_mask`` the model was called with) is skipped: pads never enter the cache and each
    row attends over its own real tokens (:meth:`~iclr25.cascading_kv.cache.CascadingLayer.partition`); the outputs
    at pad positions are zeros.
    """
    layer = take_pending(getattr(module, "layer_idx", None))
    if layer is None:
        return _fallback(module, query, key, value, attention_mask, scaling, dropout, fallback, **kwargs)
    key, value = layer.pop_pending()
    shared = layer.shared
    valid = shared.get("valid")
    if layer.layer_idx is not None and layer.layer_idx == shared.get("num_layers", 0) - 1:
        shared["valid"] = None  # the last layer of this forward has read it
    # 1. pre-RoPE chunk (the model rotated it at its own position_ids: undo with the very same cos/sin)
    pos_given = kwargs.get("position_ids")
    if pos_given is None:
        raise RuntimeError(
            f"cascade attention needs the position_ids the model rotated with ({layer.rotary.model_type}: not passed "
            "to the attention function)"
        )
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    if valid is None and layer.parts is None:
        return _attend(layer, query, key, value, pos_given, scaling, kwargs)
    return _attend_parts(layer, query, key, value, pos_given, valid, scaling, kwargs)


def _attend_parts(
    layer, query, key, value, pos_given, valid, scaling: float, kwargs
) -> tuple[torch.Tensor, None]:
    """A padded batch: each part (rows that have seen the same real tokens) attends over its real tokens only."""
    B, Hq, q, _ = query.shape
    pos = pos_given.to(query.device).reshape(-1, q).expand(B, q)
    out = None
    for rows, part, tok in layer.partition(valid):
        r = rows.to(query.device)
        qs, ks, vs, ps = query[r], key[r], value[r], pos[r]
        if tok is not None:  # the rows' real tokens, in order
            t = tok.to(query.device)
            qs, ks, vs = (
                x.gather(2, t[:, None, :, None].expand(-1, x.shape[1], -1, x.shape[3])) for x in (qs, ks, vs)
            )
            ps = ps.gather(1, t)
        o, _ = _attend(part, qs, ks, vs, ps, scaling, kwargs)  # (rows, n, Hq, Dv)
        if out is None:
            out = o.new_zeros(B, q, *o.shape[2:])
        if tok is None:
            out[r] = o
        else:
            out[r[:, None], t] = o
    if out is None:  # no real token in this chunk at all
        out = query.new_zeros(B, q, Hq, value.shape[-1])
    return out, None


def _softmax(logits: torch.Tensor) -> torch.Tensor:
    """``softmax(logits, −1)`` in float32; with :data:`INPLACE_PREFILL` written over ``logits`` (a temporary of
    :func:`_attend`) when it is float32 and no gradient is recorded: the same kernel, row by row, one full-size
    allocation fewer."""
    if (
        INPLACE_PREFILL
        and logits.dtype == torch.float32
        and not (torch.is_grad_enabled() and logits.requires_grad)
    ):
        try:
            return torch.ops.aten._softmax.out(logits, -1, False, out=logits)
        except RuntimeError:  # a build that refuses the aliased output: the out-of-place call below
            pass
    return torch.softmax(logits, dim=-1, dtype=torch.float32)


def _attend(layer, query, key, value, pos_given, scaling: float, kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """The cascade attention of one buffer (all rows share the fill counters); ``(out (B, q, Hq, Dv), A)``."""
    rot = layer.rotary
    B, Hq, q, D = query.shape
    Hkv = key.shape[1]
    rep = Hq // Hkv
    dev, dt = query.device, query.dtype
    S, M = layer.sink_tokens, layer.sink_tokens + layer.cache_size
    rot.ensure(layer.max_rotary_position(q), dev)
    ci, si = rot.model_inverse(query, pos_given)
    softcap, window = kwargs.get("softcap"), kwargs.get("sliding_window")
    grouped = q == 1 and GROUPED_DECODE
    if grouped and layer.fused_applicable(query, softcap, window):  # the same step as one compiled graph
        return layer.fused_decode(query, key, value, ci, si, scaling)
    # stored keys sit rotated at their slot's reference position; position = ref + offset
    lay = layer.layout()
    n_held = lay["n_held"]
    kbuf, vbuf = layer.kbuf, layer.vbuf
    if grouped:
        qr = _query_rotation(lay, rot, dt, B, Hkv, rep, scaling)
    q_pre = rot.apply(query, ci, si)
    k_pre = rot.apply(key, ci, si)

    if grouped:
        # decode: <R(P)q, R(ref + c)k> = <R(P − c)q, R(ref)k> — rotate the query once per distinct offset c (≤ 2C+1)
        # instead of the cache; the token's logit with itself is position-free: a²·<q, k>
        G = qr[0].shape[0]
        qg = rot.apply(q_pre.reshape(B, Hkv, rep, 1, D), qr[0], qr[1])  # (B, Hkv, rep, G, D), scaled
        if rot.rotary_dim < D:  # the pass-through channels were not scaled by the folded cos/sin
            qg = qg * torch.cat([qg.new_ones(rot.rotary_dim), qg.new_full((D - rot.rotary_dim,), scaling)])
        lg = torch.matmul(qg.reshape(B, Hkv, rep * G, D), kbuf.transpose(2, 3)).reshape(B, Hkv, rep, G, M)
        l_cache = lg.gather(3, qr[2]).squeeze(3)  # (B, Hkv, rep, M)
        l_self = (q_pre.reshape(B, Hkv, rep, D) * k_pre).sum(-1, keepdim=True) * (rot.scaling**2 * scaling)
        logits = torch.cat([l_cache, l_self], dim=-1).reshape(B, Hq, 1, M + 1)
    else:
        p_cache = torch.arange(n_held, n_held + q, device=dev)  # the chunk's cache positions
        cos_c, sin_c = rot.at(p_cache, dt)
        q_rot = rot.apply(q_pre, cos_c, sin_c)
        k_rot = rot.apply(k_pre, cos_c, sin_c)
        cu, su = rot.at(lay["offset"], dt, unit=True)
        k_cache = rot.apply(kbuf, cu, su)  # keys at their cache positions (≤ S + N, once per chunk)
        K = torch.cat([k_cache, k_rot], dim=2)
        logits = torch.matmul(_gqa(q_rot, Hkv), K.transpose(2, 3)).reshape(B, Hq, q, M + q)
        logits = logits.mul_(scaling) if INPLACE_PREFILL else logits * scaling

    # 2. A = softmax(logits + mask): empty slots masked, causal inside the chunk only (every cached token is older)
    if softcap is not None:
        logits = torch.tanh(logits / softcap) * softcap
    mkey = ("mask", q, M, window, logits.dtype)
    # additive mask, built once per step and shared by the layers; a full cache without a window masks only the
    # chunk's causal triangle, the same at every step: that one is kept across steps (rot.masks, one per length)
    shared = window is None and lay["full"]
    memo = rot.masks if shared else lay
    addmask = memo.get(mkey)
    if addmask is None and q == 1 and window is None and lay["full"]:
        addmask = memo[mkey] = False  # a full cache and one query: nothing is masked
    elif addmask is None:
        allowed = torch.cat(
            [lay["valid"][None, :].expand(q, M), torch.ones(q, q, dtype=torch.bool, device=dev).tril()], dim=1
        )
        if window is not None:
            p_cache = torch.arange(n_held, n_held + q, device=dev)
            kpos = torch.cat([lay["positions"], p_cache])
            allowed = allowed & (p_cache[:, None] - kpos[None, :] < int(window))
        addmask = memo[mkey] = torch.zeros(q, M + q, dtype=logits.dtype, device=dev).masked_fill(
            ~allowed, torch.finfo(logits.dtype).min
        )
        if shared and len(memo) > 8:
            memo.clear()
            memo[mkey] = addmask
    if addmask is not False and not INPLACE_PREFILL:
        logits = logits + addmask
    elif addmask is not False:
        # a full cache without a window masks only the chunk's causal triangle: adding the zero cache block is a
        # no-op for the softmax (x + 0 = x; only −0 becomes +0), so only the chunk's block is touched
        if shared:
            logits[..., M:].add_(addmask[:, M:])
        else:
            logits.add_(addmask)
    A = _softmax(logits)
    Av = A.to(vbuf.dtype)
    if q == 1:  # the token's own value: a broadcast multiply-add instead of a second matmul
        out = torch.addcmul(torch.matmul(_gqa(Av[..., :M], Hkv), vbuf), _gqa(Av[..., M:], Hkv), value)
    else:
        out = torch.matmul(_gqa(Av[..., :M], Hkv), vbuf) + torch.matmul(_gqa(Av[..., M:], Hkv), value)
    out = out.reshape(B, Hq, q, -1)

    # 3. EMA scores (sinks never scored) reduced over query heads, then insert the chunk
    with torch.no_grad():
        beta = layer.beta
        red = dict(kv_heads=Hkv, reduction=layer.head_reduction, homogeneous=layer.homogeneous_heads)
        if q == 1:  # (1−β)·A for both; the head reduction (max/mean) commutes with the positive factor
            # one host copy for both (the bookkeeping is NumPy float64), scaled there
            r = reduce_heads(A[..., 0, S:], **red).to("cpu", torch.float64).numpy()  # (B, Hkv, N + 1)
            r = r * (1.0 - beta)  # not in place: r may be a view (homogeneous heads, float64 model)
            cache_add, new_s = r[..., : M - S], r[..., M - S :]
        else:
            cache_add = reduce_heads(cached_token_contribution(A[..., S:M], beta), **red)  # (B, Hkv, N)
            new_s = reduce_heads(new_token_scores(A[..., M:], beta), **red)  # (B, Hkv, q)
        layer.commit(k_pre.detach(), value.detach(), cache_add, new_s)
    return out.transpose(1, 2).contiguous(), A


def _cascade_mask(fallback_mask):
    """The mask function of a cascade implementation: for a cascading cache (it sized the mask just before) record
    which chunk tokens are padding and build nothing (the cascade attention makes its own mask); for any other cache
    the mask of the model's previous implementation."""

    def mask(*args, **kwargs):
        cache = take_sizing()
        if cache is None:
            return fallback_mask(*args, **kwargs)
        cache.set_chunk_padding(kwargs.get("attention_mask"), kwargs["q_length"])
        return None

    return mask


def register_cascade_attention() -> None:
    """Register the cascade implementations in ``transformers``' attention and mask interfaces (idempotent):
    ``"cascade"`` (other caches run SDPA) and ``"cascade_eager"`` (other caches run the model's eager attention).
    Done on import, so ``from_pretrained(..., attn_implementation="cascade")`` works too."""
    masks = {"sdpa": sdpa_mask, "eager": eager_mask}
    for name, fallback in FALLBACKS.items():
        AttentionInterface.register(name, partial(cascade_attention_forward, fallback=fallback))
        AttentionMaskInterface.register(name, _cascade_mask(masks[fallback]))


def cascade_name(previous: str | None) -> str:
    """The cascade implementation that keeps ``previous`` for other caches (eager → ``"cascade_eager"``; SDPA and
    anything else → ``"cascade"``, whose other caches run SDPA)."""
    if is_cascade(previous):
        return previous
    return f"{ATTN_NAME}_eager" if previous == "eager" else ATTN_NAME


def enable_cascade_attention(model: torch.nn.Module) -> torch.nn.Module:
    """Switch ``model`` to the cascade attention implementation (needed by :class:`CascadingKVCache`, whose
    constructor calls this).

    Only a forward with a cascading cache runs the cascade; every other forward (``DynamicCache``, no cache,
    training) runs the implementation the model had before — eager stays eager (``"cascade_eager"``), SDPA stays
    SDPA (``"cascade"``; other implementations such as flash attention fall back to SDPA). Permanent until
    :func:`disable_cascade_attention`, which restores the previous implementation.
    """
    from .rope import rotary_for

    rotary_for(model)  # refuse unsupported families up front (ValueError naming the model type)
    register_cascade_attention()
    old = getattr(model.config, "_attn_implementation", None)
    if not is_cascade(old):
        model._cascade_previous_attn = old
        model.set_attn_implementation(cascade_name(old))
    take_pending()  # drop a chunk left over by an interrupted forward
    return model


def disable_cascade_attention(model: torch.nn.Module) -> torch.nn.Module:
    """Restore the attention implementation ``model`` used before :func:`enable_cascade_attention`."""
    take_pending()
    impl = getattr(model.config, "_attn_implementation", None)
    if is_cascade(impl):
        prev = getattr(model, "_cascade_previous_attn", None) or FALLBACKS[impl]
        model.set_attn_implementation(prev)
    return model


@contextmanager
def cascade_attention(model: torch.nn.Module):
    """``with cascade_attention(model): ...`` — cascade attention inside, the model's previous one restored on exit.

    Nested use is fine (only the outermost switch restores). A cache built inside the context needs the switch
    again afterwards (:func:`enable_cascade_attention`); one built outside it has already switched the model.
    """
    was = is_cascade(getattr(model.config, "_attn_implementation", None))
    enable_cascade_attention(model)
    try:
        yield model
    finally:
        if not was:
            disable_cascade_attention(model)
        else:
            take_pending()


register_cascade_attention()
