import json
import math

import pytest

from iclr25.common.claims import Claim, Stat, all_of, claims_document, make_claim, validate_claims_document


def test_stat_is_population_mean_std():
    s = Stat.of([1.0, 2.0, 3.0])
    assert s.mean == 2.0 and math.isclose(s.std, math.sqrt(2 / 3)) and s.values == (1.0, 2.0, 3.0)


@pytest.mark.parametrize(
    "compare,method,baseline,threshold,direction,expected_measured,passes,verdict",
    [
        ("value", [0.9, 0.95], None, 0.9, ">=", 0.925, True, "not decided"),  # 2 seeds: wide interval
        ("difference", [0.8, 0.9], [0.7, 0.7], 0.2, ">=", 0.15, False, "not decided"),
        ("ratio", [0.9, 0.9], [1.0, 1.0], 0.93, "<=", 0.9, True, "holds"),  # no spread: a point interval
        ("ratio", [0.95, 0.95], [1.0, 1.0], 0.93, "<=", 0.95, False, "fails"),
    ],
)
def test_verdict_is_computed_from_numbers(
    compare, method, baseline, threshold, direction, expected_measured, passes, verdict
):
    c = make_claim("x", "s", "m", method, threshold, direction, baseline=baseline, compare=compare)
    assert math.isclose(c.measured, expected_measured)
    assert c.passes is passes and c.verdict == verdict and c.holds is (verdict == "holds")


def test_reduce_all_needs_every_seed():
    c = make_claim(
        "x",
        "s",
        "m",
        [0.7, 0.8, 0.2],
        0.5,
        ">=",
        baseline=[0.1, 0.1, 0.1],
        compare="difference",
        reduce="all",
    )
    assert not c.holds and math.isclose(c.measured, 0.1)  # the mean difference (0.47) would not hide seed 3
    assert c.verdict == "fails"  # one seed on the wrong side decides an "every seed" claim
    c2 = make_claim(
        "x",
        "s",
        "m",
        [0.7, 0.8, 0.7],
        0.5,
        ">=",
        baseline=[0.1, 0.1, 0.1],
        compare="difference",
        reduce="all",
    )
    assert c2.passes and c2.verdict == "not decided"  # every seed passes, but the interval [0.49, 0.78] ∌ 0.5
    c3 = make_claim(
        "x", "s", "m", [0.7, 0.71, 0.72], 0.5, ">=", baseline=[0.1] * 3, compare="difference", reduce="all"
    )
    assert c3.holds and c3.verdict == "holds"


def test_nan_never_holds_and_says_why():
    nan = make_claim("x", "s", "m", [float("nan"), 1.0], 0.0, ">=")
    assert not nan.holds and nan.verdict == "undefined"
    assert "1 of 2 method values are NaN" in nan.undefined_reason
    assert nan.to_json()["undefined_reason"] == nan.undefined_reason
    assert not make_claim("x", "s", "m", [0.0], 3.0, ">=", baseline=[0.0], compare="ratio").holds  # 0/0


def test_ratio_against_a_zero_baseline_is_undefined_not_infinite():
    """House rule: x/0 is undefined (NaN), never floored or treated as +inf that 'beats' any threshold."""
    c = make_claim("x", "s", "m", [10.0], 3.0, ">=", baseline=[0.0], compare="ratio")
    assert math.isnan(c.measured) and not c.holds
    assert "zero baseline" in c.undefined_reason
    d = json.loads(json.dumps(c.to_json()))
    assert d["measured"] == "NaN" and d["holds"] is False
    assert not Claim.from_json(d).holds
    per_seed = make_claim(
        "x", "s", "m", [10.0, 4.0], 3.0, ">=", baseline=[0.0, 1.0], compare="ratio", reduce="all"
    )
    assert not per_seed.holds and "zero baseline" in per_seed.undefined_reason


