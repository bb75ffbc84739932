"""Selection over a stream (a ``datasets.IterableDataset`` or any iterable of documents): scores written as they
come, Gumbel-top-k kept by a streaming top-k (paper §2.3, "Data Selection", at a scale that does not fit memory).

Rows are formed shard by shard exactly as :func:`~.selection.select_corpus` forms them (one padded row per
document, or ``pack=True`` packed rows of ``max_length`` tokens), scored, and the scores appended to
``out_dir/.scores.partial.f64`` as each shard finishes. The keys ẑ_n/τ + g_n use the same Gumbel noise as
:func:`~.selection.gumbel_top_k_select` (drawn in order from one seeded generator, so the streamed selection equals
the in-memory one); :class:`StreamingTopK` keeps the ⌊r·N⌋ largest keys with O(k + shard) memory. With ``k`` (or
``n_rows``) known up front the top-k runs during the stream; with only ``ratio`` it runs once the stream has ended
and N is known, over the saved scores.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from iclr25.common.io import atomic_write_json
from iclr25.common.progress import progress
from iclr25.common.seeding import torch_generator

from .packing import Packer, corpus_pad_id, iter_doc_batches, pad_token_rows
from .selection import CorpusSelection, Scorer, _atomic_npy, _check_scorer_pad, _dist, _score


class StreamingTopK:
    """The ``k`` largest keys seen so far, ties broken by position (lower index first) — the order of
    ``torch.sort(keys, descending=True, stable=True)``. Memory O(k + pending); amortised O(log k) per key."""

    def __init__(self, k: int):
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 0:
            raise ValueError(f"k must be an int >= 0, got {k!r}")
        self.k = int(k)
        self._keys = np.zeros(0, dtype=np.float64)
        self._idx = np.zeros(0, dtype=np.int64)
        self._pending: list[tuple[np.ndarray, np.ndarray]] = []
        self._n_pending = 0

    def push(self, keys: np.ndarray, idx: np.ndarray) -> None:
        keys = np.asarray(keys, dtype=np.float64).reshape(-1)
        idx = np.asarray(idx, dtype=np.int64).reshape(-1)
        if keys.shape != idx.shape:
            raise ValueError(f"keys and idx must have one shape, got {keys.shape} and {idx.shape}")
        self._pending.append((keys, idx))
        self._n_pending += keys.size
        if self._n_pending >= max(self.k, 4096):
            self._compact()

    def _compact(self) -> None:
        if not self._pending:
            return
        keys = np.concatenate([self._keys, *(k for k, _ in self._pending)])
        idx = np.concatenate([self._idx, *(i for _, i in self._pending)])
        self._pending, self._n_pending = [], 0
        if keys.size > self.k:
            order = np.lexsort((idx, -keys))[: self.k]  # key descending, then index ascending
            keys, idx = keys[order], idx[order]
        self._keys, self._idx = keys, idx

    def indices(self) -> np.ndarray:
        """The kept indices, ascending (original order)."""
        self._compact()
        return np.sort(self._idx)


def _keys(scores: np.ndarray, tau: float, g: torch.Generator | None) -> np.ndarray:
    """ẑ/τ + Gumbel(0, 1) with the next ``len(scores)`` draws of ``g`` (the in-memory selection's noise)."""
    s = torch.from_numpy(np.array(scores, dtype=np.float64))  # a copy: the scores may be a read-only memmap
    if tau == 0:
        return s.numpy()
    u = torch.rand(s.numel(), generator=g, dtype=torch.float64)
    u = u.clamp(torch.finfo(torch.float64).tiny, 1.0 - torch.finfo(torch.float64).eps)
    return (s / tau - torch.log(-torch.log(u))).numpy()


def _check(ratio, k, n_rows, tau, seed) -> None:
    if (ratio is None) == (k is None):
        raise ValueError(
            f"give exactly one of ratio (the kept fraction) and k (the kept count), got {ratio=}, {k=}"
        )
    if ratio is not None and not (
        isinstance(ratio, (int, float)) and not isinstance(ratio, bool) and 0 < ratio <= 1
    ):
        raise ValueError(f"ratio must be in (0, 1], got {ratio!r}")
    for name, v in (("k", k), ("n_rows", n_rows)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0):
            raise ValueError(f"{name} must be an int >= 0 or None, got {v!r}")
    if not (isinstance(tau, (int, float)) and not isinstance(tau, bool) and tau >= 0):
        raise ValueError(f"tau must be >= 0, got {tau!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")


def _shards(
    stream: Iterable, shard_size: int, column: str, text_column: str, tokenizer: Any, pid: int | None,
    max_length: int | None, pack: bool, eos: bool,
) -> Iterator[np.ndarray]:  # fmt: skip
    """(n, L) int rows of the stream, one array per shard of documents."""
    if pack:
        eos_id = getattr(tokenizer, "eos_token_id", None) if eos else None
        if eos and eos_id is None:
            raise ValueError(
                "pack=True with eos=True needs a tokenizer with an eos_token_id (or pass eos=False)"
            )
        pk = Packer(tokenizer, max_length, pid, eos_id)
        for docs in iter_doc_batches(stream, shard_size, column, text_column):
            rows = pk.add(docs)
            if rows.shape[0]:
                yield rows
        last = pk.flush()
        if last.shape[0]:
            yield last
        return
    for docs in iter_doc_batches(stream, shard_size, column, text_column):
        if pid is None:  # equal-length ids without padding (no tokenizer, pad_id=None)
            a = np.asarray(docs)
            if a.ndim != 2 or not np.issubdtype(a.dtype, np.integer):
                raise ValueError(
                    "ragged or text rows need a pad id: pass tokenizer=... (its pad id) or pad_id=<int>"
                )
            yield a.astype(np.int64, copy=False)
        else:
            ids = docs if not (docs and isinstance(docs[0], str)) else tokenizer(list(docs))["input_ids"]
            yield pad_token_rows(ids, None, pid, max_length)[0]


def select_stream(
    stream: Iterable,
    scorer: Scorer,
    ratio: float | None = 0.4,
    *,
    k: int | None = None,
    n_rows: int | None = None,
    tau: float = 0.1,
    seed: int = 0,
    out_dir: str | Path | None = None,
    shard_size: int = 4096,
    column: str = "input_ids",
    text_column: str = "text",
    tokenizer: Any = None,
    pad_id: int | str | None = "auto",
    max_length: int | None = None,
    pack: bool = False,
    eos: bool = True,
) -> CorpusSelection:
    """Score a stream shard by shard and keep ⌊ratio·N⌋ rows (or ``k``) by Gumbel-top-k — the same rows
    :func:`~.selection.select_corpus` keeps on the materialised corpus with the same ``seed``.

    ``stream``: a ``datasets.IterableDataset`` (rows with ``column`` token ids or ``text_column`` text), a
    ``datasets.Dataset``, or any iterable of strings / token-id lists / such dicts; iterated once. ``n_rows``: the stream's row count when known (then the top-k runs
    during the stream; a different count raises). ``pad_id=None`` only for equal-length id rows.

    With ``out_dir``: scores are appended to ``.scores.partial.f64`` as each shard is scored, then written as
    ``scores.npy``, with ``indices.npy`` and ``selection.json``; the kept rows themselves are not re-read from
    the stream — filter it with :func:`iter_selected`. Returns a ``CorpusSelection`` (``scores`` memory-mapped from
    ``scores.npy`` when written). Single process (no ``torchrun`` sharding of a stream).
    """
    _check(ratio, k, n_rows, tau, seed)
    if _dist()[1] > 1:
        raise ValueError(
            "select_stream runs in one process (a stream cannot be sharded by rank here); under torchrun use "
            "select_corpus on a map-style datasets.Dataset, or call select_stream on rank 0 only"
        )
    if isinstance(shard_size, bool) or not isinstance(shard_size, int) or shard_size < 1:
        raise ValueError(f"shard_size must be a positive int, got {shard_size!r}")
    if isinstance(stream, (str, bytes)) or not isinstance(stream, Iterable):
        raise ValueError(f"stream must be an iterable of documents, got {type(stream).__name__}")
    if pack and not (isinstance(max_length, int) and not isinstance(max_length, bool) and max_length >= 1):
        raise ValueError(
            f"max_length must be a positive int (the packed row length) with pack=True, got {max_length!r}"
        )
    pid = None if pad_id is None else corpus_pad_id(tokenizer, pad_id)
    if pid is not None:
        _check_scorer_pad(scorer, pid)
    k_now = k if k is not None else (math.floor(ratio * n_rows) if n_rows is not None else None)
    top = StreamingTopK(k_now) if k_now is not None else None
    g = torch_generator(seed)
    out = Path(out_dir) if out_dir is not None else None
    partial = None
    kept_scores: list[np.ndarray] = []
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        partial = out / ".scores.partial.f64"
        partial.unlink(missing_ok=True)
    n = 0
    shards = _shards(stream, shard_size, column, text_column, tokenizer, pid, max_length, pack, eos)
    for rows in progress(shards, desc="score[stream]"):
        s = _score(scorer, rows)
        if partial is not None:
            with open(partial, "ab") as f:  # written as it comes: a crash keeps the scored prefix
                f.write(s.astype("<f8", copy=False).tobytes())
                f.flush()
                os.fsync(f.fileno())
        else:
            kept_scores.append(s)
        if top is not None:
            top.push(_keys(s, tau, g), np.arange(n, n + s.size))
        n += s.size
    if n_rows is not None and n != n_rows:
        raise ValueError(f"n_rows={n_rows} but the stream held {n} rows")
    if k is not None and k > n:
        raise ValueError(f"k={k} but the stream held only {n} rows")
    if partial is not None:
        scores = np.memmap(partial, dtype="<f8", mode="r", shape=(n,)) if n else np.zeros(0)
    else:
        scores = np.concatenate(kept_scores) if kept_scores else np.zeros(0)
    if not np.isfinite(scores).all():
        raise ValueError("scores must be finite, got NaN or inf from the scorer")
    if top is None:  # ratio only: N is known now; one pass over the saved scores, same noise stream
        top = StreamingTopK(math.floor(ratio * n))
        for lo in range(0, n, shard_size):
            top.push(
                _keys(np.asarray(scores[lo : lo + shard_size]), tau, g),
                np.arange(lo, min(n, lo + shard_size)),
            )
    idx = top.indices()
    if out is None:
        return CorpusSelection(indices=idx, scores=scores, out_dir=None)
    tmp = out / ".scores.npy.tmp.npy"
    mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.float64, shape=(n,))
    for lo in range(0, n, 1 << 20):
        mm[lo : lo + (1 << 20)] = scores[lo : lo + (1 << 20)]
    mm.flush()
    del mm, scores
    os.replace(tmp, out / "scores.npy")
    partial.unlink(missing_ok=True)
    _atomic_npy(out / "indices.npy", idx)
    meta = dict(
        ratio=ratio, k=k, tau=tau, seed=seed, n=int(n), kept=int(len(idx)), pack=pack, max_length=max_length
    )
    atomic_write_json(out / "selection.json", meta)
    return CorpusSelection(indices=idx, scores=np.load(out / "scores.npy", mmap_mode="r"), out_dir=out)


def iter_selected(stream: Iterable, indices: np.ndarray) -> Iterator[Any]:
    """The rows of ``stream`` at ``indices`` (ascending positions, e.g. ``select_stream(...).indices`` with
    ``pack=False``), in order; stops reading once the last index is passed."""
    idx = np.unique(np.asarray(indices, dtype=np.int64))
    if idx.size and idx[0] < 0:
        raise ValueError(f"indices must be >= 0, got {int(idx[0])}")
    j = 0
    for pos, row in enumerate(stream):
        if j == idx.size:
            return
        if pos == idx[j]:
            yield row
            j += 1
