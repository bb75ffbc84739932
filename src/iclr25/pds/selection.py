"""Gumbel-top-k selection and the corpus-scale filter (paper §2.3, "Data Selection").

Each instance gets the key

    key_n = ẑ_n / τ + g_n,        g_n = −log(−log u_n),  u_n ~ U(0, 1),                    (Gumbel-top-k)

and the ⌊r·N⌋ largest keys are kept, i.e. sampling without replacement with probability ∝ exp(ẑ_n / τ)
(τ = 0.1, r = 0.4 in the paper); kept instances stay in their original corpus order. τ = 0 is the exact
top-k. ``select_corpus`` scores a corpus shard by shard with any scorer and writes the kept subset (a token array,
a ``datasets.Dataset``, a ``list[list[int]]`` or a ``list[str]`` with its tokenizer, right-padded with the
tokenizer's pad id); under
``torchrun`` (an initialised ``torch.distributed`` process group) rank r scores shards r, r+W, … and the
scores are all-gathered, so every rank makes the same selection and rank 0 writes it.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from iclr25.common.io import atomic_write_json
from iclr25.common.progress import progress
from iclr25.common.seeding import torch_generator

from .pmp import _check_int_pad, tokenizer_pad_id


def gumbel_top_k_select(
    scores: torch.Tensor | np.ndarray, ratio: float, tau: float = 0.1, seed: int = 0
) -> torch.Tensor:
    """Indices (ascending, i.e. original order) of the ⌊ratio·N⌋ instances kept by Gumbel-top-k.

    ``tau = 0`` gives the exact top-k (ties broken by position). Same seed → same selection.
    """
    s = torch.as_tensor(scores).detach().to("cpu", torch.float64)
    if s.ndim != 1 or s.numel() == 0:
        raise ValueError(f"scores must be a non-empty 1-D array, got shape {tuple(s.shape)}")
    if not torch.isfinite(s).all():
        raise ValueError("scores must be finite, got NaN or inf")
    if not (isinstance(ratio, (int, float)) and 0 < ratio <= 1):
        raise ValueError(f"ratio must be in (0, 1], got {ratio!r}")
    if not (isinstance(tau, (int, float)) and tau >= 0):
        raise ValueError(f"tau must be >= 0, got {tau!r}")
    k = math.floor(ratio * s.numel())
    if tau == 0:
        key = s
    else:
        u = torch.rand(s.numel(), generator=torch_generator(seed), dtype=torch.float64)
        u = u.clamp(torch.finfo(torch.float64).tiny, 1.0 - torch.finfo(torch.float64).eps)
        key = s / tau - torch.log(-torch.log(u))  # ẑ/τ + Gumbel(0, 1)
    top = torch.sort(key, descending=True, stable=True).indices[:k]
    return top.sort().values


def random_select(n: int, ratio: float, seed: int = 0) -> torch.Tensor:
    """The conventional baseline: a uniform ⌊ratio·n⌋ subset, in original order."""
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if not (isinstance(ratio, (int, float)) and 0 < ratio <= 1):
        raise ValueError(f"ratio must be in (0, 1], got {ratio!r}")
    return torch.randperm(n, generator=torch_generator(seed))[: math.floor(ratio * n)].sort().values


# ---------------------------------------------------------------------------------------------------------
# corpus-scale selection
# ---------------------------------------------------------------------------------------------------------
Scorer = Callable[[np.ndarray], np.ndarray] | Any


@dataclass
class CorpusSelection:
    indices: np.ndarray  # (k,) kept rows, ascending
    scores: np.ndarray  # (N,) scorer output for every row
    out_dir: Path | None = None


def pad_token_rows(
    corpus: list,
    tokenizer: Any = None,
    pad_id: int | str = "auto",
    max_length: int | None = None,
) -> tuple[np.ndarray, int]:
    """A ``list[str]`` (encoded with ``tokenizer``) or ``list[list[int]]`` → right-padded int64 array (N, L).

    L = ``max_length`` (longer rows are truncated on the right) or the longest row. The pad id is
    ``tokenizer.pad_token_id`` for ``pad_id='auto'`` (``ValueError`` when the tokenizer has none or no tokenizer is
    given); an explicit ``pad_id`` must agree with the tokenizer's. Returns (rows, pad_id).
    """
    if not isinstance(corpus, (list, tuple)) or len(corpus) == 0:
        raise ValueError(
            f"corpus must be a non-empty list of strings or of token-id lists, got {type(corpus).__name__}"
        )
    if max_length is not None and (
        isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1
    ):
        raise ValueError(f"max_length must be a positive int or None, got {max_length!r}")
    if all(isinstance(x, str) for x in corpus):
        if tokenizer is None:
            raise ValueError(
                "corpus is a list[str]: pass tokenizer=<the tokenizer the scorer was trained with>"
            )
        rows = tokenizer(list(corpus))["input_ids"]
    elif all(isinstance(x, (list, tuple, np.ndarray)) for x in corpus):
        rows = corpus
    else:
        raise ValueError("corpus must be a list of strings or a list of token-id lists, not a mix of both")
    if pad_id == "auto":
        if tokenizer is None:
            raise ValueError(
                "pad_id='auto' needs tokenizer=... to pad a list[list[int]] corpus; pass pad_id=<int> instead"
            )
        pid = tokenizer_pad_id(tokenizer)
    else:
        pid = _check_int_pad(pad_id)
        if tokenizer is not None and getattr(tokenizer, "pad_token_id", None) not in (None, pid):
            raise ValueError(f"pad_id={pid} contradicts tokenizer.pad_token_id={tokenizer.pad_token_id}")
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    if (lengths == 0).any():
        raise ValueError(f"corpus rows must be non-empty; row {int(np.argmin(lengths))} has no tokens")
    flat = np.concatenate([np.asarray(r).reshape(-1) for r in rows])
    if not (np.issubdtype(flat.dtype, np.integer) or flat.size == 0) or (flat < 0).any():
        raise ValueError(f"corpus token ids must be non-negative integers, got dtype {flat.dtype}")
    L = int(lengths.max()) if max_length is None else max_length
    out = np.full((len(rows), L), pid, dtype=np.int64)  # (N, L) right-padded
    keep = np.minimum(lengths, L)
    src_mask = np.arange(int(lengths.max()))[None, :] < lengths[:, None]  # (N, Lmax) real tokens
    src = np.zeros(src_mask.shape, dtype=np.int64)
    src[src_mask] = flat
    out_mask = np.arange(L)[None, :] < keep[:, None]
    out[out_mask] = src[:, :L][out_mask]
    return out, pid


def _as_corpus(corpus: Any, scorer: Any, tokenizer: Any, pad_id: int | str, max_length: int | None) -> Any:
    """Lists become a padded token array; the scorer's own pad id (if it has one) must equal the corpus pad id."""
    if not isinstance(corpus, (list, tuple)):
        return corpus
    rows, pid = pad_token_rows(corpus, tokenizer, pad_id, max_length)
    spid = getattr(scorer, "pad_id", None)
    if hasattr(scorer, "pad_id") and spid != pid:
        raise ValueError(
            f"scorer.pad_id={spid!r} but the corpus is padded with {pid} (the tokenizer's pad id); build the scorer "
            f"with tokenizer=... (or pad_id={pid}) so padding is not scored as content"
        )
    return rows


