"""The budgeted continual-learning reproduction's settings (README, "Reproduction"): the arm and stream names,
:class:`Config` (the digits stream), :class:`RealConfig` (Fashion-MNIST, ``real.py``) and their :data:`PRESETS`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from iclr25.common.fields import bounded
from iclr25.common.results import ExperimentConfig

from .runner import METHODS

ARMS = ("er", "vanilla", "sar", "al", "al_sar", "er_equal")
STREAMS = ("gaussian", "disjoint")
REAL_STREAMS = ("si_blurry", "gaussian", "disjoint")


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # claims use the first stream
    streams: tuple[str, ...] = bounded(("gaussian",), choices=STREAMS, each=True)
    arms: tuple[str, ...] = bounded(ARMS, choices=ARMS, each=True)
    # 0 = the whole 80 % training split as the stream; else a stratified-free prefix subset
    n_train: int = bounded(0, lo=0)
    sigma: float = 0.1  # Gaussian stream width (SDP, file tag sigma10)
    n_tasks: int = 5  # disjoint stream
    image_size: int = bounded(16, lo=1)
    stem_channels: int = 16
    widths: tuple[int, ...] = (16, 32, 32, 64)
    batch_size: int = bounded(16, lo=1)
    lr: float = 3e-4
    online_iter: float = 1.0
    eval_period: int = bounded(50, lo=1)
    # memory budget beyond the model's bytes (≈160 exemplars of 256 B)
    extra_bytes: int = bounded(40_960, lo=1)
    temperature: float = 0.125  # SAR T (ex.sh)
    k_coeff: float = 4.0  # SAR decay coefficient (ex.sh)
    grad_subsample: float = 5e-4  # paper 0.05 % of model params ("model"); code 1e-4 per layer ("layer")
    subsample_of: str = "model"
    unfreeze_rate: float = 0.5  # ex.sh
    exploration: str = "random"
    fisher: str = "per_sample"  # paper; "batch_mean" = official code
    stem_mode: str = "code"

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (tuples element-wise); below: rules across fields
        if "er_equal" in self.arms and "al_sar" not in self.arms:
            raise ValueError("arms: 'er_equal' needs 'al_sar' (its FLOPs budget), got " + str(self.arms))
        # the remaining method fields are validated by MethodConfig when the arms are built
        self.method("al_sar")

    def method(self, arm: str):
        base = METHODS["er" if arm == "er_equal" else arm]
        return dataclasses.replace(
            base,
            online_iter=self.online_iter,
            temperature=self.temperature,
            k_coeff=self.k_coeff,
            grad_subsample=self.grad_subsample,
            subsample_of=self.subsample_of,
            unfreeze_rate=self.unfreeze_rate,
            exploration=self.exploration,
            fisher=self.fisher,
            stem_mode=self.stem_mode,
        )


PRESETS = {
    "smoke": Config(
        seeds=1,
        streams=("gaussian",),
        arms=("vanilla", "sar", "al_sar", "er_equal"),
        n_train=120,
        eval_period=40,
        extra_bytes=40_960,
    ),
    # the claims use the official code's batch-mean Fisher estimator (its cost is what is charged: the squares of
    # the step's own gradients); the paper's per-sample estimator costs a large share of a step (see the report)
    "quick": Config(
        seeds=6, streams=("gaussian",), arms=("vanilla", "sar", "al_sar", "er_equal"), fisher="batch_mean"
    ),
    "full": Config(seeds=5, streams=("gaussian", "disjoint"), arms=ARMS, device="auto", fisher="batch_mean"),
}


@dataclass(frozen=True)
class RealConfig(Config):
    """The ``real`` preset's config: a Fashion-MNIST stream (``real.py``; issue #53). A subclass, so the quick preset
    keeps its fields and config hash. Per seed ``n_train_per_class`` training images of each class (drawn by the
    seed) form the stream, Si-Blurry by default (N = ``disjoint_ratio``, M = ``blurry_ratio``, ``n_tasks`` tasks);
    the test images are the first ``n_test_per_class`` of each class. ``n_train`` and ``image_size`` of the digits
    presets are not used (images stay 28×28)."""

    streams: tuple[str, ...] = bounded(("si_blurry",), choices=REAL_STREAMS, each=True)
    n_train_per_class: int = bounded(50, lo=1, hi=6000)
    n_test_per_class: int = bounded(50, lo=1, hi=1000)
    disjoint_ratio: float = bounded(0.5, lo=0, hi=1)  # Si-Blurry N
    blurry_ratio: float = bounded(0.1, lo=0, hi=1)  # Si-Blurry M

    def __post_init__(self) -> None:
        super().__post_init__()
        base = Config()
        for name in ("n_train", "image_size"):
            if getattr(self, name) != getattr(base, name):
                raise ValueError(
                    f"{name} is a field of the digits presets, not used by the real preset; leave it at "
                    f"{getattr(base, name)!r}, got {getattr(self, name)!r}"
                )


# quick's budget accounting on 28×28 images: model bytes + 160 exemplars' worth of bytes (quick: 40,960 B =
# 160 × 256 B 16×16 images; here 160 × 784 B); FLOPs counted per block of the same TinyResNet
PRESETS["real"] = RealConfig(
    seeds=4, arms=("vanilla", "sar", "al_sar", "er_equal"), fisher="batch_mean", extra_bytes=160 * 28 * 28
)
