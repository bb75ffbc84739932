"""The ``real`` preset of the LaW reproduction: wash facts SmolLM2-135M-Instruct really knows (issue #52).

Facts are prompts built from real relations, each kept only if the model completes it greedily (the official
``unlearn.py`` keeps only known facts; the rule here is :func:`~iclr25.law.evaluation.fact_known`: the greedy
continuation starts with the answer), fixed before any washing:

- gensim's analogy sections: ``capital`` ("The capital of Greece is" → " Athens", sections capital-common-countries
  and capital-world), ``capital_of`` ("Athens is the capital of" → " Greece"), ``currency`` ("The currency of Japan
  is the" → " yen"), ``city_state`` ("Chicago is a city in the state of" → " Illinois");
- WordNet 3.0 noun hypernyms: ``hypernym`` ("A banana is a kind of" → " fruit"), from noun synsets whose first
  lemma and whose first hypernym's first lemma are single lower-case words (every ``wn_stride``-th such synset,
  at most ``wn_candidates``);
- WordNet 3.0 antonyms (the ``!`` pointers of all four parts of speech): ``antonym`` ("The opposite of hot is" →
  " cold"), both words single lower-case alphabetic words of ≥ 3 letters, one fact per word (its first antonym in
  file order);
- gensim's ``family`` section in both directions: ``family`` ("The female equivalent of a king is a" → " queen",
  "The male equivalent of a queen is a" → " king").

No fact's (subject, answer) pair is a pair of the nine grammatical sections in either order (they are the
reasoning test; :func:`gram_pairs`).

Per seed (the data and the model are fixed; a seed draws which known facts are washed and which are held out):
of each washed relation's known facts ``heldout_frac`` are held out (never washed: *held-out, same relation*),
the rest are shuffled and the first 64 / 256 are washed (nested, the paper's scale axis); the known facts of the
``other_relations`` are never washed (*held-out, other relations*). Washing: LaW (``wash``, the paper's defaults:
λ 20,000, Adam lr 1e-7 for 1,000 steps, β = 1.1×, successive elimination) on W_out of layers 3–7 with
C = E[kkᵀ] over Shakespeare passages; MEMIT→EOS = LaW's initialisation applied alone; FT-UL = gradient ascent on
prompt + answer on the same W_out matrices, stopped at LaW's washed accuracy (matched forgetting). Reasoning kept:
few-shot accuracy on gensim's nine grammatical analogy sections (no washed fact in them); fluency: perplexity on
held-out Wikipedia text.
"""

from __future__ import annotations

import copy
import hashlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..common.claims import Claim, all_of, explain_failures, make_claim
from ..common.io import atomic_write_json, read_json
from ..common.progress import log
from ..common.results import aggregate, values
from ..common.seeding import derive_seed
from ..harness.rundir import RunDir, RunResult
from .baselines import ft_unlearn
from .config import KNOWN_RULES, RealConfig
from .covariance import key_covariance
from .evaluation import fact_known, fact_known_generate, generic_loss
from .facts import Fact
from .memit import ZConfig, compute_z
from .memories import model_fingerprint, resolve_layers
from .washing import apply_delta, wash

GRAM_SECTIONS = tuple(f"gram{i}" for i in range(1, 10))
METHODS = ("law", "memit", "ft_ul")


def known_fn(rule: str):
    """The fact test of a rule: ``starts`` — the greedy continuation starts with the answer (teacher-forced,
    :func:`fact_known`); ``generate10`` — the official test, the answer inside 10 greedy tokens
    (:func:`fact_known_generate`). The same test picks the known facts, drives successive elimination, stops FT-UL
    and measures every accuracy."""
    if rule == "starts":
        return lambda m, t, fs: fact_known(m, t, fs, batch_size=256)
    if rule == "generate10":
        return lambda m, t, fs: fact_known_generate(m, t, fs, max_new_tokens=10)
    raise ValueError(f"known_rule must be one of {KNOWN_RULES}, got {rule!r}")


# -- facts ----------------------------------------------------------------------------------------------------


def _pairs(analogies, prefix: str) -> list[tuple[str, str]]:
    """Unique (a, b) pairs of the analogy sections starting with ``prefix`` (first-seen order)."""
    seen: dict[tuple[str, str], None] = {}
    for r in analogies:
        if r["section"].startswith(prefix):
            seen[(r["a"], r["b"])] = None
            seen[(r["c"], r["d"])] = None
    return list(seen)


