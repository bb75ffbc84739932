"""The real preset's inputs on the real Fashion-MNIST images: loader counts, the class-balanced subsets, the
grayscale corruption suite's statistics, and a short training run that learns (issue #53)."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from iclr25.dst_robustness import real
from iclr25.dst_robustness.corruptions import COMMON_CORRUPTIONS, SEVERITIES


@functools.cache
def _load():
    return real.load_split("train"), real.load_split("test")


@pytest.fixture
def fashion(need_asset):
    need_asset("fashion-mnist")
    return _load()  # loaded once per process


def test_loader_counts_and_balance(fashion):
    (xtr, ytr), (xte, yte) = fashion
    assert xtr.shape == (60_000, 28, 28, 1) and xte.shape == (10_000, 28, 28, 1)
    assert xtr.dtype == np.uint8 and ytr.dtype == np.int64
    assert np.bincount(ytr).tolist() == [6000] * 10 and np.bincount(yte).tolist() == [1000] * 10


def test_subsets_are_class_balanced_fixed_and_seeded(fashion):
    (_, ytr), (_, yte) = fashion
    te = real.balanced_first(yte, 50)
    assert np.bincount(yte[te]).tolist() == [50] * 10 and te.tolist() == real.balanced_first(yte, 50).tolist()
    a, b = real.balanced_sample(ytr, 300, 0), real.balanced_sample(ytr, 300, 1)
    assert np.bincount(ytr[a]).tolist() == [300] * 10 and len(np.unique(a)) == 3000
    assert a.tolist() == real.balanced_sample(ytr, 300, 0).tolist() and a.tolist() != b.tolist()
    with pytest.raises(ValueError, match="per_class"):
        real.balanced_sample(ytr, 6001, 0)


def test_gaussian_noise_adds_the_specified_std_on_real_images(fashion):
    """CIFAR-10-C gaussian noise: x' = clip(x/255 + N(0, σ²)) with σ = .04 … .10; on mid-grey pixels (no clipping)
    the residual's std is σ (up to 8-bit truncation) and grows with the severity."""
    (_, _), (xte, _) = fashion
    x = xte[:400]
    stds = []
    for s, sigma in zip(SEVERITIES, (0.04, 0.06, 0.08, 0.09, 0.10), strict=True):
        out = real.corrupt_gray(x, "gaussian_noise", s, rng=s)
        assert out.shape == x.shape and out.dtype == np.uint8
        mid = (x >= 80) & (x <= 175)  # > 3.5 σ from both ends: clipping is negligible
        r = (out.astype(float) - x.astype(float))[mid] / 255.0
        assert abs(r.std() - sigma) < 0.08 * sigma + 0.002, (s, r.std(), sigma)
        assert abs(r.mean() + 0.5 / 255) < 0.004  # np.uint8 truncation: −½ level on average
        stds.append(r.std())
    assert np.all(np.diff(stds) > 0)


def test_every_corruption_grows_with_severity_on_real_images(fashion):
    (_, _), (xte, yte) = fashion
    x = xte[real.balanced_first(yte, 4)]
    full = real.corrupted_gray_set(x)
    assert full.shape == (15, 5, 40, 28, 28, 1)
    # mean absolute change from the clean image: strictly more at severity 5 than at 1 for all but elastic (the
    # CIFAR-10-C elastic constants shrink the affine part with severity: 26.6 → 18.7 levels here), and strictly
    # increasing over the five severities for the noises and the photometric ones
    dev = np.abs(full.astype(float) - x[None, None].astype(float)).mean(axis=(2, 3, 4, 5))
    for i, c in enumerate(COMMON_CORRUPTIONS):
        if c != "elastic_transform":
            assert dev[i, 4] > dev[i, 0], (c, dev[i])
    for c in (
        "gaussian_noise",
        "shot_noise",
        "impulse_noise",
        "fog",
        "brightness",
        "contrast",
        "jpeg_compression",
    ):
        assert np.all(np.diff(dev[COMMON_CORRUPTIONS.index(c)]) > 0), (c, dev[COMMON_CORRUPTIONS.index(c)])


def test_gray_rule_keeps_channel0_noise_and_luma_elsewhere(fashion):
    from iclr25.dst_robustness.corruptions import corrupt

    (_, _), (xte, _) = fashion
    x = xte[:20]
    rgb = np.repeat(x, 3, axis=-1)
    noisy = corrupt(rgb, "impulse_noise", 3, rng=7)
    assert np.array_equal(real.corrupt_gray(x, "impulse_noise", 3, rng=7)[..., 0], noisy[..., 0])
    fog = corrupt(rgb, "fog", 3, rng=7)
    assert np.array_equal(fog[..., 0], fog[..., 1]) and np.array_equal(fog[..., 1], fog[..., 2])
    assert np.array_equal(real.corrupt_gray(x, "fog", 3, rng=7)[..., 0], fog[..., 0])
    with pytest.raises(ValueError, match="images must be uint8"):
        real.corrupt_gray(rgb, "fog", 3)
