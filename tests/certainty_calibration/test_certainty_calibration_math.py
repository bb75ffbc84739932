"""Generalised ECE and OT recalibration as the paper defines them: point masses, mass conservation, closed form,
cost matrix, plan, determinism."""

import numpy as np
import pytest
from scipy import integrate, stats

from iclr25.certainty_calibration import (
    OTCalibrator,
    PhraseSet,
    bin_integrals,
    binned_ece,
    brier_exact,
    calibration_error,
    gpt4o,
    radiologist_survey,
)
from iclr25.certainty_calibration.data import synthetic_speaker
from iclr25.certainty_calibration.metrics import reliability_from_counts


def _speaker(n=1000, seed=0):
    ps = gpt4o(12)
    _, y, idx = synthetic_speaker(n, ps, 0.3, 0.05, seed)
    return ps, idx, y


@pytest.mark.parametrize("bins", [10, 15, 100])
def test_point_masses_reduce_to_standard_ece(bins):
    rng = np.random.default_rng(0)
    means = np.round(rng.uniform(0.03, 0.97, 9), 4)
    # keep point masses away from bin edges so the near-point Beta's tiny spread cannot straddle one
    means = means[np.abs(means * bins - np.round(means * bins)) > 0.02]
    ps = PhraseSet(tuple(f"p{i}" for i in range(means.size)), 1e6 * means, 1e6 * (1 - means))
    idx = rng.integers(0, means.size, 3000)
    y = (rng.random(3000) < 0.5).astype(float)
    g = calibration_error(idx, y, ps, bins).ece
    assert g == pytest.approx(binned_ece(ps.mean[idx], y, bins), abs=1e-3)


def test_exact_integration_conserves_mass_midpoint_does_not():
    ps, idx, y = _speaker()
    for bins in (10, 100):
        r = calibration_error(idx, y, ps, bins, mode="exact")
        assert r.n.sum() == pytest.approx(idx.size, abs=1e-9)
    rs = radiologist_survey()  # near-point masses: the midpoint rule loses mass at 0 and 1
    w_mid, _ = bin_integrals(rs.alpha, rs.beta, 10, "midpoint")
    assert abs(w_mid.sum(1) - 1).max() > 0.05
    w_ex, _ = bin_integrals(rs.alpha, rs.beta, 10, "exact")
    assert np.allclose(w_ex.sum(1), 1, atol=1e-9)


def test_first_moment_closed_form_matches_quadrature():
    ps = gpt4o(12)
    _, e = bin_integrals(ps.alpha, ps.beta, 10)
    edges = np.linspace(0, 1, 11)
    for k in (0, 4, 7, 11):
        a, b = ps.alpha[k], ps.beta[k]
        for m in (0, 3, 9):
            q, _ = integrate.quad(
                lambda s, a=a, b=b: s * stats.beta.pdf(s, a, b), edges[m], edges[m + 1], epsabs=1e-13
            )
            assert e[k, m] == pytest.approx(q, abs=1e-8)


def test_cost_matrix_diagonal_zero_and_finite_with_unused_phrases():
    ps, idx, y = _speaker()
    assert np.bincount(idx, minlength=len(ps)).min() == 0  # some phrases are never used
    cal = OTCalibrator(ps).fit(idx, y)
    assert np.all(np.diag(cal.cost_) == 0) and np.all(np.isfinite(cal.cost_))


def test_cost_matrix_matches_brute_force_replacement():
    ps, idx, y = _speaker(400, seed=3)
    cal = OTCalibrator(ps, bins=20).fit(idx, y)
    e0 = calibration_error(idx, y, ps, 20).ece
    a = np.bincount(idx, minlength=len(ps)) / idx.size
    for k, l in [(11, 4), (9, 9), (7, 2), (0, 5)]:
        new = np.where(idx == k, l, idx)
        ekl = calibration_error(new, y, ps, 20).ece
        assert cal.cost_[k, l] == pytest.approx((ekl - e0) / max(a[k], 1 / idx.size), abs=1e-10)