def _n_rows(corpus: Any) -> int:
    return len(corpus)


def _rows(corpus: Any, lo: int, hi: int, column: str) -> np.ndarray:
    if isinstance(corpus, torch.Tensor):
        return corpus[lo:hi].cpu().numpy()
    if isinstance(corpus, np.ndarray):
        return np.asarray(corpus[lo:hi])
    try:  # a datasets.Dataset (fixed-length packed instances, like the released pipeline's)
        return np.asarray(corpus[lo:hi][column])
    except (TypeError, KeyError) as e:
        raise ValueError(
            f"corpus must be a 2-D np.ndarray/memmap, a torch.Tensor or a datasets.Dataset with column {column!r}, "
            f"got {type(corpus).__name__}"
        ) from e


def _score(scorer: Scorer, x: np.ndarray) -> np.ndarray:
    fn = scorer.predict if hasattr(scorer, "predict") else scorer
    out = np.asarray(fn(x), dtype=np.float64).reshape(-1)
    if out.shape[0] != x.shape[0]:
        raise ValueError(f"scorer returned {out.shape[0]} scores for a shard of {x.shape[0]} rows")
    return out


def _dist() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def score_corpus(
    corpus: Any,
    scorer: Scorer,
    shard_size: int = 4096,
    column: str = "input_ids",
    *,
    tokenizer: Any = None,
    pad_id: int | str = "auto",
    max_length: int | None = None,
) -> np.ndarray:
    """Scores of every row, shard by shard; DDP-aware (each rank scores its shards, then all-gather).

    List corpora (``list[str]`` with ``tokenizer``, ``list[list[int]]``) are padded by :func:`pad_token_rows`.
    """
    if not isinstance(shard_size, int) or shard_size < 1:
        raise ValueError(f"shard_size must be a positive int, got {shard_size!r}")
    corpus = _as_corpus(corpus, scorer, tokenizer, pad_id, max_length)
    n = _n_rows(corpus)
    rank, world = _dist()
    n_shards = math.ceil(n / shard_size)
    mine = {}
    for i in progress(range(rank, n_shards, world), desc=f"score[rank {rank}]"):
        lo, hi = i * shard_size, min(n, (i + 1) * shard_size)
        mine[i] = _score(scorer, _rows(corpus, lo, hi, column))
    parts: dict[int, np.ndarray] = dict(mine)
    if world > 1:
        gathered: list[dict[int, np.ndarray] | None] = [None] * world
        dist.all_gather_object(gathered, mine)
        parts = {i: v for d in gathered if d for i, v in d.items()}
    if sorted(parts) != list(range(n_shards)):
        raise RuntimeError(f"missing shards after gather: have {sorted(parts)}, expected {n_shards}")
    return np.concatenate([parts[i] for i in range(n_shards)]) if n_shards else np.zeros(0)


