"""Mel front end: filterbank vs librosa, shapes, top-db, tone placement, SpecAugment placement."""

import numpy as np
import pytest
import torch

from iclr25.birdset.features import MelConfig, MelFrontend, mel_filterbank, power_to_db, spec_augment


def test_filterbank_matches_librosa_htk():
    librosa = pytest.importorskip("librosa")
    for sr, n_fft, n_mels in ((32_000, 1024, 128), (16_000, 512, 32)):
        ours = mel_filterbank(n_fft // 2 + 1, sr, n_mels).numpy()
        ref = librosa.filters.mel(
            sr=sr, n_fft=n_fft, n_mels=n_mels, fmin=0.0, fmax=sr / 2, htk=True, norm=None
        ).T
        np.testing.assert_allclose(ours, ref, atol=1e-5)


def test_shapes_and_top_db_over_the_batch():
    fe = MelFrontend(MelConfig()).eval()  # 32 kHz, n_fft 1024, hop 320, 128 mels
    g = torch.Generator().manual_seed(0)
    wave = torch.randn(3, 5 * 32_000, generator=g) * torch.tensor([[1.0], [1e-3], [1e-5]])
    x = fe(wave)
    assert x.shape == (3, 1, 128, 501) and fe.cfg.n_frames(5.0) == 501
    db = x * fe.cfg.std + fe.cfg.mean
    assert float(db.min()) >= float(db.max()) - 80.0 - 1e-3
    assert float(db[2].min()) == pytest.approx(
        float(db.max()) - 80.0, abs=1e-3
    )  # quiet clip clipped by batch max
    per_ex = power_to_db(torch.rand(2, 4, 5) * torch.tensor([1.0, 1e-12]).view(2, 1, 1), 80.0, "example")
    assert float(per_ex[1].min()) >= float(per_ex[1].max()) - 80 - 1e-4
    with pytest.raises(ValueError, match="scope"):
        power_to_db(torch.rand(2, 3), 80.0, "channel")


def test_pure_tone_peaks_in_its_mel_bin():
    cfg = MelConfig()
    fe = MelFrontend(cfg).eval()
    t = torch.arange(5 * cfg.sample_rate) / cfg.sample_rate
    x = fe(torch.sin(2 * torch.pi * 4000.0 * t)[None])
    peak = int(x[0, 0].mean(1).argmax())
    fb = mel_filterbank(cfg.n_fft // 2 + 1, cfg.sample_rate, cfg.n_mels)
    bin_4k = round(4000 * cfg.n_fft / cfg.sample_rate)
    assert peak == int(fb[bin_4k].argmax())


def test_specaugment_only_in_training_before_mel():
    cfg = MelConfig(
        sample_rate=16_000, n_fft=512, hop_length=256, n_mels=32, p_freq_mask=1.0, p_time_mask=1.0
    )
    fe = MelFrontend(cfg)
    wave = torch.randn(4, 16_000 * 5, generator=torch.Generator().manual_seed(1))
    fe.eval()
    a, b = fe(wave), fe(wave)
    assert torch.equal(a, b)  # eval: deterministic, no masking
    fe.train()
    c = fe(wave, generator=torch.Generator().manual_seed(2))
    assert not torch.equal(a, c)
    p = fe.power_spectrogram(wave)
    m = spec_augment(p, 50, 30, 1.0, 1.0, torch.Generator().manual_seed(3))
    zero_rows = (m == 0).all(dim=2)  # frequency bins zeroed over all frames, per example
    zero_cols = (m == 0).all(dim=1)
    assert zero_rows.any() and zero_cols.any()  # widths are U[0, param): a draw may mask nothing
    assert ((m == 0) | (m == p)).all()  # masking only sets zeros, on the linear power spectrogram
    assert torch.equal(spec_augment(p, 50, 30, 0.0, 0.0), p)
    with pytest.raises(ValueError, match="NaN"):
        fe(torch.full((1, 1000), float("nan")))
