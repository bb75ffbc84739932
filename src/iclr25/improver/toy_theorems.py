"""Generated benchmark for the toy checker: propositional theorems with verbose seed proofs.

Each theorem is built from a random natural-deduction derivation (∧/∨ introduction, → and ∧ elimination)
over atoms ``p q r s``. The derivation gives a one-line proof term (the *short* proof ``exact t``, after
``intro`` when the statement is an implication) and a *verbose* proof that expands the same derivation into
tactics — ``constructor`` with bullets, ``apply`` chains, ``left``/``right`` and redundant ``have`` steps —
as a long human-written proof would. The verbose proof is the seed proof ImProver starts from; the length
gap between the two is what a good optimiser can recover.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..common.checks import need_int, need_real, need_seed
from .agent import Theorem
from .toy import Formula, ToyTacticChecker, _show_term, show

ATOMS = ("p", "q", "r", "s")


@dataclass(frozen=True)
class ToyTheorem:
    theorem: Theorem
    short: str  # a 1–2 step proof of the same statement
    verbose: str  # the seed proof
    steps_short: int
    steps_verbose: int


class _Gen:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng
        self.hyps: list[tuple[str, Formula]] = []

    def atom(self) -> Formula:
        return ("atom", ATOMS[self.rng.integers(len(ATOMS))])

    def hyp(self, f: Formula) -> tuple:
        for n, g in self.hyps:
            if g == f:
                return ("var", n)
        name = f"h{len(self.hyps) + 1}"
        self.hyps.append((name, f))
        return ("var", name)

    def term(self, depth: int) -> tuple[tuple, Formula]:
        """A random derivation: (term, the formula it proves)."""
        if depth <= 0:
            f = self.atom()
            return self.hyp(f), f
        rule = self.rng.choice(["and", "or", "imp", "proj"], p=[0.35, 0.2, 0.3, 0.15])
        if rule == "and":
            a, fa = self.term(depth - 1)
            b, fb = self.term(depth - 1 - int(self.rng.random() < 0.5))
            return ("anon", [a, b]), ("and", fa, fb)
        if rule == "or":
            a, fa = self.term(depth - 1)
            other = self.atom()
            if self.rng.random() < 0.5:
                return ("app", ("const", "Or.inl"), [a]), ("or", fa, other)
            return ("app", ("const", "Or.inr"), [a]), ("or", other, fa)
        if rule == "imp":
            a, fa = self.term(depth - 1)
            fb = self.atom()
            f = self.hyp(("imp", fa, fb))
            return ("app", f, [a]), fb
        fa, other = self.atom(), self.atom()
        h = self.hyp(("and", fa, other) if self.rng.random() < 0.5 else ("and", other, fa))
        idx = 1 if self.hyps[[n for n, _ in self.hyps].index(h[1])][1][1] == fa else 2
        return ("proj", h, idx), fa


def _conns(f: Formula) -> int:
    return 0 if f[0] in ("atom", "true", "false") else 1 + sum(_conns(x) for x in f[1:])


class _Verbose:
    """Expand a proof term into a verbose tactic proof (redundant ``have``s, ``apply`` chains, bullets)."""

    def __init__(self, rng: np.random.Generator, p_have: float, n_hyps: int):
        self.rng, self.p_have, self.k = rng, p_have, n_hyps

    def fresh(self) -> str:
        self.k += 1
        return f"h{self.k}"

    def expand(self, t: tuple, f: Formula, ind: str, types: dict) -> list[str]:
        k = t[0]
        if k in ("var", "proj"):
            if self.rng.random() < self.p_have:
                n = self.fresh()
                return [f"{ind}have {n} : {show(f)} := {_show_term(t)}", f"{ind}exact {n}"]
            return [f"{ind}exact {_show_term(t)}"]
        if k == "anon":
            a, b = t[1]
            out = [f"{ind}constructor"]
            for part, g in ((a, f[1]), (b, f[2])):
                sub = self.expand(part, g, ind + "  ", types)
                out.append(f"{ind}· " + sub[0][len(ind) + 2 :])
                out += sub[1:]
            return out
        if k == "app" and t[1][0] == "const":
            c = t[1][1]
            side, g = ("left", f[1]) if c == "Or.inl" else ("right", f[2])
            return [f"{ind}{side}"] + self.expand(t[2][0], g, ind, types)
        if k == "app":
            fn, arg = t[1], t[2][0]
            prem = types[fn[1]][1]
            if self.rng.random() < self.p_have * 0.6:  # a have-block for the premise
                n = self.fresh()
                body = self.expand(arg, prem, ind + "  ", types)
                return [f"{ind}have {n} : {show(prem)} := by"] + body + [f"{ind}exact {fn[1]} {n}"]
            return [f"{ind}apply {fn[1]}"] + self.expand(arg, prem, ind, types)
        raise AssertionError(k)


def make_theorem(
    rng: np.random.Generator, index: int, p_have: float = 0.5, max_connectives: int = 5
) -> ToyTheorem:
    """One random theorem with its short and verbose proofs (both checked)."""
    checker = ToyTacticChecker()
    for _ in range(100):
        g = _Gen(rng)
        term, target = g.term(int(rng.integers(1, 4)))
        if not 1 <= _conns(target) <= max_connectives:
            continue
        hyps = list(g.hyps)
        intro: list[str] = []
        if hyps and rng.random() < 0.5:  # state the last hypothesis as a premise of the target
            n, f = hyps.pop()
            target = ("imp", f, target)
            intro = [n]
        props = sorted({a for _, f in g.hyps for a in _atom_set(f)} | _atom_set(target))
        binders = f"({' '.join(props)} : Prop)" + "".join(f" ({n} : {show(f)})" for n, f in hyps)
        decl = f"theorem toy{index} {binders} : {show(target)}"
        types = dict(g.hyps)
        pre = [f"intro {' '.join(intro)}"] if intro else []
        short = "\n".join(pre + [f"exact {_show_term(term)}"])
        body_f = target[2] if intro else target
        vb = _Verbose(rng, p_have, len(g.hyps))
        lines = vb.expand(term, body_f, "", types)
        if rng.random() < p_have and hyps:  # an unused restatement
            n, f = hyps[int(rng.integers(len(hyps)))]
            lines.insert(0, f"have {vb.fresh()} : {show(f)} := {n}")
        verbose = "\n".join(pre + lines)
        rs, rv = checker.check("", decl, short), checker.check("", decl, verbose)
        if not (rs.correct and rv.correct) or len(rv.steps) <= len(rs.steps):
            continue
        return ToyTheorem(
            Theorem(decl, verbose, name=f"toy{index}"), short, verbose, len(rs.steps), len(rv.steps)
        )
    raise RuntimeError("could not generate a theorem in 100 tries")


def _atom_set(f: Formula) -> set[str]:
    if f[0] == "atom":
        return {f[1]}
    return set().union(*[_atom_set(x) for x in f[1:]]) if len(f) > 1 else set()


def make_benchmark(n: int, seed: int, p_have: float = 0.5) -> list[ToyTheorem]:
    """``n`` theorems from ``seed`` (same seed ⇒ same theorems)."""
    need_int("n", n, 1)
    need_seed("seed", seed)
    if isinstance(p_have, bool) or not isinstance(p_have, (int, float)) or not 0.0 <= p_have <= 1.0:
        raise ValueError(f"p_have must be a probability in [0, 1], got {p_have!r}")
    rng = np.random.default_rng(seed)
    return [make_theorem(rng, i, p_have) for i in range(n)]


def rewrite_pairs(
    n_theorems: int, seed: int, p_cos: float = 0.5, p_error: float = 0.2, variants: int = 3
) -> list[tuple[str, str]]:
    """Training pairs (prompt, short proof) for :class:`~iclr25.improver.generators.TinyLMGenerator`.

    Inputs are the verbose proof and partly simplified versions of it (random correct edits), shown with the
    Chain-of-States comments with probability ``p_cos`` and with an error line from a broken attempt with
    probability ``p_error``; the target is always the short proof. Theorems come from their own seed stream.
    """
    from .chain_of_states import render_chain_of_states
    from .generators import lm_prompt, scripted_edits

    need_int("n_theorems", n_theorems, 1)
    need_seed("seed", seed)
    need_real("p_cos", p_cos, 0.0, 1.0)
    need_real("p_error", p_error, 0.0, 1.0)
    need_int("variants", variants, 1)
    rng = np.random.default_rng(seed)
    checker = ToyTacticChecker()
    pairs = []
    for i in range(n_theorems):
        th = make_theorem(rng, i, p_have=float(rng.uniform(0.2, 0.8)))
        decl = th.theorem.decl
        for _ in range(variants):
            cur = th.verbose
            for _ in range(int(rng.integers(0, 4))):
                ed = scripted_edits(cur)
                if not ed:
                    break
                cur = ed[int(rng.integers(len(ed)))][1]
            res = checker.check("", decl, cur)
            if not res.correct:
                continue
            shown = render_chain_of_states(cur, res) if rng.random() < p_cos else cur
            err = ""
            if rng.random() < p_error:
                bad = cur.replace("h1", "h99", 1) if "h1" in cur else "exact h99"
                r = checker.check("", decl, bad)
                if r.errors:
                    err = f"line {r.errors[0].line}: {r.errors[0].text.split(chr(10))[0][:60]}"
            pairs.append((lm_prompt(decl, shown, err), th.short))
    return pairs
