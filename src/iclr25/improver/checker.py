"""The proof-checker protocol (what ImProver needs from Lean) and the Lean REPL backend.

ImProver (Ahuja et al., ICLR 2025, §3 and Appendix A) asks the proof assistant three things about a
candidate proof: is it correct, which tactic steps did it run (with the goal state after each step, the
raw material of Chain-of-States) and which messages did it emit (the error feedback of refinement).
:class:`ProofChecker` is exactly that contract; :class:`CheckResult` is its answer. Correctness follows the
official evaluator: no message of severity ``error`` and no ``warning`` that mentions ``sorry``.

Backends: :class:`~iclr25.improver.toy.ToyTacticChecker` (pure Python, shipped) and
:class:`LeanReplChecker` (the Lean REPL JSON protocol, needs a Lean project with ``lake`` on ``PATH``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Step:
    """One tactic record: its source text, the pretty-printed goals after it, and its source span.

    ``start``/``end`` are ``(line, column)`` with 1-based lines counted inside the proof text and 0-based
    columns; ``goals_after`` holds one string per open goal (empty when every goal is closed).
    """

    text: str
    goals_after: tuple[str, ...]
    start: tuple[int, int]
    end: tuple[int, int]

    def __post_init__(self) -> None:
        if not isinstance(self.text, str):
            raise ValueError(f"text must be a str, got {type(self.text).__name__}")
        if not (isinstance(self.goals_after, tuple) and all(isinstance(g, str) for g in self.goals_after)):
            raise ValueError(f"goals_after must be a tuple of str, got {self.goals_after!r:.80}")
        for name in ("start", "end"):
            v = getattr(self, name)
            if not (isinstance(v, tuple) and len(v) == 2 and all(isinstance(x, int) for x in v)):
                raise ValueError(f"{name} must be a (line, column) pair of ints, got {v!r}")


@dataclass(frozen=True)
class Message:
    """A checker message; ``line`` is 1-based inside the proof text (0 = the declaration itself)."""

    severity: str
    line: int
    text: str

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, got {self.severity!r}")
        if isinstance(self.line, bool) or not isinstance(self.line, int) or self.line < 0:
            raise ValueError(f"line must be an int >= 0 (0 = the declaration), got {self.line!r}")
        if not isinstance(self.text, str):
            raise ValueError(f"text must be a str, got {type(self.text).__name__}")


@dataclass(frozen=True)
class CheckResult:
    """What a checker returns for one (context, declaration, proof)."""

    steps: tuple[Step, ...] = field(default_factory=tuple)
    messages: tuple[Message, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        for name, cls in (("steps", Step), ("messages", Message)):
            v = getattr(self, name)
            if not (isinstance(v, tuple) and all(isinstance(x, cls) for x in v)):
                raise ValueError(f"{name} must be a tuple of {cls.__name__}, got {v!r:.80}")

    @property
    def correct(self) -> bool:
        """The official criterion: no ``error`` and no ``warning`` mentioning ``sorry``."""
        return not any(
            m.severity == "error" or (m.severity == "warning" and "sorry" in m.text) for m in self.messages
        )

    @property
    def errors(self) -> list[Message]:
        return [m for m in self.messages if m.severity == "error"]

    def to_json(self) -> dict:
        return {
            "steps": [
                {
                    "text": s.text,
                    "goals_after": list(s.goals_after),
                    "start": list(s.start),
                    "end": list(s.end),
                }
                for s in self.steps
            ],
            "messages": [{"severity": m.severity, "line": m.line, "text": m.text} for m in self.messages],
        }


@runtime_checkable
class ProofChecker(Protocol):
    """``check(context, decl, proof)``: elaborate ``context + decl + " := by\\n" + proof`` and report."""

    def check(self, context: str, decl: str, proof: str) -> CheckResult: ...


def check_many(checker: ProofChecker, context: str, decl: str, proofs: list[str]) -> list[CheckResult]:
    """Check several candidates of one theorem; uses the backend's batched ``check_batch`` when it has one."""
    if not callable(getattr(checker, "check", None)):
        raise ValueError(f"checker must implement check(context, decl, proof), got {checker!r}")
    if isinstance(proofs, (str, bytes)) or not isinstance(proofs, (list, tuple)):
        raise ValueError(f"proofs must be a list of proof texts, got {type(proofs).__name__}")
    batch = getattr(checker, "check_batch", None)
    if callable(batch):
        return list(batch(context, decl, proofs))
    return [checker.check(context, decl, p) for p in proofs]


