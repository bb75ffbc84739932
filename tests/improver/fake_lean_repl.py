"""A stand-in for ``lake env repl`` that speaks the Lean REPL's JSON protocol (leanprover-community/repl).

Commands arrive on stdin as JSON objects separated by blank lines; each answer is pretty-printed JSON followed
by a blank line, as the real REPL writes it. Supported: ``{"cmd": text}`` (a file header → a new ``env``),
``{"cmd": theorem, "env": k, "allTactics": true}`` (checked by the toy tactic checker; tactic records carry
the goals *before* each tactic and a ``proofState`` id, as the real REPL's do) and
``{"tactic": t, "proofState": k}`` (tactic mode: the goals *after* the tactic). Not Lean: a test double.

Fault injection through the environment: FAKE_REPL_LOG (append every command as one JSON line),
FAKE_REPL_CRASH_AT=n (exit without answering the n-th command, 0-based, of the first process only: a marker
file next to the log records that it crashed once), FAKE_REPL_GARBAGE=1 (answer with a non-JSON line),
FAKE_REPL_HANG_AT=n (never answer the n-th command, first process only), FAKE_REPL_SCRIPT=file.json (answer the k-th command with the k-th object of that list: a recorded transcript).
"""

import json
import os
import sys
import types  # noqa: E402

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "src")
sys.path.insert(0, SRC)
# load iclr25.improver.toy without the package __init__ (which imports torch): a fast-starting process
_pkg = types.ModuleType("iclr25.improver")
_pkg.__path__ = [os.path.join(SRC, "iclr25", "improver")]
sys.modules["iclr25.improver"] = _pkg

from iclr25.improver.toy import ToyTacticChecker  # noqa: E402


def commands(stream):
    buf = []
    for ln in stream:
        if ln.strip():
            buf.append(ln)
        elif buf:
            yield json.loads("".join(buf))
            buf = []
    if buf:
        yield json.loads("".join(buf))


def answer(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=1, ensure_ascii=False) + "\n\n")
    sys.stdout.flush()


def main() -> None:
    log = os.environ.get("FAKE_REPL_LOG")
    crash_at = int(os.environ.get("FAKE_REPL_CRASH_AT", "-1"))
    marker = (log or "") + ".crashed"
    hang_at = int(os.environ.get("FAKE_REPL_HANG_AT", "-1"))
    if os.path.exists(marker):
        crash_at = hang_at = -1  # only the first process crashes or hangs
    checker, envs, states = ToyTacticChecker(), 0, {}
    script = None
    if os.environ.get("FAKE_REPL_SCRIPT"):
        with open(os.environ["FAKE_REPL_SCRIPT"], encoding="utf-8") as f:
            script = json.load(f)
    for n, c in enumerate(commands(sys.stdin)):
        if log:
            with open(log, "a", encoding="utf-8") as f:
                f.write(json.dumps(c, ensure_ascii=False) + "\n")
        if n == crash_at:
            open(marker, "w").close()
            sys.exit(1)  # the REPL dies without answering
        if n == hang_at:
            open(marker, "w").close()
            import time

            time.sleep(3600)  # the REPL hangs (killed by the checker's timeout)
        if os.environ.get("FAKE_REPL_GARBAGE"):
            sys.stdout.write("uncaught exception: INTERNAL PANIC\n\n")
            sys.stdout.flush()
            continue
        if script is not None:
            answer(script[n])
            continue
        if "tactic" in c:
            if c.get("proofState") not in states:
                answer({"message": f"Unknown proof state: {c.get('proofState')}"})
                continue
            goals = states[c["proofState"]]
            states[len(states)] = ()
            answer({"proofState": len(states) - 1, "goals": list(goals)})
            continue
        text = c["cmd"]
        if not c.get("allTactics"):  # a header (imports, opens) or more file context
            answer({"env": envs})
            envs += 1
            continue
        decl, proof = text.split(" := by\n", 1)
        proof = "\n".join(ln[2:] if ln.startswith("  ") else ln for ln in proof.split("\n"))
        off = decl.count("\n") + 1
        r = checker.check("", decl, proof)
        steps = sorted(r.steps, key=lambda s: s.start)
        tactics, prev = [], ["⊢ " + decl.split(":")[-1].strip()]
        for s in steps:
            ps = len(states)
            states[ps] = s.goals_after
            tactics.append(
                {
                    "usedConstants": [],
                    "tactic": s.text,
                    "proofState": ps,
                    "pos": {"line": s.start[0] + off, "column": s.start[1]},
                    "goals": "\n\n".join(prev) if prev else "no goals",
                    "endPos": {"line": s.end[0] + off, "column": s.end[1]},
                }
            )
            prev = list(s.goals_after)
        msgs = [
            {
                "severity": m.severity,
                "pos": {"line": m.line + off if m.line else 1, "column": 0},
                "endPos": None,
                "data": m.text,
            }
            for m in r.messages
        ]
        answer(
            {"tactics": tactics, "messages": msgs, "env": envs} if msgs else {"tactics": tactics, "env": envs}
        )
        envs += 1


if __name__ == "__main__":
    main()