@pytest.mark.parametrize("solver", ["sinkhorn_unbalanced", "emd"])
def test_plan_is_nonnegative_with_exact_source_marginal(solver):
    ps, idx, y = _speaker()
    cal = OTCalibrator(ps, solver=solver).fit(idx, y)
    assert np.all(cal.plan_ >= 0)
    assert np.allclose(cal.plan_.sum(1), cal.a_, atol=1e-6)


def test_identity_plan_leaves_phrases_and_gece_unchanged():
    ps, idx, y = _speaker()
    cal = OTCalibrator(ps).fit(idx, y)
    cal.plan_ = np.diag(cal.a_)
    new = cal.transform(idx)
    assert np.array_equal(new, idx)
    assert calibration_error(new, y, ps).ece == calibration_error(idx, y, ps).ece


def test_ot_map_fixes_an_overconfident_speaker_and_is_deterministic():
    ps, idx, y = _speaker(2000, seed=1)
    cal, test = np.arange(1000), np.arange(1000, 2000)
    c1 = OTCalibrator(ps, seed=7).fit(idx[cal], y[cal])
    c2 = OTCalibrator(ps, seed=7).fit(idx[cal], y[cal])
    n1, n2 = c1.transform(idx[test]), c2.transform(idx[test])
    assert np.array_equal(n1, n2) and np.array_equal(c1.plan_, c2.plan_)
    before = calibration_error(idx[test], y[test], ps).ece
    after = calibration_error(n1, y[test], ps).ece
    assert after < 0.5 * before
    assert brier_exact(n1, y[test], ps) < brier_exact(idx[test], y[test], ps)
    # overconfident speaker: strong phrases are mapped to weaker ones
    assert ps.mean[ps.index([c1.mapping_["Definitely"]])][0] < ps.mean[ps.index(["Definitely"])][0]


def test_batched_reliability_equals_loop():
    ps, idx, y = _speaker(300)
    w, e = bin_integrals(ps.alpha, ps.beta, 10)
    edges = np.linspace(0, 1, 11)
    C = np.random.default_rng(0).integers(0, 20, (4, len(ps))).astype(float)
    S = C * 0.4
    batched = reliability_from_counts(C, S, w, e, edges).ece
    assert np.allclose(batched, [reliability_from_counts(c, s, w, e, edges).ece for c, s in zip(C, S)])


def test_bootstrap_cost_is_seeded():
    ps, idx, y = _speaker(500)
    a = OTCalibrator(ps, n_bootstrap=20, seed=1).fit(idx, y).cost_
    b = OTCalibrator(ps, n_bootstrap=20, seed=1).fit(idx, y).cost_
    assert np.array_equal(a, b) and np.all(np.diag(a) == 0)


def test_radiology_table_matches_published_betas():
    rs = radiologist_survey()
    i = rs.index(["likely", "possibly", "consistent with"])
    assert rs.alpha[i] == pytest.approx([3.92, 0.90, 4.25], abs=0.01)
    assert rs.beta[i] == pytest.approx([1.15, 2.16, 0.15], abs=0.01)


def test_phrases_sorted_by_mean_and_parse():
    ps = gpt4o(12)
    assert np.all(np.diff(ps.mean) >= 0) and ps.names[-1] == "Definitely"
    assert ps.parse(['"Likely."', "maybe"]).tolist() == ps.index(["Likely", "Maybe"]).tolist()
    with pytest.raises(ValueError, match="fallback"):
        ps.parse(["sort of"])


@pytest.mark.parametrize(
    "kwargs,param",
    [
        ({"eps": 0}, "eps"),
        ({"solver": "sinkhorn"}, "solver"),
        ({"bins": 0}, "bins"),
        ({"mode": "trapezoid"}, "mode"),
    ],
)
def test_bad_parameters_raise_naming_them(kwargs, param):
    est = OTCalibrator(gpt4o(12), **kwargs)  # scikit-learn convention: __init__ stores, fit validates
    with pytest.raises(ValueError, match=param):
        est.fit([0, 1, 2], [0, 1, 1])


def test_bad_inputs_raise():
    ps = gpt4o(12)
    with pytest.raises(ValueError, match="unknown phrase"):
        calibration_error(["Likely", "Sure thing"], [1, 0], ps)
    with pytest.raises(ValueError, match="outcomes"):
        calibration_error(["Likely"], [2.0], ps)
