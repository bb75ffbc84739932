"""NESTFUL's API specs as :class:`~iclr25.tool_planner.schemas.Tool`s, checking a call sequence against them, a
simulated backend, the examples as tasks, and NESTFUL's sequence metrics.

A NESTFUL spec lists ``query_parameters`` (``{name: {type, description, required}}``) and ``output_parameters``
(the response's fields, nested JSON-schema-like); the Tool's ``parameters`` is the JSON schema of the former and
``meta["output"]`` keeps the latter, so a backend can build a schema-conforming response and a reference
``$varN.field$`` can be checked against what the referenced API returns.

The executable APIs are real web APIs (RapidAPI) that cannot be called from here, and NESTFUL records the gold
call sequences, not the responses. :class:`NestfulSimBackend` is therefore **simulated**: it answers every call
whose arguments match the API's schema with a deterministic response built from the spec's
``output_parameters`` (:func:`simulated_response`: every declared field, values derived from a hash of the API
and its arguments), so the same call always gets the same response and nested references resolve.

Metrics (NESTFUL, arXiv:2409.03797, §4 and its scorer): a call is the string ``name(k1 = v1, k2 = v2)`` with
sorted arguments; *full-sequence accuracy* is 1 when the executed sequence equals the gold one call for call,
*partial-sequence accuracy* the fraction of aligned positions that agree (sequences of different lengths are
aligned by API name as the scorer's ``post_process_api_with_args`` does); *F1* of function names and of
``k = v`` argument slots are macro-averaged over the gold labels of a corpus (scikit-learn's
``MultiLabelBinarizer``, as the scorer). Here arguments are compared after resolving references to the values
the calls actually returned.
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .backends import ToolResult, _lookup
from .schemas import Tool, schema_errors
from .tasks import Expr, Goal, Task

# NESTFUL's parameter types → JSON schema
_TYPES = {
    "string": {"type": "string"},
    "str": {"type": "string"},
    "number": {"type": "number"},
    "float": {"type": "number"},
    "integer": {"type": "integer"},
    "int": {"type": "integer"},
    "boolean": {"type": "boolean"},
    "bool": {"type": "boolean"},
    "array": {"type": "array"},
    "list": {"type": "array"},
    "object": {"type": "object"},
    "dict": {"type": "object"},
    "date (yyyy-mm-dd)": {"type": "string", "pattern": r"^\d{4}-\d{2}-\d{2}$"},
}
REF = re.compile(r"^\$(var\d+)(?:\.([^$]+))?\$$")
RESULT = "var_result"  # NESTFUL's last pseudo-call: which responses make up the answer


def _schema(param: Mapping[str, Any]) -> dict[str, Any]:
    t = str(param.get("type", "")).strip().lower()
    out = dict(_TYPES.get(t, {}))  # an unknown type admits any value (stated in the description)
    desc = str(param.get("description", "")).strip()
    if t and t not in _TYPES:
        desc = f"{desc} (type: {param.get('type')})".strip()
    if desc:
        out["description"] = desc
    return out


def tool_from_spec(spec: Mapping[str, Any], category: str = "") -> Tool:
    """One NESTFUL spec as a Tool (``category`` default: the API host, else ``nestful``)."""
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise ValueError(f"spec must be a NESTFUL spec mapping with a 'name', got {spec!r:.80}")
    params = spec.get("query_parameters") or spec.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise ValueError(
            f"spec {spec['name']!r}: query_parameters must be a mapping, got {type(params).__name__}"
        )
    props = {str(k): _schema(v if isinstance(v, Mapping) else {}) for k, v in params.items()}
    required = [str(k) for k, v in params.items() if isinstance(v, Mapping) and v.get("required") is True]
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    meta = {k: spec[k] for k in ("host", "endpoint", "method", "url", "output_parser") if k in spec}
    meta["output"] = dict(spec.get("output_parameters") or {})
    meta["nestful_name"] = str(spec["name"])
    return Tool(
        name=function_name(str(spec["name"])),
        description=str(spec.get("description", "")),
        parameters=schema,
        category=category or str(spec.get("host") or "nestful"),
        meta=meta,
    )


def function_name(name: str) -> str:
    """A NESTFUL API name as an OpenAI function name (``WeatherAPI.com_Realtime`` → ``WeatherAPI_com_Realtime``;
    characters outside ``[A-Za-z0-9_-]`` become ``_``, cut at 64); the original stays in ``meta["nestful_name"]``."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64] or "_"


