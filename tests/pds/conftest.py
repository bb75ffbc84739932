"""Shared fixtures for the PDS tests: a float64 transformer without float32 internals, tiny token data."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn


class TinyTransformer(nn.Module):
    """One pre-norm causal self-attention block + MLP, all in the parameters' dtype (no float32 internals)."""

    def __init__(self, vocab: int = 12, d: int = 16, heads: int = 2, max_len: int = 16):
        super().__init__()
        self.heads = heads
        self.emb = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(max_len, d)
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
        self.lnf = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        b, n = ids.shape
        h = self.emb(ids) + self.pos(torch.arange(n, device=ids.device))
        q, k, v = self.qkv(self.ln1(h)).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        causal = torch.ones(n, n, dtype=torch.bool, device=ids.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(-1)
        h = h + self.proj((att @ v).transpose(1, 2).reshape(b, n, -1))
        h = h + self.mlp(self.ln2(h))
        return self.head(self.lnf(h))


@pytest.fixture
def tiny_f64():
    torch.manual_seed(0)
    return TinyTransformer().double()


@pytest.fixture
def toy_data():
    g = torch.Generator().manual_seed(1)
    vocab, L = 12, 9
    return {
        "proxy": torch.randint(0, vocab, (7, L), generator=g),
        "batches": torch.randint(0, vocab, (5, 4, L), generator=g),
        "dev": torch.randint(0, vocab, (6, L), generator=g),
    }
