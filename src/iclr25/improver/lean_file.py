"""Read the theorems of a Lean source file into :class:`~iclr25.improver.agent.Theorem` objects.

ImProver (§4) optimises the tactic proofs of a file's theorems with the file's header as context. This reader
covers the common layout: a header (``import``/``open``/``set_option``/``namespace`` lines before the first
declaration) and top-level ``theorem``/``lemma`` declarations whose proof is a ``:= by`` tactic block running to
the next top-level line. Every candidate of the file reuses one
elaborated REPL environment, extended incrementally (:class:`~iclr25.improver.checker.LeanReplChecker`).
Everything before a theorem (declarations, term-mode proofs, earlier theorems with their original proofs) is its
context.
"""

from __future__ import annotations

import os
import re

from ..common.checks import need_str
from .agent import Theorem

_DECL = re.compile(r"^(?:@\[[^\]]*\]\s*)?(?:(?:private|protected|nonrec)\s+)*(theorem|lemma)\s+([^\s(:{\[]+)")
_TOP = re.compile(r"^\S")


def parse_lean_theorems(text: str) -> list[Theorem]:
    """The ``theorem``/``lemma … := by`` declarations of ``text``, in order (context: everything before them
    including the earlier theorems with their original proofs)."""
    need_str("text", text)
    lines = text.split("\n")
    starts = [i for i, ln in enumerate(lines) if _DECL.match(ln)]
    out: list[Theorem] = []
    context: list[str] = []
    i = 0
    for k, s in enumerate(starts):
        context += lines[i:s]
        j = s + 1  # the declaration runs to the next top-level line (or the next theorem)
        nxt = starts[k + 1] if k + 1 < len(starts) else len(lines)
        while j < nxt and not (_TOP.match(lines[j]) and not lines[j].startswith(("--", "/-"))):
            j += 1
        block = "\n".join(lines[s:j]).rstrip()
        m = re.search(r":=\s*by\s*\n", block)
        i = j
        if m is None:  # term-mode proof (or `by` on the same line): context for later theorems, not optimised
            context += lines[s:j]
            continue
        decl, body = block[: m.start()].rstrip(), block[m.end() :]
        body_lines = body.split("\n")
        ind = min((len(b) - len(b.lstrip(" ")) for b in body_lines if b.strip()), default=0)
        proof = "\n".join(b[ind:] for b in body_lines).strip("\n")
        if not proof.strip():
            context += lines[s:j]
            continue
        out.append(Theorem(decl, proof, "\n".join(context).strip(), _DECL.match(lines[s]).group(2)))
        context += lines[s:j]  # later theorems may use this one (the file context of the paper's prompts)
    return out


def read_lean_theorems(path: str | os.PathLike) -> list[Theorem]:
    """:func:`parse_lean_theorems` of the file at ``path`` (UTF-8)."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise ValueError(f"path must name an existing .lean file, got {str(path)!r}")
    with open(path, encoding="utf-8") as f:
        thms = parse_lean_theorems(f.read())
    if not thms:
        raise ValueError(f"path: {str(path)!r} holds no `theorem … := by` tactic proof to optimise")
    return thms
