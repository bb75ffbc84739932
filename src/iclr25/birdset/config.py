"""The BirdSet reproduction's settings (README, "Reproduction"): the arms, :class:`Config` and its :data:`PRESETS`
(read by ``experiment.py`` and ``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from iclr25.common.fields import bounded, check_nested
from iclr25.common.results import ExperimentConfig

from .augment import AugmentConfig
from .features import MelConfig
from .synthetic import (
    XC_BOUNDS,
    XC_LOG_SD,
)
from .train import BirdTrainConfig

ARMS = {
    "A": "event mapping + event decoding, all augmentations (DT protocol)",
    "B": "first 5 s of each recording, all augmentations",
    "C": "A without background-noise augmentation",
}


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # synthetic benchmark
    n_species: int = bounded(10, lo=2)  # >= 2: a multi-label benchmark
    focal_per_species: int = bounded(30, lo=1)
    # focal recording lengths: "xeno_canto" = log-normal with Xeno-canto's mean length (46.3 s: BirdSet's XCL,
    # 528,434 recordings, > 6,800 h), log-sd focal_log_sd, clipped to focal_bounds; "uniform" = focal_duration
    focal_lengths: str = bounded("xeno_canto", choices=("xeno_canto", "uniform"))
    focal_duration: tuple[float, float] = bounded((8.0, 20.0), lo=5.0, each=True, length=2)  # (low, high) s
    focal_log_sd: float = bounded(XC_LOG_SD, lo=0, hi=5, hi_open=True)
    focal_bounds: tuple[float, float] = bounded(XC_BOUNDS, lo=5.0, each=True, length=2)
    # primary phrases per recording ∝ length (coverage 20 %); 0 = no cap (was 4)
    max_phrases: int = bounded(0, lo=0)
    n_soundscapes: int = bounded(20, lo=1)
    soundscape_s: float = bounded(60.0, lo=5.0)  # >= 5 s: one window
    calls_per_minute: float = 15.0
    scape_snr_db: tuple[float, float] = (-5.0, 10.0)
    n_background: int = bounded(40, lo=1)
    background_s: float = 10.0
    # focal validation split (by recording)
    valid_frac: float = bounded(0.2, lo=0, hi=1, lo_open=True, hi_open=True)
    # DT data pipeline (benchmark defaults)
    class_limit: int = bounded(600, lo=1)
    event_limit: int = bounded(5, lo=1)
    # front end, every MelConfig field, set with dotted overrides (``--set mel.n_mels=128``). ``mel.sample_rate`` is
    # the rate of all the audio (the synthetic benchmark is rendered at it; the augmentations run at it). The
    # benchmark masks 100 of 513 bins / 100 of 501 frames; same fractions here.
    mel: MelConfig = MelConfig(
        sample_rate=16_000, n_fft=512, hop_length=256, n_mels=64, freq_mask=50, time_mask=62
    )
    # model and optimisation (equal for every arm)
    model: str = bounded("cnn", choices=("cnn", "efficientnet", "convnext", "ast"))
    model_size: str = bounded("toy", choices=("toy", "paper"))  # for the transformers families
    channels: tuple[int, ...] = (16, 32, 64, 64)
    # every arm's training (``--set train.steps=1500``, ``--set train.augment.p_mix=0.5``); train.extension_time
    # also widens the focal-validation events; train.augment is every arm's augmentation (arm C: p_background = 0)
    # and runs at mel.sample_rate. The per-arm decoding and the seed are set in one_seed (defaults here).
    train: BirdTrainConfig = BirdTrainConfig(
        steps=600,
        batch_size=32,
        lr=1e-3,
        weight_decay=5e-4,
        extension_time=8.0,
        augment=AugmentConfig(sample_rate=16_000),
    )
    arms: tuple[str, ...] = bounded(("A", "B", "C"), choices=tuple(ARMS), each=True)

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (tuples element-wise); below: order, nesting, arms
        for name in ("focal_duration", "focal_bounds"):
            low, high = v = getattr(self, name)
            if high < low:
                raise ValueError(f"{name} must be (low >= 5 s, high >= low), got {v!r}")
        check_nested(self, "mel", MelConfig)
        check_nested(self, "train", BirdTrainConfig, ("decoding", "seed"), "set per arm and seed in one_seed")
        if self.train.augment.sample_rate != self.mel.sample_rate:
            raise ValueError(
                f"train.augment.sample_rate must equal mel.sample_rate (the audio's rate), got "
                f"{self.train.augment.sample_rate!r} and {self.mel.sample_rate!r}"
            )
        if not {"A", "B", "C"} <= set(self.arms):
            raise ValueError(
                f"arms must include 'A', 'B' and 'C' (the claims compare them), got {self.arms!r}"
            )


PRESETS = {
    "smoke": Config(
        seeds=1,
        n_species=4,
        focal_per_species=6,
        focal_lengths="uniform",  # plumbing check: short files
        focal_duration=(8.0, 10.0),
        max_phrases=4,
        n_soundscapes=2,
        soundscape_s=30.0,
        n_background=6,
        background_s=6.0,
        mel=replace(Config.mel, n_mels=32, hop_length=512, time_mask=31),
        channels=(8, 16, 16, 16),
        train=replace(Config.train, steps=12, batch_size=16),
    ),
    "quick": Config(
        seeds=3,
        n_species=10,
        focal_per_species=16,
        n_soundscapes=16,
        mel=replace(Config.mel, n_mels=32, hop_length=512, time_mask=31),
        channels=(8, 16, 32, 64),
        train=replace(Config.train, steps=240, batch_size=32),
    ),
    "full": Config(
        seeds=3,
        n_species=50,
        focal_per_species=30,
        n_soundscapes=40,
        mel=replace(
            Config.mel,
            sample_rate=32_000,
            n_fft=1024,
            hop_length=320,
            n_mels=128,
            freq_mask=100,
            time_mask=100,
        ),
        model="efficientnet",
        model_size="paper",
        # steps: ≈ 30 epochs of the ~3,200 event rows at batch 64
        train=replace(
            Config.train, steps=1500, batch_size=64, lr=5e-4, augment=AugmentConfig(sample_rate=32_000)
        ),
        n_background=200,
        device="auto",
    ),
}
