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

from .packing import DatasetRows, pack_token_rows, pad_token_rows


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


def _check_scorer_pad(scorer: Any, pid: int) -> None:
    """The scorer's own pad id (if it has one) must equal the id the corpus rows are padded with."""
    spid = getattr(scorer, "pad_id", None)
    if hasattr(scorer, "pad_id") and spid != pid:
        raise ValueError(
            f"scorer.pad_id={spid!r} but the corpus is padded with {pid} (the tokenizer's pad id); build the scorer "
            f"with tokenizer=... (or pad_id={pid}) so padding is not scored as content"
        )


def _fixed_length(dataset: Any, column: str) -> bool:
    """Whether every row of a ``datasets.Dataset`` column has one length (Arrow list lengths, no Python loop)."""
    import pyarrow.compute as pc

    col = dataset.data.column(column)
    try:
        lengths = pc.list_value_length(col)
    except Exception:  # not a list column (e.g. a fixed-size tensor feature): read as is
        return True
    mn, mx = pc.min(lengths).as_py(), pc.max(lengths).as_py()
    return mn is None or mn == mx


def _as_corpus(
    corpus: Any,
    scorer: Any,
    tokenizer: Any,
    pad_id: int | str,
    max_length: int | None,
    column: str = "input_ids",
    text_column: str = "text",
    pack: bool = False,
) -> Any:
    """What the shard loop reads: arrays and equal-length token Datasets as they are; lists, text or ragged
    Datasets as right-padded rows per document (:class:`~.packing.DatasetRows` for a Dataset, read shard by shard);
    with ``pack=True`` documents packed into ``max_length`` rows. The scorer's pad id must be the corpus pad id."""
    if not isinstance(pack, bool):
        raise ValueError(f"pack must be a bool, got {pack!r}")
    is_list = isinstance(corpus, (list, tuple))
    is_dataset = not is_list and hasattr(corpus, "column_names") and hasattr(corpus, "select")
    if pack:
        if not (is_list or is_dataset):
            raise ValueError(
                f"pack=True packs documents (a list or a datasets.Dataset of text / token-id lists); a "
                f"{type(corpus).__name__} corpus is already rows of ids"
            )
        rows, pid = pack_token_rows(
            corpus, tokenizer, max_length, pad_id=pad_id, column=column, text_column=text_column
        )
        _check_scorer_pad(scorer, pid)
        return rows
    if is_list:
        rows, pid = pad_token_rows(corpus, tokenizer, pad_id, max_length)
        _check_scorer_pad(scorer, pid)
        return rows
    if is_dataset:
        cols = corpus.column_names
        if column in cols and max_length is None and _fixed_length(corpus, column):
            return corpus  # equal-length ids (the released pipeline's packed instances): read as they are
        view = DatasetRows(
            corpus, column=column, text_column=text_column, tokenizer=tokenizer, pad_id=pad_id,
            max_length=max_length,
        )  # fmt: skip
        _check_scorer_pad(scorer, view.pad_id)
        return view
    return corpus


def _n_rows(corpus: Any) -> int:
    return len(corpus)


def _rows(corpus: Any, lo: int, hi: int, column: str) -> np.ndarray:
    if isinstance(corpus, torch.Tensor):
        return corpus[lo:hi].cpu().numpy()
    if isinstance(corpus, np.ndarray):
        return np.asarray(corpus[lo:hi])
    if isinstance(corpus, DatasetRows):
        return corpus.rows(lo, hi)
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
    text_column: str = "text",
    pack: bool = False,
) -> np.ndarray:
    """Scores of every row, shard by shard; DDP-aware (each rank scores its shards, then all-gather).

    List corpora (``list[str]`` with ``tokenizer``, ``list[list[int]]``) are padded by :func:`pad_token_rows`; a
    ``datasets.Dataset`` of text (``text_column``) or of ragged ids (``column``) is tokenised / padded shard by shard
    (one row per document); ``pack=True`` packs documents into ``max_length`` rows (:mod:`~.packing`).
    """
    if not isinstance(shard_size, int) or shard_size < 1:
        raise ValueError(f"shard_size must be a positive int, got {shard_size!r}")
    corpus = _as_corpus(corpus, scorer, tokenizer, pad_id, max_length, column, text_column, pack)
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
    text_column: str = "text",
    pack: bool = False,
) -> CorpusSelection:
    """Score ``corpus`` with ``scorer`` (``.predict(rows)`` or a callable on an (n, L) int array), keep
    ⌊ratio·N⌋ rows by Gumbel-top-k, and (with ``out_dir``) write ``scores.npy``, ``indices.npy`` and the kept
    subset: ``selected.npy`` for array corpora (a memmap, filled shard by shard) or a ``datasets`` folder
    ``selected/`` for a Dataset. Runs unchanged under ``torchrun`` (DDP inference; rank 0 writes).

    ``corpus`` may also be a ``list[str]`` (encoded with ``tokenizer``) or a ``list[list[int]]``: rows are
    right-padded to the longest row (or truncated/padded to ``max_length``) with ``tokenizer.pad_token_id``
    (``pad_id='auto'``) or an explicit ``pad_id``; a scorer with a different ``pad_id`` raises ``ValueError``.
    ``selected.npy`` then holds the padded kept rows, and ``selected_texts.json`` the kept strings.

    A ``datasets.Dataset`` of text (``text_column``, tokenised with ``tokenizer``) or of ragged token ids
    (``column``) is scored one row per document, tokenised and padded shard by shard (to ``max_length`` or the
    shard's longest document); ``selected/`` then holds the kept original rows (texts included). ``pack=True``
    instead packs the documents (EOS after each) into rows of ``max_length`` tokens and selects packed rows
    (``selected.npy``). A streaming ``IterableDataset``: :func:`~.stream.select_stream`.
    """
    texts = (
        list(corpus)
        if isinstance(corpus, (list, tuple)) and corpus and isinstance(corpus[0], str) and not pack
        else None
    )
    corpus = _as_corpus(corpus, scorer, tokenizer, pad_id, max_length, column, text_column, pack)
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
        ds = corpus.dataset if isinstance(corpus, DatasetRows) else corpus
        ds.select(idx.tolist()).save_to_disk(str(tmp))
        if (out / "selected").exists():
            shutil.rmtree(out / "selected")
        os.replace(tmp, out / "selected")
    atomic_write_json(out / "selection.json", {**meta, "n": int(len(scores)), "kept": int(len(idx))})


def _atomic_npy(path: Path, arr: np.ndarray) -> None:
    tmp = path.with_name(f".{path.name}.tmp.npy")
    np.save(tmp, arr)
    os.replace(tmp, path)
