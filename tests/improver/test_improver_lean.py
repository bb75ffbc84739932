"""The Lean REPL backend, driven through a stand-in REPL process that speaks the real JSON protocol
(``fake_lean_repl.py``: toy-checker semantics, fault injection, or a recorded transcript); a live test runs only
where ``lake`` and ``IMPROVER_LEAN_PROJECT`` exist."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from iclr25.improver import LeanReplChecker, render_chain_of_states
from iclr25.improver.checker import LeanReplError, parse_repl_output, repl_response_to_result
from iclr25.improver.metrics import length
from iclr25.improver.toy import ToyTacticChecker
from iclr25.improver.toy_theorems import make_benchmark

FAKE = str(Path(__file__).with_name("fake_lean_repl.py"))

# Recorded output of the upstream REPL (leanprover-community/repl, test/all_tactics.expected.out) for
# {"cmd": "def f : Nat := by have t := 37; exact t", "allTactics": true}: each record's "goals" is the state
# *before* its tactic ("⊢ Nat" before `have`, "t : Nat ⊢ Nat" before `exact`).
RECORDED = """{"tactics":
 [{"usedConstants": ["instOfNatNat", "Nat", "OfNat.ofNat"],
   "tactic": "have t := 37",
   "proofState": 0,
   "pos": {"line": 1, "column": 18},
   "goals": "⊢ Nat",
   "endPos": {"line": 1, "column": 30}},
  {"usedConstants": [],
   "tactic": "exact t",
   "proofState": 1,
   "pos": {"line": 1, "column": 32},
   "goals": "t : Nat\\n⊢ Nat",
   "endPos": {"line": 1, "column": 39}}],
 "env": 0}

