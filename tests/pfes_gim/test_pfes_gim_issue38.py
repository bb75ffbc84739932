"""Issue #38: point/intensity input checks, the frame-rate parameter, the strict ``> 0`` hard-variant claim."""

import numpy as np
import pytest

from iclr25.common.claims import make_claim
from iclr25.pfes_gim import GIMConfig, SpottingTrainConfig
from iclr25.pfes_gim.data import Video, check_points
from iclr25.pfes_gim.experiment import PRESETS, difference_note
from iclr25.pfes_gim.proposals import PROFILES, DatasetProfile, get_profile
from iclr25.pfes_gim.pseudo_labels import REFERENCE_FPS, hard_pseudo_labels


def _video(**kw):
    base = dict(name="v", features=np.zeros((50, 12)), points=[10, 30], classes=[0, 1])
    base.update(kw)
    return Video(**base)


def test_fractional_point_labels_raise_instead_of_truncating():
    with pytest.raises(ValueError, match=r"points of video 'v' must be integers.*3\.7"):
        _video(points=[3.7, 30])
    with pytest.raises(ValueError, match="points must be integers"):
        check_points(np.array([2.5]), 10)
    with pytest.raises(ValueError, match="points of video 'v'.*integers"):
        _video(points=[np.nan, 30])
    with pytest.raises(ValueError, match="classes of video 'v' must be integers"):
        _video(classes=[0.5, 1])
    with pytest.raises(ValueError, match="dtype bool"):
        _video(points=[True, False])
    # integral floats (how .npy annotation files often store frames) are exact and accepted
    v = _video(points=np.array([10.0, 30.0]))
    assert v.points.dtype == np.int64 and v.points.tolist() == [10, 30]
    with pytest.raises(ValueError, match="points must be integers"):
        hard_pseudo_labels(np.array([10.5]), np.array([0]), 50)


@pytest.mark.parametrize(
    "intensity,match",
    [
        (np.zeros((50, 1)), r"must be a numeric \(T,\) = \(50,\) array, got shape \(50, 1\)"),
        (np.zeros(49), r"got shape \(49,\)"),
        (np.full(50, 1.5), r"finite values in \[0, 1\].*1\.5"),
        (np.full(50, -0.1), r"finite values in \[0, 1\]"),
        (np.r_[np.zeros(49), np.nan], r"finite values in \[0, 1\].*nan"),
        (np.array(["a"] * 50), "numeric"),
    ],
)
def test_intensity_must_be_a_T_vector_in_unit_interval(intensity, match):
    with pytest.raises(ValueError, match=match):
        _video(intensity=intensity)


def test_intensity_in_range_is_kept():
    prof = np.linspace(0, 1, 50)
    assert np.allclose(_video(intensity=prof).intensity, prof)


def test_frame_rate_scales_gim_windows_and_profiles():
    g = GIMConfig()
    assert g.at_frame_rate(REFERENCE_FPS) == g  # identity at the reference rate
    g2 = g.at_frame_rate(60.0)
    assert g2.k == (64, 32) and g2.cap == (72, 32)
    assert g2.apex_half == (4, 2) and g2.hard_half == (10, 6)
    assert (g2.tau_start, g2.gim_start) == (g.tau_start, g.gim_start)  # the epoch schedule is not a duration
    # 200 fps (SAMM-LV's camera) against constants at 30 fps: durations in frames grow by 200/30
    g200 = g.at_frame_rate(200.0)
    assert g200.k == (round(32 * 200 / 30), round(16 * 200 / 30))
    # a very low rate keeps every window valid (k >= 4, cap >= k/2, hard window non-empty)
    g_low = g.at_frame_rate(3.0)
    assert min(g_low.k) >= 4 and all(c >= k // 2 for c, k in zip(g_low.cap, g_low.k))
    assert min(g_low.hard_half) >= 1
    p = PROFILES["CASME2"]
    assert p.at_frame_rate(30.0) == p
    p2 = p.at_frame_rate(60.0)
    assert p2.mae_len == (28, 478) and p2.me_len == (16, 28)
    assert (p2.score_thr, p2.cap) == (p.score_thr, p.cap)
    assert get_profile("CASME2", 60.0) == p2 and get_profile("CASME2") == p
    assert p.at_frame_rate(15.0, reference_fps=15.0) == p
    lo = p.at_frame_rate(1.0)
    assert lo.me_len[0] >= 1 and lo.me_len[1] >= lo.me_len[0]
    assert isinstance(lo, DatasetProfile)


def test_frame_rate_reaches_training_config():
    cfg = SpottingTrainConfig(frame_rate=60.0)
    assert cfg.gim_at_rate == GIMConfig().at_frame_rate(60.0)
    assert SpottingTrainConfig().gim_at_rate == GIMConfig()
    # the scaled windows are what the hard stage labels: twice the frames at twice the rate
    pl30 = hard_pseudo_labels(np.array([100]), np.array([0]), 400, GIMConfig())
    pl60 = hard_pseudo_labels(np.array([200]), np.array([0]), 800, cfg.gim_at_rate)
    n30 = int(pl30.soft[:, 0].sum())
    assert int(pl60.soft[:, 0].sum()) == 2 * n30


@pytest.mark.parametrize("fps", [0.0, -30.0, float("nan"), float("inf"), "30", True])
def test_bad_frame_rate_raises(fps):
    with pytest.raises(ValueError, match="fps"):
        GIMConfig().at_frame_rate(fps)
    with pytest.raises(ValueError, match="fps"):
        PROFILES["CASME2"].at_frame_rate(fps)
    with pytest.raises(ValueError, match="frame_rate must be None or a positive number"):
        SpottingTrainConfig(frame_rate=fps)


def test_hard_variant_claim_is_strict_and_says_when_the_sign_is_undecided():
    tie = make_claim("hard_variant_gain", "s", "f1", [0.5, 0.6], 0.0, ">", [0.5, 0.6], "difference")
    assert not tie.holds  # an exact tie is not a gain under "> 0"
    gain = make_claim("hard_variant_gain", "s", "f1", [0.6, 0.7], 0.0, ">", [0.5, 0.6], "difference")
    assert gain.holds
    undecided = difference_note(np.array([0.2, -0.1, 0.05, -0.02, 0.1]))
    assert "sign not decided (the interval contains 0)" in undecided
    assert "2 of 5 seeds negative" in undecided and "mean +0.046" in undecided
    decided = difference_note(np.array([0.10, 0.11, 0.12]))
    assert "sign decided: positive" in decided and "seeds negative" not in decided
    assert "t-interval [+0.085, +0.135]" in decided
    assert "sign not decided (1 seed)" in difference_note(np.array([0.3]))


def test_full_preset_asks_for_cuda_when_present():
    assert PRESETS["full"].device == "auto"
