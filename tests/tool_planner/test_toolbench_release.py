"""ToolBench conversion with the released quirks, raw tool-JSON entries, the released toolkit-library format and
the released toolkit prompt form — each checked against a small transcription of the released rule below."""

from __future__ import annotations

import copy
import json
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from iclr25.tool_planner import (
    OpenAICompatibleLLM,
    Task,
    ToolkitLibrary,
    build_toolkits,
    load_toolkit_library,
    standardize,
    toolbench_to_openai,
    toolbench_tool_to_openai,
    toolkit_lines,
)

SAMPLE = Path(__file__).parent / "data" / "toolkit_library_sample.json"


# --- transcription of the released rules (ToolBench utils / rapidapi converter, Tool-Planner planner) -------
def ref_standardize(s: str) -> str:
    # the released class: everything except CJK, letters, digits, '_' and a literal '^' becomes '_'
    s = re.sub("[^\u4e00-\u9fa5^a-z^A-Z^0-9^_]", "_", s)
    s = re.sub(r"(_)\1+", "_", s).lower()
    while s and s[0] == "_":
        s = s[1:]
    while s and s[-1] == "_":
        s = s[:-1]
    if s and s[0].isdigit():
        s = "get_" + s
    return s


def ref_change_name(s: str) -> str:
    return "is_" + s if s in ["from", "class", "return", "false", "true", "id", "and"] else s


def ref_param(p: dict) -> dict:
    t = {"NUMBER": "integer", "STRING": "string", "BOOLEAN": "boolean"}.get(p["type"], "string")
    out = {"type": t, "description": p["description"][:256]}
    if len(str(p["default"])) != 0:
        out["example_value"] = p["default"]
    return out


def ref_convert(api_json: dict, standard_tool_name: str) -> dict:
    """The released api_json_to_openai_json (processed entry → function schema)."""
    f = {
        "name": "",
        "description": "",
        "parameters": {"type": "object", "properties": {}, "required": [], "optional": []},
    }
    f["name"] = (ref_change_name(ref_standardize(api_json["api_name"])) + "_for_" + standard_tool_name)[-64:]
    f["description"] = f'This is the subfunction for tool "{standard_tool_name}", you can use this tool.'
    if api_json["api_description"].strip() != "":
        d = api_json["api_description"].strip().replace(api_json["api_name"], f["name"])[:256]
        f["description"] += f'The description of this function is: "{d}"'
    if "required_parameters" in api_json and len(api_json["required_parameters"]) > 0:
        for group, key in (("required_parameters", "required"), ("optional_parameters", "optional")):
            for p in api_json[group]:
                n = ref_change_name(ref_standardize(p["name"]))
                f["parameters"]["properties"][n] = ref_param(p)
                f["parameters"][key].append(n)
    return f


def ref_fetch_toolbench(api_dict: dict, tool_json: dict, cate: str) -> dict:
    """ToolBench's fetch_api_json: a raw tool-JSON api_list entry → processed entry."""
    return {
        "category_name": cate,
        "api_name": api_dict["name"],
        "api_description": api_dict["description"],
        "required_parameters": api_dict["required_parameters"],
        "optional_parameters": api_dict["optional_parameters"],
        "tool_name": tool_json["tool_name"],
    }


def ref_fetch_library(row: dict) -> dict:
    """Tool-Planner's fetch_api_json: a toolkit-library row → processed entry."""
    d, doc = row["api_dest"], row["api_doc"]
    return {
        "category_name": d["type_name"],
        "api_name": d["name"],
        "api_description": d["desc"],
        "required_parameters": doc["required_parameters"],
        "optional_parameters": doc["optional_parameters"],
        "tool_name": d["package_name"],
    }


def ref_toolkit_prompt(ids_descs: list[tuple[int, str]]) -> str:
    prompt = ""
    for i, d in ids_descs:
        prompt = prompt + f"[Toolkit {i}, Desc[{d}]]\n"
    return prompt


# --- hand-made ToolBench-style entries ---------------------------------------------------------------------
def _p(name, typ="STRING", desc="", default=""):
    return {"name": name, "type": typ, "description": desc, "default": default}


