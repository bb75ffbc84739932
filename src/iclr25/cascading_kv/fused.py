"""Fused single-token decode step: attention, EMA score update and slot moves as one ``torch.compile``d graph.

Once the cache is full, decoding one token costs the cascade ≈ 40 small tensor/NumPy ops per layer (un-rotation of
q/k, per-offset query rotation, logits + gather, softmax, value product, head reduction of the scores, the EMA
update, the ≤ C + 1 slot moves of Algorithm 2). On a CPU their dispatch overhead, not their arithmetic, dominates a
small model's step. :func:`decode_step` writes the same step as straight-line tensor code over fixed shapes, so
``torch.compile`` (inductor; a C++ compiler on CPU) turns it into one graph, compiled once per model shape:

* the time-only control flow of the insertion (:class:`~.cascade.SinglePlan`: which slots move where) comes in as
  small index/cos/sin tensors padded to ``C + 1`` entries (padding entries are "keep" no-ops), so every decoded
  token — whichever cascades accept — runs the same graph;
* the score competition of the final carry (ties → the newer token) is a ``where`` over rows, as in
  :meth:`~.cascade.CascadeState.push_single`;
* the float64 scores and original indices stay the NumPy arrays of :class:`~.cascade.CascadeState` (shared memory
  through ``torch.from_numpy``), updated in place.

The eager path (:func:`~.attention.cascade_attention_forward` → :meth:`~.cache.CascadingLayer.commit`) is the
reference; ``tests/cascading_kv/test_cascading_kv_fused.py`` checks that this step gives the same tokens, the same
retained tokens and the same cache tensors/scores (to float rounding: inductor may contract multiply-adds). The
step is used on CPU only (the bookkeeping arrays live in host memory); other devices keep the eager path.
"""

from __future__ import annotations

import time

import torch

from .rope import rope_folded
from .scores import reduce_heads

DECODE_BACKENDS = ("eager", "compile")
_COMPILED: dict = {}
COMPILE_SECONDS: list[float] = []  # wall seconds of each call that compiled a new graph


