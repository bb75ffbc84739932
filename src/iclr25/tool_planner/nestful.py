"""NESTFUL's API specs as :class:`~iclr25.tool_planner.schemas.Tool`s, and checking a call sequence against them.

A NESTFUL spec lists ``query_parameters`` (``{name: {type, description, required}}``) and ``output_parameters``
(the response's fields, nested JSON-schema-like); the Tool's ``parameters`` is the JSON schema of the former and
``meta["output"]`` keeps the latter, so a backend can build a schema-conforming response and a reference
``$varN.field$`` can be checked against what the referenced API returns.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .schemas import Tool, validate_arguments

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
        probe = Tool(tool.name, tool.description, schema, tool.category)
        errors += [f"call {i} ({name}): {e}" for e in validate_arguments(probe, concrete)]
        if call.get("label"):
            produced[str(call["label"])] = tool
    return errors
