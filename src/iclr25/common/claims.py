"""Claims: a paper's headline statement turned into a comparison of measured numbers over seeds.

The JSON form is a fixed schema read by other tools (``claims.json``)::

    {"slug", "preset", "seeds": [int], "runtime_s": float,
     "claims": [{"id", "statement", "metric",
                 "method": {"mean", "std", "values": [...]},
                 "baseline": {"mean", "std", "values"} | null,
                 "threshold", "direction": ">=" | "<=" | ">" | "<", "holds": bool, "note",
                 "verdict": "holds" | "fails" | "not decided" | "undefined", "passes": bool,
                 "interval": [low, high], "seeds_to_decide": int | null, "check": str}]}

Each claim also carries ``compare`` (how method and baseline are combined before the threshold test),
``reduce`` and ``measured`` (the number actually compared with the threshold) so a reader can redo the
verdict. Every verdict is computed from the values here, never passed in.

**The decision rule** (:data:`DECISION_RULE`, :meth:`Claim.decision`) is three-valued: a claim *holds* only when
the two-sided 95 % Student-t interval over seeds of its compared statistic lies on the threshold's side, *fails*
when it lies on the other side, and is otherwise *not decided* — with ``seeds_to_decide``, the seed count at which
the interval would clear the threshold were the mean and standard deviation to stay as measured. ``passes`` is the
point test (the measured number against the threshold: what ``holds`` meant before); ``holds`` is
``verdict == "holds"``. Documents written before the rule (no ``verdict``) are still valid: their ``holds`` is
checked as ``passes`` and their verdict derived from the stored per-seed values when they are read. A *check*
(``check``: why — a metric fixed by construction or saturated at a bound) is shown with its pass/fail and never
counted as a claim (:func:`verdict_counts`); :data:`DECLARED_CHECKS` names those in systems that predate
``make_claim(check=...)``.

Non-finite numbers are stored as the strings ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (see
:func:`iclr25.common.io.to_jsonable`). A claim whose compared number is NaN — a seed that produced NaN, or a
ratio against a zero baseline, which is undefined rather than infinite — does not hold: its verdict is
``undefined`` (counted as not decided) and its ``undefined_reason`` says why. The parts of a compound claim
(:func:`all_of`) get distinct ids ``<parent>.<part>``.

The document also carries ``provenance`` (git commit, UTC date, wall time, machine load, CPU count, preset,
device, versions) so a copy of it is a self-describing reference result.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from .fmt import fmt_num, fmt_stat
from .io import as_float, to_jsonable
from .stats import fieller_interval95, seeds_to_decide, t_interval95

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


VERDICTS = ("holds", "fails", "not decided", "undefined")  # "undefined": not decided because a number is NaN
DECIDED = ("holds", "fails")

DECISION_RULE = (
    "A claim holds only when the two-sided 95 % Student-t interval over seeds of its compared statistic lies "
    "entirely on the threshold's side (the threshold itself counts for >= and <=, not for > and <); it fails when "
    "the interval lies entirely on the other side; otherwise it is not decided. The statistic: the per-seed "
    "values (compare=value), the paired per-seed differences method − baseline (difference), or the ratio of "
    "means with its Fieller interval — the ratios r for which the paired t-interval of method − r·baseline "
    "contains 0 (ratio; unbounded, hence not decided, when the baseline mean is not distinguishable from 0). "
    "reduce=all (on every seed): one seed on the wrong side fails the claim; it holds only when every seed passes "
    "and the interval of the per-seed values clears the threshold. One seed gives no interval: not decided. A NaN "
    "makes the claim undefined (not decided). A compound claim fails when a part fails, is not decided when a part "
    "is not decided and none fails, and holds when every part holds. A check (a metric fixed by construction or "
    "saturated at a bound) is tested on its measured number alone and is never counted as a claim. A claim that "
    "is not decided carries the seed count at which the interval would clear the threshold were the mean and "
    "standard deviation to stay as measured."
)


@dataclass(frozen=True)
class Decision:
    """What :data:`DECISION_RULE` says about one claim.

    ``interval``: the 95 % interval of the compared statistic (NaN for a compound claim, fewer than two seeds or
    a NaN value; ±inf for an unbounded ratio); ``seeds_to_decide``: for a claim that is not decided, the seed
    count at which the interval would clear the threshold (``None`` when it cannot be estimated or exceeds
    :data:`iclr25.common.stats.MAX_SEEDS_ESTIMATE`); ``why``: one line on why it is not decided (``""`` when it
    is decided)."""

    verdict: str
    interval: tuple[float, float] = (math.nan, math.nan)
    seeds_to_decide: int | None = None
    why: str = ""

    @property
    def decided(self) -> bool:
        return self.verdict in DECIDED


def _on_side(x: float, thr: float, direction: str) -> bool:
    return bool({">=": x >= thr, "<=": x <= thr, ">": x > thr, "<": x < thr}[direction])


def _clears(lo: float, hi: float, thr: float, direction: str) -> str:
    """``holds`` / ``fails`` / ``not decided`` for an interval [lo, hi] against ``direction thr``."""
    if direction in (">=", ">"):
        if _on_side(lo, thr, direction):
            return "holds"
        return "fails" if not _on_side(hi, thr, direction) else "not decided"
    if _on_side(hi, thr, direction):
        return "holds"
    return "fails" if not _on_side(lo, thr, direction) else "not decided"


@dataclass(frozen=True)
class Claim:
    """One claim. Build it with :func:`make_claim` or :func:`all_of`; the verdict is derived.

    ``passes``: the measured number (:attr:`measured`) is on the threshold's side — the point test, the old
    ``holds``. ``verdict``: :data:`DECISION_RULE` over seeds (``holds``, ``fails``, ``not decided`` or
    ``undefined``); ``holds`` is ``verdict == "holds"``. ``check``: why this is a check rather than a claim
    (a metric fixed by construction or saturated at a bound; ``""`` for a claim): a check is decided by
    ``passes`` alone and never counted as a claim."""

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
    check: str = ""

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
        if not isinstance(self.check, str):
            raise ValueError(
                f"check must be a string (why it is a check, '' for a claim), got {self.check!r}"
            )

    # -- the point test ------------------------------------------------------------------------
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
    def passes(self) -> bool:
        """The point test: :attr:`measured` on the threshold's side (every part's, for a compound claim). This is
        what ``holds`` meant before the three-valued rule; a NaN never passes."""
        if self.parts:
            return all(p.passes for p in self.parts)
        x = self.measured
        if math.isnan(x) or math.isnan(self.threshold):  # undefined: see undefined_reason
            return False
        return _on_side(x, self.threshold, self.direction)

    # -- the verdict ---------------------------------------------------------------------------
    @property
    def is_check(self) -> bool:
        """A check, not a claim: declared (``check``), or a compound claim whose parts are all checks."""
        if self.parts:
            return bool(self.check) or all(p.is_check for p in self.parts)
        return bool(self.check)

    @cached_property
    def decision(self) -> Decision:
        """:data:`DECISION_RULE` applied to this claim's numbers."""
        if self.parts:
            ds = [p.decision for p in self.parts]
            if self.check and not all(p.is_check for p in self.parts):
                return Decision("holds" if self.passes else "fails")
            if any(d.verdict == "fails" for d in ds):
                return Decision("fails")
            open_ = [(p, d) for p, d in zip(self.parts, ds, strict=True) if not d.decided]
            if not open_:
                return Decision("holds")
            need = [d.seeds_to_decide for _, d in open_]
            n = None if any(x is None for x in need) else max(need)  # type: ignore[type-var]
            return Decision(
                "not decided", seeds_to_decide=n, why="; ".join(f"{p.id}: {d.why}" for p, d in open_)
            )
        return self._leaf_decision()

    def _leaf_decision(self) -> Decision:
        thr, direction = self.threshold, self.direction
        if self.check:
            if self.undefined_reason:
                return Decision("undefined", why=self.undefined_reason)
            return Decision("holds" if self.passes else "fails", (self.measured, self.measured))
        m = np.asarray(self.method.values, dtype=float)
        b = None if self.baseline is None else np.asarray(self.baseline.values, dtype=float)
        paired = b is None or b.shape == m.shape
        if self.reduce == "all" and paired:
            v = _compare(m, b, self.compare)
            finite = v[~np.isnan(v)]
            if not math.isnan(thr) and any(not _on_side(float(x), thr, direction) for x in finite):
                bad = sum(not _on_side(float(x), thr, direction) for x in finite)
                return Decision("fails", t_interval95(v), why=f"{bad} of {v.size} seeds on the wrong side")
        if self.undefined_reason:
            return Decision("undefined", why=self.undefined_reason)
        if not paired:
            if self.compare == "ratio" or self.reduce == "all":
                return Decision(
                    "not decided", why=f"{m.size} method and {b.size} baseline values are not paired"
                )
            lo, hi = _welch_interval95(m, b)  # difference of unpaired means
            d, stat_thr = None, thr
        elif self.compare == "ratio" and self.reduce == "mean":
            lo, hi = fieller_interval95(m, b)
            d, stat_thr = m - thr * b, 0.0  # the Fieller test of ratio = thr is the t-test of m − thr·b
        else:
            d, stat_thr = _compare(m, b, self.compare), thr
            lo, hi = t_interval95(d)
        if m.size < 2:
            return Decision("not decided", (lo, hi), why="one seed gives no interval")
        if math.isnan(lo) or math.isnan(hi):
            return Decision("undefined", (lo, hi), why="the interval is undefined")
        verdict = "not decided" if math.isinf(lo) and math.isinf(hi) else _clears(lo, hi, thr, direction)
        if verdict != "not decided":
            return Decision(verdict, (lo, hi))
        n = None if d is None else seeds_to_decide(d, stat_thr)
        if self.compare == "ratio" and self.reduce == "mean" and b is not None and n is not None:
            nb = seeds_to_decide(
                b, 0.0
            )  # the Fieller interval is bounded once the baseline mean is clear of 0
            n = None if nb is None else max(n, nb)
        if math.isinf(lo):
            why = "the ratio's interval is unbounded (the baseline mean is not distinguishable from 0)"
            return Decision("not decided", (lo, hi), n, why)
        return Decision(
            "not decided", (lo, hi), n, f"the 95 % interval contains the threshold {fmt_num(thr)}"
        )

    @property
    def verdict(self) -> str:
        """``holds``, ``fails``, ``not decided`` or ``undefined`` (:data:`DECISION_RULE`)."""
        return self.decision.verdict

    @property
    def holds(self) -> bool:
        """``verdict == "holds"``: the interval over seeds clears the threshold (a check: it passes)."""
        return self.verdict == "holds"

    @property
    def interval(self) -> tuple[float, float]:
        return self.decision.interval

    @property
    def seeds_to_decide(self) -> int | None:
        return self.decision.seeds_to_decide

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

    def describe(self) -> str:
        """One line: ``compare[, every seed]: measured direction threshold``."""
        every = ", every seed" if self.reduce == "all" else ""
        return f"{self.compare}{every}: {fmt_num(self.measured)} {self.direction} {fmt_num(self.threshold)}"

    # -- JSON ----------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        dec = self.decision
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
            "verdict": dec.verdict,
            "passes": self.passes,
        }
        if not self.parts:
            d["interval"] = [_f(dec.interval[0]), _f(dec.interval[1])]
        if not dec.decided:
            d["seeds_to_decide"] = dec.seeds_to_decide
        if self.check:
            d["check"] = self.check
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
            check=d.get("check", ""),
        )


