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

from iclr25.common.seeding import derive_seed

from .data import random_crop
from .sparsity import DSTConfig, DynamicSparseTraining


@dataclass(frozen=True)
class ClassifierTrainConfig:
    """SGD recipe (README, "Reproduction"): momentum 0.9, lr 0.05 with per-step cosine decay, wd 5e-4, batch 64, crop pad 2."""

    epochs: int = 30
    batch_size: int = 64
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 5e-4
    crop_pad: int = 2

    def __post_init__(self) -> None:
        for k in ("epochs", "batch_size"):
            v = getattr(self, k)
            if not isinstance(v, int) or v < 1:
                raise ValueError(f"{k} must be an int >= 1, got {v!r}")
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr!r}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum!r}")
        if self.weight_decay < 0 or self.crop_pad < 0:
            raise ValueError(
                f"weight_decay and crop_pad must be >= 0, got {self.weight_decay!r}, {self.crop_pad!r}"
            )


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