def geo_facts(analogies) -> dict[str, list[Fact]]:
    """The four gensim-analogy relations as facts (one per distinct subject, sorted by subject)."""
    caps: dict[str, str] = {}
    for capital, country in _pairs(analogies, "capital-"):
        caps.setdefault(country, capital)
    out = {
        "capital": [Fact(f"The capital of {c} is", f" {k}", c) for c, k in sorted(caps.items())],
        "capital_of": [
            Fact(f"{k} is the capital of", f" {c}", k)
            for k, c in sorted({k: c for c, k in caps.items()}.items())
        ],
        "currency": [
            Fact(f"The currency of {c} is the", f" {m}", c)
            for c, m in sorted(dict(_pairs(analogies, "currency")).items())
        ],
        "city_state": [
            Fact(f"{c} is a city in the state of", f" {s}", c)
            for c, s in sorted(dict(_pairs(analogies, "city-in-state")).items())
        ],
    }
    return out


def hypernym_facts(glosses, stride: int, limit: int) -> list[Fact]:
    """WordNet noun hypernyms "A {noun} is a kind of" → " {hypernym}" (both single lower-case words)."""
    nouns = [r for r in glosses if r["pos"] == "n"]
    first = {r["offset"]: r["lemmas"][0] for r in nouns}
    ok = lambda w: w.isalpha() and w.islower() and len(w) >= 3  # noqa: E731
    cands, seen = [], set()
    for r in nouns:
        w = r["lemmas"][0]
        hyp = [first[h] for h in r["hypernyms"] if h in first]
        if ok(w) and hyp and ok(hyp[0]) and hyp[0] != w and w not in seen:
            seen.add(w)
            cands.append((w, hyp[0]))
    cands = cands[::stride][:limit]
    return [Fact(f"{'An' if w[0] in 'aeiou' else 'A'} {w} is a kind of", f" {h}", w) for w, h in cands]


def gram_pairs(analogies) -> set[frozenset[str]]:
    """Every word pair of the nine grammatical sections (unordered): facts made of such a pair are excluded."""
    return {frozenset(p) for sec in GRAM_SECTIONS for p in _pairs(analogies, sec)}


def _word(w: str) -> bool:
    return w.isalpha() and w.islower() and len(w) >= 3


def antonym_facts(pointers, exclude: set[frozenset[str]] = frozenset()) -> list[Fact]:
    """WordNet antonyms "The opposite of {a} is" → " {b}" from ``load_wordnet_pointers(("!",))``: both words single
    lower-case alphabetic words of ≥ 3 letters, the pair not in ``exclude``, one fact per word (its first antonym
    in file order: nouns, verbs, adjectives, adverbs)."""
    out, seen = [], set()
    for r in pointers:
        a, b = r["word"], r["target"]
        if (
            r["symbol"] == "!"
            and _word(a)
            and _word(b)
            and a != b
            and a not in seen
            and frozenset((a, b)) not in exclude
        ):
            seen.add(a)
            out.append(Fact(f"The opposite of {a} is", f" {b}", a))
    return out


def family_facts(analogies, exclude: set[frozenset[str]] = frozenset()) -> list[Fact]:
    """gensim's ``family`` pairs (male, female) in both directions: "The female equivalent of a {male} is a" →
    " {female}" and "The male equivalent of a {female} is a" → " {male}" (sorted by the male word)."""
    pairs = sorted(p for p in _pairs(analogies, "family") if frozenset(p) not in exclude)
    return [Fact(f"The female equivalent of a {m} is a", f" {f}", m) for m, f in pairs] + [
        Fact(f"The male equivalent of a {f} is a", f" {m}", f) for m, f in pairs
    ]


def grammar_items(analogies, per_section: int, shots: int) -> dict[str, list[Fact]]:
    """Few-shot prompts of the nine grammatical sections: ``shots`` other pairs of the section as
    "a -> b" lines, then the query "c ->" → " d". The first ``per_section`` distinct pairs are the queries, the
    shots the next pairs cyclically (fixed, seed-independent)."""
    out = {}
    for sec in GRAM_SECTIONS:
        pairs = _pairs(analogies, sec)
        n = len(pairs)
        items = []
        for i in range(min(per_section, n)):
            demo = "\n".join(f"{a} -> {b}" for a, b in (pairs[(i + 1 + j) % n] for j in range(shots)))
            a, b = pairs[i]
            items.append(Fact(f"{demo}\n{a} ->", f" {b}"))
        out[sec] = items
    return out


def heldout_texts(corpus, n: int, chars: int) -> list[str]:
    """``n`` passages of ``chars`` characters from the start of distinct Wikipedia articles (held-out text)."""
    out = []
    for r in corpus:
        t = " ".join(r["text"].split())
        if len(t) >= chars:
            out.append(t[:chars])
        if len(out) == n:
            break
    return out


def cov_texts(corpus, n: int, chars: int) -> list[str]:
    """``n`` Shakespeare passages of ``chars`` characters, round-robin over the plays (generic text for C)."""
    texts = [" ".join(r["text"].split()) for r in corpus]
    out, j = [], 0
    while len(out) < n:
        for t in texts:
            s = 5000 + j * chars  # skip each text's front matter
            if len(t) >= s + chars and len(out) < n:
                out.append(t[s : s + chars])
        j += 1
        if j > 1000:
            break
    return out


