"""Claims: a paper's headline statement turned into a comparison of measured numbers over seeds.

The JSON form is a fixed schema read by other tools (``claims.json``)::

    {"slug", "preset", "seeds": [int], "runtime_s": float,
     "claims": [{"id", "statement", "metric",
                 "method": {"mean", "std", "values": [...]},
                 "baseline": {"mean", "std", "values"} | null,
                 "threshold", "direction": ">=" | "<=" | ">" | "<", "holds": bool, "note"}]}

Each claim also carries ``compare`` (how method and baseline are combined before the threshold test),
``reduce`` and ``measured`` (the number actually compared with the threshold) so a reader can redo the
verdict. ``holds`` is always computed from the values here, never passed in.

Non-finite numbers are stored as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (see
:func:`iclr25.common.io.to_jsonable`). A claim whose compared number is NaN — a seed that produced NaN, or a
ratio against a zero baseline, which is undefined rather than infinite — does not hold, and its
``undefined_reason`` says why. The parts of a compound claim (:func:`all_of`) get distinct ids
``<parent>.<part>``.

The document also carries ``provenance`` (git commit, UTC date, wall time, machine load, CPU count, preset,
device, versions) so a copy of it is a self-describing reference result.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .fmt import fmt_num, fmt_stat
from .io import as_float, to_jsonable

DIRECTIONS = (">=", "<=", ">", "<")  # ">" / "<": strict (a tie is not a gain)
COMPARES = ("value", "difference", "ratio")
REDUCES = ("mean", "all")


@dataclass(frozen=True)
class Stat:
    """Mean ± standard deviation (ddof=0) of per-seed values. A NaN value makes mean and std NaN (a seed that
    could not be measured is never silently dropped)."""

    mean: float
    std: float
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float] | float) -> Stat:
        """Mean ± std of per-seed ``values``: numbers only (NaN, ±inf and their JSON tags count). A boolean,
        ``None`` or any other non-number raises ``ValueError`` naming its position — a claim is never built
        from a value that is missing or is not a measurement."""
        if isinstance(values, (str, bytes)):
            raise ValueError(f"values must be numbers, got {values!r}")
        raw = np.asarray(values, dtype=object if isinstance(values, (list, tuple)) else None)
        if raw.dtype.kind in "iuf":
            v = np.atleast_1d(raw.astype(float))
        else:
            if raw.dtype.kind == "b":
                raise ValueError(f"values must be numbers, got booleans {raw.tolist()!r}")
            items = np.atleast_1d(np.asarray(values, dtype=object))
            if items.ndim != 1:
                raise ValueError(f"values must be a flat sequence of numbers, got shape {items.shape}")
            v = np.asarray([_number(x, i) for i, x in enumerate(items)], dtype=float)
        if v.size == 0:
            raise ValueError("values must hold at least one number, got an empty sequence")
        if v.ndim != 1:
            raise ValueError(f"values must be a flat sequence of numbers, got shape {v.shape}")
        with np.errstate(invalid="ignore"):
            return cls(float(v.mean()), float(v.std()), tuple(float(x) for x in v))

    @property
    def n_nan(self) -> int:
        return sum(math.isnan(x) for x in self.values)

    def to_json(self) -> dict[str, Any]:
        return {"mean": _f(self.mean), "std": _f(self.std), "values": [_f(x) for x in self.values]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Stat:
        return cls(as_float(d["mean"]), as_float(d["std"]), tuple(as_float(x) for x in d["values"]))

    def fmt(self, digits: int = 4) -> str:
        return fmt_stat(self.mean, self.std, digits)


def _number(x: Any, i: int) -> float:
    if x is None or isinstance(x, (bool, np.bool_)):
        raise ValueError(f"values must be numbers (NaN counts), got {x!r} at position {i}")
    try:
        return as_float(x)
    except ValueError as e:
        raise ValueError(f"values must be numbers, position {i}: {e}") from None


def _f(x: float) -> float | str:
    return to_jsonable(float(x))


def _compare(m: np.ndarray, b: np.ndarray | None, compare: str) -> np.ndarray:
    if compare == "value":
        return m
    assert b is not None
    if compare == "difference":
        return m - b
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b == 0, np.nan, m / np.where(b == 0, 1.0, b))  # x/0 is undefined, not ±inf


@dataclass(frozen=True)
class Claim:
    """One claim. Build it with :func:`make_claim` or :func:`all_of`; ``holds`` is derived."""

    id: str
    statement: str
    metric: str
    method: Stat
    baseline: Stat | None
    threshold: float
    direction: str
    compare: str = "value"
    reduce: str = "mean"
    note: str = ""
    parts: tuple[Claim, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {self.direction!r}")
        if self.compare not in COMPARES:
            raise ValueError(f"compare must be one of {COMPARES}, got {self.compare!r}")
        if self.reduce not in REDUCES:
            raise ValueError(f"reduce must be one of {REDUCES}, got {self.reduce!r}")
        if self.compare != "value" and self.baseline is None:
            raise ValueError(f"compare={self.compare!r} needs a baseline, got baseline=None")
        if not isinstance(self.id, str) or not _ID.fullmatch(self.id):
            raise ValueError(f"id must be a snake_case identifier (parts: parent.part), got {self.id!r}")

    # -- the verdict ---------------------------------------------------------------------------
    def _per_seed(self) -> np.ndarray:
        m = np.asarray(self.method.values, dtype=float)
        b = None if self.baseline is None else np.asarray(self.baseline.values, dtype=float)
        if b is not None and b.shape != m.shape:
            raise ValueError("reduce='all' needs paired method and baseline values of the same length")
        return _compare(m, b, self.compare)

    @property
    def measured(self) -> float:
        """The number compared with ``threshold``: the compared mean, or the worst seed for ``reduce='all'``."""
        if self.parts:
            return float("nan")
        if self.reduce == "all":
            v = self._per_seed()
            return float(v.min() if self.direction in (">=", ">") else v.max())
        m = np.asarray([self.method.mean])
        b = None if self.baseline is None else np.asarray([self.baseline.mean])
        return float(_compare(m, b, self.compare)[0])

    @property
    def holds(self) -> bool:
        if self.parts:
            return all(p.holds for p in self.parts)
        x = self.measured
        if math.isnan(x) or math.isnan(self.threshold):  # undefined: see undefined_reason
            return False
        cmp = {
            ">=": x >= self.threshold,
            "<=": x <= self.threshold,
            ">": x > self.threshold,
            "<": x < self.threshold,
        }
        return bool(cmp[self.direction])

    @property
    def undefined_reason(self) -> str:
        """Why the compared number is NaN (so the claim cannot hold), or ``""`` when it is defined."""
        if self.parts:
            return "; ".join(f"{p.id}: {r}" for p in self.parts if (r := p.undefined_reason))
        why = []
        for side, st in (("method", self.method), ("baseline", self.baseline)):
            if st is not None and st.n_nan:
                why.append(f"{st.n_nan} of {len(st.values)} {side} values are NaN")
        if self.compare == "ratio" and self.baseline is not None:
            b = self.baseline.values if self.reduce == "all" else (self.baseline.mean,)
            if any(x == 0 for x in b):
                why.append("ratio against a zero baseline is undefined")
        if math.isnan(self.threshold):
            why.append("threshold is NaN")
        if not why and math.isnan(self.measured):
            why.append("the compared number is NaN")
        return "; ".join(why)

    @property
    def verdict(self) -> str:
        """``holds``, ``fails`` or ``undefined`` (a NaN in the compared numbers: does not hold)."""
        if self.holds:
            return "holds"
        return "undefined" if self.undefined_reason and not self.parts else "fails"

    def describe(self) -> str:
        """One line: ``compare[, every seed]: measured direction threshold``."""
        every = ", every seed" if self.reduce == "all" else ""
        return f"{self.compare}{every}: {fmt_num(self.measured)} {self.direction} {fmt_num(self.threshold)}"

    # -- JSON ----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "statement": self.statement,
            "metric": self.metric,
            "method": self.method.to_json(),
            "baseline": None if self.baseline is None else self.baseline.to_json(),
            "threshold": _f(float(self.threshold)),
            "direction": self.direction,
            "holds": self.holds,
            "note": self.note,
            "compare": self.compare,
            "reduce": self.reduce,
            "measured": None if self.parts else _f(self.measured),
        }
        why = self.undefined_reason
        if why:
            d["undefined_reason"] = why
        if self.parts:
            d["parts"] = [p.to_json() for p in self.parts]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Claim:
        return cls(
            id=d["id"],
            statement=d["statement"],
            metric=d["metric"],
            method=Stat.from_json(d["method"]),
            baseline=None if d.get("baseline") is None else Stat.from_json(d["baseline"]),
            threshold=as_float(d["threshold"]),
            direction=d["direction"],
            compare=d.get("compare", "value"),
            reduce=d.get("reduce", "mean"),
            note=d.get("note", ""),
            parts=tuple(cls.from_json(p) for p in d.get("parts", [])),
        )


def make_claim(
    id: str,
    statement: str,
    metric: str,
    method: Sequence[float] | float,
    threshold: float,
    direction: str = ">=",
    baseline: Sequence[float] | float | None = None,
    compare: str = "value",
    reduce: str = "mean",
    note: str = "",
) -> Claim:
    """Build a claim from per-seed values.

    ``compare``: ``value`` tests mean(method) against the threshold; ``difference`` tests
    mean(method) − mean(baseline); ``ratio`` tests mean(method) / mean(baseline).
    ``reduce='all'`` applies the comparison seed by seed (paired) and needs every seed to pass.
    """
    return Claim(
        id=id,
        statement=statement,
        metric=metric,
        method=Stat.of(method),
        baseline=None if baseline is None else Stat.of(baseline),
        threshold=float(threshold),
        direction=direction,
        compare=compare,
        reduce=reduce,
        note=note,
    )


def all_of(id: str, statement: str, parts: Sequence[Claim], note: str = "") -> Claim:
    """A claim that holds when every part holds (e.g. 'ratio ≤ 5 for ours AND ≥ 8 for full attention').

    The first part's method/baseline/threshold are shown at top level; all parts are kept under ``parts``.
    Each part gets a distinct id ``<id>.<name>``: its own id when that differs from ``id``, otherwise a name
    made from its metric (``window_parity.cascade_acc_d4``); repeats get ``_2``, ``_3`` ….
    """
    if not parts:
        raise ValueError("parts must hold at least one claim")
    parts = _distinct_part_ids(id, parts)
    p0 = parts[0]
    return Claim(
        id=id,
        statement=statement,
        metric=" AND ".join(p.metric for p in parts),
        method=p0.method,
        baseline=p0.baseline,
        threshold=p0.threshold,
        direction=p0.direction,
        compare=p0.compare,
        reduce=p0.reduce,
        note=note,
        parts=tuple(parts),
    )


_ID = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*")


def explain_failures(claims: Sequence[Claim], notes: dict[str, str]) -> list[Claim]:
    """Each claim that does not hold gets ``notes[its id]`` as its note (``""`` when none is given): the measured
    explanation of a failure, attached after the verdict was computed from the numbers (so it can never change
    one). Claims that hold keep their note."""
    return [c if c.holds else dataclasses.replace(c, note=notes.get(c.id, "")) for c in claims]


def _name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower() or "part"


def _renamed(c: Claim, new_id: str) -> Claim:
    old = c.id
    sub = tuple(_renamed(p, new_id + p.id[len(old) :]) if p.id.startswith(old + ".") else p for p in c.parts)
    return dataclasses.replace(c, id=new_id, parts=sub)


def _distinct_part_ids(parent: str, parts: Sequence[Claim]) -> list[Claim]:
    ids = [p.id for p in parts]
    out, used = [], set()
    for p in parts:
        if p.id.startswith(parent + "."):
            base = p.id[len(parent) + 1 :]
        elif p.id != parent and ids.count(p.id) == 1:
            base = p.id
        else:
            base = _name(p.metric)
        name, k = base, 2
        while name in used:
            name, k = f"{base}_{k}", k + 1
        used.add(name)
        full = f"{parent}.{name}"
        out.append(p if p.id == full else _renamed(p, full))
    return out


STAT_REL_TOL = 1e-9  # stored mean/std/measured vs recomputed from values: float round-off, nothing more
STAT_ABS_TOL = 1e-12


def _agrees(stored: float, recomputed: float) -> bool:
    if math.isnan(stored) or math.isnan(recomputed):
        return math.isnan(stored) and math.isnan(recomputed)
    if math.isinf(stored) or math.isinf(recomputed):
        return stored == recomputed
    return math.isclose(stored, recomputed, rel_tol=STAT_REL_TOL, abs_tol=STAT_ABS_TOL)


def _check_stat(cid: Any, side: str, st: Stat) -> None:
    """``st`` as read from a document (stored mean/std) against Stat.of(its values)."""
    fresh = Stat.of(list(st.values))
    for name in ("mean", "std"):
        stored, again = getattr(st, name), getattr(fresh, name)
        if not _agrees(stored, again):
            raise ValueError(
                f"claim {cid!r}: {side} {name} {stored!r} does not match the {name} of its values ({again!r}, "
                f"recomputed; tolerance rel {STAT_REL_TOL:g}, abs {STAT_ABS_TOL:g})"
            )


CLAIMS_KEYS = ("slug", "preset", "seeds", "runtime_s", "claims")
CLAIM_KEYS = ("id", "statement", "metric", "method", "baseline", "threshold", "direction", "holds", "note")


def claims_document(
    slug: str,
    preset: str,
    seeds: Sequence[int],
    runtime_s: float,
    claims: Sequence[Claim],
    provenance: dict | None = None,
) -> dict:
    doc = {
        "slug": slug,
        "preset": preset,
        "seeds": [int(s) for s in seeds],
        "runtime_s": _f(float(runtime_s)),
        "claims": [c.to_json() for c in claims],
    }
    if provenance is not None:
        doc["provenance"] = to_jsonable(provenance)
    return doc


def validate_claims_document(doc: Any) -> list[Claim]:
    """Check ``doc`` against the claims.json schema and return its claims rebuilt from the numbers.

    Raises ``ValueError`` with the reason for anything malformed (never another exception type), including a
    stored ``mean``/``std`` that disagrees with the one recomputed from its ``values`` (every claim, part,
    method and baseline), a stored ``measured`` that disagrees with the one recomputed from those, and a stored
    ``holds`` that disagrees with the verdict recomputed from the values. "Disagrees" means beyond float
    round-off: ``math.isclose(stored, recomputed, rel_tol=STAT_REL_TOL, abs_tol=STAT_ABS_TOL)`` (1e-9 relative,
    1e-12 absolute), with NaN matching only NaN and ±inf only itself.
    """
    if not isinstance(doc, dict):
        raise ValueError(f"claims.json must hold a JSON object, got {type(doc).__name__}")
    for k in CLAIMS_KEYS:
        if k not in doc:
            raise ValueError(f"claims.json is missing key {k!r}")
    if not isinstance(doc["slug"], str) or not isinstance(doc["preset"], str):
        raise ValueError("claims.json 'slug' and 'preset' must be strings")
    seeds = doc["seeds"]
    if not isinstance(seeds, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds):
        raise ValueError("claims.json 'seeds' must be a list of ints")
    try:
        as_float(doc["runtime_s"])
    except ValueError as e:
        raise ValueError(f"claims.json 'runtime_s': {e}") from None
    if not isinstance(doc["claims"], list):
        raise ValueError("claims.json 'claims' must be a list")
    for k in ("valid",):
        if k in doc and not isinstance(doc[k], bool):
            raise ValueError(f"claims.json {k!r} must be true or false")
    if "provenance" in doc and not isinstance(doc["provenance"], dict):
        raise ValueError("claims.json 'provenance' must be an object")
    out = []
    for c in doc["claims"]:
        out.append(_validate_claim(c))
    return out


def _validate_claim(c: Any) -> Claim:
    if not isinstance(c, dict):
        raise ValueError(f"each claim must be a JSON object, got {type(c).__name__}")
    cid = c.get("id")
    for k in CLAIM_KEYS:
        if k not in c:
            raise ValueError(f"claim {cid!r} is missing key {k!r}")
    if not isinstance(cid, str):
        raise ValueError(f"claim id must be a string, got {cid!r}")
    for k in ("statement", "metric", "note"):
        if not isinstance(c[k], str):
            raise ValueError(f"claim {cid!r}: {k!r} must be a string")
    if c["direction"] not in DIRECTIONS:
        raise ValueError(f"claim {cid!r}: direction must be one of {DIRECTIONS}")
    if not isinstance(c["holds"], bool):
        raise ValueError(f"claim {cid!r}: 'holds' must be true or false")
    for side in ("method", "baseline"):
        s = c[side]
        if s is None and side == "baseline":
            continue
        if (
            not isinstance(s, dict)
            or not {"mean", "std", "values"} <= set(s)
            or not isinstance(s["values"], list)
        ):
            raise ValueError(f"claim {cid!r}: {side} must have mean, std and a list of values")
        if not s["values"]:
            raise ValueError(f"claim {cid!r}: {side} has no values")
    parts = c.get("parts", [])
    if not isinstance(parts, list):
        raise ValueError(f"claim {cid!r}: 'parts' must be a list")
    for p in parts:
        _validate_claim(p)
    try:
        claim = Claim.from_json(c)
        for side, st in (("method", claim.method), ("baseline", claim.baseline)):
            if st is not None:
                _check_stat(cid, side, st)
        holds = claim.holds
        stored_m = c.get("measured")
        if not claim.parts and stored_m is not None and not _agrees(as_float(stored_m), claim.measured):
            raise ValueError(
                f"stored measured {stored_m!r} does not match the number recomputed from the values "
                f"({claim.measured!r}; tolerance rel {STAT_REL_TOL:g}, abs {STAT_ABS_TOL:g})"
            )
        if claim.parts and stored_m is not None:
            raise ValueError(f"a compound claim stores no measured number (its parts do), got {stored_m!r}")
    except (KeyError, TypeError, ValueError) as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith(f"claim {cid!r}") else f"claim {cid!r}: {msg}") from None
    if holds != c["holds"]:
        raise ValueError(
            f"claim {cid!r}: stored holds={c['holds']} disagrees with the measured numbers (recomputed: {holds})"
        )
    return claim
