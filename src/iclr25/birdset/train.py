"""One ``train(...)`` / ``evaluate(...)`` runner for any model on log-mel inputs (paper §4 "Training").

Training rows are events (after :func:`~iclr25.birdset.events.map_events` and smart sampling). Each step draws
a batch, decodes one window per row — ``decoding="event"``: ``EventDecoding`` (event widened to
``extension_time``, random 5-s window inside); ``"first"``: the first 5 s of the file; ``"random"``: a random 5 s
of the file ignoring events — applies the waveform augmentations, the mel front end (SpecAugment in train mode)
and minimises BCE-with-logits on multi-hot targets with AdamW, a cosine schedule with 5 % linear warm-up and
gradient clipping at 0.5 (the benchmark's DT settings). Evaluation decodes fixed windows without augmentation and
returns cmAP / cmAP5 / pcmAP / mAP / AUROC / T1 / T3 (optionally through a class mask).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
import torch
from torch import nn

from ..common.fields import bounded, check_fields
from .audio import AudioCache
from .augment import AugmentConfig, augment_batch
from .events import event_windows
from .metrics import evaluate_scores

__all__ = ["BirdTrainConfig", "train", "predict", "evaluate", "decode_batch"]

DECODINGS = ("event", "first", "random")


@dataclass(frozen=True)
class BirdTrainConfig:
    """Optimisation and windowing of :func:`train` (paper §4 "Training"; the benchmark's DT settings): AdamW,
    cosine schedule with ``warmup_frac`` linear warm-up, gradient clipping, the decoding rule of the training
    windows (``event`` / ``first`` / ``random``) with its event ``extension_time``, and the waveform
    augmentations (:class:`~iclr25.birdset.augment.AugmentConfig`)."""

    steps: int = bounded(1000, lo=1)
    batch_size: int = bounded(32, lo=1)
    lr: float = bounded(5e-4, lo=0, lo_open=True)  # AdamW, the benchmark's CNN DT configs
    weight_decay: float = bounded(5e-4, lo=0)
    warmup_frac: float = bounded(0.05, lo=0, hi=1, hi_open=True)
    grad_clip: float = bounded(0.5, lo=0, lo_open=True)
    decoding: str = bounded("event", choices=DECODINGS)
    # EventDecoding extension in the DT experiment configs (6 s class default)
    extension_time: float = bounded(8.0, lo=0)
    clip_seconds: float = bounded(5.0, lo=0, lo_open=True)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    seed: int = bounded(0, lo=0)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the nested config
        if not isinstance(self.augment, AugmentConfig):
            raise ValueError(f"augment must be an AugmentConfig, got {type(self.augment).__name__}")


def cosine_with_warmup(warmup: int, total: int):
    """LR multiplier: linear warm-up over ``warmup`` steps, then cosine decay to 0 at ``total`` steps
    (``transformers.get_cosine_schedule_with_warmup``, as in the benchmark's configs)."""

    def f(step: int) -> float:
        if step < warmup:
            return step / max(1, warmup)
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * (step - warmup) / max(1, total - warmup))))

    return f


def _check_rows(rows: pd.DataFrame, targets: np.ndarray) -> None:
    for col in ("filepath", "event_start", "event_end", "duration"):
        if col not in rows.columns:
            raise ValueError(f"rows must have a {col!r} column, got {list(rows.columns)}")
    if targets.ndim != 2 or len(targets) != len(rows):
        raise ValueError(f"targets must be (rows={len(rows)}, classes), got shape {targets.shape}")


def decode_batch(
    rows: pd.DataFrame,
    audio: AudioCache,
    decoding: str,
    clip_seconds: float,
    extension_time: float,
    rng: np.random.Generator,
) -> torch.Tensor:
    """(batch, samples) waveforms for training rows under a decoding rule."""
    d = rows["duration"].to_numpy(float)
    if decoding == "event":
        s, e = event_windows(
            rows["event_start"].to_numpy(float),
            rows["event_end"].to_numpy(float),
            d,
            extension_time,
            clip_seconds,
            rng,
        )
    elif decoding == "first":
        s, e = np.zeros(len(d)), np.minimum(d, clip_seconds)
    else:
        s = rng.random(len(d)) * np.maximum(d - clip_seconds, 0.0)
        e = np.minimum(s + clip_seconds, d)
    waves = [audio.window(p, a, b, clip_seconds) for p, a, b in zip(rows["filepath"], s, e)]
    return torch.from_numpy(np.stack(waves))