def counterfact_facts(name_or_path: str, split: str = "train") -> list[Fact]:
    """CounterFact records (``requested_rewrite`` = {prompt with ``{}``, subject, target_true: {str}}) as facts
    whose answer is the true object. ``name_or_path``: a ``datasets`` hub name (``azhx/counterfact``) or a local
    ``.parquet`` / ``.jsonl`` / ``.json`` file with the same columns."""
    import datasets

    p = Path(name_or_path).expanduser()
    kind = {".parquet": "parquet", ".jsonl": "json", ".json": "json"}.get(p.suffix)
    if kind is not None:
        if not p.is_file():
            raise FileNotFoundError(f"facts_dataset: no such file {p}")
        ds = datasets.load_dataset(kind, data_files=str(p), split="train")
    else:
        ds = datasets.load_dataset(name_or_path, split=split)
    if "requested_rewrite" not in ds.column_names:
        raise ValueError(
            f"facts_dataset {name_or_path!r} must have CounterFact's 'requested_rewrite' column, got {ds.column_names}"
        )
    out = []
    for r in ds:
        rw = r["requested_rewrite"]
        subj = rw["subject"]
        out.append(Fact(rw["prompt"].format(subj), " " + rw["target_true"]["str"].strip(), subj))
    return out


def _known_path(rule: str, facts: list[Fact], cache: Path, fingerprint: str) -> Path:
    """Where the known-fact test of ``facts`` is stored: the key covers the model's weights (``fingerprint``:
    :func:`model_fingerprint`), the rule and every prompt and answer."""
    h = hashlib.sha256(f"{fingerprint}|{rule}".encode())
    for f in facts:
        h.update(f"{f.prompt}\0{f.target}\0".encode())
    return Path(cache) / f"law_known_{h.hexdigest()[:24]}.json"


def _known_read(path: Path, n: int) -> torch.Tensor | None:
    """The stored test of ``n`` facts, or ``None`` when absent or not ``n`` booleans (then recomputed)."""
    if path.is_file():
        got = read_json(path)
        if isinstance(got, list) and len(got) == n and all(isinstance(x, bool) for x in got):
            return torch.tensor(got, dtype=torch.bool)
    return None


@dataclass
class RealData:
    model: object
    tok: object
    known: dict[str, list[Fact]]  # relation -> facts the model completes greedily
    counts: dict[str, dict[str, int]]  # relation -> {"candidates", "known"}
    grammar: dict[str, list[Fact]]
    ppl_texts: list[str]
    cov: dict[int, torch.Tensor]
    cpu_s: dict[str, float]


LOAD_CHUNKS = (
    8  # the known-fact filter's share of the load tasks: interleaved chunks of the uncached candidates
)

Mapper = Callable[[Callable[[int], dict], list[int], str], dict]


def _here(fn: Callable[[int], dict], ids: list[int], part: str) -> dict:
    return {i: fn(i) for i in ids}


