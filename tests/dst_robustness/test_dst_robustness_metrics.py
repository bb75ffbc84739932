"""Robustness metrics (robust accuracy, relative gain of Fig. 3, mCE) and the RA-curve frequency filters."""

import numpy as np
import pytest
import torch

from iclr25.dst_robustness import (
    corruption_errors,
    frequency_filter,
    mce,
    relative_gain,
    relative_mce,
    robust_accuracy,
)
from iclr25.dst_robustness.spectral import max_radius


def test_robust_accuracy_and_relative_gain():
    a = np.array([[0.9, 0.8], [0.7, 0.6]])
    b = np.array([[0.9, 0.4], [0.7, 0.3]])
    assert robust_accuracy(a) == pytest.approx(0.75)
    assert np.allclose(relative_gain(a, b), [[0, 1.0], [0, 1.0]])
    with pytest.raises(ValueError, match="acc"):
        robust_accuracy(np.array([0.5]))


def test_mce_definitions():
    ref = np.array([[0.8, 0.6], [0.5, 0.5]])
    assert mce(ref, ref) == pytest.approx(1.0)
    better = np.array([[0.9, 0.8], [0.75, 0.75]])  # half the error everywhere
    assert np.allclose(corruption_errors(better, ref), 0.5)
    assert relative_mce(ref, 0.9, ref, 0.9) == pytest.approx(1.0)


def test_frequency_filter_extremes():
    x = torch.rand(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    rmax = max_radius(32, 32)
    assert torch.allclose(frequency_filter(x, rmax, "low"), x, atol=1e-6)  # everything kept
    low0 = frequency_filter(x, 0.0, "low")  # only DC: the constant mean colour
    assert torch.allclose(low0, x.mean(dim=(-2, -1), keepdim=True).expand_as(x), atol=1e-6)
    # low-pass + high-pass at the same radius sum to the image (before clipping)
    lo = frequency_filter(x, 5.0, "low", clip=(-10, 10))
    hi = frequency_filter(x, 5.0, "high", clip=(-10, 10))
    assert torch.allclose(lo + hi, x, atol=1e-5)


def test_mce_against_a_zero_error_reference_is_undefined_not_inf():
    """A reference with zero error on a corruption makes CE_c = E / 0 undefined: NaN (not inf, not floored)."""
    from iclr25.dst_robustness import zero_error_corruptions

    ref = np.array([[1.0, 1.0], [0.5, 0.5]])  # no error at any severity of corruption "a"
    model = np.array([[0.9, 0.9], [0.75, 0.75]])
    ce = corruption_errors(model, ref)
    assert np.isnan(ce[0]) and ce[1] == pytest.approx(0.5)
    assert np.isnan(corruption_errors(ref, ref)[0])
    assert np.isnan(mce(model, ref))
    assert zero_error_corruptions(ref, ["a", "b"]) == ["a"]
    assert zero_error_corruptions(model, ["a", "b"]) == []
    with pytest.raises(ValueError, match="names"):
        zero_error_corruptions(ref, ["a"])
