"""Tasks: a user query, its sub-goals with data dependencies, and a ground-truth answer.

An LLM decomposes a query itself; the offline :class:`~iclr25.tool_planner.llm.HeuristicPolicy` reads the
sub-goals the task carries (the same decomposition for every method compared). ``Ref(step, field)`` binds a
parameter to a field of an earlier sub-goal's result; ``Expr`` binds it to a NESTFUL-style value whose strings may
reference earlier results (``$var1.location.name$``, ``"10 * $var1.Exchange Rate$"``); unbound parameters are
filled by name from earlier results and the task's inputs (not when the goal is ``bound_only``).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Ref:
    """The ``field`` of the result of sub-goal ``step`` (0-based)."""

    step: int
    field: str


# a reference inside a NESTFUL value: ``$varN$`` (the whole result) or ``$varN.path$``
_REF_IN = re.compile(r"\$(var\d+)(?:\.([^$]+))?\$")
_PATH_PART = re.compile(r"^(.*?)((?:\[\d+\])*)$")


def get_path(obj: Any, path: str) -> Any:
    """The value at ``path`` in a JSON result: dotted fields with optional indices (``location.name``,
    ``author[0].id``; a field name may itself contain dots or spaces — the longest matching name wins); a field
    asked of a list is asked of its first element. ``""`` is ``obj`` itself. ``LookupError`` when absent."""
    if path == "":
        return obj
    if isinstance(obj, list) and obj and not path.startswith("["):
        return get_path(obj[0], path)
    if not isinstance(obj, Mapping):
        raise LookupError(f"no field {path!r} in a {type(obj).__name__}")
    cuts = [i for i, c in enumerate(path) if c == "."] + [len(path)]
    for cut in reversed(cuts):  # the longest field name first
        key, idx = _PATH_PART.match(path[:cut]).groups()
        if key in obj:
            node = obj[key]
            for i in re.findall(r"\[(\d+)\]", idx):
                if not isinstance(node, list) or int(i) >= len(node):
                    raise LookupError(f"no element {i} in {key!r}")
                node = node[int(i)]
            return get_path(node, path[cut + 1 :])
    raise LookupError(f"no field {path!r} (fields: {sorted(obj)[:8]})")


def conform(value: Any, schema: Mapping[str, Any]) -> Any:
    """``value`` passed as the type ``schema`` declares, where that loses nothing — what a caller does with a
    result whose declared type differs from the parameter's (NESTFUL's specs say ``product_id`` is a number in
    one API's response and a string in the next API's parameters): to a string, numbers and booleans as their
    JSON text and lists/objects as JSON; to an integer, an integral float or an integer string; to a number, a
    numeric string; to a boolean, ``"true"``/``"false"``; to an array, a single value as a one-element list.
    Anything else is returned unchanged (the call then fails schema validation)."""
    t = schema.get("type") if isinstance(schema, Mapping) else None
    if t == "string" and not isinstance(value, str):
        return json.dumps(value, sort_keys=True)
    if t == "integer" and not isinstance(value, bool):
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
            return int(value)
    if t == "number" and isinstance(value, str):
        try:
            x = float(value)
        except ValueError:
            return value
        return x if math.isfinite(x) else value
    if t == "boolean" and isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    if t == "array" and not isinstance(value, list):
        return [value]
    return value


@dataclass(frozen=True)
class Expr:
    """A NESTFUL argument value (any JSON value) whose strings may reference earlier sub-goals' results:
    ``labels`` maps a label (``var1``) to its sub-goal (0-based). A string that is one whole reference becomes
    the referenced value (of any type); references inside a longer string are replaced by the value's text (a
    string as it is, anything else as JSON); lists and objects are resolved element by element."""

    value: Any
    labels: Mapping[str, int] = field(default_factory=dict)

    def refs(self) -> list[tuple[str, str]]:
        """Every ``(label, path)`` this value references (path ``""``: the whole result)."""
        return [(m.group(1), m.group(2) or "") for m in _REF_IN.finditer(json.dumps(self.value))]

    def resolve(self, outputs: Mapping[int, Any], schema: Mapping[str, Any] | None = None) -> Any:
        """The value with every reference replaced from ``outputs`` (sub-goal → its result); ``LookupError`` when
        a referenced sub-goal has no result or its result lacks the field. With the receiving parameter's JSON
        ``schema``, a value that is one whole reference is passed as that parameter's type (:func:`conform`)."""
        out = self._resolve(self.value, outputs)
        if schema is not None and isinstance(self.value, str) and _REF_IN.fullmatch(self.value):
            out = conform(out, schema)
        return out

    def _lookup(self, label: str, path: str, outputs: Mapping[int, Any]) -> Any:
        if label not in self.labels or self.labels[label] not in outputs:
            raise LookupError(f"{label} has no result yet")
        return get_path(outputs[self.labels[label]], path or "")

    def _resolve(self, v: Any, outputs: Mapping[int, Any]) -> Any:
        if isinstance(v, str):
            m = _REF_IN.fullmatch(v)
            if m:
                return self._lookup(m.group(1), m.group(2) or "", outputs)

            def text(m: re.Match) -> str:
                x = self._lookup(m.group(1), m.group(2) or "", outputs)
                return x if isinstance(x, str) else json.dumps(x, sort_keys=True)

            return _REF_IN.sub(text, v)
        if isinstance(v, list):
            return [self._resolve(x, outputs) for x in v]
        if isinstance(v, Mapping):
            return {k: self._resolve(x, outputs) for k, x in v.items()}
        return v


@dataclass(frozen=True)
class Goal:
    """One sub-goal: its text, explicit argument bindings, and the true capability (analysis only).
    ``bound_only``: the bindings are the step's whole argument set (NESTFUL's gold calls list every argument), so
    a parameter without a binding is left out instead of being filled by name from earlier results or inputs."""

    text: str
    bindings: dict = field(default_factory=dict)
    capability: str = ""
    output: str = ""  # name of the result field this sub-goal produces
    bound_only: bool = False


@dataclass(frozen=True)
class Task:
    id: str
    query: str
    goals: tuple[Goal, ...]
    inputs: dict
    answer_field: str
    answer: Any  # ground truth

    def check(self, answer: Any) -> bool:
        """Exact match (numbers: relative tolerance 1e-6)."""
        if isinstance(self.answer, (int, float)) and not isinstance(self.answer, bool):
            try:
                return math.isclose(float(answer), float(self.answer), rel_tol=1e-6, abs_tol=1e-9)
            except (TypeError, ValueError):
                return False
        return answer == self.answer

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "query": self.query,
            "goals": [
                {
                    "text": g.text,
                    "bindings": {k: _binding_json(v) for k, v in g.bindings.items()},
                    "capability": g.capability,
                    "output": g.output,
                    **({"bound_only": True} if g.bound_only else {}),
                }
                for g in self.goals
            ],
            "inputs": self.inputs,
            "answer_field": self.answer_field,
            "answer": self.answer,
        }


def _binding_json(v: Any) -> Any:
    if isinstance(v, Ref):
        return {"ref": [v.step, v.field]}
    if isinstance(v, Expr):
        return {"expr": v.value, "labels": dict(v.labels)}
    return v
