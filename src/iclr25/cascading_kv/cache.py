"""Cascading KV cache as a ``transformers`` v5 ``Cache`` (one :class:`CascadingLayer` per decoder layer).

A layer stores **pre-RoPE** keys, values, EMA scores and original indices of its sinks and cascade slots
(bookkeeping in :class:`~iclr25.cascading_kv.cascade.CascadeState`). Reading it (``read``) rotates the keys with
their *cache positions* (sinks ``0..S−1``, cached tokens ``S..S+n−1`` in age order), so positions never exceed
``S + N + stride`` and no retraining is needed. The attention path
(:func:`iclr25.cascading_kv.attention.cascade_attention_forward`) computes attention over
``[sinks | cache | chunk]``, the EMA scores, and then calls ``commit`` to push the chunk through the cascades
(the official order: attention → score update → insertion).

``update`` only records the chunk as *pending* and hands the layer to the attention function of the same forward
call; it returns the chunk's own keys/values unchanged.
"""

from __future__ import annotations

import threading

import numpy as np
import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from .cascade import EMPTY, CascadeState
from .fused import DECODE_BACKENDS, run_compiled
from .rope import Rotary, _layout, rotary_for
from .scores import HEAD_REDUCTIONS

ATTN_NAME = "cascade"
FAST_SINGLE = (
    True  # one decoded token: memoised time-only plan + ≤ C + 1 slot moves (False: the general push)
)
_PENDING = threading.local()  # the layer whose chunk waits for its attention call (same thread, same forward)


def take_pending(layer_idx: int | None = None) -> CascadingLayer | None:
    """Pop the layer handed over by the last ``CascadingLayer.update`` (``None`` when there is none)."""
    layer = getattr(_PENDING, "layer", None)
    _PENDING.layer = None
    if (
        layer is not None
        and layer_idx is not None
        and layer.layer_idx is not None
        and layer.layer_idx != layer_idx
    ):
        raise RuntimeError(
            f"cascade attention of layer {layer_idx} received the cache of layer {layer.layer_idx}"
        )
    return layer


def find_rotary_embedding(model: torch.nn.Module) -> torch.nn.Module:
    """The rotary-embedding module of a supported decoder (``ValueError`` naming the model type otherwise)."""
    return rotary_for(model).module


def _as_rotary(rotary_emb) -> Rotary:
    """Wrap a bare rotary module (legacy ``rotary_emb=`` argument): layout and rotary dim read off its ``cos``."""
    if isinstance(rotary_emb, Rotary):
        return rotary_emb
    layout, rd = _layout(rotary_emb, rotary_emb.inv_freq.device)
    if layout == "unknown":
        raise ValueError(f"rotary_emb {type(rotary_emb).__name__}: unknown cos/sin layout")
    return Rotary(rotary_emb, type(rotary_emb).__name__, layout == "interleaved", rd)


