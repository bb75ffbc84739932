"""The ``real`` preset on NESTFUL: reference expressions, the simulated backend against the declared response
schemas, the gold sequences through the backend, NESTFUL's metrics on hand-made cases, and a smoke-sized run."""

from __future__ import annotations

import dataclasses

import jsonschema
import pytest

from iclr25.tool_planner import (
    Budget,
    DFSDTAgent,
    Goal,
    StepRecord,
    Task,
    Tool,
    ToolResult,
    fill_arguments,
)
from iclr25.tool_planner.nestful import (
    NestfulSimBackend,
    align_calls,
    call_signature,
    nestful_task,
    output_schema,
    run_gold,
    sequence_f1,
    sequence_scores,
    simulated_response,
    tool_from_spec,
    tools_from_specs,
)
from iclr25.tool_planner.tasks import Expr, conform, get_path


# --- reference expressions -------------------------------------------------------------------------------------
def test_get_path_fields_indices_lists_and_dotted_names():
    out = {
        "location": {"name": "Tokyo", "tz": "JST"},
        "author": [{"id": "a1"}, {"id": "a2"}],
        "5. Exchange Rate": 2.5,
        "rows": [{"v": 1}],
    }
    assert get_path(out, "location.name") == "Tokyo"
    assert get_path(out, "author[1].id") == "a2"
    assert get_path(out, "author[0]") == {"id": "a1"}
    assert get_path(out, "5. Exchange Rate") == 2.5  # a field name with a dot and a space: longest match
    assert get_path(out, "rows.v") == 1  # a field asked of a list: of its first element
    assert get_path(out, "") is out
    for bad in ("location.city", "author[5].id", "nope"):
        with pytest.raises(LookupError):
            get_path(out, bad)


def test_expr_resolves_whole_embedded_and_nested_references():
    labels = {"var1": 0, "var2": 1}
    outs = {0: {"rate": 3.5, "loc": {"name": "Rome"}}, 1: {"t": "10:00"}}
    assert Expr("$var1.rate$", labels).resolve(outs) == 3.5  # a whole reference keeps its type
    assert Expr("$var1$", labels).resolve(outs) == outs[0]
    assert Expr("10 * $var1.rate$", labels).resolve(outs) == "10 * 3.5"  # inside a string: its text
    assert Expr("$var2.t$ - $var1.loc.name$", labels).resolve(outs) == "10:00 - Rome"
    assert Expr(["$var1.loc.name$", 7], labels).resolve(outs) == ["Rome", 7]
    assert Expr({"a": "$var2.t$"}, labels).resolve(outs) == {"a": "10:00"}
    assert Expr("plain", labels).resolve({}) == "plain"
    assert Expr("$var1.rate$ and $var2.t$", labels).refs() == [("var1", "rate"), ("var2", "t")]
    with pytest.raises(LookupError):
        Expr("$var2.t$", labels).resolve({0: outs[0]})  # var2 has no result yet
    with pytest.raises(LookupError):
        Expr("$var1.missing$", labels).resolve(outs)
    # passed as the receiving parameter's type (a whole reference only)
    assert Expr("$var1.rate$", labels).resolve(outs, {"type": "string"}) == "3.5"
    assert Expr("x $var1.rate$", labels).resolve(outs, {"type": "integer"}) == "x 3.5"


@pytest.mark.parametrize(
    "value, schema, expected",
    [
        (378.5, {"type": "string"}, "378.5"),
        (True, {"type": "string"}, "true"),
        (["a", "b"], {"type": "string"}, '["a", "b"]'),
        (4.0, {"type": "integer"}, 4),
        ("12", {"type": "integer"}, 12),
        (4.5, {"type": "integer"}, 4.5),  # not integral: unchanged (the call then fails validation)
        ("2.5", {"type": "number"}, 2.5),
        ("abc", {"type": "number"}, "abc"),
        ("True", {"type": "boolean"}, True),
        (3, {"type": "array"}, [3]),
        ("s", {}, "s"),
    ],
)
def test_conform(value, schema, expected):
    assert conform(value, schema) == expected


def test_fill_arguments_bound_only_leaves_unbound_parameters_out():
    tool = Tool(
        "t",
        "d",
        {"type": "object", "properties": {"q": {"type": "string"}, "lang": {"type": "string"}}},
    )
    done = [StepRecord(0, "prev", {}, {"lang": "fr", "id": 5}, 0)]
    free = Task("a", "q", (Goal("g0"), Goal("g1", {"q": Expr("$var1.id$", {"var1": 0})})), {}, "", None)
    bound = Task(
        "b",
        "q",
        (Goal("g0"), Goal("g1", {"q": Expr("$var1.id$", {"var1": 0})}, bound_only=True)),
        {},
        "",
        None,
    )
    # an Expr is resolved from the earlier results and passed as the parameter's type (string)
    assert fill_arguments(free, 1, tool, done) == {
        "q": "5",
        "lang": "fr",
    }  # lang filled by name (quick's rule)
    assert fill_arguments(bound, 1, tool, done) == {"q": "5"}  # bound_only: nothing but the bindings
    assert fill_arguments(bound, 1, tool, []) == {}  # the referenced result is missing: left out


