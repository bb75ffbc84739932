"""DSIR baseline (Xie et al., 2023) through the PyPI ``data-selection`` package (``HashedNgramDSIR``).

DSIR's importance weight of a raw example x is log w(x) = Σ_j c_j(x) (log p_tgt(j) − log p_raw(j)) over
hashed unigram+bigram buckets j; resampling adds Gumbel noise to log w and keeps the top k (τ = 1 in
``gumbel_top_k_select``). Token-id rows are rendered as words ``t<id>`` so the package's word tokenizer and
hashing apply unchanged; the package reads/writes jsonl in a temporary folder, run sequentially.
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
) -> np.ndarray:
    """DSIR log-importance weights of every raw row for the target rows (``data_selection.HashedNgramDSIR``)."""
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
