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