def assemble(decl: str, proof: str) -> str:
    """The declaration text with a tactic proof attached (the statement is never regenerated)."""
    body = "\n".join("  " + ln if ln.strip() else ln for ln in proof.split("\n"))
    return f"{decl.rstrip()} := by\n{body}"


# Lean commands and attributes through which a proof text can run arbitrary code at elaboration time (file and
# process IO, network): a model-written candidate is refused if it contains one, unless the caller allows it.
UNSAFE_LEAN = re.compile(
    r"(#eval|#exit|#run|\brun_tac\b|\brun_cmd\b|\brun_elab\b|\brun_meta\b|\bby_elab\b|\belab\b|"
    r"\bmacro(_rules)?\b|\bsyntax\b|\binitialize\b|\bbuiltin_initialize\b|\bunsafe\b|\bimplemented_by\b|"
    r"\bextern\b|\bIO\.|\bSystem\.|\bimport\b)"
)


def unsafe_commands(text: str) -> list[str]:
    """The code-running Lean commands found in ``text`` (``#eval``, ``run_tac``, ``IO.``, ...), in order."""
    if not isinstance(text, str):
        raise ValueError(f"text must be a str, got {type(text).__name__}")
    return sorted({m.group(0) for m in UNSAFE_LEAN.finditer(text)}, key=text.index)


class LeanReplChecker:
    """Drive the Lean REPL (https://github.com/leanprover-community/repl) over its JSON protocol.

    Each check sends ``{"cmd": context + theorem, "allTactics": true}`` to ``lake env repl`` started in
    ``project`` (a Lake project whose dependencies, e.g. Mathlib, are built). Tactic records become
    :class:`Step` (text, goals, positions shifted to proof-relative lines) and messages keep their severity.
    The official code uses a fork with a ``theorems`` option that also reports nested InfoTree records; the
    upstream REPL's ``allTactics`` is used here, so step counts can differ from the paper's on nested proofs.

    Candidates are written by a language model and Lean runs code while it elaborates: a candidate containing a
    code-running command (``#eval``, ``run_tac``, ``run_cmd``, ``IO.``, ``import``, ... — see
    :func:`unsafe_commands`) is not sent to Lean but returned as incorrect with an error naming the command.
    ``allow_unsafe_commands=True`` lifts that (only for candidates you trust; the REPL itself is not sandboxed).
    """

    def __init__(
        self,
        project: str | os.PathLike,
        repl_cmd: tuple[str, ...] = ("lake", "env", "repl"),
        timeout_s: float = 300.0,
        allow_unsafe_commands: bool = False,
    ):
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if not isinstance(project, (str, os.PathLike)) or not os.path.isdir(project):
            raise ValueError(f"project must be an existing Lake project folder, got {str(project)!r}")
        if shutil.which(repl_cmd[0]) is None:
            raise ValueError(
                f"repl_cmd[0]={repl_cmd[0]!r} is not on PATH; install Lean (elan) and build the REPL first"
            )
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if not isinstance(allow_unsafe_commands, bool):
            raise ValueError(f"allow_unsafe_commands must be a bool, got {allow_unsafe_commands!r}")
        self.project = str(project)
        self.repl_cmd = tuple(repl_cmd)
        self.timeout_s = float(timeout_s)
        self.allow_unsafe_commands = allow_unsafe_commands

    def _run(self, commands: list[dict]) -> list[dict]:
        payload = "\n\n".join(json.dumps(c) for c in commands) + "\n\n"
        proc = subprocess.run(
            list(self.repl_cmd),
            input=payload,
            capture_output=True,
            text=True,
            cwd=self.project,
            timeout=self.timeout_s,
            check=False,
        )
        if proc.returncode != 0 and not proc.stdout.strip():
            raise RuntimeError(f"Lean REPL failed (exit {proc.returncode}): {proc.stderr.strip()[:500]}")
        return parse_repl_output(proc.stdout)

    def check_batch(self, context: str, decl: str, proofs: list[str]) -> list[CheckResult]:
        head = context.rstrip() + "\n\n" if context.strip() else ""
        offset = head.count("\n") + decl.rstrip().count("\n") + 1  # lines before the first proof line
        refused: dict[int, CheckResult] = {}
        if not self.allow_unsafe_commands:
            for i, p in enumerate(proofs):
                bad = unsafe_commands(p)
                if bad:
                    why = (
                        f"refused before elaboration: the candidate uses {', '.join(bad)}, which can run code "
                        "(file/process IO) inside Lean; pass allow_unsafe_commands=True to check it anyway"
                    )
                    refused[i] = CheckResult(messages=(Message("error", 0, why),))
        todo = [i for i in range(len(proofs)) if i not in refused]
        cmds = [{"cmd": head + assemble(decl, proofs[i]), "allTactics": True} for i in todo]
        answers = self._run(cmds) if cmds else []
        checked = dict(zip(todo, (repl_response_to_result(r, offset) for r in answers)))
        lost = CheckResult(
            messages=(
                Message("error", 0, f"the Lean REPL answered only {len(answers)} of {len(cmds)} candidates"),
            )
        )  # never drop a candidate: one the REPL did not answer (it crashed mid-batch) counts as failed
        return [refused.get(i) or checked.get(i, lost) for i in range(len(proofs))]

    def check(self, context: str, decl: str, proof: str) -> CheckResult:
        return self.check_batch(context, decl, [proof])[0]


