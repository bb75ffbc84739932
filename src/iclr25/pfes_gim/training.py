"""Training with point labels (batch size 1, pseudo-labels rebuilt every epoch), inference, and LOSO evaluation.

The paper's recipe (values from the released code's README command and ``main.py``): Adam (lr 2e-5, weight
decay 0.1), StepLR(30, 0.5), 100 epochs, one video per step; pseudo-labels from :func:`pseudo_labels_for_epoch`
with the model's current (detached) outputs. Paper location: not confirmed — these values are read from the
released code, not from the paper's implementation-details section, which could not be read here (issue #39).

:func:`evaluate_loso` reports the model after a *fixed* number of epochs for every held-out subject (the
honest protocol). The released code instead keeps, per subject, the epoch with the best F1 *on that test
subject*; that optimistic number is available as ``best_epoch`` and is labelled as such.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
import torch

from ..common.fields import bounded, check_fields
from .data import Video
from .evaluation import SpottingCounts, loso_splits, video_counts
from .losses import LossConfig, spotting_loss
from .model import SpottingModel
from .proposals import DatasetProfile, generate_proposals, get_profile
from .pseudo_labels import GIMConfig, pseudo_labels_for_epoch


@dataclass(frozen=True)
class SpottingTrainConfig:
    """Optimisation and supervision settings of :func:`fit` (defaults: the paper's training recipe — Adam lr 2e-5,
    weight decay 0.1, StepLR(30, 0.5), 100 epochs, batch 1; pseudo-labels hard → medium → GIM)."""

    epochs: int = bounded(100, lo=1)
    lr: float = bounded(2e-5, lo=0, lo_open=True)
    weight_decay: float = bounded(0.1, lo=0)
    step_size: int = bounded(30, lo=1)
    gamma: float = bounded(0.5, lo=0, hi=1, lo_open=True)
    # "gim" (hard → medium → GIM schedule) or "hard" (hard windows throughout)
    pseudo_labels: str = bounded("gim", choices=("gim", "hard"))
    loss: LossConfig = field(default_factory=LossConfig)
    gim: GIMConfig = field(default_factory=GIMConfig)
    device: str = "cpu"
    # frames per second of the videos; None = the rate the GIM constants are given at (CAS(ME)², 30 fps).
    # When set, ``gim`` is rescaled with GIMConfig.at_frame_rate (and evaluate_loso's profile likewise).
    frame_rate: float | None = bounded(None, kind=float, lo=0, lo_open=True, optional=True)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the nested config
        if not isinstance(self.gim, GIMConfig):
            raise ValueError(f"gim must be a GIMConfig, got {type(self.gim).__name__}")

    @property
    def gim_at_rate(self) -> GIMConfig:
        """``gim`` at the videos' frame rate (``gim`` itself when ``frame_rate`` is None)."""
        return self.gim if self.frame_rate is None else self.gim.at_frame_rate(self.frame_rate)


class TrainConfig(SpottingTrainConfig):
    """Deprecated alias of :class:`SpottingTrainConfig` (same fields); the method card's API example used it."""

    def __post_init__(self) -> None:
        warnings.warn(
            "TrainConfig is deprecated; use SpottingTrainConfig (same fields)",
            DeprecationWarning,
            stacklevel=3,
        )
        super().__post_init__()


def _x(video: Video, device) -> torch.Tensor:
    return torch.as_tensor(video.flat_features(), device=device)[None]


def fit(
    model: SpottingModel,
    videos: Sequence[Video],
    cfg: SpottingTrainConfig = SpottingTrainConfig(),
    seed: int = 0,
    on_epoch_end: Callable[[int, SpottingModel], None] | None = None,
) -> list[dict[str, float]]:
    """Train ``model`` in place on ``videos`` (points + classes only). Returns per-epoch mean losses."""
    if len(videos) == 0:
        raise ValueError("videos must not be empty")
    for v in videos:
        if v.flat_features().shape[1] != model.in_features:
            raise ValueError(
                f"video {v.name!r} has {v.flat_features().shape[1]} features per frame, the model expects "
                f"{model.in_features}"
            )
    dev = torch.device(cfg.device)
    model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.StepLR(opt, cfg.step_size, cfg.gamma)
    rng = np.random.default_rng(seed)
    xs = [_x(v, dev) for v in videos]
    gim = cfg.gim_at_rate
    history = []
    for itr in range(cfg.epochs):
        model.train()
        logs: dict[str, float] = {}
        for i in rng.permutation(len(videos)):
            v = videos[i]
            out = model(xs[i])
            a, q, f, g = out["intensity"][0], out["apex"][0], out["feat"][0], out["attn_feat"][0]
            pl = pseudo_labels_for_epoch(itr, a, g, v.points, v.classes, cfg.pseudo_labels, gim)
            losses = spotting_loss(a, q, f, pl, itr, cfg.loss)
            opt.zero_grad(set_to_none=True)
            losses["total"].backward()
            opt.step()
            for k, val in losses.items():
                logs[k] = logs.get(k, 0.0) + float(val.detach()) / len(videos)
        sched.step()
        history.append(logs)
        if on_epoch_end is not None:
            on_epoch_end(itr, model)
    return history


