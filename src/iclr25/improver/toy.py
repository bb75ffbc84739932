"""A pure-Python checker for a small propositional tactic language with real goal states.

It exists so that every part of ImProver (Chain-of-States, error feedback, metrics on checker steps) runs
for real without a Lean installation. It makes **no claim about Lean**: it is a different, much smaller
proof checker whose surface syntax borrows Lean 4's tactic names. Supported:

* formulas over atoms with ``¬ ∧ ∨ →`` (and ``True``/``False``); ``¬A`` unfolds to ``A → False``;
* tactics ``intro``, ``exact``, ``apply``, ``constructor``, ``left``, ``right``, ``exfalso``, ``assumption``,
  ``contradiction``, ``trivial``, ``rcases h with ⟨a, b⟩`` / ``rcases h with a | b``, ``obtain ⟨a, b⟩ := h``,
  ``have n : P := term``, ``have n := term``, ``have n : P := by …`` (same line or an indented block),
  ``sorry``, ``t1; t2`` on one line, ``t1 <;> t2``, and ``·`` bullets;
* proof terms: hypotheses, application ``h1 (h2 x)``, ``fun x => t``, ``⟨a, b⟩``, ``h.1``/``h.2``
  (``.left``/``.right``), ``Or.inl``, ``Or.inr``, ``Or.elim``, ``And.intro``, ``And.left``, ``And.right``,
  ``absurd``, ``False.elim``, ``trivial``.

Step records follow the REPL's InfoTree convention the paper's length metric is computed on: one record
per tactic invocation, nested ones (inside ``have … := by``) included, ``t1 <;> t2`` gives three records,
``;`` separators and ``·`` focusing dots give none. The first failing tactic aborts its block with an error
on its line (like Lean); remaining goals at the end of a block give ``unsolved goals``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .checker import CheckResult, Message, Step

# --------------------------------------------------------------------------------------------------------
# Formulas: ("atom", name) | ("true",) | ("false",) | ("not", A) | ("and", A, B) | ("or", A, B) | ("imp", A, B)
# --------------------------------------------------------------------------------------------------------
Formula = tuple

TRUE: Formula = ("true",)
FALSE: Formula = ("false",)
_BIN = {"∧": "and", "∨": "or", "→": "imp", "->": "imp", "/\\": "and", "\\/": "or"}
_PREC = {"imp": 25, "or": 30, "and": 35}
_SYM = {"imp": "→", "or": "∨", "and": "∧"}
_TOKEN = re.compile(r"\s*(->|=>|/\\|\\/|[()⟨⟩,:|∧∨→¬⊢]|[A-Za-z_][A-Za-z0-9_'.]*|\S)")


class ToySyntaxError(ValueError):
    """A formula, term or tactic that does not parse (carries the 1-based proof line)."""

    def __init__(self, msg: str, line: int = 0):
        super().__init__(msg if not line else f"line {line}: {msg}")
        self.msg, self.line = msg, line


class TacticError(Exception):
    def __init__(self, msg: str, line: int):
        super().__init__(msg)
        self.msg, self.line = msg, line


def _tokens(s: str) -> list[str]:
    out, i = [], 0
    while i < len(s):
        m = _TOKEN.match(s, i)
        if m is None or m.end() == i:
            break
        if m.group(1):
            out.append(m.group(1))
        i = m.end()
    return out


class _Stream:
    def __init__(self, toks: list[str], what: str):
        self.t, self.i, self.what = toks, 0, what

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def next(self) -> str:
        if self.i >= len(self.t):
            raise ToySyntaxError(f"unexpected end of {self.what}")
        self.i += 1
        return self.t[self.i - 1]

    def expect(self, tok: str) -> None:
        got = self.next()
        if got != tok:
            raise ToySyntaxError(f"expected '{tok}' in {self.what}, got '{got}'")


def parse_formula(s: str) -> Formula:
    """Parse ``p ∧ q → ¬r`` (→ right-associative and weakest, then ∨, then ∧, then ¬)."""
    if not isinstance(s, str):
        raise ValueError(f"s must be a str (a formula), got {type(s).__name__}")
    st = _Stream(_tokens(s), "formula")
    f = _formula(st, 0)
    if st.peek() is not None:
        raise ToySyntaxError(f"unexpected '{st.peek()}' in formula {s!r}")
    return f


def _formula(st: _Stream, min_prec: int) -> Formula:
    lhs = _formula_atom(st)
    while True:
        tok = st.peek()
        op = _BIN.get(tok or "")
        if op is None or _PREC[op] < min_prec:
            return lhs
        st.next()
        rhs = _formula(st, _PREC[op])  # right-associative
        lhs = (op, lhs, rhs)


def _formula_atom(st: _Stream) -> Formula:
    tok = st.next()
    if tok == "(":
        f = _formula(st, 0)
        st.expect(")")
        return f
    if tok in ("¬", "~"):
        return ("not", _formula_atom(st))
    if tok == "True":
        return TRUE
    if tok == "False":
        return FALSE
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_']*", tok):
        return ("atom", tok)
    raise ToySyntaxError(f"unexpected '{tok}' in formula")


def show(f: Formula, ctx_prec: int = 0) -> str:
    """Pretty-print with the minimal parentheses (inverse of :func:`parse_formula`)."""
    k = f[0]
    if k == "atom":
        return f[1]
    if k == "true":
        return "True"
    if k == "false":
        return "False"
    if k == "not":
        inner = f[1]
        return "¬" + (
            show(inner, 100) if inner[0] in ("atom", "true", "false", "not") else f"({show(inner)})"
        )
    p = _PREC[k]
    s = f"{show(f[1], p + 1)} {_SYM[k]} {show(f[2], p)}"
    return f"({s})" if p < ctx_prec else s


def unfold(f: Formula) -> Formula:
    """``¬A`` ↦ ``A → False`` at the head (definitional unfolding)."""
    return ("imp", f[1], FALSE) if f[0] == "not" else f


def defeq(a: Formula, b: Formula) -> bool:
    """Equality up to unfolding ``¬`` everywhere."""
    a, b = unfold(a), unfold(b)
    if a[0] != b[0]:
        return False
    if a[0] == "atom":
        return a[1] == b[1]
    return all(defeq(x, y) for x, y in zip(a[1:], b[1:]))


# --------------------------------------------------------------------------------------------------------
# Goals
# --------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Goal:
    props: tuple[str, ...]  # the Prop variables of the statement
    hyps: tuple[tuple[str, Formula], ...]
    target: Formula

    def lookup(self, name: str) -> Formula | None:
        for n, f in reversed(self.hyps):
            if n == name:
                return f
        return None

    def add(self, name: str, f: Formula) -> Goal:
        return Goal(self.props, tuple(h for h in self.hyps if h[0] != name) + ((name, f),), self.target)

    def render(self) -> str:
        """Lean-style goal: variables grouped, one hypothesis per line, then ``⊢ target``."""
        lines = [" ".join(self.props) + " : Prop"] if self.props else []
        group: list[str] = []
        prev: Formula | None = None
        for n, f in self.hyps:
            if prev is not None and f == prev:
                group.append(n)
                continue
            if group:
                lines.append(f"{' '.join(group)} : {show(prev)}")
            group, prev = [n], f
        if group:
            lines.append(f"{' '.join(group)} : {show(prev)}")
        lines.append(f"⊢ {show(self.target)}")
        return "\n".join(lines)


def render_goals(goals: list[Goal]) -> tuple[str, ...]:
    return tuple(g.render() for g in goals)


# --------------------------------------------------------------------------------------------------------
# Terms
# --------------------------------------------------------------------------------------------------------
CONSTS = (
    "Or.inl",
    "Or.inr",
    "Or.elim",
    "And.intro",
    "And.left",
    "And.right",
    "absurd",
    "False.elim",
    "trivial",
)


def parse_term(s: str) -> tuple:
    """Terms: ("var", n) | ("const", c) | ("proj", t, 1|2) | ("app", f, [args]) | ("fun", [xs], t) | ("anon", [ts])."""
    st = _Stream(_tokens(s), "term")
    t = _term(st)
    if st.peek() is not None:
        raise ToySyntaxError(f"unexpected '{st.peek()}' in term {s!r}")
    return t


def _term(st: _Stream) -> tuple:
    if st.peek() in ("fun", "λ"):
        st.next()
        xs = []
        while st.peek() not in ("=>", None):
            x = st.next()
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_']*", x):
                raise ToySyntaxError(f"bad binder '{x}' in fun")
            xs.append(x)
        st.expect("=>")
        if not xs:
            raise ToySyntaxError("fun needs at least one binder")
        return ("fun", xs, _term(st))
    head = _term_atom(st)
    args = []
    while st.peek() not in (None, ")", "⟩", ",", "=>"):
        if st.peek() in ("fun", "λ"):
            args.append(_term(st))
            break
        args.append(_term_atom(st))
    return ("app", head, args) if args else head


def _term_atom(st: _Stream) -> tuple:
    tok = st.next()
    if tok == "(":
        t = _term(st)
        st.expect(")")
        return t
    if tok == "⟨":
        parts = [_term(st)]
        while st.peek() == ",":
            st.next()
            parts.append(_term(st))
        st.expect("⟩")
        return ("anon", parts)
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_'.]*", tok):
        return _name(tok)
    raise ToySyntaxError(f"unexpected '{tok}' in term")


def _name(tok: str) -> tuple:
    if tok in CONSTS:
        return ("const", tok)
    if "." in tok:
        base, fld = tok.rsplit(".", 1)
        idx = {"1": 1, "2": 2, "left": 1, "right": 2}.get(fld)
        if idx is None or not base:
            raise ToySyntaxError(f"unknown field '{fld}' in '{tok}'")
        return ("proj", _name(base), idx)
    return ("var", tok)


def _show_term(t: tuple) -> str:
    k = t[0]
    if k in ("var", "const"):
        return t[1]
    if k == "proj":
        return f"{_show_term(t[1])}.{t[2]}"
    if k == "anon":
        return "⟨" + ", ".join(_show_term(x) for x in t[1]) + "⟩"
    if k == "fun":
        return f"fun {' '.join(t[1])} => {_show_term(t[2])}"
    return " ".join(
        [_show_term(t[1])] + [f"({_show_term(a)})" if a[0] in ("app", "fun") else _show_term(a) for a in t[2]]
    )


def _mismatch(t: tuple, got: Formula, want: Formula, line: int) -> TacticError:
    return TacticError(
        f"type mismatch\n  {_show_term(t)}\nhas type\n  {show(got)} : Prop\nbut is expected to have type\n"
        f"  {show(want)} : Prop",
        line,
    )


def infer(t: tuple, g: Goal, line: int) -> Formula:
    """The proposition a term proves, when it can be read off without an expected type."""
    k = t[0]
    if k == "var":
        f = g.lookup(t[1])
        if f is None:
            raise TacticError(f"unknown identifier '{t[1]}'", line)
        return f
    if k == "proj":
        f = unfold(infer(t[1], g, line))
        if f[0] != "and":
            raise TacticError(
                f"invalid projection, structure expected\n  {_show_term(t[1])} : {show(f)}", line
            )
        return f[t[2]]
    if k == "app":
        head, args = t[1], t[2]
        if head[0] == "const":
            return _infer_const_app(head[1], args, g, line, t)
        f = infer(head, g, line)
        for a in args:
            f = unfold(f)
            if f[0] != "imp":
                raise TacticError(f"function expected\n  {_show_term(head)} : {show(f)}", line)
            check(a, f[1], g, line)
            f = f[2]
        return f
    if k == "const" and t[1] == "trivial":
        return TRUE
    raise TacticError(f"cannot infer the type of '{_show_term(t)}' (add a type ascription)", line)


def _infer_const_app(c: str, args: list, g: Goal, line: int, whole: tuple) -> Formula:
    if c == "And.intro" and len(args) == 2:
        return ("and", infer(args[0], g, line), infer(args[1], g, line))
    if c in ("And.left", "And.right") and len(args) == 1:
        f = unfold(infer(args[0], g, line))
        if f[0] != "and":
            raise TacticError(f"{c} expects a conjunction, got {show(f)}", line)
        return f[1] if c == "And.left" else f[2]
    if c == "absurd" and len(args) == 2:
        raise TacticError("cannot infer the result of 'absurd' without an expected type", line)
    raise TacticError(f"cannot infer the type of '{_show_term(whole)}' (add a type ascription)", line)


def check(t: tuple, want: Formula, g: Goal, line: int) -> None:
    """Elaborate ``t`` against the expected proposition ``want`` (bidirectional)."""
    k, w = t[0], unfold(want)
    if k == "fun":
        xs, body = t[1], t[2]
        for x in xs:
            if w[0] != "imp":
                raise TacticError(
                    f"type mismatch: 'fun {x} => …' is a function but the goal is {show(want)}", line
                )
            g = g.add(x, w[1])
            want, w = w[2], unfold(w[2])
        check(body, want, g, line)
        return
    if k == "anon":
        parts = t[1]
        if w[0] == "true" and not parts:
            return
        if w[0] != "and":
            raise TacticError(
                f"invalid constructor ⟨...⟩, expected type must be a conjunction, got {show(want)}", line
            )
        if len(parts) < 2:
            raise TacticError("insufficient number of arguments to ⟨...⟩", line)
        check(parts[0], w[1], g, line)
        check(parts[1] if len(parts) == 2 else ("anon", parts[1:]), w[2], g, line)
        return
    if k == "app" and t[1][0] == "const":
        c, args = t[1][1], t[2]
        if c in ("Or.inl", "Or.inr") and len(args) == 1:
            if w[0] != "or":
                raise TacticError(f"{c} proves a disjunction, but the goal is {show(want)}", line)
            check(args[0], w[1] if c == "Or.inl" else w[2], g, line)
            return
        if c == "And.intro" and len(args) == 2:
            if w[0] != "and":
                raise TacticError(f"And.intro proves a conjunction, but the goal is {show(want)}", line)
            check(args[0], w[1], g, line)
            check(args[1], w[2], g, line)
            return
        if c == "False.elim" and len(args) == 1:
            check(args[0], FALSE, g, line)
            return
        if c == "absurd" and len(args) == 2:
            a = infer(args[0], g, line)
            check(args[1], ("not", a), g, line)
            return
        if c == "Or.elim" and len(args) == 3:
            d = unfold(infer(args[0], g, line))
            if d[0] != "or":
                raise TacticError(f"Or.elim expects a disjunction, got {show(d)}", line)
            check(args[1], ("imp", d[1], want), g, line)
            check(args[2], ("imp", d[2], want), g, line)
            return
    if k == "const" and t[1] == "trivial":
        if w[0] != "true":
            raise _mismatch(t, TRUE, want, line)
        return
    got = infer(t, g, line)
    if not defeq(got, want):
        raise _mismatch(t, got, want, line)


# --------------------------------------------------------------------------------------------------------
# Tactic syntax tree
# --------------------------------------------------------------------------------------------------------
@dataclass
class Node:
    kind: str  # "tac" | "have" | "bullet" | "seq" (t1 <;> t2)
    text: str
    start: tuple[int, int]
    end: tuple[int, int]
    name: str = ""  # tactic name / have name
    arg: str = ""  # tactic argument / have type
    term: str = ""  # have := term
    block: list[Node] = field(default_factory=list)  # have := by …, bullet body, seq [first, second]


_HAVE = re.compile(
    r"have\s+(?P<name>[A-Za-z_][A-Za-z0-9_']*)?\s*(?::(?P<type>.*?))?\s*:=\s*(?P<rhs>.*)$", re.S
)


def _split_top(s: str, sep: str) -> list[tuple[int, str]]:
    """Split at ``sep`` outside brackets; returns (offset, piece) pairs."""
    out, depth, last, i = [], 0, 0, 0
    while i < len(s):
        c = s[i]
        if c in "(⟨[":
            depth += 1
        elif c in ")⟩]":
            depth -= 1
        elif depth == 0 and s.startswith(sep, i) and not (sep == ";" and s.startswith("<;>", i - 1)):
            if sep == ";" and i > 0 and s[i - 1] == "<":
                i += 1
                continue
            out.append((last, s[last:i]))
            last = i + len(sep)
            i = last
            continue
        i += 1
    out.append((last, s[last:]))
    return out


def parse_proof(proof: str) -> list[Node]:
    """Parse a tactic proof into nodes (raises :class:`ToySyntaxError` with the line)."""
    if not isinstance(proof, str):
        raise ValueError(f"proof must be a str (tactic text), got {type(proof).__name__}")
    lines = proof.split("\n")
    items = [(i + 1, len(ln) - len(ln.lstrip(" ")), ln) for i, ln in enumerate(lines) if ln.strip()]
    for no, _, ln in items:
        if "\t" in ln[: len(ln) - len(ln.lstrip())]:
            raise ToySyntaxError("tabs are not allowed in indentation", no)
    if not items:
        raise ToySyntaxError("empty proof", 1)
    nodes, rest = _parse_block(items, items[0][1], lines)
    if rest:
        raise ToySyntaxError("unexpected indentation", rest[0][0])
    return nodes


def _parse_block(items, indent, lines):
    nodes: list[Node] = []
    while items:
        no, ind, ln = items[0]
        if ind < indent:
            break
        if ind > indent:
            raise ToySyntaxError("unexpected indentation", no)
        items = items[1:]
        body = ln[ind:].rstrip()
        if body.startswith("·") or body.startswith(". "):
            inner_col = ind + 1 + (len(body[1:]) - len(body[1:].lstrip(" ")))
            sub = [(no, inner_col, " " * inner_col + body[1:].strip())] if body[1:].strip() else []
            while items and items[0][1] > ind:
                sub.append(items[0])
                items = items[1:]
            if not sub:
                raise ToySyntaxError("empty bullet", no)
            block, rest = _parse_block(sub, sub[0][1], lines)
            if rest:
                raise ToySyntaxError("unexpected indentation", rest[0][0])
            end = block[-1].end
            nodes.append(Node("bullet", _span_text(lines, (no, ind), end), (no, ind), end, block=block))
            continue
        line_nodes, items = _parse_line(no, ind, body, items, lines)
        nodes.extend(line_nodes)
    return nodes, items


def _parse_line(no, ind, body, items, lines):
    out = []
    pieces = _split_top(body, ";")
    for k, (off, piece) in enumerate(pieces):
        stripped = piece.strip()
        if not stripped:
            if k == len(pieces) - 1 and k > 0:  # trailing ';'
                continue
            raise ToySyntaxError("empty tactic", no)
        col = ind + off + (len(piece) - len(piece.lstrip()))
        if (
            stripped.startswith("have")
            and re.match(r"have\b", stripped)
            and re.search(r":=\s*by\b", stripped)
        ):
            # `by` swallows the rest of the line (and an indented block when nothing follows it)
            rest_line = body[off:].strip()
            node, items = _parse_have(no, col, rest_line, items, lines, ind)
            out.append(node)
            return out, items
        out.append(_parse_simple(no, col, stripped, lines))
    return out, items


def _parse_simple(no, col, text, lines) -> Node:
    end = (no, col + len(text))
    seq = _split_top(text, "<;>")
    if len(seq) > 2:
        raise ToySyntaxError("chained '<;>' is not supported by the toy checker", no)
    if len(seq) == 2:
        (o1, a), (o2, b) = seq
        if not a.strip() or not b.strip():
            raise ToySyntaxError("'<;>' needs a tactic on both sides", no)
        first = _parse_simple(no, col + o1 + len(a) - len(a.lstrip()), a.strip(), lines)
        second = _parse_simple(no, col + o2 + len(b) - len(b.lstrip()), b.strip(), lines)
        return Node("seq", text, (no, col), end, block=[first, second])
    if re.match(r"have\b", text):
        m = _HAVE.match(text)
        if m is None:
            raise ToySyntaxError(f"malformed have: {text!r}", no)
        name = m.group("name") or "this"
        return Node(
            "have",
            text,
            (no, col),
            end,
            name=name,
            arg=(m.group("type") or "").strip(),
            term=m.group("rhs").strip(),
        )
    m = re.match(r"([A-Za-z_?]+)\s*(.*)$", text, re.S)
    if m is None:
        raise ToySyntaxError(f"unknown tactic {text!r}", no)
    return Node("tac", text, (no, col), end, name=m.group(1), arg=m.group(2).strip())


def _parse_have(no, col, text, items, lines, line_ind):
    m = _HAVE.match(text)
    if m is None:
        raise ToySyntaxError(f"malformed have: {text!r}", no)
    name, typ = m.group("name") or "this", (m.group("type") or "").strip()
    if not typ:
        raise ToySyntaxError("'have … := by' needs a type: have h : P := by …", no)
    rhs = m.group("rhs")
    after_by = rhs.strip()[2:]
    if after_by.strip():
        inner_col = col + text.index(rhs) + 2 + (len(after_by) - len(after_by.lstrip()))
        block, _ = _parse_line(no, inner_col, after_by.strip(), [], lines)
    else:
        sub = []
        while items and items[0][1] > line_ind:
            sub.append(items[0])
            items = items[1:]
        if not sub:
            raise ToySyntaxError("expected a tactic block after 'by'", no)
        block, rest = _parse_block(sub, sub[0][1], lines)
        if rest:
            raise ToySyntaxError("unexpected indentation", rest[0][0])
    end = block[-1].end
    return Node(
        "have", _span_text(lines, (no, col), end), (no, col), end, name=name, arg=typ, block=block
    ), items


def _span_text(lines, start, end) -> str:
    (l0, c0), (l1, c1) = start, end
    if l0 == l1:
        return lines[l0 - 1][c0:c1]
    return "\n".join([lines[l0 - 1][c0:]] + lines[l0 : l1 - 1] + [lines[l1 - 1][:c1]])


# --------------------------------------------------------------------------------------------------------
# Execution
# --------------------------------------------------------------------------------------------------------
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_']*")


class _Run:
    def __init__(self):
        self.steps: list[Step] = []
        self.messages: list[Message] = []

    def block(self, nodes: list[Node], goals: list[Goal]) -> list[Goal]:
        for nd in nodes:
            goals = self.node(nd, goals)
        return goals

    def record(self, nd: Node, goals: list[Goal], at: int | None = None) -> None:
        s = Step(nd.text, render_goals(goals), nd.start, nd.end)
        if at is None:
            self.steps.append(s)
        else:
            self.steps.insert(at, s)

    def node(self, nd: Node, goals: list[Goal]) -> list[Goal]:
        line = nd.start[0]
        if nd.kind == "bullet":
            if not goals:
                raise TacticError("no goals to be proved", line)
            rest = self.block(nd.block, [goals[0]])
            if rest:
                raise TacticError("unsolved goals\n" + "\n\n".join(render_goals(rest)), line)
            return goals[1:]
        if not goals:
            raise TacticError("no goals to be proved", line)
        if nd.kind == "seq":
            at = len(self.steps)
            mid = self.node(nd.block[0], [goals[0]])
            out: list[Goal] = []
            for i, g in enumerate(mid):
                keep = len(self.steps)
                out += self.node(nd.block[1], [g])
                if i > 0:  # the REPL keeps one record for the second tactic
                    del self.steps[keep:]
            new = out + goals[1:]
            self.record(nd, new, at=at)
            return new
        if nd.kind == "have":
            g = goals[0]
            if nd.block:
                try:
                    f = parse_formula(nd.arg)
                except ToySyntaxError as e:
                    raise TacticError(f"invalid type in have: {e.msg}", line) from None
                at = len(self.steps)
                rest = self.block(nd.block, [Goal(g.props, g.hyps, f)])
                if rest:
                    raise TacticError("unsolved goals\n" + "\n\n".join(render_goals(rest)), line)
                new = [g.add(nd.name, f)] + goals[1:]
                self.record(nd, new, at=at)
                return new
            t = _parse_term_at(nd.term, line)
            if nd.arg:
                try:
                    f = parse_formula(nd.arg)
                except ToySyntaxError as e:
                    raise TacticError(f"invalid type in have: {e.msg}", line) from None
                check(t, f, g, line)
            else:
                f = infer(t, g, line)
            new = [g.add(nd.name, f)] + goals[1:]
            self.record(nd, new)
            return new
        new = self.tactic(nd, goals)
        self.record(nd, new)
        return new

    def tactic(self, nd: Node, goals: list[Goal]) -> list[Goal]:
        name, arg, line = nd.name, nd.arg, nd.start[0]
        g, rest = goals[0], goals[1:]
        tgt = unfold(g.target)
        if name in ("intro", "intros"):
            names = arg.split()
            if not names:
                raise TacticError("intro needs a name (the toy checker has no inaccessible names)", line)
            for x in names:
                if not _IDENT.fullmatch(x):
                    raise TacticError(f"invalid binder name '{x}'", line)
                if tgt[0] != "imp":
                    raise TacticError(f"no additional binders: goal is {show(g.target)}", line)
                g = Goal(g.props, g.add(x, tgt[1]).hyps, tgt[2])
                tgt = unfold(g.target)
            return [g] + rest
        if name == "exact":
            check(_parse_term_at(arg, line), g.target, g, line)
            return rest
        if name == "apply":
            t = _parse_term_at(arg, line)
            f = infer(t, g, line)
            premises: list[Formula] = []
            while not defeq(f, g.target):
                f = unfold(f)
                if f[0] != "imp":
                    raise TacticError(
                        f"apply failed: could not unify the conclusion of '{arg}' with the goal {show(g.target)}",
                        line,
                    )
                premises.append(f[1])
                f = f[2]
            return [Goal(g.props, g.hyps, p) for p in premises] + rest
        if name == "constructor":
            if tgt[0] == "and":
                return [Goal(g.props, g.hyps, tgt[1]), Goal(g.props, g.hyps, tgt[2])] + rest
            if tgt[0] == "true":
                return rest
            raise TacticError(
                f"constructor failed: target {show(g.target)} is not an inductive with one constructor", line
            )
        if name in ("left", "right"):
            if tgt[0] != "or":
                raise TacticError(f"{name} failed: target {show(g.target)} is not a disjunction", line)
            return [Goal(g.props, g.hyps, tgt[1] if name == "left" else tgt[2])] + rest
        if name == "exfalso":
            return [Goal(g.props, g.hyps, FALSE)] + rest
        if name == "assumption":
            if any(defeq(f, g.target) for _, f in g.hyps):
                return rest
            raise TacticError("assumption failed: no hypothesis matches the goal", line)
        if name == "trivial":
            if tgt[0] == "true" or any(defeq(f, g.target) for _, f in g.hyps):
                return rest
            raise TacticError("trivial failed", line)
        if name == "contradiction":
            fs = [f for _, f in g.hyps]
            if any(unfold(f)[0] == "false" for f in fs) or any(
                defeq(unfold(a), ("imp", b, FALSE)) for a in fs for b in fs
            ):
                return rest
            raise TacticError("contradiction failed: no False or complementary hypotheses", line)
        if name == "sorry":
            if not any("sorry" in m.text for m in self.messages):  # Lean warns once per declaration
                self.messages.append(Message("warning", line, "declaration uses 'sorry'"))
            return rest
        if name in ("rcases", "obtain"):
            return self.rcases(name, arg, g, line) + rest
        raise TacticError(f"unknown tactic '{name}'", line)

    def rcases(self, name: str, arg: str, g: Goal, line: int) -> list[Goal]:
        if name == "rcases":
            m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_'.]*)\s+with\s+(.+)", arg.strip(), re.S)
            if m is None:
                raise TacticError("rcases syntax: rcases h with ⟨a, b⟩ | rcases h with a | b", line)
            src, pat = m.group(1), m.group(2).strip()
        else:
            m = re.fullmatch(r"(.+?)\s*:=\s*([A-Za-z_][A-Za-z0-9_'.]*)", arg.strip(), re.S)
            if m is None:
                raise TacticError("obtain syntax: obtain ⟨a, b⟩ := h", line)
            pat, src = m.group(1).strip(), m.group(2)
        f = infer(_parse_term_at(src, line), g, line)
        base = Goal(g.props, tuple(h for h in g.hyps if h[0] != src), g.target)
        if pat.startswith("⟨") and pat.endswith("⟩"):
            names = [x.strip() for x in pat[1:-1].split(",")]
            for i, x in enumerate(names):
                if not _IDENT.fullmatch(x):
                    raise TacticError(f"invalid pattern name '{x}'", line)
                if i < len(names) - 1:
                    u = unfold(f)
                    if u[0] != "and":
                        raise TacticError(f"rcases: {show(f)} is not a conjunction", line)
                    base, f = base.add(x, u[1]), u[2]
                else:
                    base = base.add(x, f)
            return [base]
        alts = [x.strip() for x in pat.split("|")]
        if len(alts) < 2:
            raise TacticError(f"rcases: unsupported pattern '{pat}'", line)
        out = []
        for i, x in enumerate(alts):
            if not _IDENT.fullmatch(x):
                raise TacticError(f"invalid pattern name '{x}'", line)
            if i < len(alts) - 1:
                u = unfold(f)
                if u[0] != "or":
                    raise TacticError(f"rcases: {show(f)} is not a disjunction", line)
                out.append(base.add(x, u[1]))
                f = u[2]
            else:
                out.append(base.add(x, f))
        return out


def _parse_term_at(s: str, line: int) -> tuple:
    if not s.strip():
        raise TacticError("expected a term", line)
    try:
        return parse_term(s)
    except ToySyntaxError as e:
        raise TacticError(f"unexpected token: {e.msg}", line) from None


_DECL = re.compile(
    r"^\s*(theorem|lemma|example)\s*(?P<name>[A-Za-z_][A-Za-z0-9_'.]*)?\s*(?P<binders>.*?)\s*:\s*(?P<stmt>[^:]*)$",
    re.S,
)
_BINDER = re.compile(r"[({]\s*([^:(){}]+?)\s*:\s*([^(){}]*(?:\([^(){}]*\)[^(){}]*)*)\s*[)}]")


@dataclass(frozen=True)
class Statement:
    name: str
    props: tuple[str, ...]
    hyps: tuple[tuple[str, Formula], ...]
    target: Formula

    def goal(self) -> Goal:
        return Goal(self.props, self.hyps, self.target)


def parse_decl(decl: str) -> Statement:
    """``theorem t (p q : Prop) (h : p → q) : p → q`` → :class:`Statement`."""
    d = decl.strip()
    if d.endswith(":= by"):
        d = d[: -len(":= by")].rstrip()
    depth, split = 0, -1
    for i, c in enumerate(d):  # the statement's colon is the first ':' outside brackets
        if c in "({[":
            depth += 1
        elif c in ")}]":
            depth -= 1
        elif c == ":" and depth == 0:
            split = i
            break
    head_m = re.match(r"^\s*(theorem|lemma|example)\b\s*([A-Za-z_][A-Za-z0-9_'.]*)?", d)
    if head_m is None or split < 0:
        raise ToySyntaxError(f"decl must look like 'theorem name (binders) : statement', got {decl!r}")
    name = head_m.group(2) or "example"
    binders, stmt = d[head_m.end() : split], d[split + 1 :]
    props: list[str] = []
    hyps: list[tuple[str, Formula]] = []
    pos = 0
    for m in _BINDER.finditer(binders):
        if binders[pos : m.start()].strip():
            raise ToySyntaxError(f"cannot parse binders {binders[pos : m.start()].strip()!r}")
        pos = m.end()
        names, typ = m.group(1).split(), m.group(2).strip()
        if typ == "Prop":
            props += names
        else:
            f = parse_formula(typ)
            hyps += [(n, f) for n in names]
    if binders[pos:].strip():
        raise ToySyntaxError(f"cannot parse binders {binders[pos:].strip()!r}")
    target = parse_formula(stmt)
    known = set(props)
    for f in [target] + [h[1] for h in hyps]:
        bad = _atoms(f) - known
        if bad:
            raise ToySyntaxError(f"unbound proposition(s) {sorted(bad)}; declare them as (… : Prop)")
    return Statement(name, tuple(props), tuple(hyps), target)


def _atoms(f: Formula) -> set[str]:
    if f[0] == "atom":
        return {f[1]}
    return set().union(*[_atoms(x) for x in f[1:]]) if len(f) > 1 else set()


class ToyTacticChecker:
    """The shipped :class:`~iclr25.improver.checker.ProofChecker`: the toy propositional tactic language.

    ``check(context, decl, proof)`` parses ``decl`` (a bad declaration is the caller's bug: ``ValueError``),
    then runs ``proof``; syntax and tactic failures become ``error`` messages with their proof line, like a
    Lean elaboration error. ``context`` is accepted for protocol compatibility and ignored (toy statements
    are self-contained).
    """

    def check(self, context: str, decl: str, proof: str) -> CheckResult:
        if not isinstance(proof, str):
            raise ValueError(f"proof must be a str, got {type(proof).__name__}")
        if not isinstance(context, str):
            raise ValueError(f"context must be a str, got {type(context).__name__}")
        if not isinstance(decl, str):
            raise ValueError(f"decl must be a str (a theorem declaration), got {type(decl).__name__}")
        stmt = parse_decl(decl)
        run = _Run()
        try:
            nodes = parse_proof(proof)
        except ToySyntaxError as e:
            return CheckResult((), (Message("error", max(e.line, 1), f"syntax error: {e.msg}"),))
        try:
            rest = run.block(nodes, [stmt.goal()])
            if rest:
                run.messages.append(Message("error", 0, "unsolved goals\n" + "\n\n".join(render_goals(rest))))
        except TacticError as e:
            run.messages.append(Message("error", e.line, e.msg))
        return CheckResult(tuple(run.steps), tuple(run.messages))

    def check_batch(self, context: str, decl: str, proofs: list[str]) -> list[CheckResult]:
        if isinstance(proofs, (str, bytes)) or not isinstance(proofs, (list, tuple)):
            raise ValueError(f"proofs must be a list of proof texts, got {type(proofs).__name__}")
        return [self.check(context, decl, p) for p in proofs]