class CascadingLayer(CacheLayerMixin):
    """One decoder layer's cascading cache: sinks + ``C`` cascades of ``W = N / C`` slots, per (batch, KV head).

    Storage is one buffer of ``S + N`` slots (sinks first, then cascade ``i`` at ``S + i·W … S + (i+1)·W − 1``).
    Each key is stored **rotated at its slot's reference position** ``ref`` (sink ``j``: ``j``; cascade slot at ring
    offset ``m``: ``m``), which never changes while the key stays in its slot. Its actual cache position is
    ``ref + c`` where the offset ``c`` is shared by all slots of a sink block / of the same side of a cascade's ring
    start (at most ``2C + 1`` distinct offsets). Positions therefore move every step without touching the keys:
    decoding rotates the *query* once per offset (RoPE scores depend only on the position difference), and a key is
    re-rotated only when it moves to another slot (``commit``: at most ``C + 1`` slots per decoded token).
    """

    is_sliding = False
    is_compileable = False
    is_croppable = False

    def __init__(
        self,
        sink_tokens: int = 64,
        cache_size: int = 2048,
        cascades: int = 4,
        beta: float = 0.9999,
        head_reduction: str = "max",
        homogeneous_heads: bool = False,
        eager_fill: bool = True,
        rotary_emb: Rotary | torch.nn.Module | None = None,
        layer_idx: int | None = None,
        decode_backend: str = "eager",
    ) -> None:
        super().__init__()
        _validate(sink_tokens, cache_size, cascades, beta, head_reduction, decode_backend)
        self.decode_backend = decode_backend
        self.sink_tokens, self.cache_size, self.cascades = int(sink_tokens), int(cache_size), int(cascades)
        self.beta = float(beta)
        self.head_reduction = head_reduction
        self.homogeneous_heads = bool(homogeneous_heads)
        self.eager_fill = bool(eager_fill)
        self.rotary = None if rotary_emb is None else _as_rotary(rotary_emb)
        self.layer_idx = layer_idx
        self.state: CascadeState | None = None
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None
        self._layout: dict | None = None
        W = self.cache_size // self.cascades
        self._ref = np.concatenate([np.arange(self.sink_tokens), np.tile(np.arange(W), self.cascades)])
        self._gid0 = 1 + 2 * np.repeat(np.arange(self.cascades), W)  # cascade i: groups 1 + 2i (and 2 + 2i)

    @property
    def rotary_emb(self) -> torch.nn.Module | None:
        return None if self.rotary is None else self.rotary.module

    # ---------------------------------------------------------------- CacheLayerMixin API
    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        B, H, _, D = key_states.shape
        Dv = value_states.shape[-1]
        self.device, self.dtype = key_states.device, key_states.dtype
        kw = dict(device=key_states.device, dtype=key_states.dtype)
        M = self.sink_tokens + self.cache_size
        self.kbuf = torch.zeros(B, H, M, D, **kw)  # keys rotated at their slot's reference position
        self.vbuf = torch.zeros(B, H, M, Dv, **kw)
        self.state = CascadeState(self.sink_tokens, self.cache_size, self.cascades, (B, H), self.eager_fill)
        self._layout = None
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        """Record the chunk (keys already rotated by the model) for the cascade attention call that follows."""
        if getattr(_PENDING, "layer", None) is not None:
            _PENDING.layer = None
            raise RuntimeError(NOT_ENABLED)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        self._pending = (key_states, value_states)
        _PENDING.layer = self
        return key_states, value_states

    def get_seq_length(self) -> int:
        return 0 if self.state is None else self.state.seq_length

    def get_max_length(self) -> int:
        return self.sink_tokens + self.cache_size

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        return self.get_seq_length() + query_length, 0

    def reset(self) -> None:
        if self.is_initialized:
            self.kbuf.zero_()
            self.vbuf.zero_()
            self.state.reset()
        self._layout = None
        self._pending = None
        if getattr(_PENDING, "layer", None) is self:
            _PENDING.layer = None

    def crop(self, tokens_to_remove: int) -> None:
        raise NotImplementedError(
            "a cascading cache evicts tokens irreversibly: it cannot be cropped/rolled back"
        )

    def _select_batch(self, index: torch.Tensor) -> None:
        if not self.is_initialized:
            return
        index = index.to(self.kbuf.device)
        self.kbuf = self.kbuf.index_select(0, index)
        self.vbuf = self.vbuf.index_select(0, index)
        H = self.kbuf.shape[1]
        rows = (index.cpu()[:, None] * H + torch.arange(H)[None, :]).reshape(-1)
        self.state.select_rows(rows, (index.numel(), H))
        self._layout = None

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._select_batch(beam_idx)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._select_batch(torch.as_tensor(indices).reshape(-1))

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._select_batch(torch.arange(self.kbuf.shape[0]).repeat_interleave(repeats))

    # ---------------------------------------------------------------- views (sinks first)
    @property
    def keys(self) -> torch.Tensor:
        """``(B, H, N, D)`` cascade-slot keys, rotated at their slot reference positions (a view)."""
        return self.kbuf[:, :, self.sink_tokens :]

    @keys.setter
    def keys(self, value) -> None:  # CacheLayerMixin.__init__ sets keys = None; the buffer is kbuf
        if value is not None:
            raise AttributeError("CascadingLayer.keys is a view of kbuf (read-only)")

    @property
    def values(self) -> torch.Tensor:
        return self.vbuf[:, :, self.sink_tokens :]

    @values.setter
    def values(self, value) -> None:
        if value is not None:
            raise AttributeError("CascadingLayer.values is a view of vbuf (read-only)")

    @property
    def sink_keys(self) -> torch.Tensor:
        return self.kbuf[:, :, : self.sink_tokens]

    @property
    def sink_values(self) -> torch.Tensor:
        return self.vbuf[:, :, : self.sink_tokens]

    # ---------------------------------------------------------------- cascade API
    @property
    def n_sinks(self) -> int:
        return 0 if self.state is None else self.state.n_sinks

    def pop_pending(self) -> tuple[torch.Tensor, torch.Tensor]:
        if self._pending is None:
            raise RuntimeError("no pending chunk: CascadingLayer.update must run before the attention call")
        p, self._pending = self._pending, None
        return p

    def layout(self) -> dict:
        """Per-slot cache positions, validity and rotation offsets of the ``S + N`` buffer.

        ``positions`` ``(S+N,)`` (0 where empty), ``valid`` bool, ``offset`` = position − reference (0 where empty),
        ``group_offsets`` the distinct offsets ``(G,)`` and ``group`` ``(S+N,)`` each slot's index into them.
        It depends on the fill counters only, which every layer shares, so it is computed once per step for all
        layers (memoised on the rotary helper).
        """
        st = self.state
        key = (self.sink_tokens, self.cache_size, self.cascades, st.t, st.n_sinks, *st.stored, *st.start)
        memo = self.rotary.layouts
        lay = memo.get(key)
        if lay is not None and lay["device"] == self.kbuf.device:
            return lay
        S, N, C = self.sink_tokens, self.cache_size, self.cascades
        W = N // C
        ns = st.n_sinks
        # offset groups (§3 cache positions, as in CascadeState.slot_positions): sinks (offset 0); for cascade i with
        # seg = min(W, stored[i]) and base = ns + (tokens held by cascades < i... counted from the newest),
        # ring offsets m >= start[i] sit at m − start[i] + base, m < start[i] at m − start[i] + seg + base
        goff = [0] * (2 * C + 1)
        ub = st.n_cached
        for i in range(C):
            seg = min(W, st.stored[i])
            base = ub - seg + ns
            goff[1 + 2 * i] = base - st.start[i]
            goff[2 + 2 * i] = base - st.start[i] + seg
            ub -= seg
        m_local = self._ref[S:]
        stored = np.repeat(np.asarray(st.stored), W)
        start = np.repeat(np.asarray(st.start), W)
        valid = np.concatenate([np.arange(S) < ns, m_local < stored])
        gid = np.concatenate([np.zeros(S, dtype=np.int64), self._gid0 + (m_local < start)])
        gid = np.where(valid, gid, 0)
        goff_np = np.asarray(goff, dtype=np.int64)
        off = goff_np[gid]
        dev = self.kbuf.device
        lay = {
            "device": dev,
            "positions": torch.from_numpy(self._ref + off).to(dev),
            "valid": torch.from_numpy(valid).to(dev),
            "offset": torch.from_numpy(off).to(dev),
            "group_offsets": torch.from_numpy(goff_np).to(dev),
            "group": torch.from_numpy(gid).to(dev),
            "ident": np.where(valid[S:], np.arange(N), EMPTY),  # slot -> itself (EMPTY if empty)
            "n_held": st.seq_length,
            "full": bool(valid.all()),
        }
        if len(memo) > 16:
            memo.clear()
        memo[key] = lay
        return lay

    def read(self) -> dict[str, torch.Tensor]:
        """Stored keys rotated at their *cache positions*, values, positions and validity (``S + N`` slots, sinks first)."""
        lay = self.layout()
        rot = self.rotary
        rot.ensure(self.sink_tokens + self.cache_size + 1, self.kbuf.device)
        cos, sin = rot.at(lay["offset"], self.kbuf.dtype, unit=True)
        keys = rot.apply(self.kbuf, cos, sin)
        return {"keys": keys, "values": self.vbuf, "positions": lay["positions"], "valid": lay["valid"]}

    def commit(
        self,
        keys_pre_rope: torch.Tensor,
        values: torch.Tensor,
        cache_score_add: torch.Tensor,
        new_scores: torch.Tensor,
    ) -> None:
        """EMA-update the cached scores, then insert the chunk token by token (Algorithm 2).

        ``keys_pre_rope``/``values`` ``(B, H, q, D)``; ``cache_score_add`` ``(B, H, N)`` = Σ_j (1−β) β^{q−1−j} A[j,k]
        for the cache slots; ``new_scores`` ``(B, H, q)`` the chunk tokens' initial scores. Only slots whose
        content changed are written (and rotated to their reference position).
        """
        st, S, N = self.state, self.sink_tokens, self.cache_size
        W = N // self.cascades
        rot = self.rotary
        q = keys_pre_rope.shape[2]
        rot.ensure(S + N + q + 1, self.kbuf.device)
        st.decay_scores(self.beta**q, cache_score_add)
        if q == 1 and st.n_sinks >= S and FAST_SINGLE:
            self._commit_single(keys_pre_rope, values, new_scores)
            return
        ns0 = st.n_sinks
        ident = self.layout()["ident"]
        res = st.push(new_scores)
        n = res.n_to_sinks
        dt = self.kbuf.dtype
        if n:
            cos, sin = rot.at(torch.arange(ns0, ns0 + n, device=self.kbuf.device), dt)
            self.kbuf[:, :, ns0 : ns0 + n] = rot.apply(keys_pre_rope[:, :, :n], cos, sin)
            self.vbuf[:, :, ns0 : ns0 + n] = values[:, :, :n]
        src = res.src.reshape(-1, N).numpy()
        cols = np.flatnonzero((src != ident[None, :]).any(0))
        if cols.size == 0:
            return
        B, H = self.kbuf.shape[:2]
        dev = self.kbuf.device
        s = torch.from_numpy(src[:, cols].reshape(B, H, -1)).to(dev)  # (B, H, k) source of each changed slot
        from_chunk = s >= N
        old = (s.clamp(0, N - 1) + S).unsqueeze(-1)
        new = (s - N).clamp(0, q - 1).unsqueeze(-1)
        D, Dv = self.kbuf.shape[-1], self.vbuf.shape[-1]
        fc = from_chunk.unsqueeze(-1)
        k_src = torch.where(fc, keys_pre_rope.gather(2, new.expand(-1, -1, -1, D)),
                            self.kbuf.gather(2, old.expand(-1, -1, -1, D)))  # fmt: skip
        v_src = torch.where(fc, values.gather(2, new.expand(-1, -1, -1, Dv)),
                            self.vbuf.gather(2, old.expand(-1, -1, -1, Dv)))  # fmt: skip
        ref_dst = torch.from_numpy(cols % W).to(dev)  # (k,)
        # a new token: pre-RoPE key rotated at ref (model-scaled cos/sin); a moved key: pure rotation by ref − ref_old
        if bool(from_chunk.all()):
            cos, sin = rot.at(ref_dst, dt)
        else:
            cos_n, sin_n = rot.at(ref_dst.expand_as(s), dt)
            cos_m, sin_m = rot.at(ref_dst - s.clamp(0, N - 1) % W, dt, unit=True)
            cos = torch.where(fc, cos_n, cos_m)
            sin = torch.where(fc, sin_n, sin_m)
        k_new = rot.apply(k_src, cos, sin)  # (a changed slot is never emptied: src >= 0 here)
        idx = torch.from_numpy(cols + S).to(dev)
        self.kbuf.index_copy_(2, idx, k_new)
        self.vbuf.index_copy_(2, idx, v_src)

    def _commit_single(self, k_pre: torch.Tensor, values: torch.Tensor, new_scores: torch.Tensor) -> None:
        """One decoded token (sinks full): the memoised :class:`~.cascade.SinglePlan` moves ≤ C + 1 slots.

        Same result as the general path (tested): slot ``a_0`` (or ``final``) gets the new key rotated at its
        reference position, every other destination the key of its source slot rotated by the reference difference.
        """
        st, S = self.state, self.sink_tokens
        plan = st.plan_single()
        won = st.push_single(plan, new_scores)
        dsts = plan.chain + ((plan.final,) if plan.final >= 0 else ())
        if won is False and plan.final >= 0:
            dsts = dsts[:-1]
        if not dsts:
            return
        kb, vb = self.kbuf, self.vbuf
        dt, dev = kb.dtype, kb.device
        src = plan.chain[: len(dsts) - 1]
        mkey = (dsts, src, dt, dev)
        memo = self.rotary.moves
        mv = memo.get(mkey)
        if mv is None:  # index and cos/sin tensors of this plan, shared by every layer
            W, rot = self.cache_size // self.cascades, self.rotary
            refs = [d % W for d in dsts]
            cn, sn = rot.at(torch.tensor(refs[:1], device=dev), dt)
            mv = {"dst": torch.tensor([d + S for d in dsts], device=dev), "new": (cn, sn)}
            if src:
                mv["src"] = torch.tensor([a + S for a in src], device=dev)
                mv["move"] = rot.at(
                    torch.tensor([r - a % W for r, a in zip(refs[1:], src)], device=dev), dt, unit=True
                )
            if len(memo) > 4096:
                memo.clear()
            memo[mkey] = mv
        rot = self.rotary
        k_new = rot.apply(k_pre, *mv["new"])  # (B, H, 1, D)
        v_new = values
        if "src" in mv:
            k_new = torch.cat([k_new, rot.apply(kb.index_select(2, mv["src"]), *mv["move"])], dim=2)
            v_new = torch.cat([v_new, vb.index_select(2, mv["src"])], dim=2)
        if won is not True and won is not False:  # the final slot's competition split the rows
            B, H = kb.shape[:2]
            w = torch.from_numpy(won).to(dev).view(B, H, 1, 1)
            f = plan.final + S
            if v_new is values:  # never write into the model's tensor
                v_new = values.clone()
            k_new[:, :, -1:] = torch.where(w, k_new[:, :, -1:], kb[:, :, f : f + 1])
            v_new[:, :, -1:] = torch.where(w, v_new[:, :, -1:], vb[:, :, f : f + 1])
        kb.index_copy_(2, mv["dst"], k_new)
        vb.index_copy_(2, mv["dst"], v_new)

    # ---------------------------------------------------------------- fused decode (decode_backend="compile")
    def fused_applicable(self, query: torch.Tensor, softcap, window) -> bool:
        """Whether this single-token step can run :func:`~.fused.decode_step`: backend ``"compile"``, CPU, a full
        cache with full sinks (no mask, the one-token insertion), no softcap / sliding window, no autograd."""
        return (
            self.decode_backend == "compile"
            and FAST_SINGLE
            and self.state.n_sinks >= self.sink_tokens
            and self.state.n_cached == self.cache_size
            and softcap is None
            and window is None
            and query.device.type == "cpu"
            and not (torch.is_grad_enabled() and query.requires_grad)
        )

    def _fused_plan(self, plan, dt, dev) -> dict:
        """Index/cos/sin tensors of ``plan``'s moves padded to ``C + 1`` entries (memoised for every layer and step)."""
        mkey = ("fused", plan.chain, plan.final, plan.compete, dt, dev)  # time-free: reused across steps
        memo = self.rotary.moves
        mv = memo.get(mkey)
        if mv is not None:
            return mv
        S, C, W, rot = self.sink_tokens, self.cascades, self.cache_size // self.cascades, self.rotary
        dsts = list(plan.chain) + ([plan.final] if plan.final >= 0 else [])
        srcs = [dsts[0]] + list(plan.chain[: len(dsts) - 1])  # entry 0's source is the new token (unused)
        k = len(dsts)
        pad = next(p for p in range(self.cache_size) if p not in dsts)  # a "keep" entry: never written
        dsts += [pad] * (C + 1 - k)
        srcs += [pad] * (C + 1 - k)
        write = [True] * k + [False] * (C + 1 - k)
        compete = [False] * (C + 1)
        if plan.final >= 0 and plan.compete:
            compete[k - 1] = True
        ncos, nsin = rot.at(torch.tensor([dsts[0] % W], device=dev), dt)
        mcos, msin = rot.at(torch.tensor([d % W - s % W for d, s in zip(dsts[1:], srcs[1:])], device=dev), dt,
                            unit=True)  # fmt: skip
        mv = {
            "dst": torch.tensor([d + S for d in dsts], device=dev),
            "src": torch.tensor([s + S for s in srcs], device=dev),
            "ncos": ncos, "nsin": nsin, "mcos": mcos, "msin": msin,
            "write": torch.tensor(write, device=dev),
            "compete": torch.tensor(compete, device=dev),
        }  # fmt: skip
        if len(memo) > 4096:
            memo.clear()
        memo[mkey] = mv
        return mv

    def fused_decode(self, query, key, value, ci, si, scaling: float) -> tuple[torch.Tensor, torch.Tensor]:
        """The single-token step as one compiled graph: ``(out (B, 1, Hq, Dv), A)``; updates cache and state."""
        st, rot = self.state, self.rotary
        plan = st.plan_single()
        dt, dev = self.kbuf.dtype, self.kbuf.device
        mv = self._fused_plan(plan, dt, dev)
        tcos, tsin = rot.table(dt)
        out, A = run_compiled(
            query, key, value, ci, si, torch.tensor(st.start, device=dev), tcos, tsin, self.kbuf, self.vbuf,
            torch.from_numpy(st._score), torch.from_numpy(st._og),
            mv["dst"], mv["src"], mv["ncos"], mv["nsin"], mv["mcos"], mv["msin"], mv["write"], mv["compete"],
            torch.tensor([[plan.t - 1]]), rot.interleaved, rot.rotary_dim, rot.table_center, float(scaling), float(rot.scaling**2 * scaling),
            self.beta, self.sink_tokens, self.head_reduction, self.homogeneous_heads,
        )  # fmt: skip
        st.t, st.stored, st.start = plan.t, list(plan.stored), list(plan.start)
        return out, A


