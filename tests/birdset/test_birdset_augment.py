"""Batched BirdSet augmentations: SNR scaling, label union, no-call, coloured-noise slope, determinism."""

import pytest
import torch

from iclr25.birdset.augment import (
    AugmentConfig,
    add_background,
    add_colored_noise,
    augment_batch,
    mix_batch,
    no_call_mix,
    scale_to_snr,
)


def _g(s=0):
    return torch.Generator().manual_seed(s)


def test_scale_to_snr_is_exact():
    s, n = torch.randn(4, 1000, generator=_g()), torch.randn(4, 1000, generator=_g(1)) * 7
    snr = torch.tensor([3.0, 10.0, 20.0, 30.0])
    scaled = scale_to_snr(s, n, snr)
    got = 20 * torch.log10(s.square().mean(1).sqrt() / scaled.square().mean(1).sqrt())
    torch.testing.assert_close(got, snr, atol=1e-3, rtol=0)


def test_mix_takes_label_union_and_p0_is_identity():
    w = torch.randn(6, 500, generator=_g())
    y = torch.eye(6)
    w2, y2 = mix_batch(w, y, p=1.0, g=_g(2))
    assert (y2.sum(1) == 2).all() and (y2 >= y).all()  # own label + exactly one other clip's label
    w3, y3 = mix_batch(w, y, p=0.0, g=_g(2))
    assert torch.equal(w3, w) and torch.equal(y3, y)


def test_no_call_and_background():
    w, y = torch.randn(5, 400, generator=_g()), torch.ones(5, 3)
    bank = torch.randn(3, 1000, generator=_g(1))
    w2, y2 = no_call_mix(w, y, bank, p=1.0, g=_g(3))
    assert (y2 == 0).all() and not torch.allclose(w2, w)
    b = add_background(w, bank, p=1.0, snr=(10.0, 10.0), g=_g(4))
    noise = b - w
    ratio = 20 * torch.log10(w.square().mean(1).sqrt() / noise.square().mean(1).sqrt())
    torch.testing.assert_close(ratio, torch.full((5,), 10.0), atol=1e-3, rtol=0)
    with pytest.raises(ValueError, match="bank"):
        augment_batch(w, y, AugmentConfig(), None)


def test_colored_noise_slope():
    w = torch.zeros(2, 16_384) + 1e-3 * torch.randn(2, 16_384, generator=_g())
    brown = add_colored_noise(w, p=1.0, snr=(-40.0, -40.0), f_decay=(2.0, 2.0), g=_g(1)) - w
    blue = add_colored_noise(w, p=1.0, snr=(-40.0, -40.0), f_decay=(-2.0, -2.0), g=_g(1)) - w
    for x, low_dominates in ((brown, True), (blue, False)):
        p = torch.fft.rfft(x, dim=-1).abs().square().mean(0)
        lo, hi = p[1:200].mean(), p[-2000:].mean()
        assert (lo > 100 * hi) if low_dominates else (hi > 100 * lo)


def test_augment_batch_deterministic_and_validated():
    w, y = torch.randn(8, 800, generator=_g()), torch.eye(8)[:, :4]
    bank = torch.randn(4, 800, generator=_g(1))
    a = augment_batch(w, y, AugmentConfig(), bank, _g(5))
    b = augment_batch(w, y, AugmentConfig(), bank, _g(5))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    with pytest.raises(ValueError, match="p_mix"):
        AugmentConfig(p_mix=1.5)