# --- the simulated backend --------------------------------------------------------------------------------------
SPEC = {
    "name": "Demo.Search",
    "description": "Search things.",
    "query_parameters": {"q": {"type": "string", "required": True}, "n": {"type": "integer"}},
    "output_parameters": {
        "id": {"type": "string"},
        "score": {"type": "float"},
        "count": {"type": "integer"},
        "ok": {"type": "boolean"},
        "kind": {"description": "no type", "allowed_values": ["a", "b"]},
        "loc": {"type": "object", "properties": {"name": {"type": "string"}, "lat": "number"}},
        "tags": {"type": "array"},
        "authors": {"type": "array", "items": {"type": "object", "properties": {"id": {"type": "string"}}}},
        "when": {"type": "date (yyyy-mm-dd)"},
        "blob": {"type": "file"},
    },
}


def _leaves(schema, path=""):
    if schema.get("type") == "object":
        for k, v in schema.get("properties", {}).items():
            yield from _leaves(v, f"{path}.{k}".lstrip("."))
    else:
        yield path


def test_simulated_response_conforms_deterministic_and_complete():
    tool = tool_from_spec(SPEC)
    schema = output_schema(tool)
    r = simulated_response(tool, {"q": "x"})
    jsonschema.validate(r, schema)
    for path in _leaves(schema):
        get_path(r, path)  # every declared field is present
    assert r["kind"] in ("a", "b") and isinstance(r["score"], float) and isinstance(r["count"], int)
    assert len(r["authors"]) == 2 and isinstance(r["authors"][0]["id"], str)
    assert simulated_response(tool, {"q": "x"}) == r  # the same call, the same response
    assert simulated_response(tool, {"q": "y"})["id"] != r["id"]  # other arguments, other values
    be = NestfulSimBackend([tool])
    assert be.call(tool.name, {"q": "x"}) == ToolResult(True, r)
    assert not be.call(tool.name, {"n": 3}).ok  # a required parameter is missing
    assert not be.call(tool.name, {"q": 3}).ok  # wrong type
    assert not be.call("Nope", {"q": "x"}).ok


def test_simulated_responses_of_every_nestful_api_validate(need_asset):
    need_asset("nestful")
    from iclr25.assets import load_nestful

    specs = [s for p in ("executable", "glaive", "sgd") for s in load_nestful(p).specs]
    tools = tools_from_specs(specs)
    assert len(tools) == 133
    for t in tools.values():
        schema = output_schema(t)
        jsonschema.Draft202012Validator.check_schema(schema)
        r = simulated_response(t, {"a": 1})
        jsonschema.validate(r, schema)
        assert set(r) == set(t.meta["output"])
        for path in _leaves(schema):
            get_path(r, path)


# --- gold sequences through the backend and NESTFUL's metrics ---------------------------------------------------
def test_gold_sequence_passes_and_perturbed_one_fails(need_asset):
    need_asset("nestful")
    from iclr25.assets import load_nestful

    data = load_nestful("executable")
    tools = tools_from_specs(data.specs)
    be = NestfulSimBackend(tools.values())
    nt = nestful_task(data.examples[0], tools, "executable", 0)  # flights + hotels: five nested calls
    q = nt.task.query  # the airport and location look-ups have no result name in var_result
    assert [g.text for g in nt.task.goals] == [q, q, "flights", q, "hotels"]
    assert all(g.bound_only for g in nt.task.goals)
    gold = run_gold(nt, be)
    assert (
        gold[2]["arguments"]["originSkyId"] == be.call(gold[0]["tool"], gold[0]["arguments"]).output["skyId"]
    )
    assert sequence_scores(gold, gold) == (True, 1.0)
    # the gold sequence replayed as the policy fills it (the right API at every step) passes
    done = []
    for j, g in enumerate(nt.task.goals):
        tool = next(t for t in be.tools if t.name == g.capability)
        args = fill_arguments(nt.task, j, tool, done)
        done.append(StepRecord(j, tool.name, args, be.call(tool.name, args).output, j))
    assert sequence_scores([{"tool": r.tool, "arguments": r.arguments} for r in done], gold) == (True, 1.0)
    # a perturbed literal changes that call and, through the simulated responses, the calls that reference it
    ex = dataclasses.replace
    goals = list(nt.task.goals)
    goals[0] = ex(goals[0], bindings={"query": Expr("Boston", {})})
    bad = run_gold(ex(nt, task=ex(nt.task, goals=tuple(goals))), be)
    full, partial = sequence_scores(bad, gold)
    assert not full and partial == pytest.approx(3 / 5)  # call 0 and flights (references var1) differ
    # another API for one step, a missing call, an extra call: all fail
    swapped = [dict(c) for c in gold]
    swapped[3] = {**swapped[3], "tool": "SkyScrapperSearchAirport"}
    assert sequence_scores(swapped, gold)[0] is False
    assert sequence_scores(gold[:-1], gold) == (False, pytest.approx(4 / 5))
    assert sequence_scores(gold + gold[:1], gold)[0] is False


