"""The three-valued decision rule (issue #50): holds / fails / not decided from a 95 % interval over seeds, the
seed count that would decide, checks, compound claims, and old documents re-derived when read."""

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from iclr25.common.claims import (
    DECISION_RULE,
    Claim,
    all_of,
    claims_document,
    declared_check,
    make_claim,
    validate_claims_document,
    verdict_counts,
)
from iclr25.common.stats import fieller_interval95, seeds_to_decide, t_interval95

RESULTS = Path(__file__).resolve().parents[2] / "results" / "quick"


def _diff(m, b, thr, direction=">=", **kw):
    return make_claim("x", "s", "m", m, thr, direction, baseline=b, compare="difference", **kw)


def test_paired_t_interval_decides_the_three_ways():
    b = [0.0] * 5
    holds = _diff([1.0, 1.1, 0.9, 1.05, 0.95], b, 0.5)
    fails = _diff([0.1, 0.2, 0.0, 0.15, 0.05], b, 0.5)
    open_ = _diff([0.2, 0.9, 0.4, 0.8, 0.3], b, 0.5)  # mean 0.52 passes the point test, the interval does not
    assert (holds.verdict, fails.verdict, open_.verdict) == ("holds", "fails", "not decided")
    assert open_.passes and not open_.holds
    lo, hi = open_.interval
    d = np.array([0.2, 0.9, 0.4, 0.8, 0.3])
    h = stats.t.ppf(0.975, 4) * d.std(ddof=1) / math.sqrt(5)
    assert lo == pytest.approx(d.mean() - h) and hi == pytest.approx(d.mean() + h) and lo < 0.5 < hi
    assert "interval contains the threshold" in open_.decision.why


def test_seeds_to_decide_is_where_the_half_width_clears_the_gap():
    d = [0.2, 0.9, 0.4, 0.8, 0.3]
    n = seeds_to_decide(d, 0.5)
    gap, sd = abs(np.mean(d) - 0.5), np.std(d, ddof=1)
    half = lambda k: stats.t.ppf(0.975, k - 1) * sd / math.sqrt(k)  # noqa: E731
    assert n is not None and half(n) < gap <= half(n - 1)
    assert _diff(d, [0.0] * 5, 0.5).seeds_to_decide == n
    assert seeds_to_decide([1.0, 2.0, 3.0], 2.0) is None  # the mean on the threshold: no seed count decides
    assert seeds_to_decide([1.0], 0.0) is None  # no spread estimate from one seed
    assert seeds_to_decide([0.0, 1e-6, -1e-6, 2e-6], 0.5) == 2  # tiny spread: two seeds would do


@pytest.mark.parametrize(
    "direction,thr,verdict",
    [(">=", 1.0, "holds"), (">", 1.0, "fails"), ("<=", 1.0, "holds"), ("<", 1.0, "fails")],
)
def test_the_threshold_itself_counts_for_non_strict_directions(direction, thr, verdict):
    c = make_claim("x", "s", "m", [1.0, 1.0, 1.0], thr, direction)  # a point interval [1, 1]
    assert c.verdict == verdict


def test_one_seed_is_never_decided_except_by_a_counterexample():
    assert make_claim("x", "s", "m", [5.0], 1.0).verdict == "not decided"
    assert make_claim("x", "s", "m", [5.0], 1.0, reduce="all").verdict == "not decided"
    assert make_claim("x", "s", "m", [0.5], 1.0, reduce="all").verdict == "fails"
    assert make_claim("x", "s", "m", [5.0], 1.0).decision.why == "one seed gives no interval"


def test_ratio_uses_the_fieller_interval_of_the_ratio_of_means():
    m, b = [2.0, 2.2, 1.9, 2.1], [1.0, 1.05, 0.95, 1.0]
    lo, hi = fieller_interval95(m, b)
    r = np.mean(m) / np.mean(b)
    assert lo < r < hi
    # the endpoints are the ratios at which the paired t-interval of m − θ·b touches 0
    for theta, side in ((lo, 0), (hi, 1)):
        d = np.asarray(m) - theta * np.asarray(b)
        assert t_interval95(d)[side] == pytest.approx(0.0, abs=1e-9)
    c = make_claim("x", "s", "m", m, 1.5, ">=", baseline=b, compare="ratio")
    assert c.verdict == "holds" and c.interval == pytest.approx((lo, hi))
    # a baseline mean not distinguishable from 0: the interval is unbounded and nothing is decided
    wild = make_claim("x", "s", "m", [10.0, 11.0, 9.0], 3.0, ">=", baseline=[0.1, -0.2, 0.4], compare="ratio")
    assert wild.interval == (-math.inf, math.inf) and wild.verdict == "not decided"
    assert "unbounded" in wild.decision.why


def test_nan_is_undefined_and_counted_as_not_decided():
    c = make_claim("x", "s", "m", [1.0, float("nan"), 2.0], 0.0)
    assert c.verdict == "undefined" and not c.holds
    assert verdict_counts([c]).not_decided == 1


def test_compound_claims_combine_their_parts():
    ok = make_claim("ok", "s", "m", [1.0, 1.0, 1.0], 0.5)
    bad = make_claim("bad", "s", "m", [0.0, 0.0, 0.0], 0.5)
    open_ = make_claim("open", "s", "m", [0.2, 0.9, 0.5], 0.5)
    assert all_of("c", "s", [ok, ok]).verdict == "holds"
    assert all_of("c", "s", [ok, open_]).verdict == "not decided"
    assert all_of("c", "s", [open_, bad]).verdict == "fails"  # any part fails → fails
    c = all_of("c", "s", [ok, open_])
    assert c.seeds_to_decide == open_.seeds_to_decide and "c.open" in c.decision.why


