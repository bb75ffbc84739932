"""Small image classifiers built from scratch as plain ``nn.Module``s (no torchvision, nothing downloaded)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn


def _conv_bn(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


class SmallVGG(nn.Module):
    """VGG-style CNN of the reproduction (README): conv c1-c1-pool-c2-c2-pool-c3-pool, FC ``fc``-``num_classes``.

    ``widths=(32, 64, 128), fc=256`` is the reproduction's default network; the quick preset uses a narrower one.
    Input ``(B, 3, H, W)`` with ``H, W`` divisible by 8.
    """

    def __init__(
        self,
        widths: Sequence[int] = (32, 64, 128),
        fc: int = 256,
        num_classes: int = 10,
        image_size: int = 32,
    ):
        super().__init__()
        if len(widths) != 3 or any(int(w) < 1 for w in widths):
            raise ValueError(f"widths must be three positive ints, got {widths!r}")
        if image_size % 8:
            raise ValueError(f"image_size must be divisible by 8, got {image_size!r}")
        c1, c2, c3 = (int(w) for w in widths)
        self.features = nn.Sequential(
            *_conv_bn(3, c1), *_conv_bn(c1, c1), nn.MaxPool2d(2),
            *_conv_bn(c1, c2), *_conv_bn(c2, c2), nn.MaxPool2d(2),
            *_conv_bn(c2, c3), nn.MaxPool2d(2),
        )  # fmt: skip
        side = image_size // 8
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(c3 * side * side, fc), nn.ReLU(inplace=True), nn.Linear(fc, num_classes)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W) -> (B, classes)
        return self.classifier(self.features(x))


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """CIFAR-style ResNet-18 (3×3 stem, no max-pool), base width ``width`` (64 = the standard one)."""

    def __init__(self, num_classes: int = 10, width: int = 64):
        super().__init__()
        w = int(width)
        self.stem = nn.Sequential(
            nn.Conv2d(3, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)
        )
        layers, cin = [], w
        for i, cout in enumerate((w, 2 * w, 4 * w, 8 * w)):
            stride = 1 if i == 0 else 2
            layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))


class SmallResNet(nn.Module):
    """A small residual CNN (the ``real`` preset's, for 28×28 grayscale): a 3×3 stem of width ``c1``, then one
    :class:`BasicBlock` per width (``c1`` at stride 1, ``c2`` and ``c3`` at stride 2: 28 → 14 → 7), global
    average pooling and a linear classifier. ``in_channels`` 1 for grayscale."""

    def __init__(self, widths: Sequence[int] = (16, 32, 64), num_classes: int = 10, in_channels: int = 1):
        super().__init__()
        if len(widths) != 3 or any(int(w) < 1 for w in widths):
            raise ValueError(f"widths must be three positive ints, got {widths!r}")
        if int(in_channels) < 1:
            raise ValueError(f"in_channels must be a positive int, got {in_channels!r}")
        c1, c2, c3 = (int(w) for w in widths)
        self.stem = nn.Sequential(*_conv_bn(int(in_channels), c1))
        self.layers = nn.Sequential(BasicBlock(c1, c1, 1), BasicBlock(c1, c2, 2), BasicBlock(c2, c3, 2))
        self.fc = nn.Linear(c3, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, in_channels, H, W) -> (B, classes)
        h = self.layers(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(h, 1), 1))


ARCHS = ("vgg_small", "resnet18", "resnet_small")


def build_model(
    arch: str,
    num_classes: int = 10,
    widths: Sequence[int] = (32, 64, 128),
    fc: int = 256,
    in_channels: int = 3,
) -> nn.Module:
    """``arch``: ``vgg_small`` (the reproduction's CNN), ``resnet18`` (width = widths[0]) or ``resnet_small``
    (:class:`SmallResNet`, ``fc`` unused); ``in_channels`` is honoured by ``resnet_small`` only (the others take
    3-channel input)."""
    if arch == "vgg_small":
        return SmallVGG(widths, fc, num_classes)
    if arch == "resnet18":
        return ResNet18(num_classes, width=int(widths[0]))
    if arch == "resnet_small":
        return SmallResNet(widths, num_classes, in_channels)
    raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
