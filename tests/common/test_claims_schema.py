import json
import math

import pytest

from iclr25.common.claims import Claim, Stat, all_of, claims_document, make_claim, validate_claims_document


def test_stat_is_population_mean_std():
    s = Stat.of([1.0, 2.0, 3.0])
    assert s.mean == 2.0 and math.isclose(s.std, math.sqrt(2 / 3)) and s.values == (1.0, 2.0, 3.0)


@pytest.mark.parametrize(
    "compare,method,baseline,threshold,direction,expected_measured,holds",
    [
        ("value", [0.9, 0.95], None, 0.9, ">=", 0.925, True),
        ("difference", [0.8, 0.9], [0.7, 0.7], 0.2, ">=", 0.15, False),
        ("ratio", [0.9, 0.9], [1.0, 1.0], 0.93, "<=", 0.9, True),
        ("ratio", [0.95, 0.95], [1.0, 1.0], 0.93, "<=", 0.95, False),
    ],
)
def test_verdict_is_computed_from_numbers(
    compare, method, baseline, threshold, direction, expected_measured, holds
):
    c = make_claim("x", "s", "m", method, threshold, direction, baseline=baseline, compare=compare)
    assert math.isclose(c.measured, expected_measured)
    assert c.holds is holds


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
    assert c2.holds


def test_nan_never_holds_but_infinite_ratio_compares():
    assert not make_claim("x", "s", "m", [float("nan")], 0.0, ">=").holds
    assert not make_claim("x", "s", "m", [0.0], 3.0, ">=", baseline=[0.0], compare="ratio").holds  # 0/0
    inf = make_claim("x", "s", "m", [10.0], 3.0, ">=", baseline=[0.0], compare="ratio")  # 10/0
    assert inf.holds and inf.to_json()["measured"] is None
    assert Claim.from_json(inf.to_json()).holds


def test_all_of_needs_every_part():
    a = make_claim("a", "a", "m", [4.0], 5.0, "<=")
    b = make_claim("b", "b", "m", [7.0], 8.0, ">=")
    assert not all_of("ab", "both", [a, b]).holds
    assert all_of("ab", "both", [a, make_claim("b", "b", "m", [9.0], 8.0, ">=")]).holds


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


@pytest.mark.parametrize(
    "kw,param",
    [({"direction": ">"}, "direction"), ({"compare": "diff"}, "compare"), ({"reduce": "median"}, "reduce")],
)
def test_bad_claim_arguments_name_the_parameter(kw, param):
    args = dict(id="x", statement="s", metric="m", method=[1.0], threshold=0.0)
    args.update(kw)
    with pytest.raises(ValueError, match=param):
        make_claim(**args)


def test_difference_without_baseline_is_an_error():
    with pytest.raises(ValueError, match="baseline"):
        make_claim("x", "s", "m", [1.0], 0.0, compare="difference")
