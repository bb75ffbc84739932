"""The FreeVS reproduction's settings (README, "Reproduction"): :class:`Config` and its :data:`PRESETS` (read by
``experiment.py`` and ``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..common.fields import bounded, check_nested
from ..common.results import ExperimentConfig
from .model import EDMConfig
from .pseudo import OCCUPANCY_RULES


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: int = 3
    width: int = bounded(80, lo=2)
    height: int = bounded(32, lo=2)
    hfov_deg: float = bounded(90.0, lo=1, hi=179, lo_open=True, hi_open=True)
    n_frames: int = bounded(24, lo=1)
    n_train_scenes: int = bounded(12, lo=1)
    n_test_scenes: int = bounded(4, lo=1)
    # test clips start at these frames (each clip inside n_frames)
    test_starts: tuple[int, ...] = bounded((4, 10, 16), lo=0, each=True)
    clip_len: int = bounded(2, lo=1)
    beams: int = bounded(32, lo=1)
    azimuths: int = bounded(720, lo=1)
    window_n: int = bounded(2, lo=0)  # point window t − n … t + n
    occupancy_radius: int = bounded(2, lo=0)
    # dilate every projected object pixel (released); "written": drawn only
    occupancy: str = bounded("projected", choices=OCCUPANCY_RULES)
    shift_k: int = bounded(3, lo=0)  # viewpoint simulation: window centred at t ± k
    mismatch_ratio: float = bounded(0.5, lo=0, hi=1)  # the paper's; the ablation uses 0
    offsets: tuple[float, ...] = bounded((0.0, 1.0, 2.0, 3.0), kind=float, each=True)  # Δy; must hold 0 and 2
    channels: tuple[int, ...] = (8, 16, 32)
    cond_channels: int = bounded(8, lo=1)
    train_steps: int = bounded(250, lo=1)
    batch: int = bounded(8, lo=1)
    lr: float = bounded(2e-3, lo=0, lo_open=True)
    sample_steps: int = bounded(10, lo=1)
    guidance: float = bounded(2.0)
    # EDM preconditioning, training noise, pseudo-image noise and condition dropout of training and sampling: every
    # EDMConfig field, set with dotted overrides (``--set edm.drop_prob=0.1 --set edm.p_mean=-1.0``)
    edm: EDMConfig = EDMConfig()
    probe_steps: int = bounded(200, lo=0)
    # training curve: held-out PSNR measured at this many evenly spaced steps (0 = off)
    curve_points: int = bounded(6, lo=0)
    curve_clips: int = bounded(2, lo=0)  # held-out clips per monitored offset (Δy = 0 and 2 m) for the curve

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (tuples element-wise); below: rules across fields
        check_nested(self, "edm", EDMConfig)
        if any(s + self.clip_len > self.n_frames for s in self.test_starts):
            raise ValueError(
                f"test_starts must leave a clip of {self.clip_len} frames inside {self.n_frames} frames"
            )
        if 2.0 not in self.offsets or 0.0 not in self.offsets:
            raise ValueError(f"offsets must contain 0 and 2 (the claims' Δy), got {self.offsets}")


PRESETS = {
    "smoke": Config(
        seeds=2,
        n_frames=10,
        n_train_scenes=2,
        n_test_scenes=1,
        test_starts=(4,),
        train_steps=6,
        batch=2,
        sample_steps=2,
        probe_steps=5,
        azimuths=360,
        beams=16,
    ),
    # quick: 4 seeds run in two waves of two on 2 cores (`--jobs auto`). Measured on 2 idle cores: an Intel Xeon
    # (AVX512) took 489 s at 360 steps per variant; an AMD EPYC (AVX2) 489 s at 300 steps (24 s data + 2 waves ×
    # ≈ 234 CPU-s per seed, 170 of them training) — over the 8-minute budget on the slower machine; 270 steps
    # (README, "Measured").
    "quick": Config(seeds=4, train_steps=270),
    "full": Config(
        device="cuda",
        width=192,
        height=80,
        n_train_scenes=60,
        n_test_scenes=12,
        channels=(32, 64, 128),
        cond_channels=16,
        train_steps=20_000,
        batch=16,
        lr=5e-4,
        sample_steps=25,
        test_starts=(4, 6, 8, 10, 12, 14, 16, 18),
        probe_steps=2000,
    ),
}
