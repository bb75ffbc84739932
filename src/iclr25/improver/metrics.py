"""Metrics ImProver optimises and the four dataset scores of the paper's tables (§3.1, §4.1).

A metric maps a *checked* proof to a number and has a direction (``min`` or ``max``). Scores are computed
from the checker's tactic records (:class:`~iclr25.improver.checker.Step`), never from regular expressions
on the proof text, so they agree with the proof assistant's own notion of a step.

* **length** (min): ``#steps + Σ_steps count(";" in text.replace("<;>", "")[:-1])``.
* **declarativity** (max): ``#{steps whose text starts with "have"} / #steps`` (the paper's v1 calls it
  readability; the official code counts every ``have``).
* relative change ``δ(y0, y) = (μ(y) − μ(y0)) / μ(y0)``, undefined (``None``) when ``μ(y0) = 0``.

Dataset scores over N theorems (σ = +1 for max, −1 for min; δ defined only when both proofs are correct):
Improvement = 100·σ·mean(δ, undefined := 0); Nonempty improvement = 100·σ·mean over defined δ;
Accuracy = share of correct outputs; Improved accuracy = share with σ·δ > 0.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..common.checks import need_pairs, need_real, need_str, need_type
from ..common.fields import bounded, check_fields
from .checker import CheckResult

DIRECTIONS = ("min", "max")


def length(result: CheckResult) -> float:
    """Number of tactic steps (plus ``;`` inside one step's text, the official rule): the paper's length
    metric (§3.1), to be minimised."""
    need_type("result", result, CheckResult)
    extra = sum(s.text.replace("<;>", "")[:-1].count(";") for s in result.steps)
    return float(len(result.steps) + extra)


def declarativity(result: CheckResult) -> float:
    """Share of steps that are ``have`` statements (0 for a proof without steps): the paper's declarativity
    metric (§3.1; readability in its v1), to be maximised."""
    need_type("result", result, CheckResult)
    n = len(result.steps)
    if n == 0:
        return 0.0
    return sum(1 for s in result.steps if s.text.strip().startswith("have")) / n


@dataclass(frozen=True)
class Metric:
    """A metric: ``score(result)`` with a direction, and the prompt text that describes it to the model.

    ``examples`` are (input proof, improved proof) pairs, the pool retrieval draws in-context examples from.
    """

    name: str
    score_fn: Callable[[CheckResult], float]
    direction: str = bounded("min", choices=DIRECTIONS)
    system_prompt: str = ""
    user_prompt: str = ""
    examples: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        check_fields(self)  # the choice declared above; below: the name, the pairs and the callable
        need_str("name", self.name)
        need_pairs("examples", self.examples)
        if not callable(self.score_fn):
            raise ValueError(f"score_fn must be callable, got {self.score_fn!r}")

    @property
    def sign(self) -> int:
        return 1 if self.direction == "max" else -1

    def score(self, result: CheckResult) -> float:
        raw = self.score_fn(result)
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not math.isfinite(raw):
            raise ValueError(f"score_fn of metric {self.name!r} must return a finite number, got {raw!r}")
        return float(raw)

    def delta(self, old: float, new: float) -> float | None:
        """Relative change (new − old) / old; ``None`` when old = 0."""
        need_real("old", old)
        need_real("new", new)
        return None if old == 0 else (new - old) / old

    def better(self, a: float, b: float) -> bool:
        """Is score ``a`` strictly better than ``b``?"""
        need_real("a", a)
        need_real("b", b)
        return a > b if self.direction == "max" else a < b


LENGTH = Metric(
    "length",
    length,
    "min",
    system_prompt=(
        "You are an AI assistant who shortens formal proofs while keeping them correct. Each proof step "
        "(tactic) counts one; a shorter proof uses fewer tactic steps."
    ),
    user_prompt="Rewrite the current theorem's proof so that it has as few steps as possible. The statement "
    "must stay the same.",
)
DECLARATIVITY = Metric(
    "declarativity",
    declarativity,
    "max",
    system_prompt=(
        "You are an AI assistant who rewrites formal proofs to be more declarative: intermediate facts are "
        "stated explicitly with typed `have` steps."
    ),
    user_prompt="Rewrite the current theorem's proof so that as large a share of its steps as possible are "
    "explicitly typed `have` statements. The statement must stay the same.",
)
METRICS = {"length": LENGTH, "declarativity": DECLARATIVITY}


def get_metric(metric: str | Metric) -> Metric:
    """A metric by name (``length``, ``declarativity``) or a user-defined :class:`Metric` as is."""
    if isinstance(metric, Metric):
        return metric
    if not isinstance(metric, str) or metric not in METRICS:
        raise ValueError(f"metric must be one of {sorted(METRICS)} or a Metric, got {metric!r}")
    return METRICS[metric]


def _num(x) -> float | None:
    if x is None:
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    if math.isinf(v):
        raise ValueError(f"a row's score/delta must be finite or missing, got {x!r}")
    return None if math.isnan(v) else v


def _missing(x) -> bool:
    """An empty correctness cell: ``None``, NaN or a blank string (``_bool`` reads it as False)."""
    return x is None or (isinstance(x, float) and math.isnan(x)) or (isinstance(x, str) and not x.strip())


def _bool(x) -> bool:
    if isinstance(x, str):
        return x.strip().lower() in ("true", "1", "yes")
    return bool(x) if x is not None and not (isinstance(x, float) and math.isnan(x)) else False


def row_delta(row: Mapping, metric: Metric | str) -> float | None:
    """δ of one result row: the row's recorded ``delta`` when it has that column (the official CSVs, whose
    tables are computed from it), else from the scores when both proofs are correct, else ``None``."""
    m = get_metric(metric)
    if "delta" in row:
        return _num(row.get("delta"))
    og, new = _num(row.get("og_score")), _num(row.get("new_score"))
    if _bool(row.get("og_correct")) and _bool(row.get("new_correct")) and og is not None and new is not None:
        return m.delta(og, new)
    return None


def aggregate(rows: Iterable[Mapping], metric: Metric | str = "length") -> dict[str, float]:
    """The paper's four dataset scores (in %) from per-theorem rows.

    A row needs ``og_correct``, ``new_correct`` and either ``og_score``/``new_score`` or ``delta`` (the
    columns of the official result CSVs). Returns ``improvement``, ``nonempty_improvement`` (NaN when no
    theorem has a defined δ), ``accuracy``, ``improved_accuracy`` and ``n``.
    """
    m = get_metric(metric)
    if isinstance(rows, (str, bytes, Mapping)) or not isinstance(rows, Iterable):
        raise ValueError(f"rows must be an iterable of result rows (mappings), got {type(rows).__name__}")
    rows = list(rows)
    if not rows:
        raise ValueError("rows must hold at least one result row, got none")
    for i, r in enumerate(rows):
        if not isinstance(r, Mapping):
            raise ValueError(f"rows[{i}] must be a mapping (a result row), got {type(r).__name__}")
        missing = {"og_correct", "new_correct"} - set(r)
        if missing:
            raise ValueError(f"rows[{i}] lacks columns {sorted(missing)}")
    blank = sum(1 for r in rows if any(_missing(r.get(k)) for k in ("og_correct", "new_correct")))
    if blank:
        warnings.warn(
            f"aggregate: {blank} of {len(rows)} rows have an empty og_correct/new_correct value; they count as "
            "incorrect (no δ, not accurate)",
            stacklevel=2,
        )
    deltas = [row_delta(r, m) for r in rows]
    defined = [d for d in deltas if d is not None]
    n = len(rows)
    return {
        "improvement": 100.0 * m.sign * sum(defined) / n,
        "nonempty_improvement": 100.0 * m.sign * sum(defined) / len(defined) if defined else float("nan"),
        "accuracy": 100.0 * sum(_bool(r.get("new_correct")) for r in rows) / n,
        "improved_accuracy": 100.0 * sum(1 for d in defined if m.sign * d > 0) / n,
        "n": float(n),
    }


def aggregate_csv(
    path: str, metric: Metric | str = "length", where: Callable[[dict], bool] | None = None
) -> dict[str, float]:
    """:func:`aggregate` over a result CSV in the official layout (``where(row)`` keeps a subset of rows)."""
    import csv
    import os

    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise ValueError(f"path must name an existing CSV file, got {path!r}")
    if where is not None and not callable(where):
        raise ValueError(f"where must be a callable row -> bool or None, got {where!r}")
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = {"og_correct", "new_correct"} - set(reader.fieldnames or [])
        if missing:
            raise ValueError(f"CSV {path!r} lacks columns {sorted(missing)}")
        rows = [r for r in reader if where is None or where(r)]
    for r in rows:  # empty cells are missing values, as in the official pandas pipeline
        for k in ("og_score", "new_score", "delta"):
            if k in r and (r[k] is None or r[k].strip() == ""):
                r[k] = None
    return aggregate(rows, metric)


def summarize(values: Sequence[float]) -> tuple[float, float]:
    """(mean, std) ignoring NaN; (nan, nan) when nothing is defined."""
    v = [x for x in values if x is not None and not math.isnan(x)]
    if not v:
        return float("nan"), float("nan")
    mu = sum(v) / len(v)
    return mu, math.sqrt(sum((x - mu) ** 2 for x in v) / len(v))


def arm_scores(improvements: Sequence) -> dict[str, float]:
    """One arm's scores on the length metric from its :class:`~iclr25.improver.agent.Improvement` results: the
    :func:`aggregate` of their rows (Improvement, nonempty Improvement — 0 when no output improved —, accuracy,
    improved accuracy) and the mean seed-proof length in / correct-output length out."""
    rows = [imp.row() for imp in improvements]
    agg = aggregate(rows, "length")
    return {
        "improvement": agg["improvement"],
        "nonempty_improvement": agg["nonempty_improvement"]
        if np.isfinite(agg["nonempty_improvement"])
        else 0.0,
        "accuracy": agg["accuracy"],
        "improved_accuracy": agg["improved_accuracy"],
        "mean_len_in": float(np.mean([imp.original.score for imp in improvements])),
        "mean_len_out_correct": float(
            np.mean([imp.output.score for imp in improvements if imp.output.correct] or [np.nan])
        ),
    }
