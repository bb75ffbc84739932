"""A block-structured tiny ResNet (stem + basic blocks + linear head) for the budgeted-CL experiments.

The official code freezes whole "blocks" (``MODEL_BLOCK_DICT``: stem, residual blocks, head = pool + fc). Here a
block-structured model is anything exposing ``blocks: nn.ModuleList`` (freezable, in forward order),
``head: nn.Linear`` (never frozen) and ``features(x)`` (the penultimate features x_L fed to the head).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F


class BasicBlock(nn.Module):
    """ResNet basic block: conv1-BN-ReLU, conv2-BN, + shortcut, ReLU. ``conv2`` is SAR's gradient target layer."""

    def __init__(self, c_in: int, c_out: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(c_in, c_out, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(c_out)
        self.relu1 = nn.ReLU()
        self.conv2 = nn.Conv2d(c_out, c_out, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(c_out)
        self.relu2 = nn.ReLU()
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or c_in != c_out:
            self.shortcut = nn.Sequential(
                nn.Conv2d(c_in, c_out, 1, stride, bias=False), nn.BatchNorm2d(c_out)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.relu1(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return self.relu2(h + self.shortcut(x))


class TinyResNet(nn.Module):
    """Stem conv (16 ch) + basic blocks (default 16-32-32-64, strides 1-2-1-2) + global pool + linear head.

    ≈ 0.1 M parameters for 1-channel 16×16 inputs and 10 classes (README, "Reproduction"). ``blocks[0]`` is the stem.
    The head has a fixed number of outputs (all classes of the benchmark); unseen classes are masked by the
    caller, which is equivalent to the official growing head (new rows start at their init, Adam moments 0).
    """

    def __init__(
        self,
        n_classes: int = 10,
        in_channels: int = 1,
        stem_channels: int = 16,
        widths: Sequence[int] = (16, 32, 32, 64),
        strides: Sequence[int] = (1, 2, 1, 2),
    ):
        super().__init__()
        if len(widths) != len(strides) or not widths:
            raise ValueError(
                f"widths and strides must be non-empty and of equal length, got {widths}, {strides}"
            )
        if n_classes < 2:
            raise ValueError(f"n_classes must be >= 2, got {n_classes}")
        stem = nn.Sequential(
            nn.Conv2d(in_channels, stem_channels, 3, 1, 1, bias=False),
            nn.BatchNorm2d(stem_channels),
            nn.ReLU(),
        )
        blocks: list[nn.Module] = [stem]
        c = stem_channels
        for w, s in zip(widths, strides, strict=True):
            blocks.append(BasicBlock(c, w, s))
            c = w
        self.blocks = nn.ModuleList(blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(c, n_classes)
        self.feature_dim = c

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """x_L: the pooled penultimate features, shape (batch, feature_dim)."""
        for b in self.blocks:
            x = b(x)
        return self.pool(x).flatten(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def block_parameters(model: nn.Module) -> list[list[nn.Parameter]]:
    """Parameters of each freezable block (``model.blocks``) followed by the head's as the last entry."""
    groups = [list(b.parameters()) for b in model.blocks]
    groups.append(list(model.head.parameters()))
    return groups


def sar_target_layers(model: nn.Module) -> list[nn.Conv2d]:
    """SAR's gradient target layers: the ``conv2`` convolution of every residual block (official choice)."""
    return [m.conv2 for m in model.modules() if isinstance(m, BasicBlock)]


def masked_logits(logits: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    """Logits of unseen classes set to -inf-like so softmax gives them exactly 0 (growing-head equivalent)."""
    return logits.masked_fill(~seen, torch.finfo(logits.dtype).min)


def cross_entropy_seen(logits: torch.Tensor, y: torch.Tensor, seen: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(masked_logits(logits, seen), y)