def _welch_interval95(m: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """95 % Welch interval of mean(m) − mean(b) for unpaired samples (NaN when either has fewer than 2)."""
    from scipy import stats

    if m.size < 2 or b.size < 2 or not (np.isfinite(m).all() and np.isfinite(b).all()):
        return math.nan, math.nan
    vm, vb = m.var(ddof=1) / m.size, b.var(ddof=1) / b.size
    se = math.sqrt(vm + vb)
    diff = float(m.mean() - b.mean())
    if se == 0:
        return diff, diff
    dof = (vm + vb) ** 2 / (vm**2 / (m.size - 1) + vb**2 / (b.size - 1))
    h = float(stats.t.ppf(0.975, dof)) * se
    return diff - h, diff + h


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
    check: str = "",
) -> Claim:
    """Build a claim from per-seed values.

    ``compare``: ``value`` tests mean(method) against the threshold; ``difference`` tests
    mean(method) − mean(baseline); ``ratio`` tests mean(method) / mean(baseline).
    ``reduce='all'`` applies the comparison seed by seed (paired) and needs every seed to pass.
    The verdict follows :data:`DECISION_RULE` (a 95 % interval over seeds against the threshold).

    ``check``: say why this is a *check* rather than a claim — a metric fixed by construction (a parameter count
    computed from the config, an accuracy on the training set) or saturated at a bound (a recall of 1.000 on every
    seed and arm). A check is shown with its measured number and pass/fail, never counted as a claim.
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
        check=check,
    )


def all_of(id: str, statement: str, parts: Sequence[Claim], note: str = "") -> Claim:
    """A claim that holds when every part holds (e.g. 'ratio ≤ 5 for ours AND ≥ 8 for full attention'); it fails
    when a part fails and is not decided when a part is not decided and none fails (:data:`DECISION_RULE`). A part
    that is a check counts by its pass/fail; a compound claim whose parts are all checks is a check.

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
    """Each claim whose measured number does not pass (:attr:`Claim.passes`) gets ``notes[its id]`` as its note
    (``""`` when none is given): the measured explanation of a failure, attached after the verdict was computed
    from the numbers (so it can never change one). Claims that pass keep their note (a claim that passes but is
    not decided keeps the note that says so)."""
    return [c if c.passes else dataclasses.replace(c, note=notes.get(c.id, "")) for c in claims]


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

