"""Claims: a paper's headline statement turned into a comparison of measured numbers over seeds.

The JSON form is a fixed schema read by other tools (``claims.json``)::

    {"slug", "preset", "seeds": [int], "runtime_s": float,
     "claims": [{"id", "statement", "metric",
                 "method": {"mean", "std", "values": [...]},
                 "baseline": {"mean", "std", "values"} | null,
                 "threshold", "direction": ">=" | "<=", "holds": bool, "note"}]}

Each claim also carries ``compare`` (how method and baseline are combined before the threshold test),
``reduce`` and ``measured`` (the number actually compared with the threshold) so a reader can redo the
verdict. ``holds`` is always computed from the values here, never passed in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DIRECTIONS = (">=", "<=")
COMPARES = ("value", "difference", "ratio")
REDUCES = ("mean", "all")


@dataclass(frozen=True)
class Stat:
    """Mean ± standard deviation (ddof=0) of per-seed values."""

    mean: float
    std: float
    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float] | float) -> Stat:
        v = np.atleast_1d(np.asarray(values, dtype=float))
        if v.size == 0:
            raise ValueError("values must hold at least one number, got an empty sequence")
        return cls(float(v.mean()), float(v.std()), tuple(float(x) for x in v))

    def to_json(self) -> dict[str, Any]:
        return {"mean": _f(self.mean), "std": _f(self.std), "values": [_f(x) for x in self.values]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Stat:
        return cls(_nan(d["mean"]), _nan(d["std"]), tuple(_nan(x) for x in d["values"]))

    def fmt(self, digits: int = 3) -> str:
        return f"{self.mean:.{digits}g} ± {self.std:.{digits}g}"


def _f(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _nan(x: float | None) -> float:
    return float("nan") if x is None else float(x)


def _compare(m: np.ndarray, b: np.ndarray | None, compare: str) -> np.ndarray:
    if compare == "value":
        return m
    assert b is not None
    if compare == "difference":
        return m - b
    with np.errstate(divide="ignore", invalid="ignore"):
        return m / b


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
        if not self.id or not self.id.replace("_", "").isalnum():
            raise ValueError(f"id must be a non-empty snake_case identifier, got {self.id!r}")

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
            return float(v.min() if self.direction == ">=" else v.max())
        m = np.asarray([self.method.mean])
        b = None if self.baseline is None else np.asarray([self.baseline.mean])
        return float(_compare(m, b, self.compare)[0])

    @property
    def holds(self) -> bool:
        if self.parts:
            return all(p.holds for p in self.parts)
        x = self.measured
        if math.isnan(x):  # ±inf compares normally (e.g. a ratio over a baseline of 0)
            return False
        return bool(x >= self.threshold) if self.direction == ">=" else bool(x <= self.threshold)

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
            "measured": _f(self.measured),
        }
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
            threshold=_nan(d["threshold"]),
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
    """
    if not parts:
        raise ValueError("parts must hold at least one claim")
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


CLAIMS_KEYS = ("slug", "preset", "seeds", "runtime_s", "claims")
CLAIM_KEYS = ("id", "statement", "metric", "method", "baseline", "threshold", "direction", "holds", "note")


def claims_document(
    slug: str, preset: str, seeds: Sequence[int], runtime_s: float, claims: Sequence[Claim]
) -> dict:
    return {
        "slug": slug,
        "preset": preset,
        "seeds": [int(s) for s in seeds],
        "runtime_s": float(runtime_s),
        "claims": [c.to_json() for c in claims],
    }


def validate_claims_document(doc: dict) -> None:
    """Raise ``ValueError`` when ``doc`` does not follow the claims.json schema."""
    for k in CLAIMS_KEYS:
        if k not in doc:
            raise ValueError(f"claims.json is missing key {k!r}")
    if not isinstance(doc["seeds"], list) or not all(isinstance(s, int) for s in doc["seeds"]):
        raise ValueError("claims.json 'seeds' must be a list of ints")
    for c in doc["claims"]:
        for k in CLAIM_KEYS:
            if k not in c:
                raise ValueError(f"claim {c.get('id')!r} is missing key {k!r}")
        if c["direction"] not in DIRECTIONS:
            raise ValueError(f"claim {c['id']!r}: direction must be one of {DIRECTIONS}")
        for side in ("method", "baseline"):
            s = c[side]
            if s is None and side == "baseline":
                continue
            if not {"mean", "std", "values"} <= set(s):
                raise ValueError(f"claim {c['id']!r}: {side} must have mean, std and values")
        if Claim.from_json(c).holds != c["holds"]:
            raise ValueError(f"claim {c['id']!r}: 'holds' disagrees with the measured numbers")