def tools_from_specs(specs: Iterable[Mapping[str, Any]]) -> dict[str, Tool]:
    """``{NESTFUL name: Tool}``; a name given twice with different specs, or two names that become the same
    function name, are refused."""
    out: dict[str, Tool] = {}
    fn: dict[str, str] = {}
    for s in specs:
        t = tool_from_spec(s)
        key = t.meta["nestful_name"]
        if key in out and out[key].parameters != t.parameters:
            raise ValueError(f"NESTFUL spec {key!r} is declared twice with different parameters")
        if fn.get(t.name, key) != key:
            raise ValueError(
                f"NESTFUL specs {fn[t.name]!r} and {key!r} map to the same function name {t.name!r}"
            )
        out[key], fn[t.name] = t, key
    return out


def _has_field(output: Mapping[str, Any], dotted: str) -> bool:
    """Whether ``dotted`` (``a.b`` or ``a[0].b``) names a field the response declares."""
    node: Any = {"properties": output}
    for part in re.split(r"\.", re.sub(r"\[\d+\]", "", dotted)):
        props = node.get("properties") if isinstance(node, Mapping) else None
        if (
            isinstance(node, Mapping)
            and node.get("type") == "array"
            and isinstance(node.get("items"), Mapping)
        ):
            props = node["items"].get("properties")
        if not isinstance(props, Mapping) or part not in props:
            return False
        node = props[part]
    return True


def check_calls(example: Mapping[str, Any], tools: Mapping[str, Tool]) -> list[str]:
    """Every way the example's gold call sequence disagrees with the specs (empty: it validates): an unknown API,
    arguments that violate the API's schema (a reference stands for a value of the declared type), a reference to
    a label not produced earlier, or to a response field the referenced API does not declare."""
    errors: list[str] = []
    produced: dict[str, Tool] = {}
    for i, call in enumerate(example.get("output") or []):
        name = call.get("name")
        args = dict(call.get("arguments") or {})
        refs = {k: REF.match(v) for k, v in args.items() if isinstance(v, str) and REF.match(v)}
        for k, m in refs.items():
            label, fld = m.group(1), m.group(2)
            if label not in produced:
                errors.append(f"call {i} ({name}): argument {k} references {label}, not produced before")
            elif (
                fld
                and produced[label].meta.get("output")
                and not _has_field(produced[label].meta["output"], fld)
            ):
                errors.append(
                    f"call {i} ({name}): {label} ({produced[label].name}) declares no field {fld!r}"
                )
        if name == RESULT:
            continue
        tool = tools.get(name)
        if tool is None:
            errors.append(f"call {i}: unknown API {name!r}")
            continue
        concrete = {k: v for k, v in args.items() if k not in refs}
        schema = dict(tool.parameters)
        schema["required"] = [r for r in schema.get("required", []) if r not in refs]
        errors += [f"call {i} ({name}): {e}" for e in schema_errors(schema, concrete)]
        if call.get("label"):
            produced[str(call["label"])] = tool
    return errors


# ---------------------------------------------------------------------------------------------------------
# the declared response schema and the simulated backend
# ---------------------------------------------------------------------------------------------------------
def _out_field_schema(spec: Any) -> dict[str, Any]:
    """One ``output_parameters`` entry as JSON schema (``{"type": ...}`` or a bare type name such as
    ``"string"``; ``properties`` makes an object, ``items`` an array's elements; ``enum`` / non-empty
    ``allowed_values`` an enumeration; no or an unknown type (``file``) admits any value)."""
    if not isinstance(spec, Mapping):
        spec = {"type": str(spec)}
    t = str(spec.get("type", "")).strip().lower()
    props = spec.get("properties")
    if isinstance(props, Mapping):
        return {"type": "object", "properties": {str(k): _out_field_schema(v) for k, v in props.items()}}
    out = dict(_TYPES.get(t, {}))
    if out.get("type") == "array" and isinstance(spec.get("items"), Mapping):
        out["items"] = _out_field_schema(spec["items"])
    values = spec.get("enum") or spec.get("allowed_values")
    if isinstance(values, list) and values:
        out["enum"] = list(values)
    return out


