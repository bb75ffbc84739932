"""Gumbel-top-k selection and the corpus-scale filter (paper §2.3, "Data Selection").

Each instance gets the key

    key_n = ẑ_n / τ + g_n,        g_n = −log(−log u_n),  u_n ~ U(0, 1),                    (Gumbel-top-k)

and the ⌊r·N⌋ largest keys are kept, i.e. sampling without replacement with probability ∝ exp(ẑ_n / τ)
(τ = 0.1, r = 0.4 in the paper); kept instances stay in their original corpus order. τ = 0 is the exact
top-k. ``select_corpus`` scores a corpus shard by shard with any scorer and writes the kept subset; under
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
    corpus: Any, scorer: Scorer, shard_size: int = 4096, column: str = "input_ids"
) -> np.ndarray:
    """Scores of every row, shard by shard; DDP-aware (each rank scores its shards, then all-gather)."""
    if not isinstance(shard_size, int) or shard_size < 1:
        raise ValueError(f"shard_size must be a positive int, got {shard_size!r}")
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
) -> CorpusSelection:
    """Score ``corpus`` with ``scorer`` (``.predict(rows)`` or a callable on an (n, L) int array), keep
    ⌊ratio·N⌋ rows by Gumbel-top-k, and (with ``out_dir``) write ``scores.npy``, ``indices.npy`` and the kept
    subset: ``selected.npy`` for array corpora (a memmap, filled shard by shard) or a ``datasets`` folder
    ``selected/`` for a Dataset. Runs unchanged under ``torchrun`` (DDP inference; rank 0 writes).
    """
    scores = score_corpus(corpus, scorer, shard_size, column)
    idx = gumbel_top_k_select(scores, ratio, tau, seed).numpy()
    rank, world = _dist()
    out = Path(out_dir) if out_dir is not None else None
    if out is not None and rank == 0:
        _write_selection(corpus, idx, scores, out, shard_size, column, dict(ratio=ratio, tau=tau, seed=seed))
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
