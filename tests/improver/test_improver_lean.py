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
