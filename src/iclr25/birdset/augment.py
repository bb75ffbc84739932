"""BirdSet waveform augmentations (paper Appendix "Augmentations"), batched.

Training clips pass, in this order: ``MultilabelMix`` (p = 0.7: add another clip of the batch at SNR U[3, 30] dB,
labels = union), ``AddBackgroundNoise`` (p = 0.5: a no-bird background clip at SNR U[3, 30] dB),
``AddColoredNoise`` (p = 0.2: noise with power spectrum ∝ f^(−decay), decay U[−2, 2], SNR U[3, 30] dB),
``Gain`` (U[−18, 6] dB, p = 0.5, torch-audiomentations defaults) and ``NoCallMixer`` (p = 0.075: the clip is replaced
by a background clip and its label set to all-zero).

The benchmark calls torch-audiomentations, which needs torchaudio (it does not import with our torch). Where the
numpy ``audiomentations`` package has the transform it is used (``AugmentConfig(library="audiomentations")``, the
default), one call per clip:

* ``AddColoredNoise`` → ``audiomentations.AddColorNoise``: its decay is in dB/octave, so U[−2, 2] in the exponent
  is U[−6.02, +6.02] dB/octave (decay_db = −10·log10(2)·β; uniform in one is uniform in the other); same SNR
  rule (noise rms = signal rms / 10^(snr/20)). It shapes the noise with a 128-point FIR filter instead of a
  full-length spectrum (smoother below ~sr/128 Hz).
* ``Gain`` → ``audiomentations.Gain`` (same U[−18, 6] dB, same p).

The others stay batched torch code, because audiomentations has no such transform or cannot take our data:

* ``MultilabelMix`` and ``NoCallMixer`` change the **labels** (union / all-zero); audiomentations transforms see
  one waveform and no targets, and mixing needs the other clips of the batch.
* ``AddBackgroundNoise``: audiomentations' version only reads noise from audio **files** (``sounds_path``) and
  decodes one per call; our background clips are an in-memory bank (synthetic, or decoded once). Its rule
  (random crop, noise rms from the signal rms and U[snr]) is the one implemented here.

``library="torch"`` uses the batched torch versions of all five (no extra dependency). Every random draw
comes from the ``torch.Generator`` passed in: audiomentations draws from Python's ``random`` and numpy's global
generator, which are seeded from it per batch and restored afterwards, so a run is reproducible and the
callers' global random state is left as it was.
"""

from __future__ import annotations

import random
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import torch

from ..common.checks import need_range as _check_range_pair
from ..common.checks import need_real as _check_num
from ..common.fields import bounded, check_fields

__all__ = [
    "AugmentConfig",
    "augment_batch",
    "mix_batch",
    "add_background",
    "add_colored_noise",
    "random_gain",
    "no_call_mix",
    "scale_to_snr",
    "am_colored_noise",
    "am_gain",
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
    if n == 0:
        return bank.new_zeros(0, length)
    return torch.stack(
        [bank[i, o : o + length] for i, o in zip(idx.tolist(), off.tolist())]
    )  # slices, no gather


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
    snr_db = _u(n, *snr, g)
    rows = on.nonzero().flatten()
    if rows.numel() == 0:
        return wave, target
    src = other[rows]
    wave, target = wave.clone(), target.clone()
    wave[rows] = wave[rows] + scale_to_snr(wave[rows], wave[src], snr_db[rows], validate=False)
    target[rows] = torch.maximum(target[rows], target[src])  # the mixed-in clip's labels as they were
    return wave, target


def add_background(wave, bank, p=0.5, snr=(3.0, 30.0), g=None):
    """AddBackgroundNoise: a random crop of a background clip at SNR U[snr] dB, with probability p."""
    _check_wave2d(wave)
    _check_wave2d(bank, "bank")
    _check_p(p)
    _check_range_pair("snr", snr)
    n, t = wave.shape
    rows = _bern(n, p, g).nonzero().flatten()
    crops = _random_crops(bank, rows.numel(), t, g)
    snr_db = _u(rows.numel(), *snr, g)
    if rows.numel() == 0:
        return wave
    wave = wave.clone()
    wave[rows] = wave[rows] + scale_to_snr(wave[rows], crops, snr_db, validate=False)
    return wave


def add_colored_noise(wave, p=0.2, snr=(3.0, 30.0), f_decay=(-2.0, 2.0), g=None):
    """AddColoredNoise: Gaussian noise shaped to power ∝ f^(−decay) (0 white, 1 pink, 2 brown, < 0 blue/violet)."""
    _check_wave2d(wave)
    _check_p(p)
    _check_range_pair("snr", snr)
    _check_range_pair("f_decay", f_decay)
    n, t = wave.shape
    rows = _bern(n, p, g).nonzero().flatten()
    m = rows.numel()
    decay = _u(m, *f_decay, g)
    white = torch.randn(m, t, generator=g)
    snr_db = _u(m, *snr, g)
    if m == 0:
        return wave
    spec = torch.fft.rfft(white, dim=-1)
    f = torch.arange(spec.shape[-1], dtype=torch.float32).clamp_min(1.0)[None]
    noise = torch.fft.irfft(spec * f ** (-decay[:, None] / 2.0), n=t, dim=-1)
    wave = wave.clone()
    wave[rows] = wave[rows] + scale_to_snr(wave[rows], noise, snr_db, validate=False)
    return wave


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
    rows = _bern(n, p, g).nonzero().flatten()
    bg = _random_crops(bank, rows.numel(), t, g)
    if rows.numel() == 0:
        return wave, target
    wave, target = wave.clone(), target.clone()
    wave[rows] = bg * (_rms(wave[rows]) / _rms(bg))
    target[rows] = 0.0
    return wave, target


LIBRARIES = ("audiomentations", "torch")
DB_PER_OCTAVE = 10.0 * float(np.log10(2.0))  # decay exponent β ↔ −β · 3.0103 dB/octave


def _audiomentations():
    try:
        import audiomentations
    except ImportError as e:  # pragma: no cover - the [audio] extra installs it
        raise ImportError(
            "AugmentConfig(library='audiomentations') needs the audiomentations package (pip install "
            "'iclr25[audio]'); library='torch' uses the built-in batched versions"
        ) from e
    return audiomentations


@contextmanager
def _global_rngs(seed: int):
    """Seed Python's ``random`` and numpy's global generator (audiomentations draws from them), then restore."""
    py, npy = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed)
    try:
        yield
    finally:
        random.setstate(py)
        np.random.set_state(npy)