# Checks in systems whose claims predate ``make_claim(check=...)``: (slug, claim id) → why it is a check. Applied
# to every document of that system when it is written (claims_document) or read (validate_claims_document), so the
# committed references are re-derived without being edited. A system that passes ``check=`` itself needs no entry.
DECLARED_CHECKS: dict[tuple[str, str], str] = {
    ("scope_faithfulness", "recall_kept"): "saturated: field recall is 1.000 for every arm and seed",
    (
        "cascading_kv",
        "window_parity.streaming_acc_d40",
    ): "saturated: StreamingLLM's accuracy inside its window is 1.000 on every seed",
    ("quantum_peft", "param_ratio"): "fixed by construction: parameter counts computed from the config",
    ("quantum_peft", "log_scaling"): "fixed by construction: analytic parameter counts (count_parameters)",
    ("transformer2", "param_efficiency"): "fixed by construction: parameter counts computed from the config",
    ("transformer2", "dispatch.classification_expert"): "saturated: routing accuracy 1.000 on every seed",
    ("transformer2", "expert_specificity_controls.diagonal_dominance"): "saturated: 3 of 3 diagonal cells on "
    "every seed",
}


def declared_check(slug: str, claim_id: str) -> str:
    """Why claim ``claim_id`` of system ``slug`` is a check (:data:`DECLARED_CHECKS`; a part of a declared
    compound claim inherits it), or ``""``."""
    cid = claim_id
    while True:
        why = DECLARED_CHECKS.get((slug, cid), "")
        if why or "." not in cid:
            return why
        cid = cid.rsplit(".", 1)[0]