def output_schema(tool: Tool) -> dict[str, Any]:
    """The JSON schema of ``tool``'s response, from its spec's ``output_parameters`` (``meta["output"]``)."""
    fields = tool.meta.get("output") or {}
    return {"type": "object", "properties": {str(k): _out_field_schema(v) for k, v in fields.items()}}


def _h(*key: Any) -> int:
    return int.from_bytes(
        hashlib.blake2b(json.dumps(key, sort_keys=True, default=str).encode(), digest_size=8).digest(),
        "little",
    )


def _value(schema: Mapping[str, Any], key: tuple, path: str) -> Any:
    h = _h(*key, path)
    if schema.get("enum"):
        return schema["enum"][h % len(schema["enum"])]
    t = schema.get("type")
    if t == "object":
        return {k: _value(v, key, f"{path}.{k}") for k, v in (schema.get("properties") or {}).items()}
    if t == "array":
        return [_value(schema.get("items") or {"type": "string"}, key, f"{path}[{i}]") for i in range(2)]
    if t == "number":
        return round(1.0 + (h % 99_900) / 100.0, 2)
    if t == "integer":
        return 1 + h % 1000
    if t == "boolean":
        return bool(h & 1)
    if schema.get("pattern") == _TYPES["date (yyyy-mm-dd)"]["pattern"]:
        return f"2024-{1 + h % 12:02d}-{1 + (h >> 8) % 28:02d}"
    leaf = re.sub(r"\W+", "_", path.rsplit(".", 1)[-1]).strip("_") or "value"
    return f"{leaf}-{h >> 32:08x}"