ENTRIES = [
    {  # required + optional, reserved word, long description mentioning the api name, None default
        "api_name": "Get Weather/Forecast (v2)",
        "api_description": "  Get Weather/Forecast (v2) returns the forecast. " + "x" * 400,
        "required_parameters": [
            _p("city-name", desc="City", default="Paris"),
            _p("days", "NUMBER", "d" * 300),
        ],
        "optional_parameters": [_p("from", "BOOLEAN", "b", True), _p("unit", "ENUM", "u", None)],
    },
    {  # only optional parameters: the released converter emits none of them
        "api_name": "List Rates",
        "api_description": "",
        "required_parameters": [],
        "optional_parameters": [_p("base", default="EUR"), _p("limit", "NUMBER", "n", 0)],
    },
    {  # '^' in a parameter name, lower-case type name, empty-string default
        "api_name": "3d search",
        "api_description": "Search.",
        "required_parameters": [_p("q^x", "number", "query")],
        "optional_parameters": [_p("class", "BOOLEAN", "c", False)],
    },
]
TOOL = "My Weather & FX Tool"


@pytest.mark.parametrize("api", ENTRIES, ids=["req+opt", "opt-only", "caret-param"])
def test_official_quirks_match_released_converter(api):
    std = ref_standardize(TOOL)
    ref = ref_convert(api, std)
    got = toolbench_to_openai(api, TOOL, quirks="official").to_openai()["function"]
    assert got == ref
    # a raw tool-JSON api_list entry (name/description, as ToolBench's loader reads the tool file) converts the
    # same way as the processed entry built from it
    raw = {"name": api["api_name"], "description": api["api_description"], "url": "u", "method": "GET"}
    raw.update(required_parameters=api["required_parameters"], optional_parameters=api["optional_parameters"])
    processed = ref_fetch_toolbench(raw, {"tool_name": TOOL}, "Weather")
    assert ref_convert(processed, std) == ref
    for quirks in ("none", "official"):
        a = toolbench_to_openai(raw, TOOL, quirks=quirks).to_openai()
        b = toolbench_to_openai(processed, TOOL, quirks=quirks).to_openai()
        assert a == b


def test_default_differs_from_release_only_where_documented():
    req_opt, opt_only, caret = ENTRIES
    std = ref_standardize(TOOL)
    # 1. optional parameters are kept when there are no required ones
    t = toolbench_to_openai(opt_only, TOOL)
    assert t.parameters["optional"] == ["base", "limit"] and t.parameters["required"] == []
    assert t.parameters["properties"]["limit"] == {"type": "integer", "description": "n", "example_value": 0}
    assert ref_convert(opt_only, std)["parameters"]["properties"] == {}
    # 2. '^' is replaced by '_' in names
    assert "q_x" in toolbench_to_openai(caret, TOOL).parameters["properties"]
    assert "q^x" in ref_convert(caret, std)["parameters"]["properties"]
    # 3. a None default is no example value
    assert "example_value" not in toolbench_to_openai(req_opt, TOOL).parameters["properties"]["unit"]
    assert ref_convert(req_opt, std)["parameters"]["properties"]["unit"]["example_value"] is None
    # everything else is the released rule
    for api in ENTRIES:
        d, r = toolbench_to_openai(api, TOOL).to_openai()["function"], ref_convert(api, std)
        assert d["name"] == r["name"] and d["description"] == r["description"]
        if api is req_opt:
            d["parameters"]["properties"]["unit"]["example_value"] = None
            assert d == r