def select_corpus(
    corpus: Any,
    scorer: Scorer,
    ratio: float = 0.4,
    tau: float = 0.1,
    seed: int = 0,
    out_dir: str | Path | None = None,
    shard_size: int = 4096,
    column: str = "input_ids",
    *,
    tokenizer: Any = None,
    pad_id: int | str = "auto",
    max_length: int | None = None,
) -> CorpusSelection:
    """Score ``corpus`` with ``scorer`` (``.predict(rows)`` or a callable on an (n, L) int array), keep
    ⌊ratio·N⌋ rows by Gumbel-top-k, and (with ``out_dir``) write ``scores.npy``, ``indices.npy`` and the kept
    subset: ``selected.npy`` for array corpora (a memmap, filled shard by shard) or a ``datasets`` folder
    ``selected/`` for a Dataset. Runs unchanged under ``torchrun`` (DDP inference; rank 0 writes).

    ``corpus`` may also be a ``list[str]`` (encoded with ``tokenizer``) or a ``list[list[int]]``: rows are
    right-padded to the longest row (or truncated/padded to ``max_length``) with ``tokenizer.pad_token_id``
    (``pad_id='auto'``) or an explicit ``pad_id``; a scorer with a different ``pad_id`` raises ``ValueError``.
    ``selected.npy`` then holds the padded kept rows, and ``selected_texts.json`` the kept strings.
    """
    texts = (
        list(corpus) if isinstance(corpus, (list, tuple)) and corpus and isinstance(corpus[0], str) else None
    )
    corpus = _as_corpus(corpus, scorer, tokenizer, pad_id, max_length)
    scores = score_corpus(corpus, scorer, shard_size, column)
    idx = gumbel_top_k_select(scores, ratio, tau, seed).numpy()
    rank, world = _dist()
    out = Path(out_dir) if out_dir is not None else None
    if out is not None and rank == 0:
        _write_selection(corpus, idx, scores, out, shard_size, column, dict(ratio=ratio, tau=tau, seed=seed))
        if texts is not None:
            atomic_write_json(out / "selected_texts.json", [texts[i] for i in idx.tolist()])
    if world > 1:
        dist.barrier()
    return CorpusSelection(indices=idx, scores=scores, out_dir=out)


def _write_selection(corpus, idx, scores, out: Path, shard_size: int, column: str, meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    _atomic_npy(out / "scores.npy", scores)
    _atomic_npy(out / "indices.npy", idx)
    if isinstance(corpus, (np.ndarray, torch.Tensor)):
        first = _rows(corpus, 0, 1, column)
        tmp = out / ".selected.npy.tmp"
        mm = np.lib.format.open_memmap(tmp, mode="w+", dtype=first.dtype, shape=(len(idx),) + first.shape[1:])
        for j in range(0, len(idx), shard_size):
            rows = idx[j : j + shard_size]
            mm[j : j + len(rows)] = (
                corpus[torch.as_tensor(rows)].cpu().numpy()
                if isinstance(corpus, torch.Tensor)
                else corpus[rows]
            )
        mm.flush()
        del mm
        os.replace(tmp, out / "selected.npy")
    else:
        tmp = out / ".selected.tmp"
        if tmp.exists():
            shutil.rmtree(tmp)
        corpus.select(idx.tolist()).save_to_disk(str(tmp))
        if (out / "selected").exists():
            shutil.rmtree(out / "selected")
        os.replace(tmp, out / "selected")
    atomic_write_json(out / "selection.json", {**meta, "n": int(len(scores)), "kept": int(len(idx))})


def _atomic_npy(path: Path, arr: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.tmp.npy")
    np.save(tmp, arr)
    os.replace(tmp, path)