@torch.no_grad()
def predict(model: SpottingModel, video: Video) -> dict[str, np.ndarray]:
    """Eval-mode outputs of one video: ``intensity`` ``(T,)``, ``apex`` ``(T, 2)``, ``attn_feat`` ``(T, C)``."""
    model.eval()
    dev = next(model.parameters()).device
    out = model(_x(video, dev))
    return {k: out[k][0].cpu().numpy() for k in ("intensity", "apex", "attn_feat", "feat")}


def spot(
    model: SpottingModel,
    videos: Sequence[Video],
    profile: str | DatasetProfile = "CASME2",
    frame_rate: float | None = None,
) -> list[np.ndarray]:
    """Detections ``(n, 4)`` ``[start, end, class, score]`` per video; ``frame_rate`` (fps) rescales the
    profile's length limits from the 30 fps they are given at (:meth:`DatasetProfile.at_frame_rate`)."""
    prof = get_profile(profile, frame_rate)
    return [generate_proposals(o["intensity"], o["apex"], prof) for o in (predict(model, v) for v in videos)]


def counts(dets: Sequence[np.ndarray], videos: Sequence[Video], convention: str = "frames") -> SpottingCounts:
    total = SpottingCounts()
    for d, v in zip(dets, videos, strict=True):
        if v.segments is None:
            raise ValueError(f"video {v.name!r} has no ground-truth segments to evaluate against")
        total = total + video_counts(d, v.segments, v.gt_classes, 0.5, convention)
    return total


def evaluate_loso(
    videos: Sequence[Video],
    make_model: Callable[[], SpottingModel],
    cfg: SpottingTrainConfig = SpottingTrainConfig(),
    profile: str | DatasetProfile = "CASME2",
    seed: int = 0,
    subjects: Sequence[str] | None = None,
    track_epochs: bool = False,
    convention: str = "frames",
) -> dict:
    """Leave-one-subject-out: train on all other subjects for ``cfg.epochs`` epochs, spot the held-out one.

    Returns ``{'fixed_epoch': summary, 'per_subject': {...}}`` and, with ``track_epochs``, also
    ``'best_epoch'``: the released code's protocol (per subject the epoch with the best F1 on the *test*
    subject) — optimistic, reported only beside the fixed-epoch number.
    """
    subj = list(subjects) if subjects is not None else [v.subject or v.name for v in videos]
    prof = get_profile(profile, cfg.frame_rate)
    fixed = SpottingCounts()
    best = SpottingCounts()
    per_subject: dict[str, dict] = {}
    per_subject_best: dict[str, dict] = {}
    for k, (s, tr, te) in enumerate(loso_splits(subj)):
        torch.manual_seed(seed * 1000 + k)
        model = make_model()
        test = [videos[i] for i in te]
        epoch_counts: list[SpottingCounts] = []

        def hook(itr: int, m: SpottingModel, test=test, epoch_counts=epoch_counts) -> None:
            if track_epochs:
                epoch_counts.append(counts(spot(m, test, prof), test, convention))

        fit(model, [videos[i] for i in tr], cfg, seed=seed * 1000 + k, on_epoch_end=hook)
        c = counts(spot(model, test, prof), test, convention)
        fixed = fixed + c
        per_subject[s] = c.summary()
        if track_epochs:
            f1s = [e.f1() if e.f1() == e.f1() else -1.0 for e in epoch_counts]
            chosen = epoch_counts[int(np.argmax(f1s))]
            best = best + chosen
            per_subject_best[s] = chosen.summary()
    out = {"fixed_epoch": fixed.summary(), "per_subject": per_subject}
    if track_epochs:
        out["best_epoch"] = best.summary()
        out["per_subject_best_epoch"] = per_subject_best
    return out


SEED_THREADS = 1  # torch and BLAS threads inside one seed, whatever the process uses (see the method card)


@contextmanager
def pinned_threads(n: int = SEED_THREADS):
    """Run a block with ``n`` torch intra-op threads and ``n`` BLAS/OpenMP threads, then restore both.

    The training here is chaotic in the float rounding: a different intra-op thread count changes the
    reduction order of the convolutions and moves a seed's spotting F1 by up to ~0.2 (method card,
    "Environment dependence"). Pinning makes a seed's numbers independent of ``threads``, ``--jobs`` and how the
    library is called (``run`` directly or through the run path)."""
    from threadpoolctl import threadpool_limits

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(n):
            yield
    finally:
        torch.set_num_threads(old)