def load_real(cfg: RealConfig, cache: Path, mapper: Mapper | None = None) -> RealData:
    """The model, the known facts of every relation, the grammar prompts, the held-out texts and C.

    The known-fact filter of the candidates not yet in ``cache`` and C run as tasks through ``mapper(fn, ids, part)``
    (:func:`run` passes its worker pool; default: here, one after the other): C, then :data:`LOAD_CHUNKS` interleaved
    chunks of the candidates — a fact's verdict is its own (teacher-forced; the one-call and per-list tests agree,
    tested), so the chunking changes no verdict."""
    from iclr25.assets import (
        load_analogies,
        load_causal_lm,
        load_corpus,
        load_wordnet_glosses,
        load_wordnet_pointers,
    )

    from ..common.device import get_device

    mapper = mapper or _here
    _RULE["fn"], _RULE["rule"] = known_fn(cfg.known_rule), cfg.known_rule
    t0 = time.process_time()
    model, tok = load_causal_lm(cfg.model, device=str(get_device(cfg.device)))
    an = load_analogies()
    # plain rows: the builders scan the 19,544 analogy rows about twenty times, and a datasets.Dataset decodes every
    # row it yields again (≈ 0.9 s a scan, most of the load's time before this)
    an = an.to_list() if hasattr(an, "to_list") else list(an)
    cands = geo_facts(an)
    rels = cfg.washed_relations + cfg.other_relations
    if "hypernym" in rels:
        cands["hypernym"] = hypernym_facts(load_wordnet_glosses(), cfg.wn_stride, cfg.wn_candidates)
    excl = gram_pairs(an)
    if "antonym" in rels:
        cands["antonym"] = antonym_facts(load_wordnet_pointers(("!",)), excl)
    if "family" in rels:
        cands["family"] = family_facts(an, excl)
    if cfg.facts_dataset:
        cands["counterfact"] = counterfact_facts(cfg.facts_dataset, cfg.facts_split)
    grammar = grammar_items(an, cfg.gram_per_section, cfg.gram_shots)
    ppl = heldout_texts(load_corpus("wikipedia"), cfg.ppl_passages, cfg.ppl_chars)
    cov_in = cov_texts(load_corpus("shakespeare"), cfg.cov_passages, cfg.cov_chars)
    fp = model_fingerprint(model)  # once: hashing 135M parameters costs seconds
    order = sorted(set(rels), key=list(cands).index)
    paths = {rel: _known_path(cfg.known_rule, cands[rel], cache, fp) for rel in order}
    masks = {rel: _known_read(paths[rel], len(cands[rel])) if cands[rel] else torch.zeros(0, dtype=torch.bool)
             for rel in order}  # fmt: skip
    todo = [f for rel in order if masks[rel] is None for f in cands[rel]]
    k = min(LOAD_CHUNKS, len(todo))
    chunks = [todo[i::k] for i in range(k)]
    t1 = time.process_time()

    def covariance():
        return key_covariance(
            model,
            list(cfg.edit_layers),
            cov_in,
            tok,
            batch_size=8,
            max_length=cfg.cov_max_tokens,
            cache_dir=cache,
        )

    def task(i: int) -> dict:
        t = time.process_time()
        if i == 0:
            covariance()  # written to the cache folder, read back below
            return {"cpu_s": time.process_time() - t}
        fs = chunks[i - 1]
        mask = _RULE["fn"](model, tok, fs)
        return {
            "cpu_s": time.process_time() - t,
            "facts_sha256": _facts_sha(fs),
            "known": [bool(x) for x in mask],
        }

    done = mapper(task, list(range(k + 1)), "real_load")
    got = torch.zeros(len(todo), dtype=torch.bool)
    for i, fs in enumerate(chunks, start=1):
        r = done[i]
        if r.get("facts_sha256") != _facts_sha(fs) or len(r["known"]) != len(fs):
            raise ValueError(
                f"the stored load task {i} tested other facts than chunk {i}; remove the run folder's seeds/*real_load* files"
            )
        got[i - 1 :: k] = torch.tensor(r["known"], dtype=torch.bool)
    j = 0
    for rel in order:
        if masks[rel] is None:
            masks[rel], j = got[j : j + len(cands[rel])], j + len(cands[rel])
            paths[rel].parent.mkdir(parents=True, exist_ok=True)
            atomic_write_json(paths[rel], [bool(x) for x in masks[rel].tolist()])
    known, counts = {}, {}
    for rel in order:
        known[rel] = [f for f, ok in zip(cands[rel], masks[rel].tolist()) if ok]
        counts[rel] = {"candidates": len(cands[rel]), "known": len(known[rel])}
        log(f"[law real] known filter {rel}: {len(known[rel])} of {len(cands[rel])}")
    cov = covariance()  # from the cache folder
    cpu = {
        "load": t1 - t0,
        "known_filter": sum(done[i]["cpu_s"] for i in range(1, k + 1)),
        "covariance": done[0]["cpu_s"],
    }
    return RealData(model, tok, known, counts, grammar, ppl, cov, cpu)


# -- per seed -------------------------------------------------------------------------------------------------


def split(cfg: RealConfig, data: RealData, seed: int) -> dict:
    """The seed's washed sets (nested, one per scale) and its held-out facts (same / other relations)."""
    rng = np.random.default_rng(derive_seed(cfg.seed, "law-real-split", seed))
    pool, same = [], {}
    for rel in cfg.washed_relations:
        fs = list(data.known[rel])
        idx = rng.permutation(len(fs))
        n_hold = int(round(cfg.heldout_frac * len(fs)))
        same[rel] = [fs[i] for i in idx[:n_hold]][: cfg.max_heldout]
        pool += [fs[i] for i in idx[n_hold:]]
    order = rng.permutation(len(pool))
    pool = [pool[i] for i in order]
    washed = {n: pool[:n] for n in cfg.scales}
    other = {rel: data.known[rel][: cfg.max_heldout] for rel in cfg.other_relations}
    return {"washed": washed, "same": same, "other": other, "pool": len(pool)}


_RULE = {
    "fn": known_fn("starts"),
    "rule": "starts",
}  # the run's rule (set by load_real; forked workers inherit it)


def _ft_known(cfg: RealConfig):
    """FT-UL's stop test: ``None`` (ft_unlearn's default, the same teacher-forced rule read off each step's own
    forward pass) for ``starts``; the rule's function otherwise."""
    return None if cfg.known_rule == "starts" else _RULE["fn"]