def _per_clip(transform, wave: torch.Tensor, sample_rate: int, g: torch.Generator | None) -> torch.Tensor:
    """Apply an audiomentations transform to every row of (batch, samples), seeded from ``g``."""
    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=g))
    x = wave.detach().cpu().numpy().astype(np.float32, copy=False)
    with _global_rngs(seed):
        out = np.stack([transform(samples=row, sample_rate=sample_rate) for row in x])
    return torch.from_numpy(np.ascontiguousarray(out, dtype=np.float32)).to(wave.device)


def am_colored_noise(wave, sample_rate=32_000, p=0.2, snr=(3.0, 30.0), f_decay=(-2.0, 2.0), g=None):
    """AddColoredNoise through ``audiomentations.AddColorNoise`` (per clip; decay exponent β ↔ −3.01·β dB/oct)."""
    _check_wave2d(wave)
    _check_p(p)
    _check_range_pair("snr", snr)
    _check_range_pair("f_decay", f_decay)
    _check_num("sample_rate", sample_rate, 0.0, lo_open=True)
    am = _audiomentations()
    lo, hi = sorted((-f_decay[1] * DB_PER_OCTAVE, -f_decay[0] * DB_PER_OCTAVE))
    t = am.AddColorNoise(min_snr_db=snr[0], max_snr_db=snr[1], min_f_decay=lo, max_f_decay=hi, p=p)
    return _per_clip(t, wave, int(sample_rate), g)


def am_gain(wave, sample_rate=32_000, p=0.5, gain_db=(-18.0, 6.0), g=None):
    """Gain through ``audiomentations.Gain`` (per clip)."""
    _check_wave2d(wave)
    _check_p(p)
    _check_range_pair("gain_db", gain_db)
    am = _audiomentations()
    t = am.Gain(min_gain_db=gain_db[0], max_gain_db=gain_db[1], p=p)
    return _per_clip(t, wave, int(sample_rate), g)


@dataclass(frozen=True)
class AugmentConfig:
    """Probabilities / ranges of the BirdSet training augmentations (0 disables one).

    ``library``: ``"audiomentations"`` (AddColoredNoise and Gain through the numpy audiomentations package, the
    rest batched torch) or ``"torch"`` (all five batched torch). ``sample_rate``: the clips' rate (Hz), which
    audiomentations' colour filter needs.
    """

    p_mix: float = bounded(0.7, lo=0, hi=1)
    p_background: float = bounded(0.5, lo=0, hi=1)
    p_colored: float = bounded(0.2, lo=0, hi=1)
    p_gain: float = bounded(0.5, lo=0, hi=1)
    p_no_call: float = bounded(0.075, lo=0, hi=1)
    # (low, high) ranges
    snr_db: tuple[float, float] = bounded((3.0, 30.0), each=True, length=2)
    f_decay: tuple[float, float] = bounded((-2.0, 2.0), each=True, length=2)
    gain_db: tuple[float, float] = bounded((-18.0, 6.0), each=True, length=2)
    library: str = bounded("audiomentations", choices=LIBRARIES)
    sample_rate: int = bounded(32_000, lo=1)  # Hz

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above (pairs element-wise); below: low <= high
        for name in ("snr_db", "f_decay", "gain_db"):
            low, high = v = getattr(self, name)
            if not low <= high:
                raise ValueError(f"{name} must be a (low, high) range with low <= high, got {v!r}")


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
    am = cfg.library == "audiomentations"
    if cfg.p_colored > 0:
        if am:
            wave = am_colored_noise(wave, cfg.sample_rate, cfg.p_colored, cfg.snr_db, cfg.f_decay, g)
        else:
            wave = add_colored_noise(wave, cfg.p_colored, cfg.snr_db, cfg.f_decay, g)
    if cfg.p_gain > 0:
        if am:
            wave = am_gain(wave, cfg.sample_rate, cfg.p_gain, cfg.gain_db, g)
        else:
            wave = random_gain(wave, cfg.p_gain, cfg.gain_db, g)
    if cfg.p_no_call > 0:
        wave, target = no_call_mix(wave, target, bank, cfg.p_no_call, g)
    return wave, target