def parse_repl_output(stdout: str) -> list[dict]:
    """Split the REPL's stdout (JSON objects separated by blank lines) into dicts."""
    out, dec, i = [], json.JSONDecoder(), 0
    s = stdout.strip()
    while i < len(s):
        while i < len(s) and s[i].isspace():
            i += 1
        if i >= len(s):
            break
        obj, i = dec.raw_decode(s, i)
        out.append(obj)
    return out


def repl_response_to_result(resp: dict, line_offset: int) -> CheckResult:
    """Map one REPL answer to a :class:`CheckResult` with lines relative to the proof text.

    The upstream REPL's ``goals`` field holds the goals *before* each tactic (the authors' fork reports them
    after); they are stored in ``goals_after`` unchanged, so Chain-of-States text is shifted by one step there.
    """
    steps = []
    for t in resp.get("tactics", []):
        goals = t.get("goals", "")
        goal_list = (
            tuple(g for g in goals.split("\n\n") if g.strip()) if goals and goals != "no goals" else ()
        )
        sp, ep = t.get("pos", {}), t.get("endPos", {})
        steps.append(
            Step(
                text=t.get("tactic", ""),
                goals_after=goal_list,
                start=(int(sp.get("line", 0)) - line_offset, int(sp.get("column", 0))),
                end=(int(ep.get("line", 0)) - line_offset, int(ep.get("column", 0))),
            )
        )
    msgs = []
    for m in resp.get("messages", []):
        sev = m.get("severity", "error")
        sev = sev if sev in SEVERITIES else "error"
        msgs.append(
            Message(sev, max(0, int(m.get("pos", {}).get("line", 0)) - line_offset), m.get("data", ""))
        )
    if "message" in resp and not resp.get("messages"):  # a REPL-level failure ({"message": "..."})
        msgs.append(Message("error", 0, str(resp["message"])))
    return CheckResult(tuple(steps), tuple(msgs))