def with_declared_checks(slug: str, claims: Sequence[Claim]) -> list[Claim]:
    """``claims`` with :data:`DECLARED_CHECKS` of system ``slug`` applied (every part too); a claim that already
    says why it is a check keeps its own reason."""

    def one(c: Claim) -> Claim:
        parts = tuple(one(p) for p in c.parts)
        why = c.check or declared_check(slug, c.id)
        if why == c.check and parts == c.parts:
            return c
        return dataclasses.replace(c, parts=parts, check=why)

    return [one(c) for c in claims]


@dataclass(frozen=True)
class VerdictCounts:
    """Top-level claims by verdict (``not_decided`` includes ``undefined``), and the checks beside them."""

    holds: int = 0
    fails: int = 0
    not_decided: int = 0
    checks: int = 0
    checks_failed: int = 0

    @property
    def claims(self) -> int:
        return self.holds + self.fails + self.not_decided

    def __add__(self, other: VerdictCounts) -> VerdictCounts:
        return VerdictCounts(
            *(a + b for a, b in zip(dataclasses.astuple(self), dataclasses.astuple(other), strict=True))
        )

    def text(self) -> str:
        """``3 hold · 1 fails · 2 not decided (of 6 claims) · 1 check``."""
        chk = ""
        if self.checks:
            failed = f", {self.checks_failed} FAILED" if self.checks_failed else ""
            chk = f" · {self.checks} check{'' if self.checks == 1 else 's'}{failed}"
        return (
            f"{self.holds} hold{'s' if self.holds == 1 else ''} · {self.fails} fail{'s' if self.fails == 1 else ''}"
            f" · {self.not_decided} not decided (of {self.claims} claim{'' if self.claims == 1 else 's'}){chk}"
        )


def verdict_counts(claims: Sequence[Claim]) -> VerdictCounts:
    """Count the top-level ``claims`` by verdict; checks are counted apart (never as claims)."""
    h = f = nd = ch = chf = 0
    for c in claims:
        if c.is_check:
            ch += 1
            chf += not c.holds
        elif c.verdict == "holds":
            h += 1
        elif c.verdict == "fails":
            f += 1
        else:
            nd += 1
    return VerdictCounts(h, f, nd, ch, chf)


def claims_document(
    slug: str,
    preset: str,
    seeds: Sequence[int],
    runtime_s: float,
    claims: Sequence[Claim],
    provenance: dict | None = None,
) -> dict:
    """The claims.json document; :data:`DECLARED_CHECKS` of ``slug`` are applied to ``claims`` first."""
    doc = {
        "slug": slug,
        "preset": preset,
        "seeds": [int(s) for s in seeds],
        "runtime_s": _f(float(runtime_s)),
        "claims": [c.to_json() for c in with_declared_checks(slug, claims)],
    }
    if provenance is not None:
        doc["provenance"] = to_jsonable(provenance)
    return doc


