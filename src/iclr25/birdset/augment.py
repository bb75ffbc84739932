"""BirdSet waveform augmentations, vectorised over a batch (paper Appendix "Augmentations").

Training clips pass, in this order: ``MultilabelMix`` (p = 0.7: add another clip of the batch at SNR U[3, 30] dB,
labels = union), ``AddBackgroundNoise`` (p = 0.5: a no-bird background clip at SNR U[3, 30] dB),
``AddColoredNoise`` (p = 0.2: noise with power spectrum ∝ f^(−decay), decay U[−2, 2], SNR U[3, 30] dB),
``Gain`` (U[−18, 6] dB, p = 0.5, torch-audiomentations defaults) and ``NoCallMixer`` (p = 0.075: the clip is replaced
by a background clip and its label set to all-zero). The benchmark uses torch-audiomentations for these; that
package needs torchaudio, which does not import with our torch, so they are re-implemented as batched torch ops
with the same parameters. Every random draw comes from the ``torch.Generator`` passed in.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..common.checks import need_range as _check_range_pair
from ..common.checks import need_real as _check_num

__all__ = [
    "AugmentConfig",
    "augment_batch",
    "mix_batch",
    "add_background",
    "add_colored_noise",
    "random_gain",
    "no_call_mix",
    "scale_to_snr",
]


def _check_p(p) -> None:
    _check_num("p", p, 0.0, 1.0)


def _check_wave2d(wave, name: str = "wave") -> None:
    if not isinstance(wave, torch.Tensor) or wave.ndim != 2:
        raise ValueError(
            f"{name} must be a (batch, samples) tensor, got {getattr(wave, 'shape', type(wave).__name__)}"
        )


def _check_target(wave, target) -> None:
    if not isinstance(target, torch.Tensor) or target.ndim != 2 or target.shape[0] != wave.shape[0]:
        raise ValueError(
            f"target must be a (batch, classes) tensor with wave's batch {wave.shape[0]}, "
            f"got {getattr(target, 'shape', type(target).__name__)}"
        )


def _rms(x: torch.Tensor) -> torch.Tensor:
    return x.square().mean(-1, keepdim=True).sqrt().clamp_min(1e-8)


def scale_to_snr(
    signal: torch.Tensor, noise: torch.Tensor, snr_db: torch.Tensor, validate: bool = True
) -> torch.Tensor:
    """``noise`` rescaled so that rms(signal)/rms(noise) = 10^(snr/20), per row. signal, noise (batch, samples);
    snr_db (batch,) finite; ``validate=False`` (the augmentations' own calls) skips that check, a sync."""
    if signal.shape != noise.shape or signal.ndim != 2 or snr_db.numel() != signal.shape[0]:
        raise ValueError(
            f"signal and noise must be (batch, samples) of one shape and snr_db (batch,), got "
            f"{tuple(signal.shape)}, {tuple(noise.shape)}, {tuple(snr_db.shape)}"
        )
    if validate and not bool(torch.isfinite(snr_db).all()):
        raise ValueError("snr_db must be finite (dB)")
    return noise * (_rms(signal) / _rms(noise)) / (10.0 ** (snr_db.view(-1, 1) / 20.0))


def _u(n: int, lo: float, hi: float, g: torch.Generator | None) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(n, generator=g)


def _bern(n: int, p: float, g: torch.Generator | None) -> torch.Tensor:
    return torch.rand(n, generator=g) < p


def _random_crops(bank: torch.Tensor, n: int, length: int, g: torch.Generator | None) -> torch.Tensor:
    """n random crops of ``length`` samples from a (clips, samples) bank (tiled when clips are shorter)."""
    if bank.ndim != 2 or bank.shape[0] == 0:
        raise ValueError(f"background bank must be (clips, samples) with >= 1 clip, got {tuple(bank.shape)}")
    if bank.shape[1] < length:
        bank = bank.repeat(1, -(-length // bank.shape[1]))
    idx = torch.randint(bank.shape[0], (n,), generator=g)
    off = (torch.rand(n, generator=g) * (bank.shape[1] - length + 1)).long()
    cols = off[:, None] + torch.arange(length)[None]
    return bank[idx[:, None], cols]


def mix_batch(wave, target, p=0.7, snr=(3.0, 30.0), g=None):
    """MultilabelMix: each clip (with prob. p) gets another clip of the batch added at SNR U[snr]; labels union."""
    _check_wave2d(wave)
    _check_target(wave, target)
    _check_p(p)
    _check_range_pair("snr", snr)
    n = wave.shape[0]
    if n < 2:
        return wave, target
    on = _bern(n, p, g)
    other = (torch.arange(n) + torch.randint(1, n, (n,), generator=g)) % n  # never the clip itself
    add = scale_to_snr(wave, wave[other], _u(n, *snr, g), validate=False)
    wave = torch.where(on[:, None], wave + add, wave)
    target = torch.where(on[:, None], torch.maximum(target, target[other]), target)
    return wave, target


def add_background(wave, bank, p=0.5, snr=(3.0, 30.0), g=None):
    """AddBackgroundNoise: a random crop of a background clip at SNR U[snr] dB, with probability p."""
    _check_wave2d(wave)
    _check_wave2d(bank, "bank")
    _check_p(p)
    _check_range_pair("snr", snr)
    n, t = wave.shape
    on = _bern(n, p, g)
    noise = scale_to_snr(wave, _random_crops(bank, n, t, g), _u(n, *snr, g), validate=False)
    return torch.where(on[:, None], wave + noise, wave)


def add_colored_noise(wave, p=0.2, snr=(3.0, 30.0), f_decay=(-2.0, 2.0), g=None):
    """AddColoredNoise: Gaussian noise shaped to power ∝ f^(−decay) (0 white, 1 pink, 2 brown, < 0 blue/violet)."""
    _check_wave2d(wave)
    _check_p(p)
    _check_range_pair("snr", snr)
    _check_range_pair("f_decay", f_decay)
    n, t = wave.shape
    on = _bern(n, p, g)
    decay = _u(n, *f_decay, g)
    spec = torch.fft.rfft(torch.randn(n, t, generator=g), dim=-1)
    f = torch.arange(spec.shape[-1], dtype=torch.float32).clamp_min(1.0)[None]
    noise = torch.fft.irfft(spec * f ** (-decay[:, None] / 2.0), n=t, dim=-1)
    return torch.where(on[:, None], wave + scale_to_snr(wave, noise, _u(n, *snr, g), validate=False), wave)


def random_gain(wave, p=0.5, gain_db=(-18.0, 6.0), g=None):
    """Gain: multiply by 10^(U[gain_db]/20) with probability p."""
    _check_wave2d(wave)
    _check_p(p)
    _check_range_pair("gain_db", gain_db)
    n = wave.shape[0]
    on = _bern(n, p, g)
    factor = torch.where(on, 10.0 ** (_u(n, *gain_db, g) / 20.0), torch.ones(n))
    return wave * factor[:, None]


def no_call_mix(wave, target, bank, p=0.075, g=None):
    """NoCallMixer: with probability p a clip becomes a background clip (same rms) and its label all-zero."""
    _check_wave2d(wave)
    _check_target(wave, target)
    _check_wave2d(bank, "bank")
    _check_p(p)
    n, t = wave.shape
    on = _bern(n, p, g)
    bg = _random_crops(bank, n, t, g)
    bg = bg * (_rms(wave) / _rms(bg))
    return torch.where(on[:, None], bg, wave), torch.where(on[:, None], torch.zeros_like(target), target)


@dataclass(frozen=True)
class AugmentConfig:
    """Probabilities / ranges of the BirdSet training augmentations (0 disables one)."""

    p_mix: float = 0.7
    p_background: float = 0.5
    p_colored: float = 0.2
    p_gain: float = 0.5
    p_no_call: float = 0.075
    snr_db: tuple[float, float] = (3.0, 30.0)
    f_decay: tuple[float, float] = (-2.0, 2.0)
    gain_db: tuple[float, float] = (-18.0, 6.0)

    def __post_init__(self) -> None:
        for name in ("p_mix", "p_background", "p_colored", "p_gain", "p_no_call"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {v!r}")
        for name in ("snr_db", "f_decay", "gain_db"):
            _check_range_pair(name, getattr(self, name))


def augment_batch(
    wave, target, cfg: AugmentConfig, bank: torch.Tensor | None = None, g=None, validate: bool = True
):
    """Apply the BirdSet training augmentations to (batch, samples) waves and (batch, classes) multi-hot targets.

    ``bank``: background clips (clips, samples) for AddBackgroundNoise and NoCallMixer; required when their
    probability is > 0. ``validate=False`` skips the finiteness check of ``wave`` (a device sync) for the
    training loop.
    """
    if not isinstance(cfg, AugmentConfig):
        raise ValueError(f"cfg must be an AugmentConfig, got {type(cfg).__name__}")
    _check_wave2d(wave)
    if wave.ndim != 2 or target.ndim != 2 or wave.shape[0] != target.shape[0]:
        raise ValueError(
            f"wave (batch, samples) and target (batch, classes) must match, got "
            f"{tuple(wave.shape)} and {tuple(target.shape)}"
        )
    if (cfg.p_background > 0 or cfg.p_no_call > 0) and bank is None:
        raise ValueError("bank (background clips) is required when p_background or p_no_call is > 0")
    if validate and not bool(torch.isfinite(wave).all()):
        raise ValueError("wave holds NaN/inf samples")
    target = target.float()
    if cfg.p_mix > 0:
        wave, target = mix_batch(wave, target, cfg.p_mix, cfg.snr_db, g)
    if cfg.p_background > 0:
        wave = add_background(wave, bank, cfg.p_background, cfg.snr_db, g)
    if cfg.p_colored > 0:
        wave = add_colored_noise(wave, cfg.p_colored, cfg.snr_db, cfg.f_decay, g)
    if cfg.p_gain > 0:
        wave = random_gain(wave, cfg.p_gain, cfg.gain_db, g)
    if cfg.p_no_call > 0:
        wave, target = no_call_mix(wave, target, bank, cfg.p_no_call, g)
    return wave, target
