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

import weakref

import numpy as np
import torch
from transformers.cache_utils import Cache, CacheLayerMixin

from .attention import enable_cascade_attention, is_cascade
from .cascade import EMPTY, CascadeState
from .fused import DECODE_BACKENDS, run_compiled
from .handoff import PENDING, SIZING, take_pending
from .rope import Rotary, _layout, rotaries_for, rotary_for
from .scores import HEAD_REDUCTIONS

FAST_SINGLE = (
    True  # one decoded token: memoised time-only plan + ≤ C + 1 slot moves (False: the general push)
)


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

    Padded batches: the cascade's control flow (fill counters, ring starts) is shared by the rows of one buffer, so
    rows that have seen different numbers of real tokens cannot share one. The first chunk with padding (an
    ``attention_mask`` with zeros) splits the layer into **parts** (:attr:`parts`: ``(rows, CascadingLayer)``), rows
    that have seen the same number of real tokens sharing one part; pads never enter a cache, each part attends over
    its rows' real tokens only, so a row's result is the one it gets alone (same chunks of its own tokens).
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
        shared: dict | None = None,
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
        self.shared = {} if shared is None else shared  # per-forward facts of the whole cache (chunk padding)
        self.state: CascadeState | None = None
        # tokens fed so far, pads included (get_seq_length: where the caller's next token sits)
        self.columns = 0
        self.parts: list[tuple[torch.Tensor, CascadingLayer]] | None = None
        self._pending: tuple[torch.Tensor, torch.Tensor] | None = None
        self._layout: dict | None = None
        W = self.cache_size // self.cascades
        self._ref = np.concatenate([np.arange(self.sink_tokens), np.tile(np.arange(W), self.cascades)])
        self._gid0 = 1 + 2 * np.repeat(np.arange(self.cascades), W)  # cascade i: groups 1 + 2i (and 2 + 2i)

    @property
    def rotary_emb(self) -> torch.nn.Module | None:
        return None if self.rotary is None else self.rotary.module

    def max_rotary_position(self, q: int) -> int:
        """Largest ``|position|`` a chunk of ``q`` tokens rotates by: chunk positions ``< S + N + q``, a decoded query's
        position minus a slot group's offset ``< S + N + W`` (:mod:`~iclr25.cascading_kv.rope`)."""
        return self.sink_tokens + self.cache_size + max(int(q), self.cache_size // self.cascades) + 1

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
        if getattr(PENDING, "layer", None) is not None:
            PENDING.layer = None
            raise RuntimeError(NOT_ENABLED)
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        elif key_states.shape[0] != self.batch_size:
            raise ValueError(
                f"the cascading cache holds streams of batch size {self.batch_size} but the model got a chunk of batch "
                f"size {key_states.shape[0]}: a filled cache continues the same rows (generate's num_beams / "
                "num_return_sequences expand the batch only from an empty cache; copy the cache per row instead), "
                "or call cache.reset() to start new streams"
            )
        self.columns += key_states.shape[-2]
        self._pending = (key_states, value_states)
        PENDING.layer = self
        return key_states, value_states

    @property
    def batch_size(self) -> int:
        """Rows of the streams held (``0`` before the first chunk)."""
        if not self.is_initialized:
            return 0
        if self.parts is not None:
            return int(sum(rows.numel() for rows, _ in self.parts))
        return self.kbuf.shape[0]

    def get_seq_length(self) -> int:
        """Tokens fed so far, pads included — where the caller's next token sits, as for ``transformers``' sliding-
        window layers (the cascade holds at most ``S + N`` of them: :meth:`get_held_length`)."""
        return self.columns

    def get_held_length(self) -> int:
        """Tokens held now (sinks + filled slots; the largest over the parts of a padded batch)."""
        if self.parts is not None:
            return max(sub.get_held_length() for _, sub in self.parts)
        return 0 if self.state is None else self.state.seq_length

    def get_max_length(self) -> int:
        return self.sink_tokens + self.cache_size

    def get_mask_sizes(self, query_length: int) -> tuple[int, int]:
        held = self.get_held_length()
        return held + query_length, max(self.columns - held, 0)

    def reset(self) -> None:
        if self.is_initialized and self.parts is None:
            self.kbuf.zero_()
            self.vbuf.zero_()
            self.state.reset()
        elif self.parts is not None:
            # back to one buffer for the whole batch (the next stream may be unpadded)
            self.parts = None
            self.is_initialized = False
            self.kbuf = self.vbuf = self.state = None
        self.columns = 0
        self._layout = None
        self._pending = None
        self.shared["valid"] = None
        if getattr(PENDING, "layer", None) is self:
            PENDING.layer = None

    def crop(self, max_length: int) -> None:
        """``transformers``' rollback (``crop(-n)``: drop the last ``n`` tokens; ``crop(m)``: keep the first ``m``).
        Only a no-op is possible (``crop(0)`` as for sliding-window layers, or keeping every token fed)."""
        if max_length == 0 or max_length >= self.columns:
            return
        raise NotImplementedError(
            f"a cascading cache cannot be cropped (crop({max_length}) on {self.columns} tokens fed): it evicts and "
            "merges tokens irreversibly as they arrive (Algorithm 2), so the state before the last tokens no longer "
            "exists. Assisted decoding and prompt lookup, which verify draft tokens and roll the rejected ones back, "
            "need a croppable cache (DynamicCache); copy the cache (cache.copy()) before a step you may want to undo"
        )

    def _select_batch(self, index: torch.Tensor) -> None:
        if not self.is_initialized:
            return
        index = torch.as_tensor(index).reshape(-1).to("cpu", torch.long)
        if self.parts is not None:
            self._select_parts(index)
            return
        dev_index = index.to(self.kbuf.device)
        self.kbuf = self.kbuf.index_select(0, dev_index)
        self.vbuf = self.vbuf.index_select(0, dev_index)
        H = self.kbuf.shape[1]
        rows = (index[:, None] * H + torch.arange(H)[None, :]).reshape(-1)
        self.state.select_rows(rows, (index.numel(), H))
        self._layout = None

    def _select_parts(self, index: torch.Tensor) -> None:
        """``_select_batch`` of a padded batch: new row ``i`` is old row ``index[i]``, in whichever part holds it."""
        B = self.batch_size
        part_of = torch.empty(B, dtype=torch.long)
        pos_in = torch.empty(B, dtype=torch.long)
        for p, (rows, _) in enumerate(self.parts):
            part_of[rows] = p
            pos_in[rows] = torch.arange(rows.numel())
        parts = []
        for p, (_, sub) in enumerate(self.parts):
            new_rows = torch.nonzero(part_of[index] == p).reshape(-1)
            if new_rows.numel():
                sub._select_batch(pos_in[index[new_rows]])
                parts.append((new_rows, sub))
        self.parts = parts
        self._collapse()

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        self._select_batch(beam_idx)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._select_batch(torch.as_tensor(indices).reshape(-1))

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.is_initialized:
            self._select_batch(torch.arange(self.batch_size).repeat_interleave(repeats))

    # ---------------------------------------------------------------- copies and padded batches
    def _empty_like(self) -> CascadingLayer:
        """A new layer with the same settings, rotary helper and shared dict (no buffers)."""
        new = object.__new__(CascadingLayer)
        new.__dict__.update(self.__dict__)
        new.parts, new.state, new._pending, new._layout = None, None, None, None
        new.kbuf = new.vbuf = None
        return new

    def copy(self, shared: dict | None = None) -> CascadingLayer:
        """An independent copy: keys, values, scores and counters copied (the rotary helper is shared)."""
        new = self._empty_like()
        if shared is not None:
            new.shared = shared
        if self.parts is not None:
            new.parts = [(rows.clone(), sub.copy(new.shared)) for rows, sub in self.parts]
        elif self.is_initialized:
            new.kbuf, new.vbuf, new.state = self.kbuf.clone(), self.vbuf.clone(), self.state.copy()
        return new

    def _subset(self, index: torch.Tensor) -> CascadingLayer:
        """A new single-buffer layer holding rows ``index`` of this one (copies)."""
        new = self._empty_like()
        dev_index = index.to(self.kbuf.device)
        new.kbuf = self.kbuf.index_select(0, dev_index)
        new.vbuf = self.vbuf.index_select(0, dev_index)
        H = self.kbuf.shape[1]
        new.state = self.state.copy()
        new.state.select_rows((index[:, None] * H + torch.arange(H)[None, :]).reshape(-1), (index.numel(), H))
        return new

    def _collapse(self) -> None:
        """Back to one buffer when a single part holds every row in order (the batched fast paths apply again)."""
        if self.parts is not None and len(self.parts) == 1:
            rows, sub = self.parts[0]
            if torch.equal(rows, torch.arange(rows.numel())):
                self.kbuf, self.vbuf, self.state = sub.kbuf, sub.vbuf, sub.state
                self.parts = None
                self._layout = None

    def partition(
        self, valid: torch.Tensor | None
    ) -> list[tuple[torch.Tensor, CascadingLayer, torch.Tensor | None]]:
        """Split the rows by how many real tokens they get in this chunk; ``[(rows, part, token_index)]``.

        ``valid`` ``(B, q)`` bool (``None``: every token is real). Rows of one part that get different numbers of
        real tokens move to separate parts (they no longer share counters); ``token_index`` ``(rows, n)`` are each
        row's real tokens in order (``None``: all ``q``). Parts that get no real token are left out of the list.
        """
        if self.parts is None:
            B = self.kbuf.shape[0]
            whole = self._empty_like()
            whole.kbuf, whole.vbuf, whole.state = self.kbuf, self.vbuf, self.state
            self.parts = [(torch.arange(B), whole)]
            self.kbuf = self.vbuf = self.state = None
            self._layout = None
        if valid is None:
            work = [(rows, sub, None) for rows, sub in self.parts]
            self._collapse()
            return work
        q = valid.shape[1]
        n_real = valid.sum(1)  # (B,)
        # each row's real tokens first, in order
        order = torch.sort((~valid).to(torch.uint8), dim=1, stable=True).indices
        parts, work = [], []
        for rows, sub in self.parts:
            counts = n_real[rows]
            values = torch.unique(counts)
            for v in values.tolist():
                sel = torch.nonzero(counts == v).reshape(-1)
                piece = sub if values.numel() == 1 else sub._subset(sel)
                r = rows[sel]
                parts.append((r, piece))
                if v:
                    work.append((r, piece, None if v == q else order[r, :v]))
        self.parts = parts
        self._collapse()
        return work

    # ---------------------------------------------------------------- views (sinks first)
    @property
    def keys(self) -> torch.Tensor:
        """``(B, H, N, D)`` cascade-slot keys, rotated at their slot reference positions (a view)."""
        if self.parts is not None:
            return self._gather_parts("kbuf")[:, :, self.sink_tokens :]
        return self.kbuf[:, :, self.sink_tokens :]

    @keys.setter
    def keys(self, value) -> None:  # CacheLayerMixin.__init__ sets keys = None; the buffer is kbuf
        if value is not None:
            raise AttributeError("CascadingLayer.keys is a view of kbuf (read-only)")

    @property
    def values(self) -> torch.Tensor:
        if self.parts is not None:
            return self._gather_parts("vbuf")[:, :, self.sink_tokens :]
        return self.vbuf[:, :, self.sink_tokens :]

    @values.setter
    def values(self, value) -> None:
        if value is not None:
            raise AttributeError("CascadingLayer.values is a view of vbuf (read-only)")

    def _gather_parts(self, name: str) -> torch.Tensor:
        """A padded batch's ``kbuf``/``vbuf`` assembled in batch order (a copy)."""
        first = getattr(self.parts[0][1], name)
        out = first.new_zeros(self.batch_size, *first.shape[1:])
        for rows, sub in self.parts:
            out[rows.to(out.device)] = getattr(sub, name)
        return out

    @property
    def sink_keys(self) -> torch.Tensor:
        return self.kbuf[:, :, : self.sink_tokens]

    @property
    def sink_values(self) -> torch.Tensor:
        return self.vbuf[:, :, : self.sink_tokens]

    def retained(self) -> torch.Tensor:
        """``(B, H_kv, S + N)`` original token indices held (each row counts its own real tokens; ``-1`` = empty)."""
        if self.parts is None:
            return self.state.retained()
        H = self.parts[0][1].kbuf.shape[1]
        out = torch.full((self.batch_size, H, self.sink_tokens + self.cache_size), EMPTY, dtype=torch.long)
        for rows, sub in self.parts:
            out[rows] = sub.state.retained()
        return out

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
        if len(memo) > 64:  # a few steps of every part and layer size
            memo.clear()
        memo[key] = lay
        return lay

    def read(self) -> dict[str, torch.Tensor]:
        """Stored keys rotated at their *cache positions*, values, positions and validity (``S + N`` slots, sinks first)."""
        lay = self.layout()
        rot = self.rotary
        rot.ensure(self.max_rotary_position(1), self.kbuf.device)
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
        rot.ensure(self.max_rotary_position(q), self.kbuf.device)
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
        mkey = (S, self.cache_size // self.cascades, dsts, src, dt, dev)  # layers may differ in S and W
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
        # time-free: reused across steps (and by every layer of the same S, N, C)
        mkey = ("fused", self.sink_tokens, self.cache_size, self.cascades, plan.chain, plan.final, plan.compete, dt,
                dev)  # fmt: skip
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
    "chunk to it: a cache built with `CascadingKVCache(model, ...)` switches the model to it (its other forwards "
    "keep their previous attention); after switching it away, call iclr25.cascading_kv.enable_cascade_attention(model)"
    " or run inside `with iclr25.cascading_kv.cascade_attention(model):`."
)


def _validate(
    sink_tokens, cache_size, cascades, beta, head_reduction, decode_backend="eager", size_name="cache_size"
):
    if decode_backend not in DECODE_BACKENDS:
        raise ValueError(f"decode_backend must be one of {DECODE_BACKENDS}, got {decode_backend!r}")
    for name, v, lo in (
        ("sink_tokens", sink_tokens, 0),
        (size_name, cache_size, 1),
        ("cascades", cascades, 1),
    ):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")
    if cache_size % cascades:
        raise ValueError(
            f"{size_name} must be divisible by cascades, got {size_name}={cache_size}, cascades={cascades}"
        )
    if not (isinstance(beta, (int, float)) and 0.0 < float(beta) < 1.0):
        raise ValueError(f"beta must be a float in (0, 1), got {beta!r}")
    if head_reduction not in HEAD_REDUCTIONS:
        raise ValueError(f"head_reduction must be one of {HEAD_REDUCTIONS}, got {head_reduction!r}")


def _layer_sizes(cache_size, num_layers: int) -> list[int]:
    """``cache_size`` as one size per layer (an int for all, or a list/tuple with one entry per layer)."""
    if isinstance(cache_size, (list, tuple)):
        if len(cache_size) != num_layers:
            raise ValueError(
                f"cache_size must be an int or a list with one size per layer ({num_layers}), got a list of "
                f"{len(cache_size)}: {list(cache_size)!r}"
            )
        return [
            int(c) if isinstance(c, (int, np.integer)) and not isinstance(c, bool) else c for c in cache_size
        ]
    return [cache_size] * num_layers


class CascadingKVCache(Cache):
    """Cascading KV cache for the RoPE decoders of ``transformers`` listed in :data:`~.rope.SUPPORTED_MODEL_TYPES`.

    Parameters
    ----------
    model: the model (gives the number of layers and its rotary embedding); or pass ``num_layers`` and ``rotary_emb``.
        Building the cache switches ``model`` to the ``"cascade"`` attention implementation
        (:func:`~iclr25.cascading_kv.enable_cascade_attention`), so the plain ``model(...)`` / ``model.generate(...,
        cache=cache)`` (or ``past_key_values=cache``) / pipelines use it; any other cache (or none) still runs the model's previous
        attention (eager or SDPA) unchanged.
    sink_tokens: ``S`` attention sinks (paper's scripts: 64).
    cache_size: ``N`` slots per layer besides the sinks, split into ``cascades`` sub-caches of ``W = N / C``; an int,
        or a list with one size per layer (per-layer budgets, each divisible by ``cascades``).
    cascades: ``C``; ``1`` is exactly StreamingLLM (sinks + sliding window).
    beta: EMA decay of the attention scores (0.9999 in the submission; the final code release uses 0.9999999).
    head_reduction: ``max`` (paper's scripts) or ``mean`` over the query heads of a group.
    homogeneous_heads: reduce over all query heads so every KV head keeps the same tokens.
    eager_fill: every cascade accepts every token until the cache is first full.
    decode_backend: ``"eager"`` (the reference) or ``"compile"``: once the cache is full, a decoded token's
        attention, score update and slot moves run as one ``torch.compile``d graph per layer on CPU
        (:mod:`~iclr25.cascading_kv.fused`; compiled on first use, tested equal to the eager path). Other devices,
        softcapping and sliding-window models keep the eager path.

    ``get_seq_length()`` is the number of tokens fed so far (pads included), as for ``transformers``' sliding-window
    caches, so ``generate`` continues a filled cache from the whole sequence; :meth:`get_held_length` is the number
    held (≤ ``S + N``). :meth:`copy` (and ``copy.deepcopy``) duplicates a filled cache to reuse a prefilled context.
    """

    def __init__(
        self,
        model: torch.nn.Module | None = None,
        *,
        cache_size: int | list[int],
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
        first = cache_size[0] if isinstance(cache_size, (list, tuple)) and len(cache_size) else cache_size
        _validate(sink_tokens, first, cascades, beta, head_reduction, decode_backend)
        self._config = None
        self._model = None
        if model is not None:
            if rotary_emb is not None:
                rotaries = None
                rotary = _as_rotary(rotary_emb)
            else:
                rotaries = rotaries_for(model)
                rotary = rotaries[0]
            num_layers = (
                num_layers if num_layers is not None else model.config.get_text_config().num_hidden_layers
            )
            self._config = model.config
            self._model = weakref.ref(model)
        else:
            if num_layers is None or rotary_emb is None:
                raise ValueError("pass model=..., or both num_layers=... and rotary_emb=... (got None)")
            rotary, rotaries = _as_rotary(rotary_emb), None
        if isinstance(num_layers, bool) or not isinstance(num_layers, int) or num_layers < 1:
            raise ValueError(f"num_layers must be an int >= 1, got {num_layers!r}")
        sizes = _layer_sizes(cache_size, num_layers)
        for i, n in enumerate(sizes):
            _validate(sink_tokens, n, cascades, beta, head_reduction, decode_backend,
                      size_name="cache_size" if not isinstance(cache_size, (list, tuple)) else f"cache_size[{i}]")  # fmt: skip
        if rotaries is None or len(rotaries) < num_layers:
            rotaries = [rotary] * num_layers
        self.config_kwargs = dict(
            sink_tokens=sink_tokens, cache_size=list(sizes) if isinstance(cache_size, (list, tuple)) else cache_size,
            cascades=cascades, beta=beta, head_reduction=head_reduction, homogeneous_heads=homogeneous_heads,
            eager_fill=eager_fill, decode_backend=decode_backend,
        )  # fmt: skip
        shared: dict = {"valid": None, "num_layers": num_layers}
        layer_kw = {k: v for k, v in self.config_kwargs.items() if k != "cache_size"}
        layers = [
            CascadingLayer(
                **layer_kw, cache_size=sizes[i], rotary_emb=rotaries[i], layer_idx=i, shared=shared
            )
            for i in range(num_layers)
        ]
        super().__init__(layers=layers)
        self.rotary = rotary
        self.rotary_emb = rotary.module
        if model is not None:
            enable_cascade_attention(model)

    # ---------------------------------------------------------------- Cache API
    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        """Hand the chunk to the cascade attention; raises at once if the model is not using it."""
        SIZING.cache = None
        cfg = self._config
        if cfg is not None:
            if not is_cascade(getattr(cfg, "_attn_implementation", None)):
                raise RuntimeError(NOT_ENABLED + f" (the model uses {cfg._attn_implementation!r})")
        return super().update(key_states, value_states, layer_idx, *args, **kwargs)

    def get_mask_sizes(self, query_length: int, layer_idx: int = 0) -> tuple[int, int]:
        """Also tells the ``"cascade"`` mask function that follows which cache it builds the mask for: it records which
        tokens of the chunk are padding (:meth:`set_chunk_padding`) instead of building a mask nobody reads."""
        self.layers[0].shared["valid"] = None
        SIZING.cache = self
        return super().get_mask_sizes(query_length, layer_idx)

    def set_chunk_padding(self, attention_mask: torch.Tensor | None, query_length: int) -> None:
        """Record the chunk's real tokens from a 2-D ``attention_mask`` ``(B, ≥ q)`` (its last ``q`` columns)."""
        valid = None
        if attention_mask is not None and attention_mask.ndim == 2:
            valid = attention_mask[:, -query_length:].to("cpu", torch.bool)
            if bool(valid.all()):
                valid = None
        self.layers[0].shared["valid"] = valid

    def get_held_length(self, layer_idx: int = 0) -> int:
        """Tokens held by a layer now (sinks + filled slots, ≤ ``S + N``)."""
        return self.layers[layer_idx].get_held_length()

    def reset(self) -> None:
        """Empty every layer (sinks, cascades, scores, counters) so the cache can take a new stream."""
        super().reset()
        take_pending()

    def copy(self) -> CascadingKVCache:
        """An independent copy (keys, values, scores and counters copied; model and rotary helpers shared), e.g. to
        answer several questions about one prefilled context. ``copy.deepcopy(cache)`` does the same."""
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        shared = dict(self.layers[0].shared, valid=None)
        new.layers = [layer.copy(shared) for layer in self.layers]
        return new

    def __deepcopy__(self, memo) -> CascadingKVCache:
        return self.copy()

    @property
    def sink_tokens(self) -> int:
        return self.config_kwargs["sink_tokens"]

    @property
    def cache_size(self) -> int | list[int]:
        """``N`` (an int), or the list of per-layer sizes the cache was built with."""
        return self.config_kwargs["cache_size"]

    @property
    def cascades(self) -> int:
        return self.config_kwargs["cascades"]

    def retained(self, layer_idx: int = 0) -> torch.Tensor:
        """``(B, H_kv, S + N)`` original token indices held by a layer (sinks first, ``-1`` = empty)."""
        layer = self.layers[layer_idx]
        if not layer.is_initialized:
            raise ValueError(f"layer {layer_idx} is empty: run the model on some tokens first")
        return layer.retained()

    def cache_tensor_bytes(self) -> int:
        """Bytes held by the cache's tensors (constant in the prompt length)."""
        total = 0
        for layer in self.layers:
            if not layer.is_initialized:
                continue
            subs = [layer] if layer.parts is None else [sub for _, sub in layer.parts]
            for sub in subs:
                for t in (sub.kbuf, sub.vbuf):
                    total += t.numel() * t.element_size()
        return total
