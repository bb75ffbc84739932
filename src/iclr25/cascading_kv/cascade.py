"""Cascade bookkeeping (Algorithm 2 of the paper, as the official Triton kernel implements it), model-free.

One :class:`CascadeState` holds, for a batch of streams (``rows`` = batch × KV heads), the ``S`` sink slots and
``C`` cascades ("sub-caches") of ``W`` slots each (``N = C·W``). Cascade ``i`` accepts a token only every
``2^i`` stream steps; on the other arrivals the newcomer and the cascade's newest entry compete and the larger
EMA attention score survives (ties go to the newer token). The evicted oldest entry of cascade ``i`` is carried
into cascade ``i+1``; what falls out of the last cascade is gone. Cascade ``i`` therefore spans ≈ ``W·2^i``
tokens and the whole cache ≈ ``S + W·(2^C − 1)`` instead of ``S + N``.

The control flow (fill counts ``stored[i]``, ring starts ``start[i]``, acceptance) depends on time only, so it
is a plain Python walk over cascades shared by every row; the data-dependent parts (which token wins a slot,
scores, original indices) are arrays over rows. Slots hold *source indices* during a push, so key/value
tensors are moved once per chunk by a single gather (see :meth:`CascadeState.push`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

EMPTY = -1  # original index / source index of an empty slot


def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or int(value) < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


@dataclass(frozen=True)
class PushResult:
    """What a :meth:`CascadeState.push` did, as gather indices for the tensors that follow the tokens.

    ``n_to_sinks`` — the first ``n_to_sinks`` tokens of the chunk were appended to the sinks (same for all rows).
    ``src`` — ``(*rows, N)`` long: for each cache slot after the push, the index of its content in
    ``concat(old slots [0, N), chunk tokens [N, N+q))``; ``EMPTY`` for an empty slot.
    """

    n_to_sinks: int
    src: torch.Tensor


@dataclass(frozen=True)
class SinglePlan:
    """The time-only control flow of inserting **one** token (sinks full): the same for every row and every layer.

    ``chain`` — slots ``a_0 … a_{k−1}`` of the accepting *full* cascades: ``a_0`` receives the new token and ``a_j``
    the former content of ``a_{j−1}`` (each cascade's oldest entry is passed down). ``final`` — the slot that
    receives the last carry (the new token when ``k = 0``, else the former content of ``a_{k−1}``), ``−1`` when it
    falls out of the last cascade; ``compete`` — whether it only gets there by winning the score comparison against
    the cascade's newest entry (ties → the carry). ``t``, ``stored``, ``start`` — the counters afterwards.
    """

    chain: tuple[int, ...]
    final: int
    compete: bool
    t: int
    stored: tuple[int, ...]
    start: tuple[int, ...]


@lru_cache(maxsize=256)
def single_plan(
    S: int, N: int, C: int, eager_fill: bool, t: int, stored: tuple[int, ...], start: tuple[int, ...]
) -> SinglePlan:
    """:class:`SinglePlan` of the next token (counter ``t + 1``): the control flow of :meth:`CascadeState.push` for
    ``q = 1`` without the data. Memoised, so a decoded token walks the cascades once for all layers."""
    W = N // C
    stored, start = list(stored), list(start)
    t += 1
    x = t - 1 - S
    n_acc = C if ((eager_fill and t - 1 <= N + S) or x == 0) else min(C, (x & -x).bit_length())
    chain: list[int] = []
    final, compete = -1, False
    for i in range(C):
        base = i * W
        if i < n_acc:
            if stored[i] < W:
                final = base + (start[i] + stored[i]) % W
                stored[i] += 1
                break
            chain.append(base + start[i])
            start[i] = (start[i] + 1) % W
        else:
            if stored[i] == 0:
                final = base + start[i]
                stored[i] = 1
            else:
                final, compete = base + (start[i] - 1) % stored[i], True
            break
    return SinglePlan(tuple(chain), final, compete, t, tuple(stored), tuple(start))


class CascadeState:
    """Sinks + ``C`` cascades of ``W`` slots for ``rows`` independent streams (e.g. batch × KV heads).

    Parameters
    ----------
    sink_tokens: ``S``, number of attention-sink slots (the first ``S`` tokens of the stream).
    cache_size: ``N`` cache slots besides the sinks, split evenly into the cascades (``N % C == 0``).
    cascades: ``C``; ``C = 1`` is exactly StreamingLLM (sinks + sliding window of the last ``N`` tokens).
    rows: shape of the independent streams, e.g. ``(batch, kv_heads)``.
    eager_fill: while ``t − 1 ≤ N + S`` every cascade accepts every token (the cache fills like a window).

    State (``t`` counts tokens seen, sinks included; indices are 0-based original token positions):
    ``stored[i]``, ``start[i]`` (python ints, identical for every row), ``og`` ``(*rows, N)`` original index per
    slot, ``scores`` ``(*rows, N)`` float64 EMA score per slot (sinks are never scored).
    """

    def __init__(
        self,
        sink_tokens: int,
        cache_size: int,
        cascades: int = 4,
        rows: tuple[int, ...] | int = (1,),
        eager_fill: bool = True,
    ) -> None:
        self.S = _check_int("sink_tokens", sink_tokens, 0)
        self.N = _check_int("cache_size", cache_size, 1)
        self.C = _check_int("cascades", cascades, 1)
        if self.N % self.C:
            raise ValueError(
                f"cache_size must be divisible by cascades, got cache_size={self.N}, cascades={self.C}"
            )
        self.W = self.N // self.C
        rows = (rows,) if isinstance(rows, (int, np.integer)) else tuple(int(r) for r in rows)
        if not rows or any(r < 1 for r in rows):
            raise ValueError(f"rows must be a non-empty tuple of positive ints, got {rows!r}")
        self.rows = rows
        self.eager_fill = bool(eager_fill)
        self.reset()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        R = int(np.prod(self.rows))
        self.t = 0  # tokens seen so far (sinks included)
        self.n_sinks = 0
        self.stored = [0] * self.C
        self.start = [0] * self.C
        self._og = np.full((R, self.N), EMPTY, dtype=np.int64)
        self._score = np.zeros((R, self.N), dtype=np.float64)

    @property
    def n_cached(self) -> int:
        """Σ stored: number of filled cache slots (sinks excluded)."""
        return int(sum(self.stored))

    @property
    def seq_length(self) -> int:
        """Tokens currently held: sinks + cache slots."""
        return self.n_sinks + self.n_cached

    @property
    def span_limit(self) -> int:
        """``W·(2^C − 1)``: the age beyond which no token can survive (§3.2)."""
        return self.W * (2**self.C - 1)

    @property
    def og(self) -> torch.Tensor:
        """``(*rows, N)`` original 0-based token index held by each slot (``EMPTY`` when empty)."""
        return torch.from_numpy(self._og.reshape(*self.rows, self.N))

    @property
    def scores(self) -> torch.Tensor:
        """``(*rows, N)`` EMA attention score of each slot (float64; 0 for empty slots)."""
        return torch.from_numpy(self._score.reshape(*self.rows, self.N))

    def valid_mask(self) -> torch.Tensor:
        """``(N,)`` bool: slot holds a token (identical for every row)."""
        m = np.zeros(self.N, dtype=bool)
        for i in range(self.C):
            m[i * self.W : i * self.W + self.stored[i]] = True
        return torch.from_numpy(m)

    def slot_positions(self) -> torch.Tensor:
        """``(N,)`` RoPE position of each slot, ``-1`` for empty slots (§3.3, "cache positions").

        Sinks occupy ``0..n_sinks−1``; the cached tokens occupy ``n_sinks..n_sinks+n−1`` contiguously, oldest lowest:
        for cascade ``i`` with ``seg = min(W, stored[i])`` slot offset ``m`` gets ``((m + seg − start[i]) mod seg) + ub − seg``
        with ``ub`` running down from ``Σ stored`` (cascade 0 holds the newest tokens).
        """
        pos = np.full(self.N, -1, dtype=np.int64)
        ub = self.n_cached
        for i in range(self.C):
            seg = min(self.W, self.stored[i])
            if seg == 0:
                continue
            m = np.arange(seg)
            pos[i * self.W + m] = (m + seg - self.start[i]) % seg + ub - seg + self.n_sinks
            ub -= seg
        return torch.from_numpy(pos)

    def sink_positions(self) -> torch.Tensor:
        return torch.arange(self.n_sinks)

    def retained(self) -> torch.Tensor:
        """``(*rows, S + N)`` original indices of every retained token (sinks first), ``EMPTY`` padded."""
        sinks = np.full((self._og.shape[0], self.S), EMPTY, dtype=np.int64)
        sinks[:, : self.n_sinks] = np.arange(self.n_sinks)
        return torch.from_numpy(
            np.concatenate([sinks, self._og], axis=1).reshape(*self.rows, self.S + self.N)
        )

    def accepts(self, t: int, i: int) -> bool:
        """Cascade ``i`` accepts the token with 1-based counter ``t``: eager fill, or ``(t−1−S) mod 2^i == 0``."""
        return (self.eager_fill and t - 1 <= self.N + self.S) or ((t - 1 - self.S) % (1 << i) == 0)

    # ------------------------------------------------------------------ updates
    def decay_scores(self, factor: float, add: torch.Tensor | np.ndarray | None = None) -> None:
        """EMA update of the cached tokens' scores: ``s ← factor·s + add`` (``add``: ``(*rows, N)``)."""
        self._score *= float(factor)
        if add is not None:
            a = (
                add.detach().to("cpu", torch.float64).numpy()
                if isinstance(add, torch.Tensor)
                else np.asarray(add)
            )
            self._score += a.reshape(self._score.shape)
        if self.n_cached < self.N:  # a full cache has no empty slot
            self._score[self._og == EMPTY] = 0.0

    def push(self, scores: torch.Tensor | np.ndarray) -> PushResult:
        """Insert ``q`` new tokens, one after another, with initial scores ``scores`` ``(*rows, q)`` (Algorithm 2).

        Exact semantics of the official Triton kernel (Algorithm 2)::

            sink if fewer than S sinks; else carry = new token, for i = 0..C-1:
              accept: room → append after the newest, stop; full → replace the oldest, carry the evicted one on
              reject: empty → store, stop; else the newest entry vs carry, larger score wins (ties → carry), stop
        """
        s = (
            scores.detach().to("cpu", torch.float64).numpy()
            if isinstance(scores, torch.Tensor)
            else np.asarray(scores)
        )
        R = self._og.shape[0]
        if s.ndim < 1 or s.size % R or s.shape[: len(self.rows)] != self.rows:
            raise ValueError(f"scores must have shape (*rows={self.rows}, q), got {tuple(s.shape)}")
        s = s.reshape(R, -1).astype(np.float64, copy=False)
        q = s.shape[1]
        N, W, S = self.N, self.W, self.S
        n_to_sinks = min(max(S - self.n_sinks, 0), q)
        self.n_sinks += n_to_sinks
        self.t += n_to_sinks
        # slot-major (N, R) working copies: one slot's entries for every row are contiguous
        src = np.where(self._og == EMPTY, EMPTY, np.arange(N)[None, :]).astype(np.int64).T.copy()
        score = self._score.T.copy()
        sT = np.ascontiguousarray(s.T)
        stored, start, C = self.stored, self.start, self.C
        eager_until = self.N + self.S if self.eager_fill else -1
        for j in range(n_to_sinks, q):
            self.t += 1
            t = self.t
            x = t - 1 - S
            # cascades 0..n_acc-1 accept (x divisible by 2^i), cascade n_acc (if any) rejects — accepts() inlined
            n_acc = C if (t - 1 <= eager_until or x == 0) else min(C, (x & -x).bit_length())
            carry_src: np.ndarray | int = N + j
            carry_s = sT[j]
            for i in range(C):
                base = i * W
                if i < n_acc:
                    if stored[i] < W:  # room: append after the newest
                        p = base + (start[i] + stored[i]) % W
                        src[p] = carry_src
                        score[p] = carry_s
                        stored[i] += 1
                        break
                    p = base + start[i]  # full: the oldest is replaced and passed down
                    ev_src, ev_s = src[p].copy(), score[p].copy()
                    src[p] = carry_src
                    score[p] = carry_s
                    start[i] = (start[i] + 1) % W
                    carry_src, carry_s = ev_src, ev_s  # dropped for good after the last cascade
                else:
                    if stored[i] == 0:
                        p = base + start[i]
                        src[p] = carry_src
                        score[p] = carry_s
                        stored[i] = 1
                        break
                    p = base + (start[i] - 1) % stored[i]  # the newest entry of cascade i
                    win = carry_s >= score[p]  # ties go to the newer token (the carry)
                    np.copyto(src[p], carry_src, where=win)
                    np.copyto(score[p], carry_s, where=win)
                    break
        src, score = src.T, score.T
        # original indices follow the same gather as the tensors
        chunk_og = np.arange(self.t - q, self.t, dtype=np.int64)  # 0-based indices of the chunk's tokens
        og_all = np.concatenate([self._og, np.broadcast_to(chunk_og, (R, q))], axis=1)
        self._og = np.where(src == EMPTY, EMPTY, np.take_along_axis(og_all, np.maximum(src, 0), axis=1))
        self._score = np.where(src == EMPTY, 0.0, score)
        return PushResult(n_to_sinks, torch.from_numpy(src.reshape(*self.rows, N)))

    def plan_single(self) -> SinglePlan:
        """The :class:`SinglePlan` of the next token (only valid once the sinks are full)."""
        return single_plan(
            self.S, self.N, self.C, self.eager_fill, self.t, tuple(self.stored), tuple(self.start)
        )

    def push_single(self, plan: SinglePlan, scores: torch.Tensor | np.ndarray) -> np.ndarray | bool:
        """``push`` of one token (``scores`` ``(*rows,)`` or ``(*rows, 1)``) following ``plan`` (from
        :meth:`plan_single`, sinks full): the same result as :meth:`push` without the general walk.

        Returns whether the final carry was stored: ``True``/``False`` for all rows, or a ``(R,)`` bool array when
        the score competition split the rows.
        """
        if self.n_sinks < self.S or plan.t != self.t + 1:
            raise ValueError("push_single needs full sinks and the plan of the next token (plan_single())")
        s = (
            scores.detach().to("cpu", torch.float64).numpy()
            if isinstance(scores, torch.Tensor)
            else np.asarray(scores, dtype=np.float64)
        ).reshape(-1)
        sc, og = self._score, self._og
        if s.shape[0] != sc.shape[0]:
            raise ValueError(f"scores must have shape (*rows={self.rows}, 1), got {tuple(np.shape(scores))}")
        a, f, new_og = plan.chain, plan.final, plan.t - 1
        won: np.ndarray | bool = True
        if f >= 0:
            cand_s, cand_og = (sc[:, a[-1]].copy(), og[:, a[-1]].copy()) if a else (s, new_og)
        if a:
            if len(a) > 1:
                sc[:, a[1:]] = sc[:, a[:-1]]
                og[:, a[1:]] = og[:, a[:-1]]
            sc[:, a[0]] = s
            og[:, a[0]] = new_og
        if f >= 0:
            if plan.compete:
                w = cand_s >= sc[:, f]  # ties go to the newer token (the carry)
                won = True if w.all() else (False if not w.any() else w)
                if won is not False:
                    np.copyto(sc[:, f], cand_s, where=w)
                    np.copyto(og[:, f], cand_og, where=w)
            else:
                sc[:, f] = cand_s
                og[:, f] = cand_og
        else:
            won = False
        self.t, self.stored, self.start = plan.t, list(plan.stored), list(plan.start)
        return won

    def copy(self) -> CascadeState:
        """An independent copy (counters and the score / original-index arrays copied)."""
        new = object.__new__(CascadeState)
        new.__dict__.update(self.__dict__)
        new.stored, new.start = list(self.stored), list(self.start)
        new._og, new._score = self._og.copy(), self._score.copy()
        return new

    def select_rows(self, index: torch.Tensor | np.ndarray, rows: tuple[int, ...]) -> None:
        """Keep/reorder rows (beam search, batch selection): ``index`` indexes the flattened rows."""
        idx = np.asarray(index.cpu() if isinstance(index, torch.Tensor) else index, dtype=np.int64)
        self._og = self._og[idx]
        self._score = self._score[idx]
        self.rows = tuple(int(r) for r in rows)

    def check_invariants(self) -> None:
        """Raise ``AssertionError`` when a structural invariant is broken.

        Σ stored ≤ N, stored[i] ≤ W, cache positions a permutation of S..S+n−1 in original-index order, sinks first.
        """
        assert all(0 <= st <= self.W for st in self.stored), self.stored
        assert self.n_cached <= self.N
        assert self.n_sinks <= self.S
        valid = self.valid_mask().numpy()
        assert ((self._og != EMPTY) == valid[None, :]).all(), "slot occupancy differs between rows"
        pos = self.slot_positions().numpy()
        vp = pos[valid]
        assert sorted(vp.tolist()) == list(range(self.n_sinks, self.n_sinks + self.n_cached)), (
            "positions not a permutation"
        )
        order = np.argsort(vp)
        og_sorted = self._og[:, valid][:, order]
        assert (np.diff(og_sorted, axis=1) > 0).all(), "position order differs from original-index order"
        assert (og_sorted >= self.n_sinks).all() or self.n_cached == 0
