"""The Lean REPL backend: protocol mapping on fabricated REPL output; live tests need `lake`."""

import shutil

import pytest

from iclr25.improver import LeanReplChecker
from iclr25.improver.checker import parse_repl_output, repl_response_to_result
from iclr25.improver.metrics import length

REPL_OUT = """{"tactics": [{"tactic": "constructor", "proofState": 0, "pos": {"line": 3, "column": 2},
  "goals": "p q : Prop\\n⊢ p ∧ q", "endPos": {"line": 3, "column": 13}},
  {"tactic": "all_goals sorry", "proofState": 1, "pos": {"line": 4, "column": 2},
  "goals": "no goals", "endPos": {"line": 4, "column": 17}}],
 "messages": [{"severity": "warning", "pos": {"line": 2, "column": 8}, "endPos": null,
  "data": "declaration uses 'sorry'"}], "env": 1}

{"message": "unknown environment"}
"""


def test_repl_json_is_mapped_to_proof_relative_steps_and_messages():
    a, b = parse_repl_output(REPL_OUT)
    r = repl_response_to_result(a, line_offset=2)
    assert [s.start for s in r.steps] == [(1, 2), (2, 2)] and length(r) == 2
    assert r.steps[1].goals_after == () and not r.correct  # a sorry warning makes the proof incorrect
    bad = repl_response_to_result(b, 0)
    assert not bad.correct and "unknown environment" in bad.errors[0].text


def test_constructor_errors_are_clear(tmp_path):
    with pytest.raises(ValueError, match="project"):
        LeanReplChecker(tmp_path / "missing")
    with pytest.raises(ValueError, match="not on PATH"):
        LeanReplChecker(tmp_path, repl_cmd=("definitely-not-lake-xyz", "env", "repl"))


@pytest.mark.skipif(
    shutil.which("lake") is None, reason="Lean (lake) is not installed: live REPL test skipped"
)
def test_live_repl(tmp_path):  # pragma: no cover - needs a Lean toolchain
    import os

    project = os.environ.get("IMPROVER_LEAN_PROJECT")
    if not project:
        pytest.skip("set IMPROVER_LEAN_PROJECT to a built Lake project with the REPL")
    r = LeanReplChecker(project).check(
        "", "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q", "exact ⟨hp, hq⟩"
    )
    assert r.correct and length(r) == 1


_FAKE_REPL = r"""
import json, sys
text = sys.stdin.read()
cmds, dec, i = [], json.JSONDecoder(), 0
while i < len(text):
    while i < len(text) and text[i].isspace():
        i += 1
    if i >= len(text):
        break
    obj, i = dec.raw_decode(text, i)
    cmds.append(obj)
log = sys.argv[1]
with open(log, "a") as f:
    f.write(json.dumps([c["cmd"] for c in cmds]) + "\n")
crash_after = int(sys.argv[2])
for n, c in enumerate(cmds):
    if n == crash_after:
        sys.exit(1)  # the REPL dies mid-batch
    print(json.dumps({"env": n, "messages": [], "tactics": []}) + "\n")
"""


def _fake_checker(tmp_path, crash_after=99, **kw):
    import sys

    script = tmp_path / "fake_repl.py"
    script.write_text(_FAKE_REPL)
    log = tmp_path / "sent.jsonl"
    cmd = (sys.executable, str(script), str(log), str(crash_after))
    return LeanReplChecker(tmp_path, repl_cmd=cmd, **kw), log


def test_code_running_candidates_are_refused_before_lean_sees_them(tmp_path):
    """A model-written `#eval` / `run_tac` / `IO.` candidate is never elaborated unless explicitly allowed."""
    import json

    from iclr25.improver.checker import unsafe_commands

    ok = "intro h\nexact h"
    evil = [
        '#eval IO.FS.writeFile "/tmp/x" "pwned"\nexact h',
        "run_tac do IO.println 1",
        "exact (IO.Process.exit 0)",
    ]
    chk, log = _fake_checker(tmp_path)
    res = chk.check_batch("", "theorem t (p : Prop) (h : p) : p", [ok, *evil])
    assert len(res) == 4 and res[0].correct and not any(r.correct for r in res[1:])
    assert "#eval" in res[1].errors[0].text and "allow_unsafe_commands" in res[1].errors[0].text
    sent = [json.loads(x) for x in log.read_text().splitlines()]
    assert (
        len(sent) == 1 and len(sent[0]) == 1 and "IO" not in sent[0][0]
    )  # only the safe one reached the REPL
    assert unsafe_commands(evil[0]) == ["#eval", "IO."]
    assert unsafe_commands("simp [foo_eval, elabora]") == []  # names that merely contain the words are fine
    (tmp_path / "b").mkdir()
    allowed, _ = _fake_checker(tmp_path / "b", allow_unsafe_commands=True)
    assert all(r.correct for r in allowed.check_batch("", "theorem t : True", evil))
    with pytest.raises(ValueError, match="allow_unsafe_commands"):
        LeanReplChecker(tmp_path, repl_cmd=("python3",), allow_unsafe_commands="yes")


def test_a_repl_crash_mid_batch_fails_the_remaining_candidates_instead_of_dropping_them(tmp_path):
    chk, _ = _fake_checker(tmp_path, crash_after=1)
    res = chk.check_batch("", "theorem t : True", ["trivial", "trivial", "trivial"])
    assert len(res) == 3 and res[0].correct
    assert not res[1].correct and not res[2].correct and "answered only 1 of 3" in res[2].errors[0].text


def test_toy_bad_inputs_name_the_parameter():
    from iclr25.improver.toy import parse_proof
    from iclr25.improver.toy_theorems import make_benchmark

    with pytest.raises(ValueError, match="proof must be a str"):
        parse_proof(None)
    for bad in (2, -0.1, float("nan"), True):
        with pytest.raises(ValueError, match="p_have must be a probability"):
            make_benchmark(3, 0, p_have=bad)
