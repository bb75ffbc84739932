"""The small world of the reproduction: subjects with unique keys, relational facts, an in-context associative
recall task (reasoning that needs no stored fact) and Markov-chain generic text, with a word-level tokenizer so
the library runs on it through its ordinary string API."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from iclr25.common.fields import bounded, check_fields
from iclr25.common.lm import SPECIAL_TOKENS

from .evaluation import associative_recall_facts
from .facts import Fact


@dataclass(frozen=True)
class WorldConfig:
    subjects: int = bounded(300, lo=1)
    first_names: int = bounded(20, lo=1)  # subject = first token (shared) + a unique last token
    relations: int = bounded(4, lo=1)
    objects: int = bounded(40, lo=1)
    recall_keys: int = bounded(16, lo=1)
    recall_values: int = bounded(16, lo=1)
    recall_pairs: int = bounded(4, lo=1)
    generic_states: int = bounded(32, lo=1)
    generic_len: int = bounded(12, lo=1)
    # prompt order: "s₁ s₂ r" (subject first) or "r s₁ s₂" (relation first, like "The capital of | France" — the
    # subject's last token is the prompt's last token, where the answer is produced)
    relation_first: bool = bounded(False)
    seed: int = bounded(0, lo=0)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the rule across fields
        if self.recall_pairs > self.recall_keys:
            raise ValueError(
                f"recall_pairs ({self.recall_pairs}) must be <= recall_keys ({self.recall_keys})"
            )


class World:
    def __init__(self, cfg: WorldConfig):
        if not isinstance(cfg, WorldConfig):
            raise ValueError(f"cfg must be a WorldConfig, got {type(cfg).__name__}")
        self.cfg = cfg
        rng = np.random.default_rng(cfg.seed)
        self.first = [f"f{i}" for i in range(cfg.first_names)]
        self.last = [f"u{i}" for i in range(cfg.subjects)]
        self.rel = [f"r{i}" for i in range(cfg.relations)]
        self.obj = [f"o{i}" for i in range(cfg.objects)]
        self.rk = [f"k{i}" for i in range(cfg.recall_keys)]
        self.rv = [f"v{i}" for i in range(cfg.recall_values)]
        self.gen = [f"g{i}" for i in range(cfg.generic_states)]
        words = self.first + self.last + self.rel + self.obj + self.rk + self.rv + self.gen + ["Q"]
        self.vocab = list(SPECIAL_TOKENS) + words
        self.subject_names = [f"{self.first[rng.integers(cfg.first_names)]} {u}" for u in self.last]
        self.answers = rng.integers(0, cfg.objects, (cfg.subjects, cfg.relations))  # (S, R)
        # generic text: a sparse Markov chain (3 successors per state)
        G = cfg.generic_states
        self.trans = np.zeros((G, G))
        for s in range(G):
            nxt = rng.choice(G, 3, replace=False)
            self.trans[s, nxt] = rng.dirichlet(np.ones(3))
        self.tokenizer = self._tokenizer()

    def _tokenizer(self):
        from tokenizers import Tokenizer, models, pre_tokenizers
        from transformers import PreTrainedTokenizerFast

        tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(self.vocab)}, unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
        return PreTrainedTokenizerFast(
            tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
        )

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def facts(self, subjects=None) -> list[Fact]:
        subjects = range(self.cfg.subjects) if subjects is None else list(subjects)
        bad = [s for s in subjects if isinstance(s, bool) or not isinstance(s, (int, np.integer))
               or not 0 <= s < self.cfg.subjects]  # fmt: skip
        if bad:
            raise ValueError(f"subjects must be indices in [0, {self.cfg.subjects}), got {bad[:5]}")
        return [
            Fact(
                self._prompt(self.subject_names[s], self.rel[r]),
                f" {self.obj[self.answers[s, r]]}",
                self.subject_names[s],
            )
            for s in subjects
            for r in range(self.cfg.relations)
        ]

    def _prompt(self, subject: str, relation: str) -> str:
        return f"{relation} {subject}" if self.cfg.relation_first else f"{subject} {relation}"

    def recall(self, n: int, seed: int) -> list[Fact]:
        return associative_recall_facts(self.rk, self.rv, n, self.cfg.recall_pairs, seed=seed)

    def generic(self, n: int, seed: int) -> list[str]:
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"n must be an int >= 1, got {n!r}")
        rng = np.random.default_rng(seed)
        G, L = self.cfg.generic_states, self.cfg.generic_len
        seq = np.zeros((n, L), dtype=int)
        seq[:, 0] = rng.integers(0, G, n)
        cum = self.trans.cumsum(1)
        for t in range(1, L):  # vectorised over sequences
            u = rng.random(n)[:, None]
            seq[:, t] = (u > cum[seq[:, t - 1]]).sum(1).clip(max=G - 1)
        return [" ".join(self.gen[i] for i in row) for row in seq]

    # -- training data -----------------------------------------------------------------------------
    def seq_len(self) -> int:
        return max(self.cfg.generic_len, 2 * self.cfg.recall_pairs + 4, 5)

    def encode(self, texts: list[str], answer_only_from: list[int] | None = None):
        """(ids, labels): right-padded to :meth:`seq_len`, <eos> appended, labels −100 on padding and, for rows
        with ``answer_only_from[i] >= 0``, on every token before that position."""
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        L = self.seq_len()
        x = torch.zeros(len(ids), L, dtype=torch.long)
        y = torch.full((len(ids), L), -100, dtype=torch.long)
        eos = self.tokenizer.eos_token_id
        for i, r in enumerate(ids):
            r = (r + [eos])[:L]
            x[i, : len(r)] = torch.tensor(r)
            y[i, : len(r)] = torch.tensor(r)
            if answer_only_from is not None and answer_only_from[i] > 0:
                y[i, : answer_only_from[i]] = -100
        return x, y

    def fact_rows(self, facts: list[Fact]):
        return self.encode([f.prompt + f.target for f in facts])

    def recall_rows(self, n: int, seed: int, length: int | None = None):
        """Multi-query recall training rows: ``k₁ v₁ … k_p v_p`` then queried pairs ``k_j v_j`` up to the row
        length; every queried value is a label (the evaluation prompt ``k₁ v₁ … k_p v_p k_j`` is a prefix)."""
        rng = np.random.default_rng(seed)
        p, L = self.cfg.recall_pairs, length or self.seq_len()
        K, V = len(self.rk), len(self.rv)
        kidx = np.argsort(rng.random((n, K)), axis=1)[:, :p]
        vidx = rng.integers(0, V, (n, p))
        nq = (L - 2 * p) // 2
        q = rng.integers(0, p, (n, nq))
        keys = np.concatenate([kidx, np.take_along_axis(kidx, q, 1)], 1)  # (n, p + nq)
        vals = np.concatenate([vidx, np.take_along_axis(vidx, q, 1)], 1)
        base_k = self.vocab.index(self.rk[0])
        base_v = self.vocab.index(self.rv[0])
        seq = np.stack([keys + base_k, vals + base_v], 2).reshape(n, -1)  # k v k v ...
        x = torch.zeros(n, L, dtype=torch.long)
        x[:, : seq.shape[1]] = torch.from_numpy(seq)
        y = torch.full((n, L), -100, dtype=torch.long)
        lab = torch.arange(2 * p + 1, seq.shape[1], 2)  # queried values
        y[:, lab] = x[:, lab]
        return x, y

    def generic_rows(self, texts: list[str]):
        return self.encode(texts)