def simulated_response(tool: Tool, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A deterministic response of ``tool`` to ``arguments`` that conforms to :func:`output_schema`: every
    declared field present (arrays with two elements), values derived from a hash of (API, arguments, field) —
    strings ``<field>-<8 hex>``, numbers, integers and booleans from the hash, enumerations by the hash. The
    same call always returns the same response; different arguments give different values."""
    key = (tool.meta.get("nestful_name", tool.name), json.dumps(dict(arguments), sort_keys=True, default=str))
    return _value(output_schema(tool), key, "")


class NestfulSimBackend:
    """**Simulated** NESTFUL APIs (the real RapidAPI endpoints cannot be called from here): a call to an unknown
    API, or with arguments that violate the API's schema, fails as a server would; every other call gets
    :func:`simulated_response`. No other failures (no rate limits, no dead APIs) are injected."""

    simulated = True

    def __init__(self, tools: Iterable[Tool]):
        self.tools = list(tools)
        self._by_name = {t.name: t for t in self.tools}
        if len(self._by_name) != len(self.tools):
            raise ValueError("tools must have unique names")

    def reset(self, task_id: str) -> None:
        pass

    def call(self, name: str, arguments: dict) -> ToolResult:
        tool, rejected = _lookup(self._by_name, name, arguments)
        if rejected is not None:
            return rejected
        return ToolResult(True, simulated_response(tool, arguments))


# ---------------------------------------------------------------------------------------------------------
# examples as tasks
# ---------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class NestfulTask:
    """One NESTFUL example as a task: ``gold`` is its call sequence (``{"tool": Tool.name, "arguments": the
    example's arguments with their $varN$ references}``, ``var_result`` left out), ``part`` and ``index`` say
    where it comes from."""

    task: Task
    gold: tuple[dict, ...]
    part: str
    index: int


def _words(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", str(key)).replace("_", " ").strip().lower()


def nestful_task(example: Mapping[str, Any], tools: Mapping[str, Tool], part: str, index: int) -> NestfulTask:
    """The example as a :class:`NestfulTask` (``tools``: NESTFUL name → Tool, :func:`tools_from_specs`).

    Sub-goals follow the gold decomposition, one per call, each ``bound_only`` with the call's arguments as
    :class:`~iclr25.tool_planner.tasks.Expr` bindings (literals and references to earlier calls' results); the
    API is *not* named. A sub-goal's text is the name NESTFUL's annotators gave that call's result in the final
    ``var_result`` call (``"product_offers": "$var3$"`` → "product offers"), or the user query when no result
    name points at the call. ``ValueError`` for an unknown API."""
    calls = [c for c in example.get("output") or [] if c.get("name") != RESULT]
    labels = {str(c["label"]): j for j, c in enumerate(calls) if c.get("label")}
    names: dict[int, list[str]] = {}
    for c in example.get("output") or []:
        if c.get("name") == RESULT:
            for k, v in (c.get("arguments") or {}).items():
                for lab, _ in Expr(v, labels).refs():
                    if lab in labels and _words(k) not in names.setdefault(labels[lab], []):
                        names[labels[lab]].append(_words(k))
    query = str(example.get("input", ""))
    goals, gold = [], []
    for j, c in enumerate(calls):
        tool = tools.get(c.get("name"))
        if tool is None:
            raise ValueError(f"{part} example {index}: unknown API {c.get('name')!r}")
        args = dict(c.get("arguments") or {})
        goals.append(
            Goal(
                " ".join(names.get(j, [])) or query,
                {k: Expr(v, labels) for k, v in args.items()},
                capability=tool.name,
                bound_only=True,
            )
        )
        gold.append({"tool": tool.name, "arguments": args})
    task = Task(f"{part}-{index}", query, tuple(goals), {}, "", None)
    return NestfulTask(task, tuple(gold), part, index)


def run_gold(nt: NestfulTask, backend: Any) -> list[dict]:
    """The gold sequence executed through ``backend`` with every reference resolved to what the calls returned
    (a whole-value reference passed as the parameter's type, :func:`~iclr25.tool_planner.tasks.conform`, as the
    agents' argument filling does): ``[{"tool", "arguments"}]``. ``ValueError`` when a call fails or a
    reference does not resolve."""
    outputs: dict[int, Any] = {}
    out = []
    by_name = {t.name: t for t in backend.tools}
    for j, (g, goal) in enumerate(zip(nt.gold, nt.task.goals)):
        props = by_name[g["tool"]].parameters.get("properties", {}) if g["tool"] in by_name else {}
        try:
            args = {k: b.resolve(outputs, props.get(k)) for k, b in goal.bindings.items()}
        except LookupError as e:
            raise ValueError(
                f"{nt.task.id} call {j} ({g['tool']}): a reference does not resolve: {e}"
            ) from None
        res = backend.call(g["tool"], args)
        if not res.ok:
            raise ValueError(f"{nt.task.id} call {j} ({g['tool']}) fails: {res.error}")
        outputs[j] = res.output
        out.append({"tool": g["tool"], "arguments": args})
    return out


def nestful_tasks(
    examples: Sequence[Mapping[str, Any]], tools: Mapping[str, Tool], part: str, backend: Any
) -> tuple[list[tuple[NestfulTask, list[dict]]], dict[str, int]]:
    """The examples whose gold sequence is executable here — it validates against the specs (:func:`check_calls`)
    and runs through ``backend`` with every reference resolving — each with its resolved gold sequence, and the
    counts: ``examples``, ``kept``, ``dropped_invalid`` (the gold calls disagree with the specs),
    ``dropped_unresolved`` (valid, but a reference or call fails in the backend)."""
    kept, counts = [], {"examples": len(examples), "kept": 0, "dropped_invalid": 0, "dropped_unresolved": 0}
    for i, ex in enumerate(examples):
        if check_calls(ex, tools):
            counts["dropped_invalid"] += 1
            continue
        nt = nestful_task(ex, tools, part, i)
        try:
            kept.append((nt, run_gold(nt, backend)))
        except ValueError:
            counts["dropped_unresolved"] += 1
    counts["kept"] = len(kept)
    return kept, counts


# ---------------------------------------------------------------------------------------------------------
# NESTFUL's metrics
# ---------------------------------------------------------------------------------------------------------
def _canon(v: Any) -> str:
    return json.dumps(v, sort_keys=True, default=str)


def call_signature(call: Mapping[str, Any]) -> str:
    """``name(k1 = v1, k2 = v2)`` with sorted arguments and values as canonical JSON (NESTFUL's scorer form)."""
    args = ", ".join(sorted(f"{k} = {_canon(v)}" for k, v in (call.get("arguments") or {}).items()))
    return f"{call['tool']}({args})"


def align_calls(gold: Sequence[str], pred: Sequence[str]) -> tuple[list[str], list[str]]:
    """NESTFUL's ``post_process_api_with_args``: sequences of equal length are compared position by position;
    otherwise they are aligned by API name — equal names are paired, a gold call whose name differs from the
    next predicted one is paired with a gap, and predicted calls left over after the gold ones with gaps."""
    gold, pred = list(gold), list(pred)
    if len(gold) == len(pred):
        return gold, pred
    gn = [c.split("(", 1)[0] for c in gold]
    pn = [c.split("(", 1)[0] for c in pred]
    ag, ap, i, j = [], [], 0, 0
    while i < len(gold) or j < len(pred):
        if i < len(gold) and j < len(pred) and gn[i] == pn[j]:
            ag.append(gold[i]), ap.append(pred[j])
            i, j = i + 1, j + 1
        elif i < len(gold):
            ag.append(gold[i]), ap.append("")
            i += 1
        else:
            ag.append(""), ap.append(pred[j])
            j += 1
    return ag, ap


def sequence_scores(pred: Sequence[Mapping], gold: Sequence[Mapping]) -> tuple[bool, float]:
    """(full-sequence match, partial-sequence accuracy) of the executed calls ``pred`` against ``gold`` (both
    ``[{"tool", "arguments"}]`` with resolved values)."""
    if not gold:
        raise ValueError("gold must hold at least one call")
    ag, ap = align_calls([call_signature(c) for c in gold], [call_signature(c) for c in pred])
    partial = sum(a == b for a, b in zip(ag, ap)) / len(ag)
    return partial == 1.0, partial


def sequence_f1(preds: Sequence[Sequence[Mapping]], golds: Sequence[Sequence[Mapping]]) -> dict[str, float]:
    """NESTFUL's corpus-level F1 (scorer: ``compute_score_sklearn``): ``f1_func`` — macro F1 over API names,
    each example's names as a label set; ``f1_param`` — macro F1 over ``k = v`` slots, one row per example and
    API name (the union of predicted and gold names; an API called twice keeps its last call's slots, as the
    scorer's dict does). Labels are the gold ones; predicted labels never in gold are ignored."""
    from sklearn.metrics import f1_score
    from sklearn.preprocessing import MultiLabelBinarizer

    if len(preds) != len(golds) or not golds:
        raise ValueError(
            f"preds and golds must be equally long and non-empty, got {len(preds)}, {len(golds)}"
        )
    gi, pi, gs, ps = [], [], [], []
    for pred, gold in zip(preds, golds):
        gi.append([c["tool"] for c in gold])
        pi.append([c["tool"] for c in pred])
        gmap = {c["tool"]: [f"{k} = {_canon(v)}" for k, v in c["arguments"].items()] for c in gold}
        pmap = {c["tool"]: [f"{k} = {_canon(v)}" for k, v in c["arguments"].items()] for c in pred}
        for name in sorted(set(gmap) | set(pmap)):
            gs.append(gmap.get(name, []))
            ps.append(pmap.get(name, []))

    def macro(g: list, p: list) -> float:
        b = MultiLabelBinarizer().fit(g)
        if not len(b.classes_):
            return float("nan")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unknown predicted labels are ignored, as in the scorer
            return float(f1_score(b.transform(g), b.transform(p), average="macro", zero_division=0))

    return {"f1_func": macro(gi, pi), "f1_param": macro(gs, ps)}