def test_nan_and_inf_survive_the_json_round_trip():
    c = make_claim("x", "s", "m", [float("nan"), float("inf"), -float("inf"), 1.0], 0.0, ">=")
    text = json.dumps(claims_document("toy", "smoke", [0, 1, 2, 3], 0.0, [c]), allow_nan=False)
    back = json.loads(text)
    validate_claims_document(back)
    vals = Claim.from_json(back["claims"][0]).method.values
    assert math.isnan(vals[0]) and vals[1] == math.inf and vals[2] == -math.inf and vals[3] == 1.0
    assert back["claims"][0]["method"]["values"][:3] == ["NaN", "Infinity", "-Infinity"]


def test_compound_parts_get_distinct_ids():
    parts = [make_claim("window_parity", "a", f"{n}/acc", [1.0], 0.9) for n in ("cascade", "streaming")]
    parts.append(make_claim("window_parity", "b", "cascade/acc", [1.0], 0.9))
    parts.append(make_claim("own", "c", "m", [1.0], 0.9))
    c = all_of("window_parity", "s", parts)
    ids = [p.id for p in c.parts]
    assert ids == [
        "window_parity.cascade_acc",
        "window_parity.streaming_acc",
        "window_parity.cascade_acc_2",
        "window_parity.own",
    ]
    again = all_of("window_parity", "s", list(c.parts))  # idempotent
    assert [p.id for p in again.parts] == ids
    nested = all_of("outer", "s", [c])
    assert nested.parts[0].id == "outer.window_parity"
    assert nested.parts[0].parts[0].id == "outer.window_parity.cascade_acc"


def test_all_of_needs_every_part():
    a = make_claim("a", "a", "m", [4.0], 5.0, "<=")
    b = make_claim("b", "b", "m", [7.0], 8.0, ">=")
    assert not all_of("ab", "both", [a, b]).passes
    assert all_of("ab", "both", [a, make_claim("b", "b", "m", [9.0], 8.0, ">=")]).passes
    # one seed decides nothing: every part is "not decided", and so is the compound claim
    assert all_of("ab", "both", [a, make_claim("b", "b", "m", [9.0], 8.0, ">=")]).verdict == "not decided"


def test_schema_round_trip():
    claims = [
        make_claim(
            "gain", "g", "acc", [0.8, 0.9, 0.85], 0.05, ">=", baseline=[0.7, 0.75, 0.8], compare="difference"
        ),
        make_claim("solo", "s", "acc", [0.1], 0.2, "<=", note="why"),
        all_of(
            "both",
            "b",
            [make_claim("p", "p", "t", [4.0], 5.0, "<="), make_claim("q", "q", "t", [9.0], 8.0, ">=")],
        ),
    ]
    doc = claims_document("toy", "smoke", [0, 1, 2], 1.5, claims)
    text = json.dumps(doc)
    back = json.loads(text)
    validate_claims_document(back)
    assert set(back) >= {"slug", "preset", "seeds", "runtime_s", "claims"}
    for c, d in zip(claims, back["claims"]):
        assert set(d) >= {
            "id",
            "statement",
            "metric",
            "method",
            "baseline",
            "threshold",
            "direction",
            "holds",
            "note",
        }
        c2 = Claim.from_json(d)
        assert c2 == c and c2.holds == d["holds"] == c.holds
    assert back["claims"][1]["baseline"] is None


def test_tampered_verdict_is_rejected():
    doc = claims_document("toy", "smoke", [0], 0.0, [make_claim("x", "s", "m", [0.1], 0.5, ">=")])
    doc["claims"][0]["holds"] = True
    with pytest.raises(ValueError, match="holds"):
        validate_claims_document(doc)


def _doc_with_parts():
    a = make_claim("a", "s", "m", [0.2, 0.4, 0.9], 0.5, ">=")
    b = make_claim("b", "s", "m", [1.0, 2.0], 1.2, ">=", baseline=[0.5, 0.7], compare="difference")
    return claims_document("toy", "smoke", [0, 1, 2], 0.0, [a, b, all_of("both", "s", [a, b])])