def test_nestful_examples_as_tasks_counts(need_asset):
    need_asset("nestful")
    from iclr25.tool_planner import real

    d = real.load()
    assert d.counts["executable"] == {
        "examples": 85,
        "kept": 78,
        "dropped_invalid": 6,  # the specs disagree with the gold calls (check_calls)
        "dropped_unresolved": 1,  # '$var1.localtime$' inside a string: var1 declares no such field
        "used": 78,
        "validation": 26,
        "test": 52,
    }
    assert d.counts["glaive"]["kept"] == 134 and d.counts["sgd"]["kept"] == 44
    assert len(d.tools) == 133 and len(d.val) + len(d.test) == 256
    assert not {nt.task.id for nt, _ in d.val} & {nt.task.id for nt, _ in d.test}
    # every kept gold sequence, replayed with the policy's argument filling on its own APIs, matches itself
    by = {t.name: t for t in d.tools}
    for nt, gold in d.val + d.test:
        done = []
        for j, g in enumerate(nt.task.goals):
            args = fill_arguments(nt.task, j, by[g.capability], done)
            res = d.backend.call(g.capability, args)
            assert res.ok, (nt.task.id, res.error)
            done.append(StepRecord(j, g.capability, args, res.output, j))
        assert sequence_scores([{"tool": r.tool, "arguments": r.arguments} for r in done], gold)[0]


def _c(name, **args):
    return {"tool": name, "arguments": args}


def test_metrics_on_hand_made_cases():
    assert call_signature(_c("f", b=2, a="x")) == 'f(a = "x", b = 2)'
    g = [_c("f", a=1), _c("g", b=2), _c("h", c=3)]
    assert sequence_scores(g, g) == (True, 1.0)
    # equal lengths: compared position by position (order matters)
    assert sequence_scores([g[1], g[0], g[2]], g) == (False, pytest.approx(1 / 3))
    assert sequence_scores([_c("f", a=1), _c("g", b=9), _c("h", c=3)], g) == (False, pytest.approx(2 / 3))
    # different lengths: aligned by name, as NESTFUL's post_process_api_with_args
    sig = [call_signature(c) for c in g]
    assert align_calls(sig, [sig[0], sig[2]]) == (sig, [sig[0], "", sig[2]])
    assert sequence_scores([g[0], g[2]], g) == (False, pytest.approx(2 / 3))
    # a first call that matches nothing: the scorer's greedy alignment pairs every gold call with a gap
    extra = [_c("z"), *g[:2]]
    assert align_calls(sig[:2], [call_signature(c) for c in extra])[1] == [
        "",
        "",
        *map(call_signature, extra),
    ]
    assert sequence_scores(extra, g[:2]) == (False, 0.0)
    assert sequence_scores([], g) == (False, 0.0)
    with pytest.raises(ValueError):
        sequence_scores(g, [])


def test_f1_on_hand_made_cases():
    golds = [[_c("f", a=1)], [_c("g", b=2)]]
    assert sequence_f1(golds, golds) == {"f1_func": 1.0, "f1_param": 1.0}
    # right names, one wrong slot: names perfect; slots 'a = 1' F1 1, 'b = 2' F1 0 → macro 0.5
    assert sequence_f1([[_c("f", a=1)], [_c("g", b=3)]], golds) == {"f1_func": 1.0, "f1_param": 0.5}
    # a wrong API in example 2: name 'g' never predicted (F1 0), 'f' predicted twice but gold once
    # (precision 1/2, recall 1 → 2/3); slots: 'a = 1' tp in ex 1, fp in ex 2's row for f → 2/3; 'b = 2' 0
    s = sequence_f1([[_c("f", a=1)], [_c("f", a=1)]], golds)
    assert s["f1_func"] == pytest.approx((2 / 3 + 0) / 2)
    assert s["f1_param"] == pytest.approx((2 / 3 + 0) / 2)
    # an API called twice keeps its last call's slots (the scorer's dict)
    two = [[_c("f", a=1), _c("f", a=2)]]
    assert sequence_f1([[_c("f", a=2)]], two)["f1_param"] == 1.0
    with pytest.raises(ValueError):
        sequence_f1([], [])