NOT_ENABLED = (
    "CascadingKVCache needs the cascade attention implementation, but the model's attention did not route the "
    "chunk to it: run inside `with iclr25.cascading_kv.cascade_attention(model):` or call "
    "iclr25.cascading_kv.enable_cascade_attention(model) first (attn_implementation='cascade')."
)


def _validate(sink_tokens, cache_size, cascades, beta, head_reduction, decode_backend="eager") -> None:
    if decode_backend not in DECODE_BACKENDS:
        raise ValueError(f"decode_backend must be one of {DECODE_BACKENDS}, got {decode_backend!r}")
    for name, v, lo in (
        ("sink_tokens", sink_tokens, 0),
        ("cache_size", cache_size, 1),
        ("cascades", cascades, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if cache_size % cascades:
        raise ValueError(
            f"cache_size must be divisible by cascades, got cache_size={cache_size}, cascades={cascades}"
        )
    if not (isinstance(beta, (int, float)) and 0.0 < float(beta) < 1.0):
        raise ValueError(f"beta must be a float in (0, 1), got {beta!r}")
    if head_reduction not in HEAD_REDUCTIONS:
        raise ValueError(f"head_reduction must be one of {HEAD_REDUCTIONS}, got {head_reduction!r}")


class CascadingKVCache(Cache):
    """Cascading KV cache for the RoPE decoders of ``transformers`` listed in :data:`~.rope.SUPPORTED_MODEL_TYPES`.

    Parameters
    ----------
    model: the model (gives the number of layers and its rotary embedding); or pass ``num_layers`` and ``rotary_emb``.
    sink_tokens: ``S`` attention sinks (paper's scripts: 64).
    cache_size: ``N`` slots per layer besides the sinks, split into ``cascades`` sub-caches of ``W = N / C``.
    cascades: ``C``; ``1`` is exactly StreamingLLM (sinks + sliding window).
    beta: EMA decay of the attention scores (0.9999 in the submission; the final code release uses 0.9999999).
    head_reduction: ``max`` (paper's scripts) or ``mean`` over the query heads of a group.
    homogeneous_heads: reduce over all query heads so every KV head keeps the same tokens.
    eager_fill: every cascade accepts every token until the cache is first full.
    decode_backend: ``"eager"`` (the reference) or ``"compile"``: once the cache is full, a decoded token's
        attention, score update and slot moves run as one ``torch.compile``d graph per layer on CPU
        (:mod:`~iclr25.cascading_kv.fused`; compiled on first use, tested equal to the eager path). Other devices,
        softcapping and sliding-window models keep the eager path.

    Use with ``enable_cascade_attention(model)`` (done by :func:`strided_prefill` / :func:`generate_streaming`).
    ``get_seq_length()`` is the number of tokens held (sinks + cascades), which is also where the next chunk's
    cache positions start.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        *,
        cache_size: int,
        sink_tokens: int = 64,
        cascades: int = 4,
        beta: float = 0.9999,
        head_reduction: str = "max",
        homogeneous_heads: bool = False,
        eager_fill: bool = True,
        num_layers: int | None = None,
        rotary_emb: torch.nn.Module | None = None,
        decode_backend: str = "eager",
    ) -> None:
        _validate(sink_tokens, cache_size, cascades, beta, head_reduction, decode_backend)
        self._config = None
        if model is not None:
            rotary = _as_rotary(rotary_emb) if rotary_emb is not None else rotary_for(model)
            num_layers = (
                num_layers if num_layers is not None else model.config.get_text_config().num_hidden_layers
            )
            self._config = model.config
        else:
            if num_layers is None or rotary_emb is None:
                raise ValueError("pass model=..., or both num_layers=... and rotary_emb=... (got None)")
            rotary = _as_rotary(rotary_emb)
        if not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be an int >= 1, got {num_layers!r}")
        self.config_kwargs = dict(
            sink_tokens=sink_tokens, cache_size=cache_size, cascades=cascades, beta=beta,
            head_reduction=head_reduction, homogeneous_heads=homogeneous_heads, eager_fill=eager_fill,
            decode_backend=decode_backend,
        )  # fmt: skip
        layers = [
            CascadingLayer(**self.config_kwargs, rotary_emb=rotary, layer_idx=i) for i in range(num_layers)
        ]
        super().__init__(layers=layers)
        self.rotary = rotary
        self.rotary_emb = rotary.module

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Hand the chunk to the cascade attention; raises at once if the model is not using it."""
        cfg = self._config
        if cfg is not None and getattr(cfg, "_attn_implementation", None) != ATTN_NAME:
            raise RuntimeError(NOT_ENABLED + f" (the model uses {cfg._attn_implementation!r})")
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    def reset(self) -> None:
        """Empty every layer (sinks, cascades, scores, counters) so the cache can take a new stream."""
        super().reset()
        take_pending()

    @property
    def sink_tokens(self) -> int:
        return self.config_kwargs["sink_tokens"]

    @property
    def cache_size(self) -> int:
        return self.config_kwargs["cache_size"]

    @property
    def cascades(self) -> int:
        return self.config_kwargs["cascades"]

    def retained(self, layer_idx: int = 0) -> torch.Tensor:
        """``(B, H_kv, S + N)`` original token indices held by a layer (sinks first, ``-1`` = empty)."""
        st = self.layers[layer_idx].state
        if st is None:
            raise ValueError(f"layer {layer_idx} is empty: run the model on some tokens first")
        return st.retained()

    def cache_tensor_bytes(self) -> int:
        """Bytes held by the cache's tensors (constant in the prompt length)."""
        total = 0
        for layer in self.layers:
            if layer.is_initialized:
                for t in (layer.kbuf, layer.vbuf):
                    total += t.numel() * t.element_size()
        return total
