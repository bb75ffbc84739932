"""Synthetic biographies: a data-to-text task whose hallucinations can be counted exactly.

A small world of names, occupations, cities and years. The *pre-training* corpus of the base LM p_LM ties city and
birth year to the occupation (probability ``prior_strength``), so p_LM learns spurious "knowledge". The
data-to-text set D pairs records ``name n12 job o3 city c5 [year y1] ::`` with templated biographies whose city and
year are drawn independently of the occupation; the year is missing from ``year_absent`` of the records, and then
the reference still says "born in <prior year>" with probability ``divergent`` — the source–reference divergence
that makes models trained on ToTTo/WikiBio-style data hallucinate. Test references are faithful.

Everything is word-level, so :func:`hallucination_and_recall` is exact: an output hallucinates when it mentions an
occupation, city or year that is absent from or different from its record.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from transformers import PreTrainedTokenizerFast

from iclr25.common.fields import bounded, check_fields

SPECIALS = ("<pad>", "<bos>", "<eos>", "<unk>")
TEMPLATE_WORDS = ("name", "job", "city", "year", "::", "is", "a", "from", "born", "in", ".")
FIELDS = ("job", "city", "year")  # the fields whose wrong/extra mention is a hallucination


@dataclass(frozen=True)
class World:
    """The vocabulary and the occupation → (city, year) priors that p_LM's corpus follows."""

    n_names: int = bounded(40, lo=2)
    n_jobs: int = bounded(8, lo=2)
    n_cities: int = bounded(8, lo=2)
    n_years: int = bounded(8, lo=2)
    prior_seed: int = bounded(1234, lo=0)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above

    @property
    def names(self) -> list[str]:
        return [f"n{i}" for i in range(self.n_names)]

    @property
    def jobs(self) -> list[str]:
        return [f"o{i}" for i in range(self.n_jobs)]

    @property
    def cities(self) -> list[str]:
        return [f"c{i}" for i in range(self.n_cities)]

    @property
    def years(self) -> list[str]:
        return [f"y{i}" for i in range(self.n_years)]

    def priors(self) -> tuple[np.ndarray, np.ndarray]:
        """Prior city and prior year index of every occupation (fixed by ``prior_seed``)."""
        rng = np.random.default_rng(self.prior_seed)
        return rng.integers(0, self.n_cities, self.n_jobs), rng.integers(0, self.n_years, self.n_jobs)

    def words(self) -> list[str]:
        return [*SPECIALS, *TEMPLATE_WORDS, *self.names, *self.jobs, *self.cities, *self.years]


def _check_world(world) -> None:
    if not isinstance(world, World):
        raise ValueError(f"world must be a biographies.World, got {type(world).__name__}")


def _check_count(name: str, v, lo: int = 1) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an int >= {lo}, got {v!r}")


def _check_prob(name: str, v) -> None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")


def word_tokenizer(world: World = World()) -> PreTrainedTokenizerFast:
    """Word-level tokenizer over the world's words; prepends ``<bos>`` like Llama tokenizers (ids 0..3 special)."""
    _check_world(world)
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors

    vocab = {w: i for i, w in enumerate(world.words())}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="<bos> $A", pair="<bos> $A $B", special_tokens=[("<bos>", vocab["<bos>"])]
    )
    tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)  # joins words with single spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="<pad>", bos_token="<bos>", eos_token="<eos>", unk_token="<unk>"
    )


def _sentence(name: str, job: str, city: str, year: str | None) -> str:
    s = f"{name} is a {job} from {city}"
    return f"{s} born in {year} ." if year is not None else f"{s} ."


def pretraining_corpus(world: World, n: int, seed: int, prior_strength: float = 0.9) -> list[str]:
    """Biographical sentences where city and year follow the occupation's prior with prob. ``prior_strength``."""
    _check_world(world)
    _check_count("n", n)
    _check_count("seed", seed, 0)
    _check_prob("prior_strength", prior_strength)
    rng = np.random.default_rng(seed)
    pc, py = world.priors()
    job = rng.integers(0, world.n_jobs, n)
    name = rng.integers(0, world.n_names, n)
    city = np.where(rng.random(n) < prior_strength, pc[job], rng.integers(0, world.n_cities, n))
    year = np.where(rng.random(n) < prior_strength, py[job], rng.integers(0, world.n_years, n))
    return [
        _sentence(f"n{a}", f"o{b}", f"c{c}", f"y{d}")
        for a, b, c, d in zip(name, job, city, year, strict=True)
    ]


