"""The HGM reproduction's settings (README, "Reproduction"): :class:`Config` and its :data:`PRESETS` (read by
``experiment.py`` and ``report.py``; the views BACK / FRONT are the library's, :mod:`iclr25.hgm.training`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from iclr25.common.fields import bounded, check_nested
from iclr25.common.results import ExperimentConfig

from .model import HGMConfig

TRAINED_ARMS = ("image_only", "dual", "two_view")  # the arms train_model trains, in arm_steps order


@dataclass(frozen=True)
class Config(ExperimentConfig):
    n_train: int = bounded(300, lo=1)
    n_test: int = bounded(50, lo=1)
    # every trained model's HGM (and the refiner's channels), every HGMConfig field set with dotted overrides
    # (``--set model.heads=2``); model.image_size is also the rendered ToyHumans' size. feat_dim is its own field
    # (the presets keep it = channels[1]); num_vertices and use_body are set per body model and arm (training.build_model).
    model: HGMConfig = HGMConfig(
        image_size=32, splat_size=16, channels=(16, 32, 64), feat_dim=32, code_dim=16, heads=4, grid=16
    )
    num_points: int = bounded(16000, lo=1)
    pose_noise_deg: float = bounded(7.0, lo=0)
    steps: int = bounded(400, lo=1)  # step cap per trained model (identical for every arm)
    # CPU seconds of training per arm (identical for every arm); None = steps only
    budget_s: float | None = bounded(None, kind=float, lo=0, lo_open=True, optional=True)
    # steps of each trained arm (image_only, dual, two_view) in place of ``steps``: a step budget equal in
    # expectation to a CPU-second budget (measured on an idle machine), so a re-run on any CPU does the same work
    arm_steps: tuple[int, ...] | None = bounded(None, kind=int, lo=1, each=True, length=3, optional=True)
    refiner_steps: int = bounded(200, lo=1)
    refiner_budget_s: float | None = bounded(None, kind=float, lo=0, lo_open=True, optional=True)
    batch_size: int = bounded(4, lo=1)
    # supervision views per sample: inputs, back, random others (≥ 1 non-input view always)
    sup_views: int = bounded(3, lo=2, hi=12)
    # render the auxiliary sets G_I, G_S at 1/aux_downscale resolution in training
    aux_downscale: int = bounded(1, lo=1)
    lr: float = bounded(1e-3, lo=0, lo_open=True)
    # Chamfer uses the chamfer_frac most opaque merged Gaussians of each subject
    chamfer_frac: float = bounded(0.25, lo=0, hi=1, lo_open=True)
    # E3 (report-only; the released code's 20 Adam steps); 0 disables it
    body_refine_steps: int = bounded(20, lo=0)
    body_refine_lr: float = bounded(0.01, lo=0, lo_open=True)
    # E3 target silhouette = coarse alpha render > threshold
    body_refine_threshold: float = bounded(0.5, lo=0, hi=1, lo_open=True, hi_open=True)
    data_seed: int = bounded(1234)

    def steps_for(self, arm: str) -> int:
        """The step cap of trained arm ``arm`` (one of :data:`TRAINED_ARMS`): ``arm_steps`` when set, else
        ``steps``."""
        if arm not in TRAINED_ARMS:
            raise ValueError(f"arm must be one of {', '.join(TRAINED_ARMS)}, got {arm!r}")
        return self.steps if self.arm_steps is None else self.arm_steps[TRAINED_ARMS.index(arm)]

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above; below: the nested model, cross-field
        check_nested(
            self,
            "model",
            HGMConfig,
            ("num_vertices", "use_body"),
            "set per body model and arm where the models are built",
        )
        if self.model.image_size % (2 * self.aux_downscale):
            raise ValueError(
                f"aux_downscale must divide model.image_size/2; got {self.aux_downscale} for "
                f"{self.model.image_size}"
            )


PRESETS = {
    "smoke": Config(
        seeds=2,
        n_train=4,
        n_test=2,
        model=replace(Config.model, image_size=16, splat_size=4, channels=(8, 16, 16), feat_dim=16),
        num_points=2000,
        steps=2,
        refiner_steps=2,
        batch_size=2,
        aux_downscale=2,
        body_refine_steps=2,
    ),
    # Quick: equal compute per trained arm as a step budget: the steps each arm reached in 50 CPU-s (the refiner in
    # 10 CPU-s) on the idle 2-core Intel Xeon, seed 0 (2026-12-06, load 1.0–2.3): image-only 263, dual 139,
    # two-view 59, refiner 259 (≈ 185 CPU-s per seed with evaluation). Steps, not seconds, so a re-run does the
    # same work on any CPU and at any load (issue #50); `--set budget_s=50 refiner_budget_s=10 arm_steps=none
    # steps=100000 refiner_steps=100000` restores the CPU-second budgets.
    "quick": Config(
        seeds=4,
        n_train=100,
        n_test=16,
        num_points=8000,
        arm_steps=(263, 139, 59),
        refiner_steps=259,
        batch_size=4,
        sup_views=2,
        aux_downscale=2,
    ),
    "full": Config(
        seeds=3,
        n_train=300,
        n_test=50,
        steps=3000,
        refiner_steps=1000,
        batch_size=8,
        sup_views=4,
        device="cuda",
    ),
}