def _known_sets(model, tok, sets: dict[str, list[Fact]]) -> dict[str, torch.Tensor]:
    """The run's fact test of every list in ``sets``; with ``starts`` (teacher-forced, each fact's verdict its own:
    rows of equal length run together, :func:`fact_known`) all lists in one call — fewer, larger batches — and
    otherwise one call per list."""
    if _RULE["rule"] != "starts":
        return {
            k: _RULE["fn"](model, tok, fs) if fs else torch.zeros(0, dtype=torch.bool)
            for k, fs in sets.items()
        }
    allf = [f for fs in sets.values() for f in fs]
    mask = _RULE["fn"](model, tok, allf) if allf else torch.zeros(0, dtype=torch.bool)
    out, i = {}, 0
    for k, fs in sets.items():
        out[k], i = mask[i : i + len(fs)], i + len(fs)
    return out


def evaluate(model, data: RealData, sp: dict, washed: list[Fact]) -> dict:
    """Washed accuracy, held-out accuracy (same relations, other relations, both; per relation), grammar few-shot
    accuracy (mean over the nine sections) and held-out perplexity of ``model``."""
    tok = data.tok
    groups = {f"same_{r}": fs for r, fs in sp["same"].items()} | {
        f"other_{r}": fs for r, fs in sp["other"].items()
    }
    sets = {"washed": washed} | groups | {f"gram_{s}": fs for s, fs in data.grammar.items()}
    known = _known_sets(model, tok, sets)
    hits = {k: float(known[k].float().sum()) for k in groups}
    n = {k: len(fs) for k, fs in groups.items()}

    def pooled(prefix: str) -> float:
        ks = [k for k in groups if k.startswith(prefix)]
        tot = sum(n[k] for k in ks)
        return sum(hits[k] for k in ks) / tot if tot else float("nan")

    acc = lambda k: float(known[k].float().mean()) if len(known[k]) else float("nan")  # noqa: E731
    gram = {s: acc(f"gram_{s}") for s in data.grammar}
    out = {
        "washed": acc("washed"),
        "heldout_same": pooled("same_"),
        "heldout_other": pooled("other_"),
        "heldout_all": pooled(""),
        "grammar": float(np.mean(list(gram.values()))),
        "ppl": float(np.exp(generic_loss(model, tok, data.ppl_texts, batch_size=8))),
    }
    out |= {f"gram_{s}": v for s, v in gram.items()}
    out |= {k: hits[k] / n[k] if n[k] else float("nan") for k in groups}
    return out


def base_metrics(data: RealData) -> dict:
    known = _known_sets(data.model, data.tok, {s: fs for s, fs in data.grammar.items()})
    gram = {s: float(known[s].float().mean()) if len(known[s]) else float("nan") for s in data.grammar}
    return {
        "grammar": float(np.mean(list(gram.values()))),
        "ppl": float(np.exp(generic_loss(data.model, data.tok, data.ppl_texts, batch_size=8))),
    } | {f"gram_{s}": v for s, v in gram.items()}


def one_scale(
    cfg: RealConfig, data: RealData, base: dict, sp: dict, seed: int, n: int, z_cache: dict
) -> dict:
    """Wash the seed's first ``n`` washable facts (``sp``: :func:`split`) with LaW, apply MEMIT→EOS alone, run FT-UL
    to LaW's washed accuracy, and evaluate the three edited models. ``z_cache``: the MEMIT target vectors (computed
    here for facts it lacks)."""
    washed = sp["washed"][n]  # fewer than n when the seed has fewer washable known facts (run invalid)
    if not washed:
        raise ValueError(
            f"seed {seed} has no washable known facts (known: {data.counts}); the model knows none of the facts "
            "of washed_relations beyond the held-out share"
        )
    layers = list(cfg.edit_layers)
    r: dict = {"n_washed": len(washed)}  # all known by the same test: wash's only_known filter is skipped
    t = time.process_time()
    m = copy.deepcopy(data.model)
    rep = wash(
        m, data.tok, washed, layers, data.cov, lam=cfg.lam, steps=cfg.ascent_steps, lr=cfg.ascent_lr,
        beta_ratio=cfg.beta_ratio, z_cache=z_cache, known_fn=_RULE["fn"], only_known=False,
    )  # fmt: skip
    t_wash = time.process_time() - t
    t = time.process_time()
    r["law"] = evaluate(m, data, sp, washed) | {
        "cpu_s": t_wash,
        "eval_cpu_s": time.process_time() - t,
        **{f"{k}_cpu_s": v for k, v in rep.cpu_s.items()},
        "z_nll": float("nan") if rep.z_nll is None else rep.z_nll,
        "known_before": rep.known_before,
        "remaining": [lr.remaining_after for lr in rep.layers],
        "ratio_over_beta": [lr.ratio / lr.beta for lr in rep.layers],
    }
    del m
    t = time.process_time()
    mm = copy.deepcopy(data.model)
    apply_delta(mm, rep.init_deltas)
    t_apply = time.process_time() - t
    t = time.process_time()
    r["memit"] = evaluate(mm, data, sp, washed) | {"cpu_s": t_apply, "eval_cpu_s": time.process_time() - t}
    del mm
    target = r["law"]["washed"]
    t = time.process_time()
    mf = copy.deepcopy(data.model)
    params = [ml.module.weight for ml in resolve_layers(mf, layers)]
    for p in mf.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    fr = ft_unlearn(mf, data.tok, washed, lr=cfg.ft_lr, max_steps=cfg.ft_max_steps, stop_at=target,
                    params=params, seed=seed, known_fn=_ft_known(cfg))  # fmt: skip
    mf.eval()
    t_ft = time.process_time() - t
    t = time.process_time()
    r["ft_ul"] = evaluate(mf, data, sp, washed) | {
        "cpu_s": t_ft, "eval_cpu_s": time.process_time() - t, "steps": fr.steps, "reached_target": float(fr.stopped_at_target),
    }  # fmt: skip
    del mf
    for k in METHODS:
        r[k]["grammar_drop"] = base["grammar"] - r[k]["grammar"]
        r[k]["ppl_rise"] = r[k]["ppl"] / base["ppl"] - 1
    r["law_minus_ft_heldout"] = r["law"]["heldout_all"] - r["ft_ul"]["heldout_all"]
    log(
        f"[law real] seed {seed} n={n}: LaW washed {r['law']['washed']:.3f} held-out {r['law']['heldout_all']:.3f} "
        f"| MEMIT {r['memit']['washed']:.3f}/{r['memit']['heldout_all']:.3f} | FT-UL {r['ft_ul']['washed']:.3f}/"
        f"{r['ft_ul']['heldout_all']:.3f} ({fr.steps} steps)"
    )
    return r


