"""A compact supervised training loop with an optional DST engine (dense when ``dst`` is None).

Random streams are separate and named (``iclr25.common.seeding.derive_seed``): ``init`` (weights), ``data``
(order and crops) and ``mask`` (the DST engine), so turning sparsity on never shifts the data order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from iclr25.common.fields import bounded, check_fields
from iclr25.common.seeding import derive_seed

from .data import random_crop
from .sparsity import DSTConfig, DynamicSparseTraining


@dataclass(frozen=True)
class ClassifierTrainConfig:
    """SGD recipe (README, "Reproduction"): momentum 0.9, lr 0.05 with per-step cosine decay, wd 5e-4, batch 64, crop pad 2."""

    epochs: int = bounded(30, lo=1)
    batch_size: int = bounded(64, lo=1)
    lr: float = bounded(0.05, lo=0, lo_open=True)
    momentum: float = bounded(0.9, lo=0, hi=1, hi_open=True)
    weight_decay: float = bounded(5e-4, lo=0)
    crop_pad: int = bounded(2, lo=0)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above


def train_classifier(
    make_model: Callable[[], nn.Module],
    x_train: np.ndarray,
    y_train: np.ndarray,
    cfg: ClassifierTrainConfig,
    seed: int,
    dst: DSTConfig | None = None,
    mean: float = 0.0,
    std: float = 1.0,
    device: str | torch.device = "cpu",
) -> tuple[nn.Module, DynamicSparseTraining | None, dict]:
    """Train ``make_model()`` on uint8 images ``(N, H, W, 3)``; returns ``(model, engine, info)``."""
    n = x_train.shape[0]
    steps_per_epoch = math.ceil(n / cfg.batch_size)
    total = cfg.epochs * steps_per_epoch
    torch.manual_seed(derive_seed(seed, "init"))  # the same initial weights for every arm of a seed
    model = make_model().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
    engine = (
        DynamicSparseTraining(model, opt, dst, total, seed=derive_seed(seed, "mask"))
        if dst is not None
        else None
    )
    g = torch.Generator().manual_seed(derive_seed(seed, "data"))
    x = torch.from_numpy(np.ascontiguousarray(x_train)).permute(0, 3, 1, 2).float().div(255.0).to(device)
    y = torch.as_tensor(y_train, dtype=torch.long, device=device)
    losses = []
    model.train()
    for _ in range(cfg.epochs):
        perm = torch.randperm(n, generator=g).to(device)
        for i in range(0, n, cfg.batch_size):
            idx = perm[i : i + cfg.batch_size]
            xb = (random_crop(x[idx], cfg.crop_pad, g) - mean) / std
            loss = nn.functional.cross_entropy(model(xb), y[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if engine is None:
                opt.step()
            else:
                engine.step()  # masked step + topology update every ΔT
            sched.step()
            losses.append(float(loss.detach()))
    info = {"steps": total, "final_loss": float(np.mean(losses[-steps_per_epoch:]))}
    if engine is not None:
        info["density"] = engine.density()
        info["updates"] = len(engine.history)
    return model, engine, info
