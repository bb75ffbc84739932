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

import collections
import json
import os
import queue
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Protocol, runtime_checkable

from ..common.checks import need_str
from ..common.fields import bounded, check_fields

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True)
class Step:
    """One tactic record: its source text, the pretty-printed goals after it, and its source span.

    ``start``/``end`` are ``(line, column)`` with 1-based lines counted inside the proof text and 0-based
    columns; ``goals_after`` holds one string per open goal (empty when every goal is closed).
    """

    text: str = bounded(kind=str)
    goals_after: tuple[str, ...] = bounded(kind=str, each=True, length=(0, None))  # () = all closed
    start: tuple[int, int] = bounded(kind=int, each=True, length=2)  # (line, column)
    end: tuple[int, int] = bounded(kind=int, each=True, length=2)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above (the tuples element-wise); below: tuples, not lists
        for name in ("goals_after", "start", "end"):
            if not isinstance(v := getattr(self, name), tuple):
                raise ValueError(f"{name} must be a tuple, got {v!r:.80}")


@dataclass(frozen=True)
class Message:
    """A checker message; ``line`` is 1-based inside the proof text (0 = the declaration itself)."""

    severity: str = bounded(choices=SEVERITIES)
    line: int = bounded(kind=int, lo=0)  # 0 = the declaration
    text: str = bounded(kind=str)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above


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


class LeanReplError(RuntimeError):
    """The Lean REPL process misbehaved (died before answering, timed out, or wrote non-JSON output)."""


class LeanReplOutputError(LeanReplError):
    """The Lean REPL wrote output that is not a JSON object (a setup problem: raised, never a failed proof)."""


def _first_bytes(text: str, n: int = 120) -> str:
    return repr(text[:n]) + ("…" if len(text) > n else "")


