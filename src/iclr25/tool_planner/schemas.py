"""Tools as OpenAI function schemas, their validation, and the ToolBench / BFCL converters.

A tool is what an OpenAI-compatible server receives in ``tools=[{"type": "function", "function": {...}}]``:
a name, a description (the tool's *functionality text* f(a) of Tool-Planner §3.1) and a JSON-schema
``parameters`` object. Schemas are checked with ``jsonschema`` (Draft 2020-12 meta-schema) and call arguments
are validated against them, so a model's malformed call is recorded as a failed call, never a crash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function names


@dataclass(frozen=True, eq=False)
class Tool:
    """One callable API as an OpenAI function schema.

    ``category`` is the tool/package it belongs to (ToolBench's tool, BFCL's API class); ``meta`` holds anything
    a backend needs to execute it (never sent to an LLM).
    """

    name: str
    description: str
    parameters: dict = field(default_factory=lambda: {"type": "object", "properties": {}})
    category: str = ""
    meta: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        validate_tool(self)

    @property
    def required(self) -> list[str]:
        return list(self.parameters.get("required", []))

    @property
    def param_names(self) -> list[str]:
        return list(self.parameters.get("properties", {}))

    def to_openai(self) -> dict:
        """``{"type": "function", "function": {name, description, parameters}}`` for ``tools=[...]``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    @classmethod
    def from_openai(cls, schema: Mapping, category: str = "") -> Tool:
        """Read a tool from an OpenAI ``{"type": "function", "function": {...}}`` dict (or the inner dict)."""
        if not isinstance(schema, Mapping):
            raise ValueError(
                f"schema must be a mapping (OpenAI function schema), got {type(schema).__name__}"
            )
        fn = schema.get("function", schema) if schema.get("type") == "function" else schema
        if not isinstance(fn, Mapping) or "name" not in fn:
            raise ValueError(f"schema must have a 'name' (OpenAI function schema), got keys {sorted(schema)}")
        return cls(
            name=fn["name"],
            description=str(fn.get("description", "")),
            parameters=dict(fn.get("parameters") or {"type": "object", "properties": {}}),
            category=category,
        )


def validate_tool(tool: Tool) -> None:
    """Raise ``ValueError`` naming the tool when its name or parameter schema is not a valid OpenAI function."""
    if not isinstance(tool.name, str) or not _NAME_RE.match(tool.name):
        raise ValueError(
            f"tool name must match [A-Za-z0-9_-]{{1,64}} (OpenAI function names), got {tool.name!r}"
        )
    if not isinstance(tool.description, str):
        raise ValueError(
            f"tool {tool.name!r}: description must be a str, got {type(tool.description).__name__}"
        )
    p = tool.parameters
    if not isinstance(p, Mapping) or p.get("type") != "object":
        raise ValueError(
            f"tool {tool.name!r}: parameters must be a JSON schema with type 'object', got {p!r}"
        )
    try:
        jsonschema.Draft202012Validator.check_schema(p)
    except jsonschema.SchemaError as e:
        raise ValueError(f"tool {tool.name!r}: parameters is not a valid JSON schema: {e.message}") from None
    props = p.get("properties", {})
    missing = [r for r in p.get("required", []) if r not in props]
    if missing:
        raise ValueError(f"tool {tool.name!r}: required parameters {missing} are not in 'properties'")


def validate_arguments(tool: Tool, arguments: Any) -> list[str]:
    """Messages of every way ``arguments`` violates ``tool.parameters`` (empty list: the call is valid)."""
    return schema_errors(tool.parameters, arguments)


def schema_errors(schema: Mapping, arguments: Any) -> list[str]:
    """Messages of every way ``arguments`` violates the parameters' JSON ``schema`` (assumed valid)."""
    if not isinstance(arguments, Mapping):
        return [f"arguments must be a JSON object, got {type(arguments).__name__}"]
    v = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.path)) or '<root>'}: {e.message}" for e in v.iter_errors(dict(arguments))]


def parse_arguments(raw: Any) -> dict:
    """Arguments from an LLM tool call (a JSON string or a dict); ``ValueError`` when it is neither."""
    if isinstance(raw, Mapping):
        return dict(raw)
    if isinstance(raw, str):
        try:
            out = json.loads(raw or "{}")
        except json.JSONDecodeError as e:
            raise ValueError(f"tool-call arguments are not valid JSON: {e.msg} in {raw[:80]!r}") from None
        if isinstance(out, dict):
            return out
    raise ValueError(f"tool-call arguments must be a JSON object, got {raw!r:.80}")