def test_a_check_is_shown_never_counted():
    chk = make_claim("params", "s", "n", [4.0], 3.0, check="fixed by construction: counts from the config")
    claim = make_claim("gain", "s", "m", [1.0, 1.1, 0.9], 0.5)
    assert chk.is_check and chk.holds and chk.verdict == "holds"  # a check is its pass/fail, even on 1 seed
    counts = verdict_counts([chk, claim, make_claim("f", "s", "m", [3.0], 4.0, check="saturated")])
    assert (counts.holds, counts.fails, counts.not_decided, counts.checks, counts.checks_failed) == (
        1,
        0,
        0,
        2,
        1,
    )
    assert counts.claims == 1 and "2 checks, 1 FAILED" in counts.text()
    doc = json.loads(json.dumps(claims_document("toy", "quick", [0, 1, 2], 1.0, [chk, claim])))
    assert doc["claims"][0]["check"].startswith("fixed by construction")
    back = validate_claims_document(doc)
    assert back[0].is_check and not back[1].is_check
    # a compound claim of checks is a check; a check part counts by its pass/fail
    assert all_of("both", "s", [chk, chk]).is_check
    assert (
        all_of("both", "s", [chk, claim]).verdict == "holds"
        and not all_of("both", "s", [chk, claim]).is_check
    )


def test_declared_checks_apply_to_documents_of_that_system():
    assert declared_check("scope_faithfulness", "recall_kept").startswith("saturated")
    assert declared_check("quantum_peft", "param_ratio.param_ratio_d64")  # a part inherits its claim's
    assert declared_check("scope_faithfulness", "alpha_trend") == ""
    c = make_claim("recall_kept", "s", "m", [1.0] * 5, -0.03, baseline=[1.0] * 5, compare="difference")
    doc = claims_document("scope_faithfulness", "quick", range(5), 1.0, [c])
    assert doc["claims"][0]["check"] and validate_claims_document(doc)[0].is_check
    assert not validate_claims_document(claims_document("other", "quick", range(5), 1.0, [c]))[0].is_check


def test_new_documents_store_and_validate_the_verdict():
    c = _diff([0.2, 0.9, 0.4, 0.8, 0.3], [0.0] * 5, 0.5)
    doc = json.loads(json.dumps(claims_document("toy", "quick", range(5), 1.0, [c])))
    d = doc["claims"][0]
    assert d["verdict"] == "not decided" and d["holds"] is False and d["passes"] is True
    assert d["seeds_to_decide"] == c.seeds_to_decide and len(d["interval"]) == 2
    validate_claims_document(doc)
    for key, value, match in (
        ("verdict", "holds", "stored verdict 'holds' disagrees"),
        ("holds", True, "holds=True disagrees with the measured numbers"),
        ("passes", False, "stored passes=False"),
        ("interval", [0.0, 1.0], "stored interval"),
        ("verdict", "maybe", "verdict must be one of"),
    ):
        bad = json.loads(json.dumps(doc))
        bad["claims"][0][key] = value
        with pytest.raises(ValueError, match=match):
            validate_claims_document(bad)


def test_old_documents_without_a_verdict_are_re_derived_when_read():
    c = _diff([0.2, 0.9, 0.4, 0.8, 0.3], [0.0] * 5, 0.5)
    doc = json.loads(json.dumps(claims_document("toy", "quick", range(5), 1.0, [c])))
    old = doc["claims"][0]
    for k in ("verdict", "passes", "interval", "seeds_to_decide"):
        old.pop(k)
    old["holds"] = True  # what the point test said before the three-valued rule
    (claim,) = validate_claims_document(doc)
    assert claim.verdict == "not decided" and claim.passes
    old["holds"] = False  # an old document whose holds disagrees with the point test is still refused
    with pytest.raises(ValueError, match="stored holds=False disagrees with the measured numbers"):
        validate_claims_document(doc)


def test_the_rule_is_stated_once():
    for words in ("95 % Student-t interval", "Fieller", "not decided", "check", "every seed"):
        assert words in DECISION_RULE


@pytest.mark.skipif(not RESULTS.is_dir(), reason="no committed references")
def test_committed_references_are_re_derived():
    """Issue #50's examples: the references read under the new rule (the files are not edited)."""
    by = {}
    for p in sorted(RESULTS.glob("*/claims.json")):
        doc = json.loads(p.read_text())
        for c in validate_claims_document(doc):
            by[(doc["slug"], c.id)] = c
    birdset = by[("birdset", "noise_aug_helps")]
    assert birdset.passes and birdset.verdict == "not decided"
    assert birdset.interval == pytest.approx((0.004, 0.146), abs=1e-3)
    fosp = by[("fosp", "ref_helps_shift")].parts[0]
    assert fosp.interval == pytest.approx((-78.4, 56.9), abs=0.1) and fosp.verdict == "not decided"
    assert by[("improver", "cos_helps")].verdict == "not decided"
    assert by[("scope_faithfulness", "recall_kept")].is_check
    assert by[("freevs", "beats_hole_filling")].verdict == "fails"


def test_claim_equality_and_json_round_trip_keep_the_check():
    c = make_claim("x", "s", "m", [1.0, 2.0], 0.0, check="saturated")
    assert Claim.from_json(json.loads(json.dumps(c.to_json()))) == c
    with pytest.raises(ValueError, match="check must be a string"):
        make_claim("x", "s", "m", [1.0], 0.0, check=None)
