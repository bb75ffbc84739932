"""Spectrogram front end of the BirdSet "vision" models (paper §4 / Appendix "Preprocessing").

Pipeline (``BirdSetTransformsWrapper`` with ``PreprocessingConfig``), for a batch of 5-s waveforms:

    P = |STFT(x)|²                       n_fft 1024, hop 320, centre=True, Hann window (power 2)
    P = SpecAugment(P)                   training only: FrequencyMasking(100 bins, p=0.5), TimeMasking(100, p=0.3)
    M = P · Wmel                         128 HTK mel bands, 0 … sr/2, no area normalisation (torchaudio MelScale)
    D = 10·log10(max(M, 1e-10)) ; D = max(D, max(D) − 80)      power-to-dB, top_db relative to the batch max
    X = (D − (−4.268)) / 4.569           AudioSet normalisation

torchaudio does not import with our torch, so STFT is ``torch.stft`` and the mel matrix is built here with the
same formula as ``torchaudio.functional.melscale_fbanks`` (checked against ``librosa.filters.mel(htk=True,
norm=None)`` in the tests).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..common.checks import need_count as _check_int
from ..common.checks import need_real as _check_num
from ..common.fields import bounded, check_fields

__all__ = ["mel_filterbank", "MelConfig", "MelFrontend", "power_to_db", "spec_augment"]


def _hz_to_mel(f):
    return 2595.0 * np.log10(1.0 + np.asarray(f, dtype=np.float64) / 700.0)


def _mel_to_hz(m):
    return 700.0 * (10.0 ** (np.asarray(m, dtype=np.float64) / 2595.0) - 1.0)


def mel_filterbank(
    n_freqs: int, sample_rate: int, n_mels: int, f_min: float = 0.0, f_max: float | None = None
):
    """Triangular HTK-mel filters, shape ``(n_freqs, n_mels)`` (``torchaudio.functional.melscale_fbanks``)."""
    _check_int("n_freqs", n_freqs)
    _check_int("sample_rate", sample_rate)
    _check_int("n_mels", n_mels)
    _check_num("f_min", f_min, 0.0)
    if f_max is not None:
        _check_num("f_max", f_max, 0.0)
    f_max = sample_rate / 2 if f_max is None else f_max
    if n_freqs < 2 or n_mels < 1:
        raise ValueError(f"n_freqs must be >= 2 and n_mels >= 1, got {n_freqs}, {n_mels}")
    if not 0 <= f_min < f_max <= sample_rate / 2:
        raise ValueError(f"need 0 <= f_min < f_max <= sample_rate/2, got f_min={f_min}, f_max={f_max}")
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    f_pts = _mel_to_hz(np.linspace(_hz_to_mel(f_min), _hz_to_mel(f_max), n_mels + 2))
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]  # (n_freqs, n_mels + 2)
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    return torch.from_numpy(np.maximum(0.0, np.minimum(down, up))).float()


def power_to_db(
    x: torch.Tensor,
    top_db: float | None = 80.0,
    scope: str = "batch",
    amin: float = 1e-10,
    validate: bool = True,
):
    """10·log10 of a power spectrogram (ref 1). ``top_db`` clips at (max − top_db).

    ``scope="batch"`` takes the max over the whole batch tensor (the benchmark's ``PowerToDB``);
    ``scope="example"`` per example (torchaudio's ``AmplitudeToDB`` on a 4-D batch). ``validate=False`` skips
    the check that ``x`` is a finite power (>= 0) spectrogram, a device sync, for the front end's forward pass.
    """
    if top_db is not None and (
        isinstance(top_db, bool)
        or not isinstance(top_db, (int, float))
        or not (math.isfinite(top_db) and top_db >= 0)
    ):
        raise ValueError(f"top_db must be None or a finite number >= 0 (dB below the max), got {top_db!r}")
    if isinstance(amin, bool) or not isinstance(amin, (int, float)) or not (math.isfinite(amin) and amin > 0):
        raise ValueError(f"amin must be a finite number > 0 (the power floor), got {amin!r}")
    if scope not in ("batch", "example"):
        raise ValueError(f"scope must be 'batch' or 'example', got {scope!r}")
    if validate and not bool((torch.isfinite(x) & (x >= 0)).all()):
        raise ValueError(
            "x must be a power spectrogram: finite values >= 0 (got NaN/inf or a negative power)"
        )
    db = 10.0 * torch.log10(torch.clamp(x, min=amin))
    if top_db is not None:
        if scope == "batch":
            db = torch.maximum(db, db.max() - top_db)
        elif scope == "example":
            m = db.flatten(1).amax(1).view(-1, *([1] * (db.ndim - 1)))
            db = torch.maximum(db, m - top_db)
        else:
            raise ValueError(f"scope must be 'batch' or 'example', got {scope!r}")
    return db


def spec_augment(
    spec: torch.Tensor,
    freq_mask: int,
    time_mask: int,
    p_freq: float,
    p_time: float,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """iid SpecAugment on a (batch, freq, time) power spectrogram: one band of width U[0, param) each, value 0.

    Each example gets its own masks (``iid_masks=True``); a mask is applied with probability ``p_freq`` /
    ``p_time`` per example.
    """
    if not isinstance(spec, torch.Tensor) or spec.ndim != 3:
        raise ValueError(
            f"spec must be a (batch, freq, time) tensor, got {getattr(spec, 'shape', type(spec).__name__)}"
        )
    _check_int("freq_mask", freq_mask, 0)
    _check_int("time_mask", time_mask, 0)
    _check_num("p_freq", p_freq, 0.0, 1.0)
    _check_num("p_time", p_time, 0.0, 1.0)
    b, f, t = spec.shape
    dev = spec.device
    out = spec

    def _mask(size: int, param: int, p: float, dim: int):
        nonlocal out
        if param <= 0 or p <= 0:
            return
        u = torch.rand(3, b, generator=generator).to(dev)  # drawn on the CPU: same numbers on any device
        width = u[0] * min(param, size)
        start = u[1] * (size - width)
        on = u[2] < p
        idx = torch.arange(size, device=dev)[None]
        m = (
            (idx >= start[:, None].floor()) & (idx < (start + width)[:, None].floor()) & on[:, None]
        )  # (b, size)
        m = m[:, :, None] if dim == 1 else m[:, None, :]
        out = out.masked_fill(m, 0.0)

    _mask(f, freq_mask, p_freq, 1)
    _mask(t, time_mask, p_time, 2)
    return out


@dataclass(frozen=True)
class MelConfig:
    """Front-end hyper-parameters; defaults = the benchmark's ConvNeXt / AST preprocessing at 32 kHz."""

    sample_rate: int = bounded(32_000, lo=1)
    n_fft: int = bounded(1024, lo=1)
    hop_length: int = bounded(320, lo=1)
    n_mels: int = bounded(128, lo=1)
    f_min: float = bounded(0.0, lo=0)
    f_max: float | None = bounded(None, kind=float, lo=0, optional=True)
    # FrequencyMasking(freq_mask_param=100) on the linear power spectrogram
    freq_mask: int = bounded(100, lo=0)
    time_mask: int = bounded(100, lo=0)
    p_freq_mask: float = bounded(0.5, lo=0, hi=1)
    p_time_mask: float = bounded(0.3, lo=0, hi=1)
    top_db: float | None = bounded(80.0, kind=float, lo=0, optional=True)
    top_db_scope: str = bounded("batch", choices=("batch", "example"))
    mean: float = bounded(-4.268)  # AudioSet statistics
    std: float = bounded(4.569, lo=0, lo_open=True)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the rule across fields
        if self.f_max is not None:
            if not self.f_min < self.f_max <= self.sample_rate / 2:
                raise ValueError(
                    f"f_max must satisfy f_min < f_max <= sample_rate/2 = {self.sample_rate / 2}, got {self.f_max}"
                )

    def n_frames(self, seconds: float) -> int:
        _check_num("seconds", seconds, 0.0)
        return int(round(seconds * self.sample_rate)) // self.hop_length + 1  # centre=True


class MelFrontend(nn.Module):
    """waveforms (batch, samples) → normalised log-mel (batch, 1, n_mels, frames); SpecAugment in train mode."""

    def __init__(self, cfg: MelConfig | None = None, **overrides):
        super().__init__()
        if cfg is not None and not isinstance(cfg, MelConfig):
            raise ValueError(f"cfg must be a MelConfig or None, got {type(cfg).__name__}")
        self.cfg = cfg if cfg is not None else MelConfig(**overrides)
        c = self.cfg
        self.register_buffer("window", torch.hann_window(c.n_fft), persistent=False)
        self.register_buffer(
            "mel",
            mel_filterbank(c.n_fft // 2 + 1, c.sample_rate, c.n_mels, c.f_min, c.f_max),
            persistent=False,
        )

    def power_spectrogram(self, wave: torch.Tensor) -> torch.Tensor:
        if wave.ndim != 2:
            raise ValueError(f"wave must be (batch, samples), got shape {tuple(wave.shape)}")
        if not torch.isfinite(wave).all():
            raise ValueError("wave holds NaN/inf samples")
        spec = torch.stft(
            wave, self.cfg.n_fft, self.cfg.hop_length, window=self.window, center=True, return_complex=True
        )
        return spec.real.square() + spec.imag.square()  # (batch, n_fft/2+1, frames)

    def forward(self, wave: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        c = self.cfg
        p = self.power_spectrogram(wave)
        if self.training:
            p = spec_augment(p, c.freq_mask, c.time_mask, c.p_freq_mask, c.p_time_mask, generator)
        m = torch.einsum("bft,fm->bmt", p, self.mel)  # (batch, n_mels, frames)
        db = power_to_db(m, c.top_db, c.top_db_scope, validate=False)
        return ((db - c.mean) / c.std).unsqueeze(1)
