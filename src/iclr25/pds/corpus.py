"""The generated pre-training corpus of the reproduction (README, "Reproduction"): a target Markov chain and noise sources.

Sources of the pool: ``clean`` (the target chain: each symbol has ``successors`` likely next symbols holding
``top_mass`` of the probability), ``noisy`` (clean sequences with a fraction ``noise`` of symbols replaced
uniformly at random), ``other`` (a *different* chain of the same kind) and ``repeat`` (degenerate 2-symbol
repeats ``a b a b …``). The downstream set (J, the paper's LIMA) and the test set are further clean sequences.
Rows are ``[BOS] + seq_len`` token ids; symbols map to ids 4.. (0..3 are pad/bos/eos/unk as in
``iclr25.common.lm``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from iclr25.common.seeding import torch_generator

SOURCES = ("clean", "noisy", "other", "repeat")
N_SPECIAL = 4
BOS = 1


@dataclass
class MarkovCorpus:
    pool: torch.Tensor  # (N, L+1) the unfiltered pre-training corpus, sources interleaved at random
    source: torch.Tensor  # (N,) index into SOURCES
    dev: torch.Tensor  # (M, L+1) downstream set defining J
    test: torch.Tensor  # (K, L+1) held-out clean sequences
    vocab_size: int  # including the 4 specials

    def source_fractions(self, idx: torch.Tensor | None = None) -> dict[str, float]:
        s = self.source if idx is None else self.source[idx]
        cnt = torch.bincount(s, minlength=len(SOURCES)).double() / max(1, s.numel())
        return {name: float(c) for name, c in zip(SOURCES, cnt)}


def sparse_chain(n_symbols: int, successors: int, top_mass: float, g: torch.Generator) -> torch.Tensor:
    """(S, S) transition matrix: ``successors`` random next symbols share ``top_mass``, the rest the remainder."""
    P = torch.full((n_symbols, n_symbols), (1 - top_mass) / (n_symbols - successors), dtype=torch.float64)
    top = torch.rand(n_symbols, n_symbols, generator=g).argsort(dim=1)[:, :successors]  # (S, successors)
    P.scatter_(1, top, top_mass / successors)
    return P


def sample_chain(P: torch.Tensor, n: int, length: int, g: torch.Generator) -> torch.Tensor:
    """n sequences of ``length`` symbols (vectorised over sequences; the loop runs over positions)."""
    x = torch.empty(n, length, dtype=torch.long)
    x[:, 0] = torch.randint(0, P.shape[0], (n,), generator=g)
    for i in range(1, length):
        x[:, i] = torch.multinomial(P[x[:, i - 1]], 1, generator=g).squeeze(1)
    return x


def make_markov_corpus(
    n_pool: int = 12000,
    n_dev: int = 128,
    n_test: int = 512,
    n_symbols: int = 48,
    seq_len: int = 32,
    mix: tuple[float, float, float, float] = (0.3, 0.3, 0.2, 0.2),
    successors: int = 3,
    top_mass: float = 0.9,
    noise: float = 0.5,
    seed: int = 0,
) -> MarkovCorpus:
    """Generate the pool/dev/test sets (same seed → same corpus)."""
    if len(mix) != len(SOURCES) or any(m < 0 for m in mix) or abs(sum(mix) - 1) > 1e-9:
        raise ValueError(f"mix must be {len(SOURCES)} non-negative fractions summing to 1, got {mix!r}")
    if not 1 <= successors < n_symbols:
        raise ValueError(f"successors must be in [1, n_symbols), got {successors!r}")
    if not 0 <= noise <= 1:
        raise ValueError(f"noise must be in [0, 1], got {noise!r}")
    for name, v in (("n_pool", n_pool), ("n_dev", n_dev), ("n_test", n_test), ("seq_len", seq_len)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    g = torch_generator(seed)
    target = sparse_chain(n_symbols, successors, top_mass, g)
    other = sparse_chain(n_symbols, successors, top_mass, g)
    counts = [int(round(m * n_pool)) for m in mix]
    counts[0] += n_pool - sum(counts)
    clean = sample_chain(target, counts[0], seq_len, g)
    noisy = sample_chain(target, counts[1], seq_len, g)
    flip = torch.rand(noisy.shape, generator=g) < noise
    noisy = torch.where(flip, torch.randint(0, n_symbols, noisy.shape, generator=g), noisy)
    oth = sample_chain(other, counts[2], seq_len, g)
    ab = torch.randint(0, n_symbols, (counts[3], 2), generator=g)
    rep = ab[:, torch.arange(seq_len) % 2]  # a b a b …
    pool = torch.cat([clean, noisy, oth, rep])
    source = torch.cat([torch.full((c,), i, dtype=torch.long) for i, c in enumerate(counts)])
    perm = torch.randperm(n_pool, generator=g)
    dev = sample_chain(target, n_dev, seq_len, g)
    test = sample_chain(target, n_test, seq_len, g)

    def rows(x: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.full((x.shape[0], 1), BOS, dtype=torch.long), x + N_SPECIAL], dim=1)

    return MarkovCorpus(rows(pool[perm]), source[perm], rows(dev), rows(test), n_symbols + N_SPECIAL)