"""
# Tactic-mode answers in the REPL's format (test/by_cases.expected.out): {"proofState": k, "goals": [...]}.
REPLAYED = [{"proofState": 2, "goals": ["t : Nat\n⊢ Nat"]}, {"proofState": 3, "goals": []}]


def _checker(tmp_path, monkeypatch, **env):
    monkeypatch.setenv("FAKE_REPL_LOG", str(tmp_path / "sent.jsonl"))
    for k in ("FAKE_REPL_CRASH_AT", "FAKE_REPL_HANG_AT", "FAKE_REPL_GARBAGE", "FAKE_REPL_SCRIPT"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, str(v))
    return lambda **kw: LeanReplChecker(tmp_path, repl_cmd=(sys.executable, FAKE), **{"timeout_s": 60, **kw})


def _sent(tmp_path) -> list[dict]:
    p = tmp_path / "sent.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines()] if p.exists() else []


def test_repl_json_is_mapped_to_proof_relative_steps_and_messages():
    out = (
        '{"tactics": [{"tactic": "constructor", "proofState": 0, "pos": {"line": 3, "column": 2},\n'
        '  "goals": "p q : Prop\\n⊢ p ∧ q", "endPos": {"line": 3, "column": 13}},\n'
        '  {"tactic": "all_goals sorry", "proofState": 1, "pos": {"line": 4, "column": 2},\n'
        '  "goals": "no goals", "endPos": {"line": 4, "column": 17}}],\n'
        ' "messages": [{"severity": "warning", "pos": {"line": 2, "column": 8}, "endPos": null,\n'
        '  "data": "declaration uses \'sorry\'"}], "env": 1}\n\n{"message": "unknown environment"}\n'
    )
    a, b = parse_repl_output(out)
    r = repl_response_to_result(a, line_offset=2)
    assert [s.start for s in r.steps] == [(1, 2), (2, 2)] and length(r) == 2
    assert not r.correct  # a sorry warning makes the proof incorrect
    bad = repl_response_to_result(b, 0)
    assert not bad.correct and "unknown environment" in bad.errors[0].text


def test_recorded_transcript_goals_are_before_each_tactic_and_the_checker_shifts_them(tmp_path, monkeypatch):
    resp = parse_repl_output(RECORDED)[0]
    raw = repl_response_to_result(resp, 0)
    assert [s.goals_after for s in raw.steps] == [("⊢ Nat",), ("t : Nat\n⊢ Nat",)]  # as the REPL reports
    want = [("t : Nat\n⊢ Nat",), ()]  # the goals after `have t := 37` and after `exact t`
    script = tmp_path / "script.json"
    script.write_text(json.dumps([resp, *REPLAYED]))
    make = _checker(tmp_path, monkeypatch, FAKE_REPL_SCRIPT=script)
    r = make().check("", "def f : Nat", "have t := 37; exact t")
    assert r.correct and [s.goals_after for s in r.steps] == want
    assert _sent(tmp_path)[1:] == [
        {"tactic": "have t := 37", "proofState": 0},
        {"tactic": "exact t", "proofState": 1},
    ]
    script.write_text(json.dumps([resp]))  # goals="next": no replay, the next tactic's before-goals
    (tmp_path / "sent.jsonl").unlink()
    r = make(goals="next").check("", "def f : Nat", "have t := 37; exact t")
    assert [s.goals_after for s in r.steps] == want and len(_sent(tmp_path)) == 1


def test_chain_of_states_through_the_repl_equals_the_true_goal_states(tmp_path, monkeypatch):
    chk = _checker(tmp_path, monkeypatch)()
    toy = ToyTacticChecker()
    for b in make_benchmark(6, 3):
        t = b.theorem
        got, ref = chk.check("import Mathlib", t.decl, t.proof), toy.check("", t.decl, t.proof)
        assert got.correct == ref.correct
        assert [s.goals_after for s in got.steps] == [
            s.goals_after for s in sorted(ref.steps, key=lambda s: s.start)
        ]
        assert render_chain_of_states(t.proof, got) == render_chain_of_states(t.proof, ref)
    chk.close()


def test_the_file_context_is_elaborated_once_and_its_env_reused(tmp_path, monkeypatch):
    chk = _checker(tmp_path, monkeypatch)(goals="next")
    thms = [b.theorem for b in make_benchmark(3, 0)]
    for t in thms:
        res = chk.check_batch("import Mathlib\nopen Nat", t.decl, [t.proof, t.proof, "exact h99"])
        assert [r.correct for r in res] == [True, True, False]
    r = chk.check("import Mathlib\nopen Nat\n\ndef g := 1", thms[0].decl, thms[0].proof)
    assert r.correct
    sent = _sent(tmp_path)
    headers = [c for c in sent if not c.get("allTactics")]
    assert headers == [{"cmd": "import Mathlib\nopen Nat"}, {"cmd": "\n\ndef g := 1", "env": 0}]
    cands = [c for c in sent if c.get("allTactics")]
    assert len(cands) == 10 and [c["env"] for c in cands[:9]] == [0] * 9 and cands[9]["env"] not in (None, 0)
    assert chk.starts == 1
    chk.close()


def test_a_repl_crash_fails_the_rest_of_the_batch_and_restarts_the_repl(tmp_path, monkeypatch):
    # command 0 = the context, 1 = candidate 1, 2 = candidate 2: the REPL dies there
    chk = _checker(tmp_path, monkeypatch, FAKE_REPL_CRASH_AT=2)(goals="next")
    decl = "theorem t (p : Prop) (h : p) : p"
    res = chk.check_batch("import Mathlib", decl, ["exact h", "exact h", "exact h"])
    assert len(res) == 3 and res[0].correct
    for r in res[1:]:
        assert (
            not r.correct
            and "exited before answering" in r.errors[0].text
            and "not checked" in r.errors[0].text
        )
    again = chk.check_batch("import Mathlib", decl, ["exact h", "exact h"])  # a fresh REPL
    assert [r.correct for r in again] == [True, True] and chk.starts == 2
    assert sum(1 for c in _sent(tmp_path) if c.get("cmd") == "import Mathlib") == 2  # context re-elaborated
    chk.close()


def test_a_hanging_repl_times_out_fails_the_rest_and_is_restarted(tmp_path, monkeypatch):
    chk = _checker(tmp_path, monkeypatch, FAKE_REPL_HANG_AT=1)(goals="next", timeout_s=3)
    decl = "theorem t (p : Prop) (h : p) : p"
    res = chk.check_batch("import Mathlib", decl, ["exact h", "exact h"])
    assert [r.correct for r in res] == [False, False] and "timeout_s=3" in res[1].errors[0].text
    assert chk.check("import Mathlib", decl, "exact h").correct and chk.starts == 2
    chk.close()


def test_garbage_repl_output_is_a_clear_error_with_the_first_bytes(tmp_path, monkeypatch):
    chk = _checker(tmp_path, monkeypatch, FAKE_REPL_GARBAGE=1)()
    with pytest.raises(LeanReplError, match=r"not JSON.*INTERNAL PANIC") as e:
        chk.check("", "theorem t : True", "trivial")
    assert "fake_lean_repl.py" in str(e.value)  # names the REPL command
    with pytest.raises(LeanReplError, match="not JSON.*'oops"):
        parse_repl_output('{"env": 0}\n\noops, a panic')


def test_code_running_candidates_are_refused_before_lean_sees_them(tmp_path, monkeypatch):
    """A model-written `#eval` / `run_tac` / `IO.` candidate is never elaborated unless explicitly allowed."""
    from iclr25.improver.checker import unsafe_commands

    ok = "exact h"
    evil = [
        '#eval IO.FS.writeFile "/tmp/x" "pwned"\nexact h',
        "run_tac do IO.println 1",
        "exact (IO.Process.exit 0)",
    ]
    make = _checker(tmp_path, monkeypatch)
    res = make(goals="next").check_batch("", "theorem t (p : Prop) (h : p) : p", [ok, *evil])
    assert len(res) == 4 and res[0].correct and not any(r.correct for r in res[1:])
    assert "#eval" in res[1].errors[0].text and "allow_unsafe_commands" in res[1].errors[0].text
    sent = _sent(tmp_path)
    assert len(sent) == 1 and "IO" not in sent[0]["cmd"]  # only the safe one reached the REPL
    assert unsafe_commands(evil[0]) == ["#eval", "IO."]
    assert unsafe_commands("simp [foo_eval, elabora]") == []  # names that merely contain the words are fine
    allowed = make(goals="next", allow_unsafe_commands=True).check_batch(
        "", "theorem t (p : Prop) (h : p) : p", evil
    )
    assert len(_sent(tmp_path)) == 4 and len(allowed) == 3  # all three were sent
    with pytest.raises(ValueError, match="allow_unsafe_commands"):
        LeanReplChecker(tmp_path, repl_cmd=("python3",), allow_unsafe_commands="yes")


def test_constructor_errors_are_clear(tmp_path):
    with pytest.raises(ValueError, match="project"):
        LeanReplChecker(tmp_path / "missing")
    with pytest.raises(ValueError, match="not on PATH"):
        LeanReplChecker(tmp_path, repl_cmd=("definitely-not-lake-xyz", "env", "repl"))
    with pytest.raises(ValueError, match="goals"):
        LeanReplChecker(tmp_path, repl_cmd=("python3",), goals="before")
    with pytest.raises(ValueError, match="repl_cmd"):
        LeanReplChecker(tmp_path, repl_cmd="lake env repl")


@pytest.mark.skipif(
    shutil.which("lake") is None, reason="Lean (lake) is not installed: live REPL test skipped"
)
def test_live_repl(tmp_path):  # pragma: no cover - needs a Lean toolchain
    project = os.environ.get("IMPROVER_LEAN_PROJECT")
    if not project:
        pytest.skip("set IMPROVER_LEAN_PROJECT to a built Lake project with the REPL")
    chk = LeanReplChecker(project)
    r = chk.check("", "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q", "constructor\nexact hp\nexact hq")
    assert r.correct and length(r) == 3 and r.steps[-1].goals_after == ()
    assert r.steps[0].goals_after and "⊢ q" in r.steps[1].goals_after[0]  # after `exact hp`, q is left


def test_toy_bad_inputs_name_the_parameter():
    from iclr25.improver.toy import parse_proof

    with pytest.raises(ValueError, match="proof must be a str"):
        parse_proof(None)
    for bad in (2, -0.1, float("nan"), True):
        with pytest.raises(ValueError, match="p_have must be a probability"):
            make_benchmark(3, 0, p_have=bad)
