"""Metrics on checker steps and the paper's dataset scores."""

import math
import os
from pathlib import Path

import pytest

from iclr25.improver import (
    CheckResult,
    Step,
    ToyTacticChecker,
    aggregate,
    aggregate_csv,
    declarativity,
    get_metric,
    length,
)
from iclr25.improver.metrics import LENGTH


def steps(*texts):
    return CheckResult(tuple(Step(t, (), (i + 1, 0), (i + 1, len(t))) for i, t in enumerate(texts)))


def test_length_counts_steps_and_inner_semicolons():
    assert length(steps("a; b; c")) == 3  # one record, two inner ';'
    assert length(steps("t1 <;> t2")) == 1  # '<;>' is not a semicolon
    assert length(steps("a;")) == 1  # the step's last character is ignored
    assert length(steps("a", "b")) == 2


def test_length_uses_checker_steps_not_text():
    c = ToyTacticChecker()
    d = "theorem t (p q : Prop) (hp : p) (hq : q) : p ∧ q"
    assert length(c.check("", d, "constructor <;> assumption")) == 3
    assert length(c.check("", d, "constructor\n· exact hp\n· exact hq")) == 3  # bullets are not steps
    assert length(c.check("", d, "have h : p := by exact hp\nexact ⟨h, hq⟩")) == 3  # nested record counts


def test_declarativity():
    r = steps("have a : p := x", "exact a", "have b : q := y", "x", "y", "z", "w", "v")
    assert declarativity(r) == 0.25
    assert declarativity(CheckResult()) == 0.0


def test_delta_undefined_at_zero_and_sign():
    m = get_metric("declarativity")
    assert m.delta(0.0, 0.5) is None
    assert LENGTH.delta(10, 5) == -0.5 and LENGTH.better(5, 10) and not LENGTH.better(10, 10)
    with pytest.raises(ValueError, match="metric must be one of"):
        get_metric("elegance")


def test_aggregate_by_hand():
    rows = [
        {"og_correct": True, "og_score": 10, "new_correct": True, "new_score": 5},  # δ = -0.5
        {"og_correct": True, "og_score": 4, "new_correct": True, "new_score": 4},  # δ = 0
        {"og_correct": True, "og_score": 4, "new_correct": False, "new_score": None},  # undefined
        {"og_correct": True, "og_score": 8, "new_correct": True, "new_score": 10},  # δ = +0.25
    ]
    a = aggregate(rows, "length")
    assert a["improvement"] == pytest.approx(100 * (0.5 + 0 - 0.25) / 4)
    assert a["nonempty_improvement"] == pytest.approx(100 * (0.5 - 0.25) / 3)
    assert a["accuracy"] == 75.0 and a["improved_accuracy"] == 25.0
    rows_max = [{"og_correct": True, "og_score": 0.0, "new_correct": True, "new_score": 0.5}]
    a = aggregate(rows_max, "declarativity")
    assert a["improvement"] == 0.0 and math.isnan(a["nonempty_improvement"]) and a["improved_accuracy"] == 0.0
    with pytest.raises(ValueError, match="rows"):
        aggregate([])


# Paper Table 1/2 (GPT-4o baseline and ImProver; Improvement / Nonempty / Accuracy / Improved accuracy).
PAPER = {
    ("length", "MIL"): (
        30.54,
        56.56,
        None,
        50.0,
    ),  # the table prints accuracy 100 %; the CSV run used keep_best=False
    ("length", "MIL_baseline"): (6.25, 18.58, 37.5, 14.42),
    ("length", "Compfiles"): (18.86, 54.48, 100.0, 34.62),
    ("length", "Compfiles_baseline"): (2.75, 30.7, 11.54, 5.13),
    ("length", "Mathlib"): (6.19, 53.65, 100.0, 11.54),
    ("modularity", "MIL"): (13.45, 30.97, 100.0, 34.21),
    ("modularity", "MIL_baseline"): (4.18, 14.48, 28.85, 11.54),
    ("modularity", "Compfiles"): (5.74, 24.89, 100.0, 19.23),
    ("modularity", "Mathlib"): (4.63, 33.19, 100.0, 11.63),
}
CSV_DIR = os.environ.get("IMPROVER_RESULTS_DIR", "")


@pytest.mark.skipif(not CSV_DIR, reason="set IMPROVER_RESULTS_DIR to the official benchmark/data/main folder")
@pytest.mark.parametrize("key", sorted(PAPER))
def test_aggregate_reproduces_paper_tables_from_official_csvs(key):
    folder, name = key
    a = aggregate_csv(
        str(Path(CSV_DIR) / folder / f"{name}.csv"), "length" if folder == "length" else "declarativity"
    )
    for got, want in zip(
        (a["improvement"], a["nonempty_improvement"], a["accuracy"], a["improved_accuracy"]), PAPER[key]
    ):
        if want is not None:
            assert round(got, 2) == pytest.approx(want, abs=0.006)


def test_aggregate_warns_with_the_count_of_rows_missing_correctness_values():
    import warnings

    from iclr25.improver.metrics import aggregate

    rows = [
        {"og_correct": True, "new_correct": True, "og_score": 4, "new_score": 2},
        {"og_correct": None, "new_correct": True, "og_score": 4, "new_score": 2},
        {"og_correct": True, "new_correct": "", "og_score": 4, "new_score": 2},
        {"og_correct": True, "new_correct": float("nan"), "og_score": 4, "new_score": 2},
    ]
    with pytest.warns(UserWarning, match="3 of 4 rows have an empty og_correct/new_correct"):
        agg = aggregate(rows)
    assert agg["accuracy"] == 50.0 and agg["improved_accuracy"] == 25.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        aggregate(rows[:1])  # complete rows: no warning
