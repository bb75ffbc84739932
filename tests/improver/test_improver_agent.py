"""Agent components: keep-best, best-of-n, Chain-of-States, statement immutability, the full loop."""

import numpy as np
import pytest

from iclr25.improver import (
    LENGTH,
    Candidate,
    CheckResult,
    ImProver,
    ImProverConfig,
    Message,
    ScriptedRewriter,
    StatementChanged,
    Step,
    Theorem,
    ToyTacticChecker,
    aggregate,
    best_of_n,
    build_prompt,
    clean_candidate,
    keep_best_update,
    make_benchmark,
    render_chain_of_states,
    strip_chain_of_states,
)

C = ToyTacticChecker()
BAD = CheckResult((), (Message("error", 1, "boom"),))


def cand(correct: bool, score: float, tag: str = "", n_err: int = 1) -> Candidate:
    res = (
        CheckResult((Step("x", (), (1, 0), (1, 1)),))
        if correct
        else CheckResult((), (Message("error", 1, "e"),) * n_err)
    )
    return Candidate(tag or f"{correct}-{score}", res, score if correct else None)


def test_keep_best_property_1000_trials():
    rng = np.random.default_rng(0)
    for _ in range(1000):
        state = cand(True, float(rng.integers(1, 20)))
        best_seen = state.score
        for _ in range(int(rng.integers(1, 8))):
            c = cand(bool(rng.random() < 0.5), float(rng.integers(1, 20)))
            state = keep_best_update(state, c, LENGTH, keep_best=True)
            assert state.correct
            if c.correct:
                best_seen = min(best_seen, c.score)
            assert state.score == best_seen  # never worse than the best correct proof seen


def test_keep_best_off_and_ties():
    s, c = cand(True, 5, "s"), cand(False, 0, "c")
    assert keep_best_update(s, c, LENGTH, keep_best=False) is c
    assert keep_best_update(s, cand(True, 5, "tie"), LENGTH).proof == "s"  # ties keep the state
    assert keep_best_update(cand(False, 0, "broken"), c, LENGTH) is c  # a broken state is always replaced


def test_best_of_n_selection():
    cs = [
        cand(False, 0, "a", 3),
        cand(True, 7, "b"),
        cand(True, 4, "c"),
        cand(True, 4, "d"),
        cand(False, 0, "e", 1),
    ]
    assert best_of_n(cs, LENGTH).proof == "c"  # best correct, earliest among ties
    none = [cand(False, 0, "a", 3), cand(False, 0, "b", 1)]
    assert best_of_n(none, LENGTH).proof == "a"  # official: the first sample
    assert best_of_n(none, LENGTH, on_none="fewest_errors").proof == "b"  # paper formula
    with pytest.raises(ValueError, match="on_none"):
        best_of_n(none, LENGTH, on_none="random")


def test_chain_of_states_round_trip_and_layout():
    b = make_benchmark(15, 3)
    for t in b:
        r = C.check("", t.theorem.decl, t.verbose)
        shown = render_chain_of_states(t.verbose, r)
        assert strip_chain_of_states(shown) == t.verbose  # byte-for-byte
        assert shown.count("/-") == len({s.end[0] for s in r.steps})  # one block per line ending a step
    r = C.check("", "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q", "constructor\n· exact hp\n· exact hq")
    shown = render_chain_of_states("constructor\n· exact hp\n· exact hq", r).split("\n")
    assert shown[1] == "/-" and shown[-3:] == ["  /-", "  Goals Solved!", "  -/"]  # bullet tactic's column
    assert "⊢ p" in "\n".join(shown[:10])


def test_statement_is_immutable():
    decl = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q"
    assert (
        clean_candidate(
            "```lean\ntheorem t (p q : Prop) (hp : p) (hq : q) :\n  p ∧ q := by\n  exact ⟨hp, hq⟩\n```", decl
        )
        == "exact ⟨hp, hq⟩"
    )
    with pytest.raises(StatementChanged):
        clean_candidate("theorem t (p q : Prop) (hp : p) (hq : q) : p := by\n  exact hp", decl)

    class Cheater:
        def generate(self, messages, n):
            return ["theorem t (p q : Prop) (hp : p) (hq : q) : p := by\n  exact hp"] * n

    imp = ImProver(C, Cheater(), "length", ImProverConfig(n=2, m=2)).improve(
        Theorem(decl, "constructor\n· exact hp\n· exact hq")
    )
    assert imp.output.proof == "constructor\n· exact hp\n· exact hq"  # rejected; original kept
    assert imp.attempts[0].messages[0][2].startswith("statement changed")


def test_broken_candidates_never_replace_a_correct_proof_and_bad_generators_fail_loudly():
    decl = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q"

    class Garbage:
        def generate(self, messages, n):
            return ["exact ⟨hq, hp⟩", "", "%%%"][:n]

    imp = ImProver(C, Garbage(), "length", ImProverConfig(n=3, m=3)).improve(
        Theorem(decl, "constructor\n· exact hp\n· exact hq")
    )
    assert imp.output.correct and imp.output.proof.startswith("constructor") and imp.delta == 0.0

    class Short:
        def generate(self, messages, n):
            return ["x"]

    with pytest.raises(ValueError, match="outputs for n=2"):
        ImProver(C, Short(), "length", ImProverConfig(n=2, m=1)).improve(Theorem(decl, "exact ⟨hp, hq⟩"))
    with pytest.raises(ValueError, match="generator must implement"):
        ImProver(C, object())
    with pytest.raises(ValueError, match="metric must be one of"):
        ImProver(C, Short(), metric="beauty")
    with pytest.raises(ValueError, match="n must be a positive int, got 0"):
        ImProverConfig(n=0)


def test_prompt_holds_cos_history_and_examples():
    decl = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q"
    proof = "constructor\n· exact hp\n· exact hq"
    cur = Candidate(proof, C.check("", decl, proof), 3.0)
    from iclr25.improver import attempt_record

    broken = Candidate("exact h9", C.check("", decl, "exact h9"), None)
    hist = [attempt_record(cur, broken, LENGTH)]
    msgs = build_prompt(
        Theorem(decl, proof, context="import Foo"), cur, LENGTH, ImProverConfig(), hist, [("a", "b")]
    )
    text = "\n".join(m["content"] for m in msgs)
    assert "/-" in msgs[-1]["content"] and "<FILE_CONTEXT>" in text and "<EXAMPLE>" in text
    assert "ERROR at line 1 ('exact h9'): unknown identifier 'h9'" in text
    plain = build_prompt(Theorem(decl, proof), cur, LENGTH, ImProverConfig.baseline(), hist)
    assert "/-" not in plain[-1]["content"] and not any(m["content"].startswith("<PREV") for m in plain)


def test_improver_beats_single_shot_with_the_scripted_double():
    ths = [t.theorem for t in make_benchmark(30, 11)]
    base = ImProver(C, ScriptedRewriter(seed=0), "length", ImProverConfig.baseline()).improve_all(ths)
    full = ImProver(C, ScriptedRewriter(seed=0), "length", ImProverConfig()).improve_all(ths)
    a, b = aggregate([i.row() for i in full]), aggregate([i.row() for i in base])
    assert a["accuracy"] == 100.0 and b["accuracy"] < 100.0
    assert a["improvement"] > b["improvement"] + 10
    assert all(i.generations == 15 for i in full) and all(i.generations == 1 for i in base)
    for i in full:  # keep-best: never worse than the seed proof
        assert i.output.score <= i.original.score
