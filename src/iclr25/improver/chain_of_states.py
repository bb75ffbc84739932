"""Chain-of-States prompting (ImProver §3.2): the proof with the goal state after every step as comments.

After the last source line of each tactic step a Lean block comment ``/- … -/`` with the pretty-printed goals
after that step is inserted, indented like the tactic (the column after a bullet dot); ``Goals Solved!`` when no goal is left. When several
steps end on the same line (``a; b``, a ``have … := by`` block whose last tactic ends there), the state after
the outermost of them is shown — the state the next line of the proof starts from.
"""

from __future__ import annotations

import re

from ..common.checks import need_str, need_type
from .checker import CheckResult

_COS_BLOCK = re.compile(r"[ \t]*/-.*?-/[ \t]*\n", re.S)


def render_chain_of_states(proof: str, result: CheckResult) -> str:
    """``proof`` with a ``/- goals -/`` comment after the last line of every step of ``result``."""
    need_str("proof", proof)
    need_type("result", result, CheckResult)
    lines = proof.split("\n")
    by_line: dict[int, tuple] = {}
    for s in result.steps:  # outermost = earliest start among the steps ending last on that line
        ln = s.end[0]
        if not 1 <= ln <= len(lines):
            continue
        key = (s.end[1], (-s.start[0], -s.start[1]))
        if ln not in by_line or key > by_line[ln][0]:
            by_line[ln] = (key, s)
    out: list[str] = []
    for i, ln in enumerate(lines, start=1):
        out.append(ln)
        if i in by_line:
            step = by_line[i][1]
            body_ln = ln.lstrip(" ")
            col = len(ln) - len(body_ln)
            if body_ln.startswith(("·", ". ")):  # a bullet line: indent like the tactic after the dot
                col += 1 + len(body_ln[1:]) - len(body_ln[1:].lstrip(" "))
            ind = " " * col
            body = "\n\n".join(step.goals_after) if step.goals_after else "Goals Solved!"
            out.append("\n".join([ind + "/-"] + [ind + b for b in body.split("\n")] + [ind + "-/"]))
    return "\n".join(out)


def strip_chain_of_states(text: str) -> str:
    """Remove block comments that stand on their own lines (the inverse of :func:`render_chain_of_states`)."""
    need_str("text", text)
    if not text.endswith("\n"):
        return _COS_BLOCK.sub("", text + "\n")[:-1]
    return _COS_BLOCK.sub("", text)
