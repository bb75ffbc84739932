"""EMA attention scores (the paper's token-importance score, Algorithm 2): how much attention each cached token keeps receiving.

For a chunk of ``q`` queries with attention probabilities ``A`` (softmax rows):

* a token already in the cache (sequential EMA over the chunk's queries ``j = 0..q−1``)::

      s_k ← β^q · s_k + Σ_j (1−β) β^{q−1−j} A[j, k]

* a new token at chunk offset ``m`` (its initial score when inserted; the sum starts with its own query)::

      s_m = Σ_{j≥m} (1−β) β^{j−m} A[j, m]

  (the exponent counts from the key, not to the chunk end — the official implementation's convention).

Sinks are never scored. Scores are then reduced over query heads: per GQA group (one score per KV head) or over
all heads ("homogeneous heads": every KV head keeps the same tokens), with ``max`` (paper's scripts) or ``mean``.
"""

from __future__ import annotations

import math
import threading
from functools import lru_cache

import torch

HEAD_REDUCTIONS = ("max", "mean")
_SCRATCH = threading.local()  # new_token_scores' work buffer, one per thread


@lru_cache(maxsize=64)
def _weights(kind: str, q_len: int, beta: float, device, dtype) -> torch.Tensor:
    """Memoised EMA weight tensors (a strided prefill uses the same chunk length over and over)."""
    if kind == "query":
        e = torch.arange(q_len - 1, -1, -1, device=device, dtype=torch.float64)
        return ((1.0 - beta) * beta**e).to(dtype)
    j = torch.arange(q_len, device=device, dtype=torch.float64)
    d = j[:, None] - j[None, :]
    w = torch.where(
        d >= 0, (1.0 - beta) * beta ** d.clamp(min=0), torch.zeros((), dtype=torch.float64, device=device)
    )
    return w.to(dtype)


def ema_query_weights(q_len: int, beta: float, device=None, dtype=torch.float32) -> torch.Tensor:
    """``(q,)`` weights ``(1−β) β^{q−1−j}`` of query ``j`` in the EMA update of an already cached key."""
    return _weights("query", int(q_len), float(beta), torch.device(device or "cpu"), dtype)


def ema_new_token_weights(q_len: int, beta: float, device=None, dtype=torch.float32) -> torch.Tensor:
    """``(q, q)`` weights ``w[j, m] = (1−β) β^{j−m}`` for ``j ≥ m`` (0 above the diagonal)."""
    return _weights("new", int(q_len), float(beta), torch.device(device or "cpu"), dtype)


def cached_token_contribution(probs: torch.Tensor, beta: float) -> torch.Tensor:
    """``Σ_j (1−β) β^{q−1−j} A[j, k]`` for attention ``probs`` ``(..., q, K)`` → ``(..., K)``."""
    w = ema_query_weights(probs.shape[-2], beta, probs.device, probs.dtype)
    return torch.einsum("...jk,j->...k", probs, w)


def update_cached_scores(scores: torch.Tensor, probs: torch.Tensor, beta: float) -> torch.Tensor:
    """``β^q · s + Σ_j (1−β) β^{q−1−j} A[j, k]`` (``scores`` ``(..., K)``, ``probs`` ``(..., q, K)``)."""
    return beta ** probs.shape[-2] * scores + cached_token_contribution(probs, beta)


def _scratch(shape: torch.Size, like: torch.Tensor) -> torch.Tensor:
    """A per-thread work buffer of ``shape`` (reused across calls: no fresh pages for every layer and chunk)."""
    n = math.prod(shape)
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or buf.numel() < n or buf.dtype != like.dtype or buf.device != like.device:
        buf = _SCRATCH.buf = torch.empty(n, dtype=like.dtype, device=like.device)
    return buf[:n].view(shape)


def new_token_scores(probs_chunk: torch.Tensor, beta: float) -> torch.Tensor:
    """Initial scores of the chunk's own tokens, ``probs_chunk`` ``(..., q, q)`` (query j, key m) → ``(..., q)``."""
    w = ema_new_token_weights(probs_chunk.shape[-1], beta, probs_chunk.device, probs_chunk.dtype)
    if torch.is_grad_enabled() and probs_chunk.requires_grad:
        return (probs_chunk * w).sum(dim=-2)
    # the same product written into a reused buffer (the (…, q, q) temporary is as large as the chunk's attention)
    prod = torch.mul(
        probs_chunk, w, out=_scratch(torch.broadcast_shapes(probs_chunk.shape, w.shape), probs_chunk)
    )
    return prod.sum(dim=-2)


def reduce_heads(
    x: torch.Tensor, kv_heads: int, reduction: str = "max", homogeneous: bool = False
) -> torch.Tensor:
    """Reduce per-query-head scores ``(B, H_q, K)`` to ``(B, H_kv, K)``.

    ``homogeneous=False``: reduce over the ``H_q / H_kv`` query heads of each GQA group (one score per KV head).
    ``homogeneous=True``: reduce over all query heads and broadcast, so every KV head selects the same tokens.
    """
    if reduction not in HEAD_REDUCTIONS:
        raise ValueError(f"head_reduction must be one of {HEAD_REDUCTIONS}, got {reduction!r}")
    B, Hq, K = x.shape
    if Hq % kv_heads:
        raise ValueError(f"query heads ({Hq}) must be divisible by kv_heads ({kv_heads})")
    g = x.reshape(B, 1, Hq, K) if homogeneous else x.reshape(B, kv_heads, Hq // kv_heads, K)
    r = g.amax(dim=2) if reduction == "max" else g.mean(dim=2)
    return r.expand(B, kv_heads, K) if homogeneous else r