def test_standardize_quirk_and_caret_in_function_name():
    for s in ["A^b  C", "__9lives^__", "Köln/Zürich", "x" * 5 + "^^" + "y", "^", "天气 API"]:
        assert standardize(s, quirks="official") == ref_standardize(s)
        assert standardize(s) == ref_standardize(s.replace("^", " "))  # default: '^' is one more separator
    api = {
        "api_name": "Get^Rate",
        "api_description": "",
        "required_parameters": [],
        "optional_parameters": [],
    }
    assert toolbench_to_openai(api, "fx").name == "get_rate_for_fx"
    with pytest.raises(ValueError, match=r"get\^rate_for_fx.*not a valid OpenAI function name"):
        toolbench_to_openai(api, "fx", quirks="official")
    with pytest.raises(ValueError, match="quirks must be one of"):
        toolbench_to_openai(api, "fx", quirks="released")
    with pytest.raises(ValueError, match="'api_name' .* or 'name'"):
        toolbench_to_openai({"description": "x"}, "fx")
    with pytest.raises(ValueError, match="required_parameters must be a list"):
        toolbench_to_openai({"name": "a", "required_parameters": "city"}, "fx")
    with pytest.raises(ValueError, match="mapping with a 'name'"):
        toolbench_to_openai({"name": "a", "required_parameters": [{"type": "STRING"}]}, "fx")


def test_raw_tool_json_file():
    tool_json = {
        "tool_name": "FX Rates",
        "tool_description": "Rates.",
        "api_list": [
            {
                "name": "Latest",
                "description": "Latest rates",
                "required_parameters": [_p("base")],
                "optional_parameters": [],
            },
            {
                "name": "History",
                "description": "",
                "required_parameters": [],
                "optional_parameters": [_p("day")],
            },
        ],
    }
    tools = toolbench_tool_to_openai(tool_json, quirks="official")
    refs = [
        ref_convert(ref_fetch_toolbench(a, tool_json, "Finance"), "fx_rates") for a in tool_json["api_list"]
    ]
    assert [t.to_openai()["function"] for t in tools] == refs
    assert tools[0].meta["toolbench_api_name"] == "latest" and tools[0].category == "fx_rates"
    with pytest.raises(ValueError, match="'tool_name' and 'api_list'"):
        toolbench_tool_to_openai({"api_list": []})


# --- the released toolkit-library file ---------------------------------------------------------------------
def _rows() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("quirks", ["none", "official"])
def test_load_toolkit_library_sample(quirks):
    lib = load_toolkit_library(SAMPLE, quirks=quirks)
    rows = _rows()
    assert isinstance(lib, ToolkitLibrary) and len(lib) == 4 and lib.clustered
    assert [e.id for e in lib.entries] == [0, 1, 7, 8] and [e.toolkit for e in lib.entries] == [0, 0, 1, 1]
    for e, row in zip(lib.entries, rows):
        api = ref_fetch_library(row)
        official = ref_convert(api, ref_standardize(row["api_dest"]["package_name"]))
        got = e.tool.to_openai()["function"]
        if quirks == "official":
            assert got == official
        else:
            assert got == toolbench_to_openai(api, row["api_dest"]["package_name"]).to_openai()["function"]
        assert e.functionality == row["functionality"] and e.tool.meta["library_id"] == row["id"]
    assert lib.entries[1].tool.name == "forecast_v2_for_weather_now"
    assert "forecast_v2_for_weather_now gives a forecast" in lib.entries[1].tool.description
    tk = lib.toolkits()
    assert [tk_.names for tk_ in tk.toolkits] == [
        [t.name for t in lib.tools[:2]],
        [t.name for t in lib.tools[2:]],
    ]
    # a toolkit's description: the last non-empty toolkit_fun of its rows (the release overwrites row by row)
    assert [t.description for t in tk.toolkits] == [rows[1]["toolkit_fun"], rows[2]["toolkit_fun"]]
    # the index embeds the stored functionality texts f(a)
    assert lib.index().texts == [r["functionality"] for r in rows]
    # an unclustered copy clusters from the same index
    assert len(build_toolkits(lib.index(), 2, seed=0)) == 2