@pytest.mark.parametrize(
    "where,edit",
    [
        ("claim", lambda d: d["claims"][0]["method"].update(mean=0.6)),  # flips 'a' to holding by its mean
        ("claim", lambda d: d["claims"][0]["method"].update(std=0.0)),
        ("baseline", lambda d: d["claims"][1]["baseline"].update(mean=0.0)),
        ("part", lambda d: d["claims"][2]["parts"][0]["method"].update(mean=0.6)),
        ("compound top level", lambda d: d["claims"][2]["method"].update(mean=0.6)),
        ("nan", lambda d: d["claims"][0]["method"].update(mean="NaN")),
        ("value", lambda d: d["claims"][0]["method"]["values"].__setitem__(0, 0.9)),  # values no longer match
    ],
)
def test_stored_mean_or_std_that_disagrees_with_the_values_makes_the_document_invalid(where, edit):
    """Regression (issue #34): holds was recomputed from a stored mean never checked against its values."""
    doc = json.loads(json.dumps(_doc_with_parts()))
    validate_claims_document(doc)
    d = json.loads(json.dumps(doc))
    edit(d)
    with pytest.raises(
        ValueError, match=r"(mean|std) .* does not match the (mean|std) of its values|measured"
    ):
        validate_claims_document(d)


def test_holds_from_a_tampered_mean_that_matches_the_stored_verdict_is_still_caught():
    doc = json.loads(json.dumps(_doc_with_parts()))
    c = doc["claims"][0]
    c["method"]["mean"], c["holds"], c["measured"] = 0.6, True, 0.6  # a consistent lie except for the values
    with pytest.raises(ValueError, match=r"claim 'a': method mean 0.6 does not match the mean of its values"):
        validate_claims_document(doc)


def test_mean_recomputation_tolerates_float_round_off_only():
    doc = json.loads(json.dumps(_doc_with_parts()))
    m = doc["claims"][0]["method"]
    m["mean"] = m["mean"] * (1 + 1e-12)  # another summation order: accepted
    validate_claims_document(doc)
    m["mean"] = m["mean"] * (1 + 1e-7)
    with pytest.raises(ValueError, match="tolerance rel 1e-09"):
        validate_claims_document(doc)


def test_tampered_measured_is_rejected():
    doc = json.loads(json.dumps(_doc_with_parts()))
    doc["claims"][1]["measured"] = 0.0
    with pytest.raises(ValueError, match="claim 'b': stored measured 0.0 does not match"):
        validate_claims_document(doc)


@pytest.mark.parametrize("bad", [True, None, "abc"])
def test_document_values_must_be_numbers(bad):
    doc = json.loads(json.dumps(_doc_with_parts()))
    doc["claims"][0]["method"]["values"][1] = bad
    if bad is None:  # legacy null = NaN: then the stored mean (a number) no longer matches
        match = "does not match"
    else:
        match = "expected a number"
    with pytest.raises(ValueError, match=match):
        validate_claims_document(doc)


@pytest.mark.parametrize(
    "kw,param",
    [({"direction": "=>"}, "direction"), ({"compare": "diff"}, "compare"), ({"reduce": "median"}, "reduce")],
)
def test_bad_claim_arguments_name_the_parameter(kw, param):
    args = dict(id="x", statement="s", metric="m", method=[1.0], threshold=0.0)
    args.update(kw)
    with pytest.raises(ValueError, match=param):
        make_claim(**args)


def test_difference_without_baseline_is_an_error():
    with pytest.raises(ValueError, match="baseline"):
        make_claim("x", "s", "m", [1.0], 0.0, compare="difference")


def test_a_compound_claims_measured_number_cannot_be_planted():
    parts = [
        make_claim("a", "a", "m", [1.0, 2.0], 0.5, ">="),
        make_claim("b", "b", "m", [1.0, 2.0], 0.5, ">="),
    ]
    doc = claims_document("toy", "smoke", [0, 1], 1.0, [all_of("both", "both", parts)], {})
    validate_claims_document(doc)
    doc["claims"][0]["measured"] = -5.0
    with pytest.raises(ValueError, match="compound claim stores no measured number"):
        validate_claims_document(doc)