def seed_header(sp: dict) -> dict:
    """The per-seed counts every scale shares: washable pool, held-out facts of the same and of other relations."""
    return {"pool": sp["pool"], "n_same": sum(map(len, sp["same"].values())),
            "n_other": sum(map(len, sp["other"].values()))}  # fmt: skip


def one_seed(cfg: RealConfig, data: RealData, base: dict, seed: int, z_cache: dict) -> dict:
    """Every scale of one seed in this process (:func:`one_scale`; the run itself spreads (seed, scale) tasks over
    workers, :func:`run`)."""
    sp = split(cfg, data, seed)
    return seed_header(sp) | {f"n{n}": one_scale(cfg, data, base, sp, seed, n, z_cache) for n in cfg.scales}


# -- the run's tasks ------------------------------------------------------------------------------------------


def z_facts(cfg: RealConfig, splits: dict[int, dict]) -> dict[int, list[Fact]]:
    """The facts whose MEMIT target vectors each seed adds to the run's z cache: the seed's washed facts at the
    largest scale (the scales are nested) not washed by an earlier seed of the list. A seed's facts depend on it
    and the seeds before it only, so the first K seeds of any run get the same z (``iclr25 verify`` re-runs a prefix)."""
    seen: set[Fact] = set()
    out = {}
    for s in cfg.seed_list:
        new = [f for f in dict.fromkeys(splits[s]["washed"][max(cfg.scales)]) if f not in seen]
        seen.update(new)
        out[s] = new
    return out


def _facts_sha(facts: list[Fact]) -> str:
    h = hashlib.sha256()
    for f in facts:
        h.update(f"{f.prompt}\0{f.target}\0{f.subject}\0".encode())
    return h.hexdigest()


def compute_z_task(cfg: RealConfig, data: RealData, facts: list[Fact]) -> dict:
    """MEMIT target vectors of ``facts`` at the last edited layer, exactly as :func:`wash` computes the ones its
    ``z_cache`` lacks (default :class:`~iclr25.law.memit.ZConfig`, EOS target, plain template), as JSON lists."""
    zl = resolve_layers(data.model, list(cfg.edit_layers))[-1]
    t = time.process_time()
    with torch.enable_grad():
        Z, _, nll = compute_z(data.model, data.tok, facts, zl, ZConfig(), None, ("{}",))
    return {"n": len(facts), "facts_sha256": _facts_sha(facts), "cpu_s": time.process_time() - t,
            "z": Z.detach().cpu().double().tolist(), "nll": nll.detach().cpu().double().tolist()}  # fmt: skip


def task_order(cfg: RealConfig) -> list[tuple[int, int]]:
    """The (seed, scale) washes, longest first (the largest scale of every seed, then the next): two workers taking
    them in this order finish close together."""
    return [(s, n) for n in sorted(cfg.scales, reverse=True) for s in cfg.seed_list]


def task_id(cfg: RealConfig, seed: int, n: int) -> int:
    """The result-file id of the (seed, scale) task: seed · (number of scales) + the scale's index."""
    return seed * len(cfg.scales) + cfg.scales.index(n)


# -- claims ---------------------------------------------------------------------------------------------------