def test_toolkit_lines_official_form():
    tk = load_toolkit_library(SAMPLE).toolkits()
    ref = ref_toolkit_prompt([(t.id, t.description) for t in tk.toolkits])
    assert toolkit_lines(tk, "official") == ref
    assert ref.startswith("[Toolkit 0, Desc[Weather lookups and forecasts for cities.]]\n[Toolkit 1, Desc[")
    assert toolkit_lines(tk) == "\n".join(f"[Toolkit {t.id}] {t.description[:400]}" for t in tk.toolkits)
    with pytest.raises(ValueError, match="style must be one of"):
        toolkit_lines(tk, "paper")

    seen = []

    def create(**kw):
        seen.append(kw["messages"][0]["content"])
        return SimpleNamespace(
            choices=[SimpleNamespace(message=SimpleNamespace(content='[{"Toolkit 1": "convert"}]'))]
        )

    client = SimpleNamespace(chat=SimpleNamespace(completions=SimpleNamespace(create=create)))
    task = Task("q", "convert 3 EUR", (), {}, "answer", None)
    for fmt in ("default", "official"):
        llm = OpenAICompatibleLLM("m", client=client, toolkit_format=fmt)
        steps = llm.plan(task, tk)
        assert [s.toolkit for s in steps] == [1] and seen[-1].endswith(toolkit_lines(tk, fmt))
    with pytest.raises(ValueError, match="toolkit_format must be one of"):
        OpenAICompatibleLLM("m", client=client, toolkit_format="released")


def _write(tmp_path: Path, rows, name="lib.json") -> Path:
    p = tmp_path / name
    p.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return p


def test_library_json_array_unclustered_and_gaps(tmp_path):
    rows = _rows()
    arr = tmp_path / "arr.json"
    arr.write_text(json.dumps(rows, indent=1))
    assert [t.name for t in load_toolkit_library(arr).tools] == [
        t.name for t in load_toolkit_library(SAMPLE).tools
    ]
    un = copy.deepcopy(rows)
    un[2]["toolkit"] = -1
    lib = load_toolkit_library(_write(tmp_path, un))
    assert not lib.clustered
    with pytest.raises(ValueError, match=r"1 rows have toolkit -1 .*build_toolkits\(library.index\(\), k\)"):
        lib.toolkits()
    gap = copy.deepcopy(rows)
    for r in gap[2:]:
        r["toolkit"] = 5
    with pytest.warns(UserWarning, match="renumbered"):
        tk = load_toolkit_library(_write(tmp_path, gap)).toolkits()
    assert [t.id for t in tk.toolkits] == [0, 1]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_toolkit_library(SAMPLE).toolkits()  # contiguous ids: no warning


def _broken(rows, i, fn):
    rows = copy.deepcopy(rows)
    fn(rows[i])
    return rows


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda r: r.pop("toolkit_fun"), r"lib.json:2: missing keys \['toolkit_fun'\]"),
        (lambda r: r.update(toolkit="0"), "toolkit must be an int >= -1"),
        (lambda r: r.update(toolkit=-2), "toolkit must be an int >= -1"),
        (lambda r: r.update(id=True), "id must be an int"),
        (lambda r: r.update(functionality=None), "functionality must be a str"),
        (lambda r: r["api_dest"].pop("package_name"), "api_dest must be an object with str"),
        (lambda r: r.update(api_doc={"required_parameters": []}), "api_doc must be an object with list"),
        (lambda r: r.update(id=0), "id 0 is already used at .*lib.json:1"),
        (
            lambda r: r["api_dest"].update(name="current weather"),
            "converts to function name 'current_weather_for",
        ),
        (lambda r: r["api_doc"]["required_parameters"].append({"type": "STRING"}), "lib.json:2: .*'name'"),
    ],
)
def test_library_malformed_rows(tmp_path, mutate, match):
    with pytest.raises(ValueError, match=match):
        load_toolkit_library(_write(tmp_path, _broken(_rows(), 1, mutate)))


def test_library_malformed_files(tmp_path):
    with pytest.raises(ValueError, match=r"lib.json:2: not valid JSON"):
        load_toolkit_library(_write(tmp_path, [_rows()[0], "{not json"]))
    with pytest.raises(ValueError, match="each row must be a JSON object"):
        load_toolkit_library(_write(tmp_path, ["3", "[1]"]))
    with pytest.raises(ValueError, match="no rows"):
        load_toolkit_library(_write(tmp_path, ["", "  "]))
    with pytest.raises(ValueError, match="quirks must be one of"):
        load_toolkit_library(SAMPLE, quirks="yes")
    with pytest.raises(FileNotFoundError):
        load_toolkit_library(tmp_path / "missing.json")