def decode_step(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    ci: torch.Tensor,
    si: torch.Tensor,
    start: torch.Tensor,
    tcos: torch.Tensor,
    tsin: torch.Tensor,
    kbuf: torch.Tensor,
    vbuf: torch.Tensor,
    score: torch.Tensor,
    og: torch.Tensor,
    dst: torch.Tensor,
    src: torch.Tensor,
    ncos: torch.Tensor,
    nsin: torch.Tensor,
    mcos: torch.Tensor,
    msin: torch.Tensor,
    write: torch.Tensor,
    compete: torch.Tensor,
    new_og: torch.Tensor,
    interleaved: bool,
    rotary_dim: int,
    table_center: int,
    scaling: float,
    self_scale: float,
    beta: float,
    sinks: int,
    reduction: str,
    homogeneous: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decoded token for one layer of a full cascading cache (sinks full, no mask); ``(out (B, 1, Hq, Dv), A)``.

    The math is that of the eager path, step for step: ``q_pre, k_pre`` = the model's q/k un-rotated with its own
    inverse cos/sin (``ci, si``); logits over the ``S + N`` slots = ``R(P − c)q_pre · R(ref)k`` per offset group
    (the groups' offsets follow from the ring starts ``start`` ``(C,)``; ``tcos, tsin`` the rotary table of
    :class:`~.rope.Rotary`, row ``table_center + p`` = position ``p``); the token's logit with itself is
    ``self_scale·<q_pre, k_pre>``; ``A = softmax`` in float32; ``out = A·V``. Scores: ``s ← β·s + (1−β)·red(A)``
    and the new token's ``(1−β)·red(A_self)`` (``red`` = max/mean over the query heads of a group). Moves (``dst``,
    ``src`` ``(C+1,)`` absolute buffer slots): entry 0 receives the new token (``k_pre`` rotated by ``ncos, nsin``),
    entry j ≥ 1 the former content of slot ``src[j]`` rotated by the reference difference (``mcos, msin``); an
    entry is written where ``write`` is set and, for the ``compete`` entry, only in rows whose carry score is
    ``≥`` the slot's (ties → the newer token). Mutates ``kbuf, vbuf, score, og`` in place.
    """
    B, Hq, _, D = query.shape
    Hkv, M = kbuf.shape[1], kbuf.shape[2]
    rep = Hq // Hkv
    R, N = score.shape
    C = start.shape[0]
    W = N // C
    G = 2 * C + 1
    # the full cache's layout (CascadingLayer.layout with stored = W everywhere): cascade i holds cache positions
    # base_i … base_i + W − 1 with base_i = S + N − (i+1)·W; ring offset m sits at m − start_i + base_i (+ W if
    # m < start_i): offset group 1 + 2i (2 + 2i), the sinks are group 0 at offset 0
    base = sinks + N - W * torch.arange(1, C + 1, device=start.device)
    goff = torch.zeros(G, dtype=torch.int64, device=start.device)
    goff[1::2] = base - start
    goff[2::2] = base - start + W
    m = torch.arange(W, device=start.device)
    grp = 1 + 2 * torch.arange(C, device=start.device)[:, None] + (m[None, :] < start[:, None])
    grp = torch.cat([torch.zeros(sinks, dtype=torch.int64, device=start.device), grp.reshape(-1)])
    gidx = grp.view(1, 1, 1, 1, M).expand(B, Hkv, rep, 1, M)
    idx = table_center + (sinks + N) - goff  # the query's cache position minus each group's offset
    qcos, qsin = tcos[idx] * scaling, tsin[idx] * scaling
    q_pre = rope_folded(query, ci, si, interleaved)
    k_pre = rope_folded(key, ci, si, interleaved)
    qg = rope_folded(q_pre.reshape(B, Hkv, rep, 1, D), qcos, qsin, interleaved)  # (B, Hkv, rep, G, D)
    if rotary_dim < D:
        qg = torch.cat([qg[..., :rotary_dim], qg[..., rotary_dim:] * scaling], dim=-1)
    lg = torch.matmul(qg.reshape(B, Hkv, rep * G, D), kbuf.transpose(2, 3)).reshape(B, Hkv, rep, G, M)
    l_cache = lg.gather(3, gidx).squeeze(3)
    l_self = (q_pre.reshape(B, Hkv, rep, D) * k_pre).sum(-1, keepdim=True) * self_scale
    logits = torch.cat([l_cache, l_self], dim=-1).reshape(B, Hq, 1, M + 1)
    A = torch.softmax(logits, dim=-1, dtype=torch.float32)
    Av = A.to(vbuf.dtype)
    out = torch.addcmul(
        torch.matmul(Av[..., :M].reshape(B, Hkv, rep, M), vbuf),
        Av[..., M:].reshape(B, Hkv, rep, 1),
        value,
    ).reshape(B, Hq, 1, -1)
    out = out.transpose(1, 2).contiguous()

    # EMA scores (sinks never scored), then the insertion of Algorithm 2 along the plan
    r = reduce_heads(A[..., 0, sinks:], kv_heads=Hkv, reduction=reduction, homogeneous=homogeneous)
    r = r.to(torch.float64).reshape(R, N + 1) * (1.0 - beta)
    sc = score * beta + r[:, :N]
    s_new = r[:, N:]
    slot = dst - sinks  # (C+1,) cascade slot of each entry
    from_slot = src[1:] - sinks
    cand_s = torch.cat([s_new, sc[:, from_slot]], dim=1)  # (R, C+1)
    cand_og = torch.cat([new_og.expand(R, 1), og[:, from_slot]], dim=1)
    old_s = sc[:, slot]
    w = write & (~compete | (cand_s >= old_s))  # (R, C+1)
    score.copy_(sc.index_copy(1, slot, torch.where(w, cand_s, old_s)))
    og.copy_(og.index_copy(1, slot, torch.where(w, cand_og, og[:, slot])))
    k_new = torch.cat([rope_folded(k_pre, ncos, nsin, interleaved),
                       rope_folded(kbuf[:, :, src[1:]], mcos, msin, interleaved)], dim=2)  # fmt: skip
    v_new = torch.cat([value, vbuf[:, :, src[1:]]], dim=2)
    wk = w.reshape(B, Hkv, -1, 1)
    kbuf.index_copy_(2, dst, torch.where(wk, k_new, kbuf[:, :, dst]))
    vbuf.index_copy_(2, dst, torch.where(wk, v_new, vbuf[:, :, dst]))
    return out, A


def compiled_decode_step():
    """The process-wide ``torch.compile`` of :func:`decode_step` (fixed shapes; one graph per model shape)."""
    fn = _COMPILED.get("fn")
    if fn is None:
        fn = _COMPILED["fn"] = torch.compile(decode_step, dynamic=False, fullgraph=True)
    return fn


def run_compiled(*args, **kwargs):
    """Call the compiled step; a call that triggers a compilation has its wall time appended to
    :data:`COMPILE_SECONDS` (detected by the growth of dynamo's frame-compile counter)."""
    from torch._dynamo.utils import counters

    before = counters["stats"]["unique_graphs"]
    t = time.perf_counter()
    res = compiled_decode_step()(*args, **kwargs)
    if counters["stats"]["unique_graphs"] != before:
        COMPILE_SECONDS.append(time.perf_counter() - t)
    return res