# ---------------------------------------------------------------------------------------------------------
# ToolBench (RapidAPI tool JSON) → OpenAI, following ToolBench's own converter conventions
# ---------------------------------------------------------------------------------------------------------
_TOOLBENCH_TYPES = {"NUMBER": "integer", "STRING": "string", "BOOLEAN": "boolean"}  # anything else: string
_RESERVED = {"from", "class", "return", "false", "true", "id", "and"}
_DESC_MAX = 256
_QUIRKS = ("none", "official")
# Characters the name normaliser keeps. The released class ``[^\u4e00-\u9fa5^a-z^A-Z^0-9^_]`` repeats ``^``
# inside the brackets, where only the first one negates: the others are literal, so ``^`` survives.
_STD_DROP = {
    "none": re.compile(r"[^\u4e00-\u9fa5A-Za-z0-9_]"),
    "official": re.compile(r"[^\u4e00-\u9fa5A-Za-z0-9_^]"),
}


def _check_quirks(quirks: Any) -> str:
    if quirks not in _QUIRKS:
        raise ValueError(f"quirks must be one of {_QUIRKS}, got {quirks!r}")
    return quirks


def standardize(name: str, quirks: str = "none") -> str:
    """ToolBench's name normaliser: non-word characters → ``_``, runs collapsed, lower case, no leading /
    trailing ``_``, a leading digit gets ``get_``. ``quirks="official"`` also keeps ``^`` as the released
    normaliser does (its character class lists ``^`` as a literal)."""
    s = _STD_DROP[_check_quirks(quirks)].sub("_", str(name))
    s = re.sub(r"_+", "_", s).lower().strip("_")
    if s and s[0].isdigit():
        s = "get_" + s
    return s


def _param_name(name: str, quirks: str = "none") -> str:
    s = standardize(name, quirks)
    return "is_" + s if s in _RESERVED else s


def _toolbench_fields(api: Any) -> tuple[str, str]:
    """(api name, api description) of a ToolBench API entry: the processed form (``api_name``,
    ``api_description``, what ToolBench's query files and converter use) or a raw tool-JSON ``api_list`` entry
    (``name``, ``description``, what ToolBench's loader reads from the tool file)."""
    if not isinstance(api, Mapping):
        raise ValueError(f"ToolBench API entry must be a mapping, got {type(api).__name__}")
    if "api_name" in api:
        return str(api["api_name"]), str(api.get("api_description", "") or "")
    if "name" in api:
        return str(api["name"]), str(api.get("description", "") or "")
    raise ValueError(
        "ToolBench API entry must have 'api_name' (processed entry) or 'name' (raw tool-JSON api_list entry), "
        f"got keys {sorted(api)}"
    )


def toolbench_to_openai(api: Mapping, tool_name: str, quirks: str = "none") -> Tool:
    """Convert one ToolBench API entry of tool ``tool_name`` into a :class:`Tool`, as ToolBench does: name
    ``<api>_for_<tool>`` keeping its last 64 characters, a fixed description prefix plus at most 256 characters
    of the API description, NUMBER→integer / STRING→string / BOOLEAN→boolean (else string), ``example_value``
    from a non-empty default, and ``required`` / ``optional`` name lists.

    ``api`` is either a processed entry (``api_name``, ``api_description``, ``required_parameters``,
    ``optional_parameters``) or a raw tool-JSON ``api_list`` entry (``name``, ``description``, the same
    parameter lists). ``quirks="official"`` reproduces three behaviours of the released converter that the
    default drops: optional parameters are emitted only when the API also has required ones, ``^`` is kept
    by the name normaliser, and a ``None`` default becomes ``"example_value": None`` (``len(str(None)) == 4``).
    A name with ``^`` is not a valid OpenAI function name, so for a tool or API name containing ``^`` the
    official rule raises ``ValueError`` (parameter names keep it)."""
    quirks = _check_quirks(quirks)
    api_name, api_desc = _toolbench_fields(api)
    std_tool = standardize(tool_name, quirks)
    pure = _param_name(api_name, quirks)
    name = (pure + f"_for_{std_tool}")[-64:]
    if not _NAME_RE.match(name):
        raise ValueError(
            f"ToolBench API {api_name!r} of tool {tool_name!r} converts to {name!r} (quirks={quirks!r}), which is "
            "not a valid OpenAI function name ([A-Za-z0-9_-]{1,64})"
        )
    desc = f'This is the subfunction for tool "{std_tool}", you can use this tool.'
    body = api_desc.strip()
    if body:
        body = body.replace(api_name, name)[:_DESC_MAX]
        desc += f'The description of this function is: "{body}"'
    props: dict[str, dict] = {}
    required: list[str] = []
    optional: list[str] = []
    groups = (("required_parameters", required), ("optional_parameters", optional))
    for group, _ in groups:
        if not isinstance(api.get(group, []) or [], (list, tuple)):
            raise ValueError(f"ToolBench API {api_name!r}: {group} must be a list, got {api[group]!r:.80}")
    if quirks == "official" and not api.get("required_parameters"):
        groups = ()  # the released converter reads both lists only inside `if len(required_parameters) > 0`
    for group, names in groups:
        for p in api.get(group, []) or []:
            if not isinstance(p, Mapping) or "name" not in p:
                raise ValueError(
                    f"ToolBench API {api_name!r}: every entry of {group} must be a mapping with a 'name', "
                    f"got {p!r:.80}"
                )
            pname = _param_name(p["name"], quirks)
            entry: dict[str, Any] = {
                "type": _TOOLBENCH_TYPES.get(str(p.get("type", "")), "string"),
                "description": str(p.get("description", "") or "")[:_DESC_MAX],
            }
            default = p.get("default", "")
            if (default is not None or quirks == "official") and len(str(default)) != 0:
                entry["example_value"] = default
            props[pname] = entry
            names.append(pname)
    params = {"type": "object", "properties": props, "required": required, "optional": optional}
    meta = {"toolbench": dict(api), "toolbench_api_name": pure, "toolbench_tool_name": std_tool}
    return Tool(name=name, description=desc, parameters=params, category=std_tool, meta=meta)