def test_dfsdt_calls_exclude_backtracked_branches():
    """EpisodeResult.calls is the final path: a call on a branch DFSDT backtracked from is not in it."""
    tools = [
        Tool(n, n, {"type": "object", "properties": {"x": {"type": "string"}}}) for n in ("a1", "a2", "b1")
    ]

    class Be:
        def __init__(self):
            self.tools = tools

        def reset(self, task_id):
            pass

        def call(self, name, arguments):
            if name == "b1" and arguments.get("x") == "a1-out":
                return ToolResult(False, error="fail")
            return ToolResult(True, {"x": f"{name}-out"})

    class P:
        label = "scripted"

        def decompose(self, task):
            from iclr25.tool_planner import PlanStep

            return [PlanStep(-1, g.text, i) for i, g in enumerate(task.goals)]

        def rank(self, task, text, tools_):
            return [t for t in tools_ if t.name.startswith("a" if text == "g0" else "b")]

        def select_call(self, task, step, candidates, tried, done, mode):
            return candidates[0], {"x": done[-1].output["x"] if done else "v"}

        def answer(self, task, done):
            return done[-1].output["x"]

    task = Task("s", "q", (Goal("g0"), Goal("g1")), {}, "x", "b1-out")
    r = DFSDTAgent(P(), Be(), Budget(20), width=2).run(task)
    assert r.passed
    assert r.calls == [{"tool": "a2", "arguments": {"x": "v"}}, {"tool": "b1", "arguments": {"x": "a2-out"}}]


# --- the preset and a smoke-sized run ---------------------------------------------------------------------------
def test_real_preset_builds_and_validates():
    from iclr25.tool_planner import experiment as ex

    cfg = ex.PRESETS["real"]
    assert isinstance(cfg, ex.RealConfig) and isinstance(cfg, ex.Config)
    assert {"smoke", "quick", "full", "real"} == set(ex.PRESETS)
    assert cfg.seeds >= 3 and cfg.parts == ("executable", "glaive", "sgd") and cfg.policy == "heuristic"
    # the quick preset's budget, grids and policy
    q = ex.PRESETS["quick"]
    for f in ("max_api_calls", "max_replans", "k_grid", "react_grid", "dfsdt_grid", "replan_grid", "policy"):
        assert getattr(cfg, f) == getattr(q, f)
    with pytest.raises(ValueError, match="n_tasks is a field of the simulated world"):
        dataclasses.replace(cfg, n_tasks=10)
    with pytest.raises(ValueError, match="parts"):
        dataclasses.replace(cfg, parts=("executable", "nope"))
    with pytest.raises(ValueError, match="parts"):
        dataclasses.replace(cfg, parts=("sgd", "sgd"))
    with pytest.raises(ValueError, match="val_every"):
        dataclasses.replace(cfg, val_every=1)


def test_real_smoke_run(tmp_path, need_asset):
    need_asset("nestful")
    from iclr25.harness.configs import effective_config
    from iclr25.tool_planner import experiment as ex

    cfg, _ = effective_config(ex, "real", seeds=1, overrides={"max_examples": 4, "write_traces": True})
    res = ex.run(cfg, tmp_path)
    ids = [c.id for c in res.claims]
    assert ids == ["real_beats_react", "real_near_dfsdt_cheaper", "real_k_curve"]
    assert [p.id for p in res.claims[2].parts] == [
        "real_k_curve.k1_collapse",
        "real_k_curve.interior_beats_N",
    ]
    (r,) = res.per_seed.values()
    assert r["n_test"] == 6 and r["n_tools"] == 133
    for m in ("tool_planner", "react", "dfsdt"):
        v = r["methods"][m]
        assert 0 <= v["pass"] <= v["partial"] <= 100 and 0 <= v["f1_func"] <= 1
        assert v["api_calls"] > 0 and v["llm_calls"] > v["api_calls"] - v["failed_calls"]
        assert r["budget_x"][m]["pass"] >= 0
    assert {"k_N", "k_interior"} <= set(r["budget_x"]) and r["budget_x"]["mult"] == 3
    assert r["k_curve"]["1"]["k_nonempty"] == 1 and r["k_curve"]["1"]["plan_hit"] == 100.0
    assert "simulated" in res.report_md and "| executable | 85 | 6 | 1 | 78 | 4 | 2 | 2 |" in res.report_md
    assert (tmp_path / "traces" / "seed_0.jsonl").exists()
    assert res.metrics["data"]["sgd"]["test"] == 2
    # the contract's calls give the run's numbers; a second run resumes from disk
    assert ex.one_seed(cfg, 0) == r
    assert [c.to_json() for c in ex.claims(cfg, res.per_seed)] == [c.to_json() for c in res.claims]
    assert ex.run(cfg, tmp_path).per_seed == res.per_seed