def claims(cfg: RealConfig, ps: dict) -> list[Claim]:
    v = lambda k: values(ps, k)  # noqa: E731
    lo, hi = min(cfg.scales), max(cfg.scales)
    washed = all_of(
        "real_washed",
        f"LaW washes SmolLM2's known facts: washed-fact accuracy ≤ 0.1 at {lo} and at {hi} facts (mean over seeds)",
        [
            make_claim(
                f"n{n}",
                f"LaW washed accuracy at {n} facts ≤ 0.1",
                f"n{n}/law/washed",
                v(f"n{n}/law/washed"),
                0.1,
                "<=",
            )  # fmt: skip
            for n in cfg.scales
        ],
    )
    reasoning = make_claim(
        "real_reasoning_kept",
        f"grammatical-analogy few-shot accuracy drops ≤ 5 points after washing {hi} facts (mean over seeds)",
        f"n{hi}/law/grammar_drop", v(f"n{hi}/law/grammar_drop"), 0.05, "<=",
    )  # fmt: skip
    fluency = make_claim(
        "real_fluency",
        f"held-out Wikipedia perplexity rises ≤ 10 % after washing {hi} facts (mean over seeds)",
        f"n{hi}/law/ppl_rise", v(f"n{hi}/law/ppl_rise"), 0.10, "<=",
    )  # fmt: skip
    beats = all_of(
        "real_beats_ft",
        "at matched forgetting LaW keeps more held-out known facts (same and other relations) than FT-UL, paired "
        "per seed, at each scale",
        [
            make_claim(
                f"n{n}",
                f"LaW − FT-UL held-out accuracy at {n} facts > 0 (paired per seed)",
                f"n{n}/law_minus_ft_heldout",
                v(f"n{n}/law_minus_ft_heldout"),
                0.0,
                ">",
            )  # fmt: skip
            for n in cfg.scales
        ],
    )
    # the pool check last: what the washed scale rests on (never given a failure note)
    return explain_failures([washed, reasoning, fluency, beats], _why(cfg, ps)) + [pool_check(cfg, ps)]


def _why(cfg: RealConfig, ps: dict) -> dict[str, str]:
    m = lambda k: float(np.nanmean(values(ps, k)))  # noqa: E731
    hi = max(cfg.scales)
    parts = []
    for n in cfg.scales:
        parts.append(
            f"n={n}: LaW washed {m(f'n{n}/law/washed'):.3f} (MEMIT {m(f'n{n}/memit/washed'):.3f}, FT-UL "
            f"{m(f'n{n}/ft_ul/washed'):.3f}), held-out same relation LaW {m(f'n{n}/law/heldout_same'):.3f} / FT-UL "
            f"{m(f'n{n}/ft_ul/heldout_same'):.3f}, other relations LaW {m(f'n{n}/law/heldout_other'):.3f} / FT-UL "
            f"{m(f'n{n}/ft_ul/heldout_other'):.3f}, FT-UL reached LaW's level on "
            f"{m(f'n{n}/ft_ul/reached_target'):.2f} of seeds"
        )
    return {
        "real_washed": "; ".join(parts) + f"; EOS NLL reached by z {m(f'n{hi}/law/z_nll'):.2f} nats.",
        "real_reasoning_kept": f"grammar accuracy drop at {hi}: LaW {m(f'n{hi}/law/grammar_drop'):.3f}, MEMIT "
        f"{m(f'n{hi}/memit/grammar_drop'):.3f}, FT-UL {m(f'n{hi}/ft_ul/grammar_drop'):.3f}.",
        "real_fluency": f"perplexity rise at {hi}: LaW {m(f'n{hi}/law/ppl_rise'):.3f}, MEMIT "
        f"{m(f'n{hi}/memit/ppl_rise'):.3f}, FT-UL {m(f'n{hi}/ft_ul/ppl_rise'):.3f}.",
        "real_beats_ft": "; ".join(parts) + ".",
    }