def toolbench_tool_to_openai(tool_json: Mapping, quirks: str = "none") -> list[Tool]:
    """Every API of one raw ToolBench tool file (``tool_name`` and ``api_list`` of raw entries) as a
    :class:`Tool`, converted by :func:`toolbench_to_openai` with the tool's name."""
    if not isinstance(tool_json, Mapping) or "tool_name" not in tool_json or "api_list" not in tool_json:
        keys = sorted(tool_json) if isinstance(tool_json, Mapping) else type(tool_json).__name__
        raise ValueError(f"ToolBench tool JSON must have 'tool_name' and 'api_list', got {keys}")
    if not isinstance(tool_json["api_list"], (list, tuple)):
        raise ValueError(f"ToolBench tool JSON: api_list must be a list, got {tool_json['api_list']!r:.80}")
    return [toolbench_to_openai(a, str(tool_json["tool_name"]), quirks) for a in tool_json["api_list"]]


# ---------------------------------------------------------------------------------------------------------
# BFCL function docs → OpenAI (BFCL uses Python-flavoured type names: dict, float, tuple, any)
# ---------------------------------------------------------------------------------------------------------
_BFCL_TYPES = {
    "dict": "object",
    "float": "number",
    "double": "number",
    "int": "integer",
    "integer": "integer",
    "long": "integer",
    "tuple": "array",
    "list": "array",
    "array": "array",
    "str": "string",
    "string": "string",
    "char": "string",
    "bool": "boolean",
    "boolean": "boolean",
    "number": "number",
    "object": "object",
    "null": "null",
}


def _bfcl_schema(node: Any) -> Any:
    if isinstance(node, list):
        return [_bfcl_schema(x) for x in node]
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k == "type":
            if v == "any":
                continue  # JSON schema: no type constraint
            t = _BFCL_TYPES.get(str(v).lower())
            if t is None:
                raise ValueError(f"BFCL schema: unknown type {v!r}")
            out["type"] = t
        elif k in ("properties",) and isinstance(v, Mapping):
            out[k] = {pk: _bfcl_schema(pv) for pk, pv in v.items()}
        elif k in ("items", "additionalProperties"):
            out[k] = _bfcl_schema(v)
        else:
            out[k] = v
    return out


def bfcl_to_openai(doc: Mapping, category: str = "") -> Tool:
    """Convert a BFCL function doc (``name``, ``description``, ``parameters`` with BFCL types, ``response``)
    into a :class:`Tool`: BFCL type names mapped to JSON schema (dict→object, float→number, tuple→array, any→no
    constraint) and dots in names replaced by ``_`` (OpenAI forbids them), as BFCL's own OpenAI handler does."""
    if not isinstance(doc, Mapping) or "name" not in doc:
        raise ValueError("BFCL doc must be a mapping with a 'name'")
    params = _bfcl_schema(doc.get("parameters") or {"type": "dict", "properties": {}})
    params.setdefault("type", "object")
    meta = {"bfcl_name": doc["name"], "response": doc.get("response")}
    return Tool(
        name=str(doc["name"]).replace(".", "_"),
        description=str(doc.get("description", "")),
        parameters=params,
        category=category,
        meta=meta,
    )