def records_dataset(
    world: World, n: int, seed: int, year_absent: float = 0.4, divergent: float = 0.5, faithful: bool = False
) -> list[dict]:
    """Records with ``prompt`` (the linearised record), ``reference`` (leading space) and the field values.

    City and year are independent of the occupation. With ``faithful=False`` a record without a year has a
    reference mentioning the occupation's prior year with probability ``divergent``.
    """
    _check_world(world)
    _check_count("n", n)
    _check_count("seed", seed, 0)
    for k, v in (("year_absent", year_absent), ("divergent", divergent)):
        _check_prob(k, v)
    if not isinstance(faithful, (bool, np.bool_)):
        raise ValueError(f"faithful must be a bool, got {faithful!r}")
    rng = np.random.default_rng(seed)
    _, py = world.priors()
    name = rng.integers(0, world.n_names, n)
    job = rng.integers(0, world.n_jobs, n)
    city = rng.integers(0, world.n_cities, n)
    year = rng.integers(0, world.n_years, n)
    absent = rng.random(n) < year_absent
    diverge = (rng.random(n) < divergent) & absent & (not faithful)
    rows = []
    for i in range(n):
        y = None if absent[i] else f"y{year[i]}"
        prompt = f"name n{name[i]} job o{job[i]} city c{city[i]}" + (f" year {y}" if y else "") + " ::"
        ref_year = f"y{py[job[i]]}" if diverge[i] else y
        rows.append(
            {
                "prompt": prompt,
                "reference": " " + _sentence(f"n{name[i]}", f"o{job[i]}", f"c{city[i]}", ref_year),
                "name": f"n{name[i]}",
                "job": f"o{job[i]}",
                "city": f"c{city[i]}",
                "year": y or "",
                "divergent": bool(diverge[i]),
            }
        )
    return rows


def hallucination_and_recall(
    outputs: list[str], records: list[dict], world: World = World()
) -> dict[str, np.ndarray]:
    """Exact per-output metrics for the synthetic task.

    ``hallucinated[i]``: output i mentions an occupation / city / year token absent from or different from record
    i. ``recall[i]``: share of record i's values (name, job, city, year when present) found in output i — the
    PARENT-recall analogue.
    """
    _check_world(world)
    if not isinstance(outputs, (str, bytes)) and hasattr(outputs, "__iter__"):
        outputs = list(outputs)  # a datasets Column, a tuple, a generator of texts
    if isinstance(outputs, (str, bytes)) or not all(isinstance(o, str) for o in outputs):
        raise ValueError(
            f"outputs must be a list of strings (one generated text per record), got {outputs!r:.80}"
        )
    if len(outputs) != len(records):
        raise ValueError(f"outputs has {len(outputs)} items but records has {len(records)}")
    if not outputs:
        raise ValueError("outputs and records are empty; the metrics need at least one example")
    for i, r in enumerate(records):
        missing = [k for k in ("name", "job", "city", "year") if not hasattr(r, "keys") or k not in r]
        if missing:
            raise ValueError(f"records[{i}] must be a dict with keys name/job/city/year, missing {missing}")
    kinds = {
        **{w: "job" for w in world.jobs},
        **{w: "city" for w in world.cities},
        **{w: "year" for w in world.years},
    }
    hall = np.zeros(len(outputs), dtype=bool)
    rec = np.zeros(len(outputs), dtype=float)
    for i, (text, r) in enumerate(zip(outputs, records, strict=True)):
        words = set(text.split())
        hall[i] = any(kinds[w] in FIELDS and w != r[kinds[w]] for w in words if w in kinds)
        values = [r["name"], r["job"], r["city"]] + ([r["year"]] if r["year"] else [])
        rec[i] = np.mean([v in words for v in values])
    return {"hallucinated": hall, "recall": rec}