def validate_claims_document(doc: Any) -> list[Claim]:
    """Check ``doc`` against the claims.json schema and return its claims rebuilt from the numbers, with the
    verdicts of :data:`DECISION_RULE` (and :data:`DECLARED_CHECKS` of its system applied).

    Raises ``ValueError`` with the reason for anything malformed (never another exception type), including a
    stored ``mean``/``std`` that disagrees with the one recomputed from its ``values`` (every claim, part,
    method and baseline), a stored ``measured`` that disagrees with the one recomputed from those, and a stored
    verdict that disagrees with the one recomputed from the values. "Disagrees" means beyond float
    round-off: ``math.isclose(stored, recomputed, rel_tol=STAT_REL_TOL, abs_tol=STAT_ABS_TOL)`` (1e-9 relative,
    1e-12 absolute), with NaN matching only NaN and ±inf only itself.

    Documents written before the three-valued rule have no ``verdict``: their ``holds`` was the point test, so it
    is checked against :attr:`Claim.passes` and the verdict is derived from the stored values. A document with a
    ``verdict`` must store the recomputed one, ``holds`` equal to ``verdict == "holds"`` and (where stored) the
    same ``passes`` and ``interval``.
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
    return [_validate_claim(c, doc["slug"]) for c in doc["claims"]]


def _validate_claim(c: Any, slug: str) -> Claim:
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
    if "check" in c and not isinstance(c["check"], str):
        raise ValueError(f"claim {cid!r}: 'check' must be a string (why it is a check)")
    if c["direction"] not in DIRECTIONS:
        raise ValueError(f"claim {cid!r}: direction must be one of {DIRECTIONS}")
    for k in ("holds", "passes"):
        if k in c and not isinstance(c[k], bool):
            raise ValueError(f"claim {cid!r}: {k!r} must be true or false")
    if "verdict" in c and c["verdict"] not in VERDICTS:
        raise ValueError(f"claim {cid!r}: verdict must be one of {VERDICTS}, got {c['verdict']!r}")
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
        _validate_claim(p, slug)
    try:
        claim = with_declared_checks(slug, [Claim.from_json(c)])[0]
        for side, st in (("method", claim.method), ("baseline", claim.baseline)):
            if st is not None:
                _check_stat(cid, side, st)
        passes, verdict = claim.passes, claim.verdict
        stored_m = c.get("measured")
        if not claim.parts and stored_m is not None and not _agrees(as_float(stored_m), claim.measured):
            raise ValueError(
                f"stored measured {stored_m!r} does not match the number recomputed from the values "
                f"({claim.measured!r}; tolerance rel {STAT_REL_TOL:g}, abs {STAT_ABS_TOL:g})"
            )
        if claim.parts and stored_m is not None:
            raise ValueError(f"a compound claim stores no measured number (its parts do), got {stored_m!r}")
        stored_i = c.get("interval")
        if "verdict" in c and stored_i is not None and not claim.parts:
            if not isinstance(stored_i, list) or len(stored_i) != 2:
                raise ValueError(f"'interval' must be [low, high], got {stored_i!r}")
            for x, y in zip(stored_i, claim.interval, strict=True):
                if not _agrees(as_float(x), y):
                    raise ValueError(
                        f"stored interval {stored_i!r} does not match the one recomputed from the values "
                        f"({list(claim.interval)!r})"
                    )
    except (KeyError, TypeError, ValueError) as e:
        msg = str(e)
        raise ValueError(msg if msg.startswith(f"claim {cid!r}") else f"claim {cid!r}: {msg}") from None
    if "verdict" not in c:  # written before the three-valued rule: 'holds' was the point test
        if passes != c["holds"]:
            raise ValueError(
                f"claim {cid!r}: stored holds={c['holds']} disagrees with the measured numbers (recomputed: "
                f"{passes})"
            )
        return claim
    if c["verdict"] != verdict:
        raise ValueError(
            f"claim {cid!r}: stored verdict {c['verdict']!r} disagrees with the measured numbers (recomputed: "
            f"{verdict!r})"
        )
    if c["holds"] != (verdict == "holds"):
        raise ValueError(
            f"claim {cid!r}: stored holds={c['holds']} disagrees with the measured numbers (recomputed verdict: "
            f"{verdict!r})"
        )
    if "passes" in c and c["passes"] != passes:
        raise ValueError(
            f"claim {cid!r}: stored passes={c['passes']} disagrees with the measured numbers (recomputed: {passes})"
        )
    return claim