def _check_width(logits: torch.Tensor, n: int) -> None:
    if logits.shape[1] != n:
        raise ValueError(
            f"the label list has {n} classes but the model outputs {logits.shape[1]} logits; build the head with "
            f"{n} outputs or evaluate through a class mask"
        )


def train(
    model: nn.Module,
    frontend: nn.Module,
    rows: pd.DataFrame,
    targets: np.ndarray,
    audio: AudioCache,
    cfg: BirdTrainConfig,
    bank: np.ndarray | None = None,
    device: str | torch.device = "cpu",
) -> dict:
    """Train ``model`` in place; returns ``{"loss": [per-step loss], "examples": n}``."""
    targets = np.asarray(targets, dtype=np.float32)
    _check_rows(rows, targets)
    if len(rows) == 0:
        raise ValueError("rows must hold at least one training event")
    rng = np.random.default_rng(cfg.seed)
    g = torch.Generator().manual_seed(cfg.seed)
    bank_t = None if bank is None else torch.as_tensor(bank, dtype=torch.float32)
    model.to(device).train()
    frontend.to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, cosine_with_warmup(int(cfg.warmup_frac * cfg.steps), cfg.steps)
    )
    loss_fn = nn.BCEWithLogitsLoss()
    aug = cfg.augment
    sr = getattr(getattr(frontend, "cfg", None), "sample_rate", None)
    if isinstance(sr, int) and sr != aug.sample_rate:  # the clips' rate is the front end's
        aug = replace(aug, sample_rate=sr)
    order, pos, losses = rng.permutation(len(rows)), 0, []
    for _ in range(cfg.steps):
        if pos + cfg.batch_size > len(order):  # reshuffle every epoch
            order, pos = rng.permutation(len(rows)), 0
        idx = order[pos : pos + cfg.batch_size]
        pos += cfg.batch_size
        wave = decode_batch(rows.iloc[idx], audio, cfg.decoding, cfg.clip_seconds, cfg.extension_time, rng)
        y = torch.from_numpy(targets[idx])
        wave, y = augment_batch(wave, y, aug, bank_t, g, validate=False)
        x = frontend(wave.to(device), generator=g)
        logits = model(x)
        _check_width(logits, y.shape[1])
        loss = loss_fn(logits, y.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
    return {"loss": losses, "examples": cfg.steps * cfg.batch_size}


@torch.no_grad()
def predict(
    model: nn.Module,
    frontend: nn.Module,
    audio: AudioCache,
    filepaths,
    starts,
    ends,
    clip_seconds: float = 5.0,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
) -> torch.Tensor:
    """Logits (windows, classes) for fixed windows (no augmentation, eval mode)."""
    model.to(device).eval()
    frontend.to(device).eval()
    fp, s, e = list(filepaths), np.asarray(starts, float), np.asarray(ends, float)
    out = []
    for i in range(0, len(fp), batch_size):
        w = np.stack(
            [
                audio.window(p, a, b, clip_seconds)
                for p, a, b in zip(fp[i : i + batch_size], s[i : i + batch_size], e[i : i + batch_size])
            ]
        )
        out.append(model(frontend(torch.from_numpy(w).to(device))).float().cpu())
    model.train()
    frontend.train()
    return torch.cat(out)


def evaluate(
    model: nn.Module,
    frontend: nn.Module,
    audio: AudioCache,
    windows: pd.DataFrame,
    targets: np.ndarray,
    mask=None,
    batch_size: int = 64,
    device: str | torch.device = "cpu",
) -> dict[str, float]:
    """Benchmark metrics on fixed windows (``windows``: filepath, start_time, end_time; ``targets`` multi-hot).

    ``mask``: class mask (indices of the test classes among the model's outputs) for MT/LT models.
    """
    for col in ("filepath", "start_time", "end_time"):
        if col not in windows.columns:
            raise ValueError(f"windows must have a {col!r} column, got {list(windows.columns)}")
    logits = predict(
        model,
        frontend,
        audio,
        windows["filepath"],
        windows["start_time"],
        windows["end_time"],
        batch_size=batch_size,
        device=device,
    )
    t = torch.as_tensor(np.asarray(targets))
    if mask is None:
        _check_width(logits, t.shape[1])
    return evaluate_scores(logits, t, mask)
