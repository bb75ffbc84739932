"""DSIR baseline (Xie et al., 2023) through the PyPI ``data-selection`` package (``HashedNgramDSIR``).

DSIR's importance weight of a raw example x is log w(x) = Σ_j c_j(x) (log p_tgt(j) − log p_raw(j)) over
hashed unigram+bigram buckets j; resampling adds Gumbel noise to log w and keeps the top k (τ = 1 in
``gumbel_top_k_select``). Token-id rows are rendered as words ``t<id>`` so the package's word tokenizer and
hashing apply unchanged; the package reads/writes jsonl in a temporary folder, run sequentially.
``backend="numpy"`` computes the same estimator vectorised over token ids (bigram ids hashed
multiplicatively instead of by sha256 of the text), for corpora where the package's per-n-gram Python
hashing is too slow; without bucket collisions both give identical weights.
"""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path

import numpy as np
import torch


def _render(tokens: np.ndarray | torch.Tensor, pad_id: int | None) -> list[str]:
    a = tokens.cpu().numpy() if isinstance(tokens, torch.Tensor) else np.asarray(tokens)
    if a.ndim != 2:
        raise ValueError(f"tokens must be a 2-D integer array (N, L), got shape {a.shape}")
    return [" ".join(f"t{int(t)}" for t in row if pad_id is None or t != pad_id) for row in a]


def dsir_log_weights(
    raw: np.ndarray | torch.Tensor,
    target: np.ndarray | torch.Tensor,
    ngrams: int = 2,
    num_buckets: int = 10000,
    pad_id: int | None = 0,
    workdir: str | Path | None = None,
    backend: str = "package",
) -> np.ndarray:
    """DSIR log-importance weights of every raw row for the target rows (``data_selection.HashedNgramDSIR``).

    log w(x) = Σ_j c_j(x) (log(p_tgt(j) + 1e-8) − log(p_raw(j) + 1e-8)), j over hashed n-gram buckets.
    """
    if backend not in ("package", "numpy"):
        raise ValueError(f"backend must be 'package' or 'numpy', got {backend!r}")
    if ngrams not in (1, 2) and backend == "numpy":
        raise ValueError(f"ngrams must be 1 or 2 for backend='numpy', got {ngrams!r}")
    if backend == "numpy":
        return _numpy_log_weights(raw, target, ngrams, num_buckets, pad_id)
    try:
        from data_selection import HashedNgramDSIR
    except ImportError as e:  # pragma: no cover - optional dependency
        raise ImportError(
            "the DSIR baseline needs the PyPI package 'data-selection' (pip install data-selection)"
        ) from e
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        d = Path(d)
        for name, rows in (("raw", raw), ("target", target)):
            with open(d / f"{name}.jsonl", "w") as f:
                for text in _render(rows, pad_id):
                    f.write(json.dumps({"text": text}) + "\n")
        with contextlib.redirect_stderr(io.StringIO()):  # the package's tqdm bars
            dsir = HashedNgramDSIR(
                [str(d / "raw.jsonl")],
                [str(d / "target.jsonl")],
                cache_dir=str(d / "cache"),
                num_proc=1,
                ngrams=ngrams,
                num_buckets=num_buckets,
                min_example_length=0,
            )
            dsir.fit_importance_estimator(num_tokens_to_fit="all")
            dsir.compute_importance_weights()
        return np.load(d / "cache" / "log_importance_weights" / "0.npy").astype(np.float64)


def _buckets(a: np.ndarray, V: int, ngrams: int, num_buckets: int, pad_id: int | None):
    """(N, L + L−1) bucket ids of every unigram and bigram of each row, and their validity mask."""
    valid = np.ones_like(a, dtype=bool) if pad_id is None else a != pad_id
    ids, mask = [a], [valid]
    if ngrams == 2:
        ids.append(V + a[:, :-1] * V + a[:, 1:])  # bigram (u, v) → V + u·V + v
        mask.append(valid[:, :-1] & valid[:, 1:])
    return (np.concatenate(ids, 1) * 2654435761) % num_buckets, np.concatenate(mask, 1)


def _numpy_log_weights(raw, target, ngrams: int, num_buckets: int, pad_id: int | None) -> np.ndarray:
    r = (raw.cpu().numpy() if isinstance(raw, torch.Tensor) else np.asarray(raw)).astype(np.int64)
    t = (target.cpu().numpy() if isinstance(target, torch.Tensor) else np.asarray(target)).astype(np.int64)
    if r.ndim != 2 or t.ndim != 2:
        raise ValueError(f"raw and target must be 2-D integer arrays, got shapes {r.shape} and {t.shape}")
    V = int(max(r.max(), t.max())) + 1
    b_raw, m_raw = _buckets(r, V, ngrams, num_buckets, pad_id)
    b_tgt, m_tgt = _buckets(t, V, ngrams, num_buckets, pad_id)
    p_raw = np.bincount(b_raw[m_raw], minlength=num_buckets).astype(np.float64)
    p_tgt = np.bincount(b_tgt[m_tgt], minlength=num_buckets).astype(np.float64)
    log_diff = np.log(p_tgt / p_tgt.sum() + 1e-8) - np.log(p_raw / p_raw.sum() + 1e-8)
    return np.where(m_raw, log_diff[b_raw], 0.0).sum(1)  # Σ_j c_j(x) log_diff_j
