"""Decoding, resampling and windowing, including the real 10-s birds recording shipped in the opensoundscape
wheel (fetched once by ``make setup`` with ``pip download --no-deps``; the test is skipped without it)."""

import glob
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from iclr25.birdset.audio import AudioCache, decode_window, load_audio, read_wav_from_zip, resample
from iclr25.birdset.events import soundscape_windows
from iclr25.birdset.features import MelConfig, MelFrontend

ROOT = Path(__file__).resolve().parents[2]


def _wheel() -> str | None:
    pats = [
        os.environ.get("ICLR25_OPENSOUNDSCAPE_WHEEL", ""),
        str(ROOT / ".whl" / "opensoundscape-*.whl"),
        str(Path.home() / ".cache" / "iclr25" / "wheels" / "opensoundscape-*.whl"),
    ]
    for p in pats:
        hits = sorted(glob.glob(p)) if p else []
        if hits:
            return hits[-1]
    return None


def test_decode_window_and_resample(tmp_path):
    sr = 48_000
    t = np.arange(3 * sr) / sr
    x = 0.5 * np.sin(2 * np.pi * 3000 * t)
    sf.write(tmp_path / "a.flac", np.stack([x, x], 1), sr)  # stereo → mono
    w = decode_window(tmp_path / "a.flac", 1.0, 2.0, sample_rate=32_000, max_length=5.0)
    assert w.shape == (160_000,) and np.abs(w[32_000:]).max() == 0.0
    spec = np.abs(np.fft.rfft(w[:32_000]))
    assert abs(np.fft.rfftfreq(32_000, 1 / 32_000)[spec.argmax()] - 3000) <= 1
    full, rate = load_audio(tmp_path / "a.flac", 16_000)
    assert rate == 16_000 and len(full) == 3 * 16_000
    cache = AudioCache(32_000)
    cw = cache.window(
        tmp_path / "a.flac", 1.0, 2.0
    )  # whole-file resampling: equal away from the window edges
    np.testing.assert_allclose(cw[100:31_900], w[100:31_900], atol=2e-3)
    assert cw.shape == w.shape and np.abs(cw[32_000:]).max() == 0.0
    lazy = AudioCache(32_000, max_bytes=0)
    np.testing.assert_array_equal(lazy.window(tmp_path / "a.flac", 1.0, 2.0), w)
    assert lazy.duration(tmp_path / "a.flac") == pytest.approx(3.0)


def test_bad_audio_raises(tmp_path):
    sf.write(tmp_path / "silent.wav", np.zeros(1000), 16_000)
    with pytest.raises(ValueError, match="silent"):
        load_audio(tmp_path / "silent.wav")
    assert load_audio(tmp_path / "silent.wav", allow_silent=True)[0].shape == (1000,)
    (tmp_path / "junk.wav").write_bytes(b"not audio at all")
    with pytest.raises(ValueError, match="could not be decoded"):
        load_audio(tmp_path / "junk.wav")
    with pytest.raises(ValueError, match="could not be decoded"):
        decode_window(tmp_path / "junk.wav", 0.0, 1.0)
    with pytest.raises(ValueError, match="target_sr"):
        resample(np.ones(10), 16_000, 0)
    with pytest.raises(ValueError, match="window"):
        decode_window(tmp_path / "silent.wav", 2.0, 1.0)


def test_real_birds_recording_from_the_opensoundscape_wheel():
    wheel = _wheel()
    if wheel is None:
        pytest.skip("opensoundscape wheel not downloaded (make setup fetches it into .whl/)")
    x, sr = read_wav_from_zip(wheel, "opensoundscape/sample_data/birds_10s.wav")
    assert sr == 32_000 and len(x) / sr == pytest.approx(10.13, abs=0.02)
    x16, _ = read_wav_from_zip(wheel, "opensoundscape/sample_data/birds_10s.wav", 16_000)
    assert len(x16) == pytest.approx(len(x) / 2, abs=2)
    starts, y = soundscape_windows(len(x) / sr, None, ["a"])
    assert starts.tolist() == [0.0, 5.0] and y.shape == (2, 1)  # two full 5-s windows
    cache = AudioCache(sr)
    cache.put("birds", x)
    wins = torch.from_numpy(np.stack([cache.window("birds", s, s + 5.0) for s in starts]))
    feats = MelFrontend(MelConfig()).eval()(wins)
    assert feats.shape == (2, 1, 128, 501) and torch.isfinite(feats).all()
    # real birds: energy in the 1.5–8 kHz band dominates the windows' spectra
    spec = np.abs(np.fft.rfft(x)) ** 2
    f = np.fft.rfftfreq(len(x), 1 / sr)
    assert spec[(f > 1500) & (f < 8000)].sum() > 0.3 * spec.sum()
