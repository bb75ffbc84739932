"""Shared statistics helpers of ``iclr25.common.results``."""

import math

import numpy as np
from scipy import stats

from iclr25.common.stats import t_interval95


def test_t_interval95_matches_scipy_and_handles_one_seed():
    d = [2.1, -0.4, 0.1, 1.3]
    lo, hi = t_interval95(d)
    ref = stats.t.interval(0.95, len(d) - 1, loc=np.mean(d), scale=stats.sem(d))
    assert math.isclose(lo, ref[0], rel_tol=1e-12) and math.isclose(hi, ref[1], rel_tol=1e-12)
    assert all(math.isnan(x) for x in t_interval95([1.0]))


def test_explain_failures_notes_only_the_failing_claims_and_never_changes_a_verdict():
    from iclr25.common.claims import explain_failures, make_claim

    held = make_claim("a", "a >= 0", "x", [1.0, 2.0], 0.0, ">=", note="kept")
    failed = make_claim("b", "b >= 5", "x", [1.0, 2.0], 5.0, ">=", note="old")
    other = make_claim("c", "c >= 5", "x", [1.0], 5.0, ">=", note="old")
    out = explain_failures([held, failed, other], {"a": "never used", "b": "measured: 1.5 < 5"})
    assert [c.note for c in out] == ["kept", "measured: 1.5 < 5", ""]
    assert [c.passes for c in out] == [True, False, False]
    assert [c.method for c in out] == [held.method, failed.method, other.method]
