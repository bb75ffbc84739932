"""GIM — Gaussian-based Instance-adaptive intensity Modelling for point-supervised facial expression spotting.

Deng, Hayashi, Nagahara, ICLR 2025 ("Gaussian-Based Instance-Adaptive Intensity Modeling for Point-Supervised
Facial Expression Spotting"); extended version arXiv 2511.16952 (https://arxiv.org/abs/2511.16952).

Training data give one frame per expression instance (and its class, macro- or micro-expression). A
two-branch model predicts a class-agnostic per-frame intensity and class-aware apex scores. GIM turns each
point into a soft intensity target every epoch: it finds a pseudo-apex near the point from the current
intensity, estimates the instance's duration from how many nearby frames are reliably "expressive" (a
threshold that decays with the epoch), and places a Gaussian in feature space centred on the pseudo-apex.
An intensity-aware contrastive loss (IAC) pulls frames of the same class together with weights set by their
pseudo intensities. At test time intervals come from multi-threshold grouping of the intensity, classified
by the apex branch, and are evaluated with F1 at IoU ≥ 0.5 under leave-one-subject-out.

Public API::

    from iclr25.pfes_gim import SpottingModel, SpottingTrainConfig, fit, spot, make_synthetic_dataset
    videos = make_synthetic_dataset(30, seed=0)
    model = SpottingModel(in_features=12); fit(model, videos, SpottingTrainConfig(epochs=30, lr=1e-3))
    dets = spot(model, test_videos, profile="synthetic")      # [start, end, class, score] per video

Configs: :class:`SpottingTrainConfig` (optimiser, epochs, pseudo-label mode; ``TrainConfig`` is its deprecated
alias), :class:`LossConfig` (loss weights), :class:`GIMConfig` (GIM constants and schedule),
:class:`DatasetProfile` (proposal post-processing), :class:`SyntheticSpec` (synthetic videos).
"""

from .data import (
    CLASS_NAMES,
    MAE,
    ME,
    SyntheticSpec,
    Video,
    default_subject,
    load_released,
    make_synthetic_dataset,
    make_synthetic_video,
    safe_load_npy,
)
from .evaluation import SpottingCounts, loso_splits, spotting_f1, video_counts
from .losses import LossConfig, focal_apex_loss, iac_loss, negatives, spotting_loss
from .model import ConvBackbone, SpottingModel
from .proposals import PROFILES, DatasetProfile, candidates, generate_proposals, interval_iou, nms, soft_nms
from .pseudo_labels import (
    GIMConfig,
    PseudoLabels,
    gim_duration,
    gim_pseudo_labels,
    hard_pseudo_labels,
    medium_pseudo_labels,
    pseudo_labels_for_epoch,
    reliability_threshold,
)
from .training import SpottingTrainConfig, TrainConfig, counts, evaluate_loso, fit, predict, spot

__all__ = [
    "CLASS_NAMES",
    "MAE",
    "ME",
    "PROFILES",
    "ConvBackbone",
    "DatasetProfile",
    "GIMConfig",
    "LossConfig",
    "PseudoLabels",
    "SpottingCounts",
    "SpottingModel",
    "SpottingTrainConfig",
    "SyntheticSpec",
    "TrainConfig",  # deprecated alias of SpottingTrainConfig
    "Video",
    "candidates",
    "counts",
    "default_subject",
    "evaluate_loso",
    "fit",
    "focal_apex_loss",
    "generate_proposals",
    "gim_duration",
    "gim_pseudo_labels",
    "hard_pseudo_labels",
    "iac_loss",
    "interval_iou",
    "load_released",
    "loso_splits",
    "make_synthetic_dataset",
    "make_synthetic_video",
    "medium_pseudo_labels",
    "negatives",
    "nms",
    "predict",
    "pseudo_labels_for_epoch",
    "reliability_threshold",
    "safe_load_npy",
    "soft_nms",
    "spot",
    "spotting_f1",
    "spotting_loss",
    "video_counts",
]
