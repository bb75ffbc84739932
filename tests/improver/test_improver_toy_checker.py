"""The toy tactic checker: goal states, step records (REPL convention), errors with lines."""

import pytest

from iclr25.improver import ToyTacticChecker, parse_formula
from iclr25.improver.toy import parse_decl, show

C = ToyTacticChecker()
DECL = "theorem t (p q r : Prop) (h1 : p → q) (h2 : p) : q ∧ p"


def test_formula_round_trip_and_precedence():
    for s in ["p → q → r", "(p → q) → r", "p ∧ q ∨ r", "p ∧ (q ∨ r)", "¬(p ∧ q) → ¬p ∨ r", "¬¬p"]:
        assert show(parse_formula(s)) == s
    assert parse_formula("p → q → r") == ("imp", ("atom", "p"), ("imp", ("atom", "q"), ("atom", "r")))
    assert parse_formula("p ∧ q ∨ r")[0] == "or"


def test_correct_term_proof_and_goal_states():
    r = C.check("", DECL, "constructor\n· apply h1\n  exact h2\n· exact h2")
    assert r.correct and not r.messages
    assert [s.text for s in r.steps] == [
        "constructor",
        "apply h1",
        "exact h2",
        "exact h2",
    ]  # bullets: no record
    assert r.steps[0].goals_after == (
        "p q r : Prop\nh1 : p → q\nh2 : p\n⊢ q",
        "p q r : Prop\nh1 : p → q\nh2 : p\n⊢ p",
    )
    assert r.steps[1].goals_after[0].endswith("⊢ p")
    assert r.steps[-1].goals_after == ()
    assert C.check("", DECL, "exact ⟨h1 h2, h2⟩").correct
    assert C.check("", DECL, "exact And.intro (h1 h2) h2").correct


def test_nested_have_records_and_spans():
    proof = "have h : q := by\n  apply h1\n  exact h2\nexact ⟨h, h2⟩"
    r = C.check("", DECL, proof)
    assert r.correct
    assert [s.text.split("\n")[0] for s in r.steps] == [
        "have h : q := by",
        "apply h1",
        "exact h2",
        "exact ⟨h, h2⟩",
    ]
    assert r.steps[0].start == (1, 0) and r.steps[0].end == (3, 10)
    assert r.steps[0].goals_after[0].splitlines()[-2:] == ["h : q", "⊢ q ∧ p"]


def test_combinator_counts_three_records_like_lean():
    d = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q"
    r = C.check("", d, "constructor <;> assumption")
    assert r.correct and [s.text for s in r.steps] == [
        "constructor <;> assumption",
        "constructor",
        "assumption",
    ]


def test_semicolons_split_steps_on_one_line():
    r = C.check("", DECL, "constructor; exact h1 h2; exact h2")
    assert r.correct and len(r.steps) == 3 and r.steps[2].start == (1, 26)


def test_disjunction_cases_and_negation():
    d = "theorem t (p q : Prop) : p ∨ q → q ∨ p"
    assert C.check("", d, "intro h\nrcases h with a | b\n· right; exact a\n· left; exact b").correct
    assert C.check("", d, "exact fun h => Or.elim h (fun a => Or.inr a) (fun b => Or.inl b)").correct
    d2 = "theorem t (p q : Prop) (h : p) (hn : ¬p) : q"
    assert C.check("", d2, "exfalso\nexact hn h").correct
    assert C.check("", d2, "exact absurd h hn").correct
    assert C.check("", d2, "contradiction").correct
    d3 = "theorem t (p q : Prop) (h : p ∧ q) : q"
    assert C.check("", d3, "obtain ⟨a, b⟩ := h\nexact b").correct


@pytest.mark.parametrize(
    "proof,line,needle",
    [
        ("exact ⟨h1 h2, h1⟩", 1, "type mismatch"),
        ("constructor\nexact h9", 2, "unknown identifier 'h9'"),
        ("constructor\nexact h1 h2", 0, "unsolved goals"),
        ("exact ⟨h1 h2, h2", 1, "unexpected"),
        ("left", 1, "not a disjunction"),
        ("frobnicate h1", 1, "unknown tactic"),
        ("constructor\n    exact h2", 2, "unexpected indentation"),
    ],
)
def test_errors_carry_line_numbers(proof, line, needle):
    r = C.check("", DECL, proof)
    assert not r.correct
    assert r.errors[0].line == line and needle in r.errors[0].text


def test_sorry_is_a_warning_that_makes_the_proof_incorrect():
    r = C.check("", DECL, "constructor <;> sorry")
    assert not r.correct and not r.errors
    assert [m.text for m in r.messages] == ["declaration uses 'sorry'"]


def test_bad_declaration_raises():
    with pytest.raises(ValueError, match="unbound"):
        C.check("", "theorem t (p : Prop) : p → q", "intro h")
    with pytest.raises(ValueError, match="decl"):
        parse_decl("def f := 1")
    with pytest.raises(ValueError, match="proof must be a str"):
        C.check("", DECL, None)