class LeanReplChecker:
    """Drive the Lean REPL (https://github.com/leanprover-community/repl) over its JSON protocol.

    One long-lived ``lake env repl`` process is started in ``project`` (a Lake project whose dependencies, e.g.
    Mathlib, are built). The file context (``import Mathlib``, ``open …``) is elaborated **once** per context
    text with ``{"cmd": context}``; the REPL answers with an environment id ``env`` that every candidate reuses
    (``{"cmd": theorem, "env": env, "allTactics": true}``), so ``import Mathlib`` is not re-elaborated for each
    of the 15 candidates of a theorem. Tactic records become :class:`Step` and messages keep their severity.

    Goals after each step: the REPL's tactic records carry the goals *before* the tactic (and the id of that
    proof state). With ``goals="replay"`` (default) each tactic is replayed once in the REPL's tactic mode,
    ``{"tactic": text, "proofState": id}``, whose answer lists the goals *after* it — what Chain-of-States
    shows (ImProver §3.2). ``goals="next"`` uses the before-goals of the next tactic in source order instead
    (no extra REPL calls; exact for flat proofs, approximate inside nested blocks; the last step gets no
    goals when the proof checks); it is also the fallback for a tactic whose replay fails.

    Every candidate gets a result: if the REPL dies or times out on a candidate, that candidate and the rest of
    the batch are returned as incorrect with the error, and the REPL is restarted (the context is elaborated
    again) for the next call. Output that is not JSON raises :class:`LeanReplError` with the first bytes.

    Candidates are written by a language model and Lean runs code while it elaborates: a candidate containing a
    code-running command (``#eval``, ``run_tac``, ``run_cmd``, ``IO.``, ``import``, ... — see
    :func:`unsafe_commands`) is not sent to Lean but returned as incorrect with an error naming the command.
    ``allow_unsafe_commands=True`` lifts that (only for candidates you trust; the REPL itself is not sandboxed).
    The official code uses a fork with a ``theorems`` option that also reports nested InfoTree records; the
    upstream REPL's ``allTactics`` is used here, so step counts can differ from the paper's on nested proofs.
    """

    GOALS = ("replay", "next")

    def __init__(
        self,
        project: str | os.PathLike,
        repl_cmd: tuple[str, ...] = ("lake", "env", "repl"),
        timeout_s: float = 300.0,
        allow_unsafe_commands: bool = False,
        goals: str = "replay",
    ):
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s!r}")
        if not isinstance(project, (str, os.PathLike)) or not os.path.isdir(project):
            raise ValueError(f"project must be an existing Lake project folder, got {str(project)!r}")
        if (
            isinstance(repl_cmd, str)
            or not isinstance(repl_cmd, (tuple, list))
            or not repl_cmd
            or not all(isinstance(x, str) for x in repl_cmd)
        ):
            raise ValueError(f"repl_cmd must be a non-empty tuple of str (argv), got {repl_cmd!r}")
        if shutil.which(repl_cmd[0]) is None:
            raise ValueError(
                f"repl_cmd[0]={repl_cmd[0]!r} is not on PATH; install Lean (elan) and build the REPL first"
            )
        if not isinstance(allow_unsafe_commands, bool):
            raise ValueError(f"allow_unsafe_commands must be a bool, got {allow_unsafe_commands!r}")
        if goals not in self.GOALS:
            raise ValueError(f"goals must be one of {self.GOALS}, got {goals!r}")
        self.project = str(project)
        self.repl_cmd = tuple(repl_cmd)
        self.timeout_s = float(timeout_s)
        self.allow_unsafe_commands = allow_unsafe_commands
        self.goals = goals
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue | None = None
        self._stderr: collections.deque = collections.deque(maxlen=50)
        self._envs: dict[str, int | None] = {}
        self.starts = 0  # REPL processes started (1 + restarts)
        self.sent: list[dict] = []  # every command sent, in order (for inspection)

    # -- the process ----------------------------------------------------------------------------------------
    def _start(self) -> None:
        self._proc = subprocess.Popen(
            list(self.repl_cmd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            cwd=self.project,
        )
        self.starts += 1
        self._lines = queue.Queue()
        self._stderr.clear()

        def pump(stream, put) -> None:
            for ln in stream:
                put(ln)
            put(None)

        threading.Thread(target=pump, args=(self._proc.stdout, self._lines.put), daemon=True).start()
        threading.Thread(target=pump, args=(self._proc.stderr, self._stderr.append), daemon=True).start()

    def close(self) -> None:
        """Stop the REPL process (a later check starts a fresh one)."""
        p, self._proc = self._proc, None
        self._envs.clear()
        if p is not None and p.poll() is None:
            p.kill()
            p.wait()

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order
        try:
            self.close()
        except Exception:
            pass

    def _died(self, why: str) -> LeanReplError:
        err = "".join(x for x in self._stderr if x).strip()[-400:]
        code = None if self._proc is None else self._proc.poll()
        self.close()
        return LeanReplError(
            f"Lean REPL {' '.join(self.repl_cmd)!r} {why} (exit code {code})"
            + (f"; stderr: {err}" if err else "")
        )

    def _send(self, command: dict) -> dict:
        """Send one JSON command, read one JSON answer (a blank line ends it)."""
        if self._proc is None or self._proc.poll() is not None:
            self._start()
        assert self._proc is not None and self._lines is not None
        self.sent.append(command)
        try:
            self._proc.stdin.write(json.dumps(command, ensure_ascii=False) + "\n\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died("closed its input") from None
        deadline = time.monotonic() + self.timeout_s
        buf: list[str] = []
        while True:
            try:
                ln = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise self._died(f"gave no answer within timeout_s={self.timeout_s:g} s") from None
            if ln is None:
                raise self._died(
                    "exited before answering"
                    + (f" (partial output {_first_bytes(''.join(buf))})" if buf else "")
                )
            if ln.strip():
                buf.append(ln)
            elif buf:
                break
        text = "".join(buf)
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            self.close()
            raise LeanReplOutputError(
                f"Lean REPL {' '.join(self.repl_cmd)!r} wrote output that is not JSON; first bytes: "
                f"{_first_bytes(text)}"
            ) from None
        if not isinstance(obj, dict):
            self.close()
            raise LeanReplOutputError(f"Lean REPL answered a non-object: first bytes {_first_bytes(text)}")
        return obj

    def _env(self, context: str) -> int | None:
        """The REPL environment with ``context`` elaborated (once per context text and process)."""
        if not context.strip():
            return None
        if context not in self._envs:
            # extend the longest context already elaborated (imports are elaborated once per process)
            base = max((c for c in self._envs if context.startswith(c)), key=len, default=None)
            if base is None:
                resp = self._send({"cmd": context})
            else:
                resp = self._send({"cmd": context[len(base) :], "env": self._envs[base]})
            env = resp.get("env")
            if isinstance(env, bool) or not isinstance(env, int):
                raise LeanReplError(
                    f"Lean REPL gave no environment for the file context: {_first_bytes(json.dumps(resp))}"
                )
            errs = [m for m in resp.get("messages", []) if m.get("severity") == "error"]
            if errs:
                raise ValueError(
                    f"context: the file context does not elaborate in {self.project!r}: "
                    f"{str(errs[0].get('data', ''))[:300]}"
                )
            self._envs[context] = env
        return self._envs[context]

    # -- checking -------------------------------------------------------------------------------------------
    def _goals_after(self, resp: dict, result: CheckResult) -> CheckResult:
        """Replace the REPL's before-goals in ``result.steps`` by the goals after each tactic."""
        steps = list(result.steps)
        order = sorted(range(len(steps)), key=lambda i: steps[i].start)
        befores = [s.goals_after for s in steps]  # the REPL's goals field: before each tactic
        for k, i in enumerate(order):  # "next": the before-goals of the next tactic in source order
            later = [j for j in order[k + 1 :] if steps[j].start >= steps[i].end]
            after = befores[later[0]] if later else (() if result.correct else befores[i])
            steps[i] = replace(steps[i], goals_after=after)
        if self.goals == "replay":  # exact: run the tactic on its before-state in tactic mode
            for i, t in enumerate(resp.get("tactics", [])):
                ps = t.get("proofState")
                if isinstance(ps, bool) or not isinstance(ps, int):
                    continue
                ans = self._send({"tactic": t.get("tactic", ""), "proofState": ps})
                g = ans.get("goals")
                if isinstance(g, list) and all(isinstance(x, str) for x in g):
                    steps[i] = replace(steps[i], goals_after=tuple(g))
        return replace(result, steps=tuple(steps))

    def check_batch(self, context: str, decl: str, proofs: list[str]) -> list[CheckResult]:
        need_str("context", context)
        need_str("decl", decl)
        offset = decl.rstrip().count("\n") + 1  # lines of the command before the first proof line
        out: list[CheckResult | None] = [None] * len(proofs)
        if not self.allow_unsafe_commands:
            for i, p in enumerate(proofs):
                bad = unsafe_commands(p)
                if bad:
                    why = (
                        f"refused before elaboration: the candidate uses {', '.join(bad)}, which can run code "
                        "(file/process IO) inside Lean; pass allow_unsafe_commands=True to check it anyway"
                    )
                    out[i] = CheckResult(messages=(Message("error", 0, why),))
        todo = [i for i in range(len(proofs)) if out[i] is None]
        for k, i in enumerate(todo):
            try:
                env = self._env(context)
                cmd: dict = {"cmd": assemble(decl, proofs[i]), "allTactics": True}
                if env is not None:
                    cmd["env"] = env
                resp = self._send(cmd)
                out[i] = self._goals_after(resp, repl_response_to_result(resp, offset))
            except LeanReplOutputError:
                raise
            except LeanReplError as e:
                # never drop a candidate: this one and the rest of the batch fail with the error; the next
                # call starts a fresh REPL (the context is elaborated again there)
                failed = CheckResult(messages=(Message("error", 0, f"not checked: {e}"),))
                for j in todo[k:]:
                    out[j] = failed
                break
        assert all(r is not None for r in out)  # every candidate has a result
        return list(out)  # type: ignore[arg-type]

    def check(self, context: str, decl: str, proof: str) -> CheckResult:
        return self.check_batch(context, decl, [proof])[0]


def parse_repl_output(stdout: str) -> list[dict]:
    """Split the REPL's stdout (JSON objects separated by blank lines) into dicts; non-JSON output raises
    :class:`LeanReplError` with the first bytes received."""
    need_str("stdout", stdout)
    out, dec, i = [], json.JSONDecoder(), 0
    s = stdout.strip()
    while i < len(s):
        while i < len(s) and s[i].isspace():
            i += 1
        if i >= len(s):
            break
        try:
            obj, i = dec.raw_decode(s, i)
        except json.JSONDecodeError:
            raise LeanReplOutputError(
                f"Lean REPL output is not JSON at character {i}; first bytes there: {_first_bytes(s[i:])}"
            ) from None
        out.append(obj)
    return out


def repl_response_to_result(resp: dict, line_offset: int) -> CheckResult:
    """Map one REPL answer to a :class:`CheckResult` with lines relative to the proof text.

    The REPL's ``goals`` field of a tactic record holds the goals *before* that tactic; this function stores
    it in ``goals_after`` as read, and :class:`LeanReplChecker` then replaces it by the goals after the tactic
    (see its ``goals`` option). Call :meth:`LeanReplChecker.check` rather than this function for CoS text.
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
