"""Issue #38: Xeno-canto-like focal lengths, the single-class AUROC error, the audiomentations transforms."""

import random

import numpy as np
import pytest
import torch

from iclr25.birdset.augment import (
    DB_PER_OCTAVE,
    AugmentConfig,
    am_colored_noise,
    am_gain,
    augment_batch,
)
from iclr25.birdset.metrics import auroc, evaluate_scores
from iclr25.birdset.synthetic import (
    XC_BOUNDS,
    XC_MEAN_S,
    make_focal_recordings,
    make_species,
    xeno_canto_duration,
)


def _g(s=0):
    return torch.Generator().manual_seed(s)


def _rms(x):
    return float(np.sqrt(np.mean(np.square(x))))


# --- focal recording lengths and call positions -------------------------------------------------------------
def test_xeno_canto_mean_length_comes_from_birdset_totals():
    assert XC_MEAN_S == pytest.approx(6800 * 3600 / 528_434) and 46 < XC_MEAN_S < 47
    rng = np.random.default_rng(0)
    d = np.array([xeno_canto_duration(rng) for _ in range(20_000)])
    assert d.min() >= XC_BOUNDS[0] and d.max() <= XC_BOUNDS[1]
    # the clip at 180 s removes a little of the tail: the mean stays within a few seconds of 46.3 s
    assert XC_MEAN_S - 4 < d.mean() < XC_MEAN_S + 1
    assert np.median(d) < d.mean()  # right-skewed like real recording lengths
    unclipped = np.array([xeno_canto_duration(rng, bounds=(0.0, 1e9)) for _ in range(20_000)])
    assert unclipped.mean() == pytest.approx(XC_MEAN_S, rel=0.03)


def test_call_density_does_not_fall_with_length_and_calls_are_spread_over_the_file():
    sp = make_species(3, 0)
    recs = make_focal_recordings(sp, 12, 8000, "xeno_canto", p_secondary=0.0, seed=1, max_phrases=0)
    dur = np.array([r.duration for r in recs])
    n = np.array([len(r.true_events) for r in recs])
    assert np.corrcoef(dur, n)[0, 1] > 0.7  # ∝ length (no cap of 4 phrases)
    assert n.max() > 4
    starts = np.concatenate([[a / r.duration for a, _ in r.true_events] for r in recs])
    # no preferred onset: relative phrase starts cover the whole recording
    assert starts.min() < 0.1 and starts.max() > 0.85
    assert 0.35 < np.median(starts) < 0.65
    for r in recs:  # audio length and labels consistent
        assert len(r.wave) == int(r.duration * 8000) and r.primary == r.labels[0]


def test_uniform_lengths_and_the_phrase_cap_still_available():
    sp = make_species(2, 0)
    recs = make_focal_recordings(sp, 5, 8000, (8.0, 10.0), seed=0, max_phrases=4)
    assert all(8.0 <= r.duration <= 10.0 for r in recs)
    assert all(1 <= len(r.true_events) <= 4 for r in recs)
    with pytest.raises(ValueError, match="duration_s must be a \\(low, high\\) pair or 'xeno_canto'"):
        make_focal_recordings(sp, 1, 8000, "xc")
    with pytest.raises(ValueError, match="max_phrases"):
        make_focal_recordings(sp, 1, 8000, (8.0, 9.0), max_phrases=-1)


# --- AUROC ----------------------------------------------------------------------------------------------------
def test_single_class_auroc_is_a_clear_value_error():
    s, t = np.array([[0.1], [0.9], [0.4]]), np.array([[0], [1], [1]])
    with pytest.raises(ValueError, match=r"auroc .* needs scores/targets with >= 2 classes .* got 1"):
        auroc(s, t)
    with pytest.raises(ValueError, match=">= 2 classes"):
        evaluate_scores(s, t)
    two = auroc(np.array([[0.1, 0.9], [0.9, 0.1]]), np.array([[0, 1], [1, 0]]))
    assert two == pytest.approx(1.0)  # both classes perfectly ranked