def report_md(cfg: RealConfig, ps: dict, data_summary: dict) -> str:
    lines = ["# LaW on SmolLM2-135M-Instruct (real preset)", "", "## Known facts (greedy-completion filter)", "",
             "| relation | candidates | known |", "|---|---|---|"]  # fmt: skip
    for rel, c in data_summary["counts"].items():
        lines.append(f"| {rel} | {c['candidates']} | {c['known']} |")
    lines += ["", "## Per seed", "",
              "| seed | n | method | washed | held-out same | held-out other | grammar | ppl | FT steps |",
              "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for s, r in sorted(ps.items()):
        for n in cfg.scales:
            for k in METHODS:
                x = r[f"n{n}"][k]
                lines.append(
                    f"| {s} | {n} | {k} | {x['washed']:.3f} | {x['heldout_same']:.3f} | {x['heldout_other']:.3f} | "
                    f"{x['grammar']:.3f} | {x['ppl']:.2f} | {x['steps'] if k == 'ft_ul' else ''} |"
                )
    b = data_summary["base"]
    lines += ["", f"Unedited model: grammar {b['grammar']:.3f}, perplexity {b['ppl']:.2f}.", ""]
    return "\n".join(lines)


def required_keys(cfg: RealConfig) -> tuple[str, ...]:
    """The per-seed keys the claims read: every method's washed accuracy at every scale (``experiment.required_keys``
    for a ``RealConfig``; each (seed, scale) task is checked for its share, ``<method>/washed``)."""
    return tuple(f"n{n}/{k}/washed" for n in cfg.scales for k in METHODS)


def run(cfg: RealConfig, out: Path) -> RunResult:
    """Three pools of tasks on ``--jobs`` workers (one BLAS thread each): the load (C and the known-fact filter in
    chunks, :func:`load_real`), the MEMIT target vectors z once per washed fact of the run (:func:`z_facts`: a fact
    a seed shares with an earlier seed is not recomputed), then every (seed, scale) wash (:func:`one_scale`,
    longest first). The unedited model's metrics run here between the first two."""
    torch.manual_seed(0)
    rd = RunDir(Path(out), cfg)
    data = load_real(
        cfg, rd.path / "cache",
        lambda fn, ids, part: rd.map_seeds(fn, ids, desc="law real load", part=part, required=("cpu_s",)),
    )  # fmt: skip
    log(f"[law real] known facts: {data.counts}")
    t = time.process_time()
    base = base_metrics(data)
    base_s = time.process_time() - t
    splits = {s: split(cfg, data, s) for s in cfg.seed_list}
    for s, sp in splits.items():
        if not sp["washed"][min(cfg.scales)]:
            raise ValueError(
                f"seed {s} has no washable known facts (known: {data.counts}); the model knows none of the facts "
                "of washed_relations beyond the held-out share"
            )
    zf = z_facts(cfg, splits)
    zs = [s for s in cfg.seed_list if zf[s]]
    zres = rd.map_seeds(
        lambda s: compute_z_task(cfg, data, zf[s]),
        zs,
        desc="law real z",
        part="real_z",
        required=("n", "cpu_s"),
    )
    z_cache: dict = {}
    for s in zs:
        r = zres[s]
        if r["facts_sha256"] != _facts_sha(zf[s]) or len(r["z"]) != len(zf[s]):
            raise ValueError(
                f"{rd.seed_file(s, 'real_z')} holds target vectors of other facts than seed {s}'s (the known facts "
                "changed under the same config?); remove the file to recompute it"
            )
        for f, zv, nv in zip(zf[s], r["z"], r["nll"]):
            z_cache[f] = (torch.tensor(zv, dtype=torch.float64), torch.tensor(nv, dtype=torch.float64))
    tasks = {task_id(cfg, s, n): (s, n) for s, n in task_order(cfg)}
    done = rd.map_seeds(
        lambda i: one_scale(cfg, data, base, splits[tasks[i][0]], tasks[i][0], tasks[i][1], z_cache),
        list(tasks),
        desc="law real washes",
        part="real_task",
        required=tuple(f"{k}/washed" for k in METHODS),
    )
    per_seed = {
        s: seed_header(splits[s]) | {f"n{n}": done[task_id(cfg, s, n)] for n in cfg.scales}
        for s in cfg.seed_list
    }
    summary = {
        "counts": data.counts,
        "base": base,
        "cpu_s": data.cpu_s | {"base_eval": base_s, "z": {str(s): zres[s]["cpu_s"] for s in zs}},
        "z_facts": {str(s): len(zf[s]) for s in cfg.seed_list},  # target vectors each seed added to the run's
    }
    reason = precondition(cfg, per_seed)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed) | {"data": summary},
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[],
        report_md=report_md(cfg, per_seed, summary),
        valid=not reason,
        invalid_reason=reason,
    )


def precondition(cfg: RealConfig, ps: dict) -> str:
    """Why the run cannot test the claims as stated ("" if every seed washes the full number at every scale)."""
    short = {s: r["pool"] for s, r in ps.items() if r["pool"] < max(cfg.scales)}
    if not short:
        return ""
    return (
        f"the model knows too few facts of {list(cfg.washed_relations)}: seeds {sorted(short)} have "
        f"{sorted(set(short.values()))} washable known facts (after holding out {cfg.heldout_frac:.0%} per relation), "
        f"fewer than the largest scale {max(cfg.scales)}; the larger scales washed every washable fact instead"
    )


def pool_check(cfg: RealConfig, ps: dict) -> Claim:
    return make_claim(
        "real_known_pool",
        f"each seed has ≥ {max(cfg.scales)} washable known facts (the largest scale)",
        "pool", values(ps, "pool"), max(cfg.scales), ">=", reduce="all",
        check="precondition: the scales need that many known facts",
    )  # fmt: skip