# --- audiomentations transforms do what they claim ------------------------------------------------------------
def test_am_colored_noise_hits_the_snr_and_the_spectral_slope():
    sr, n = 16_000, 32_000
    wave = torch.randn(4, n, generator=_g()) * 0.1
    slopes = {}
    for beta in (-2.0, 0.0, 2.0):
        out = am_colored_noise(wave, sr, p=1.0, snr=(10.0, 10.0), f_decay=(beta, beta), g=_g(3))
        noise = (out - wave).numpy()
        for w, z in zip(wave.numpy(), noise):
            assert 20 * np.log10(_rms(w) / _rms(z)) == pytest.approx(10.0, abs=0.15)  # unit-rms noise
        psd = np.mean(np.abs(np.fft.rfft(noise, axis=1)) ** 2, 0)
        f = np.fft.rfftfreq(n, 1 / sr)
        band = (f > 300) & (f < 6000)
        slopes[beta] = np.polyfit(np.log10(f[band]), np.log10(psd[band]), 1)[0]
    # power ∝ f^(−β): the fitted log-log slope is −β (the 128-tap FIR colours it a little less steeply)
    for beta, sl in slopes.items():
        assert sl == pytest.approx(-beta, abs=0.35), slopes
    assert DB_PER_OCTAVE == pytest.approx(3.0103, abs=1e-4)


def test_am_colored_noise_probability_and_no_op():
    wave = torch.randn(200, 800, generator=_g())
    out = am_colored_noise(wave, 16_000, p=0.2, g=_g(1))
    changed = (out != wave).any(1).float().mean().item()
    assert 0.1 < changed < 0.3
    assert torch.equal(am_colored_noise(wave, 16_000, p=0.0, g=_g(1)), wave)


def test_am_gain_range_and_probability():
    wave = torch.rand(400, 100, generator=_g()) + 0.5
    out = am_gain(wave, 16_000, p=0.5, gain_db=(-18.0, 6.0), g=_g(2))
    ratio_db = 20 * torch.log10(out[:, 0] / wave[:, 0])
    assert torch.allclose(out / wave, (out / wave)[:, :1].expand_as(out), rtol=1e-5)  # one factor per clip
    applied = ratio_db.abs() > 1e-4
    assert 0.4 < applied.float().mean().item() < 0.6
    assert ratio_db.min() >= -18.0 - 1e-3 and ratio_db.max() <= 6.0 + 1e-3
    fixed = am_gain(wave, 16_000, p=1.0, gain_db=(-6.0, -6.0), g=_g(2))
    torch.testing.assert_close(fixed, wave * 10 ** (-6 / 20))


def test_augment_batch_with_audiomentations_is_seeded_and_leaves_global_rngs_alone():
    w, y = torch.randn(8, 1600, generator=_g()), torch.eye(8)[:, :4]
    bank = torch.randn(3, 4000, generator=_g(1))
    cfg = AugmentConfig(p_colored=1.0, p_gain=1.0, sample_rate=16_000)
    random.seed(123)
    np.random.seed(123)
    before = (random.random(), np.random.random())
    random.seed(123)
    np.random.seed(123)
    a = augment_batch(w, y, cfg, bank, _g(5))
    after = (random.random(), np.random.random())
    assert before == after  # the callers' global random state is restored
    b = augment_batch(w, y, cfg, bank, _g(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    c = augment_batch(w, y, cfg, bank, _g(6))
    assert not torch.equal(a[0], c[0])
    t = augment_batch(w, y, AugmentConfig(library="torch", sample_rate=16_000), bank, _g(5))
    assert t[0].shape == w.shape


@pytest.mark.parametrize("kw,match", [({"library": "numpy"}, "library"), ({"sample_rate": 0}, "sample_rate")])
def test_augment_config_rejects_bad_library_and_rate(kw, match):
    with pytest.raises(ValueError, match=match):
        AugmentConfig(**kw)


def test_short_call_species_keep_the_minimum_gap_and_stay_detectable():
    sp = make_species(10, 1)
    short = min(sp, key=lambda s: s.phrase_s)  # the shortest phrases: 20 % coverage would pack them gap-free
    recs = make_focal_recordings(
        [short, sp[0]], 6, 8000, "xeno_canto", p_secondary=0.0, seed=3, fit_min_gap=True
    )
    for r in recs:
        ev = sorted(r.true_events)
        gaps = [b0 - a1 for (_, a1), (b0, _) in zip(ev, ev[1:])]
        assert not gaps or min(gaps) >= 0.6 - 1e-3
