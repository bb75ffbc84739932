"""Classifiers on log-mel inputs (batch, 1, n_mels, frames) → logits (batch, classes).

* :class:`SmallCNN` — a ~60 k-parameter 4-block CNN for CPU-scale runs.
* :func:`hf_audio_model` — the benchmark's model families built from ``transformers`` configs without weights:
  EfficientNet (``google/efficientnet-b1``-style, 1 input channel), ConvNeXt (``convnext-base``-style,
  1 channel) and the Audio Spectrogram Transformer (AST). ``size="paper"`` gives the paper's dimensions,
  ``size="toy"`` a tiny version of the same architecture for tests.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

__all__ = ["SmallCNN", "hf_audio_model", "HFSpectrogramClassifier"]


class SmallCNN(nn.Module):
    """conv3×3-BN-ReLU-maxpool ×4 → global mean+max pooling → dropout → linear."""

    def __init__(self, n_classes: int, channels: tuple[int, ...] = (16, 32, 64, 64), dropout: float = 0.2):
        super().__init__()
        if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 1:
            raise ValueError(f"n_classes must be an int >= 1, got {n_classes!r}")
        if (
            not isinstance(channels, (tuple, list))
            or not channels
            or any(isinstance(c, bool) or not isinstance(c, int) or c < 1 for c in channels)
        ):
            raise ValueError(f"channels must be a non-empty tuple of positive ints, got {channels!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
        layers, c_in = [], 1
        for c in channels:
            layers += [
                nn.Conv2d(c_in, c, 3, padding=1, bias=False),
                nn.BatchNorm2d(c),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            c_in = c
        self.features = nn.Sequential(*layers)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(2 * c_in, n_classes)
        self.n_classes = n_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.ndim != 4 or x.shape[1] != 1:
            raise ValueError(
                f"x must be a (batch, 1, n_mels, frames) log-mel batch, got shape {tuple(x.shape)}"
            )
        h = self.features(x)  # (batch, C, M', T')
        h = torch.cat([h.mean((2, 3)), h.amax((2, 3))], 1)
        return self.head(self.dropout(h))


class HFSpectrogramClassifier(nn.Module):
    """Adapter: (batch, 1, n_mels, frames) → a transformers image/audio classifier → logits."""

    def __init__(self, model: nn.Module, kind: str, n_classes: int):
        super().__init__()
        self.model, self.kind, self.n_classes = model, kind, n_classes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.kind == "ast":
            return self.model(input_values=x[:, 0].transpose(1, 2)).logits  # AST wants (batch, frames, mels)
        return self.model(pixel_values=x).logits


def hf_audio_model(
    kind: str, n_classes: int, n_mels: int = 128, frames: int = 501, size: str = "toy"
) -> nn.Module:
    """A BirdSet model family from a ``transformers`` config (random init, no download)."""
    import transformers as tf

    if size not in ("toy", "paper"):
        raise ValueError(f"size must be 'toy' or 'paper', got {size!r}")
    if not isinstance(n_classes, int) or n_classes < 1:
        raise ValueError(f"n_classes must be an int >= 1, got {n_classes!r}")
    if kind == "efficientnet":
        kw = (
            {} if size == "paper" else {"width_coefficient": 0.1, "depth_coefficient": 0.2, "hidden_dim": 128}
        )
        cfg = tf.EfficientNetConfig(
            num_channels=1,
            image_size=max(n_mels, 32),
            num_labels=n_classes,
            problem_type="multi_label_classification",
            **kw,
        )
        if size == "paper":  # EfficientNet-B1 scaling
            cfg.width_coefficient, cfg.depth_coefficient, cfg.hidden_dim = 1.0, 1.1, 1280
        model = tf.EfficientNetForImageClassification(cfg)
    elif kind == "convnext":
        kw = (
            {"depths": [3, 3, 27, 3], "hidden_sizes": [128, 256, 512, 1024]}
            if size == "paper"
            else {"depths": [1, 1, 1, 1], "hidden_sizes": [8, 16, 24, 32]}
        )
        cfg = tf.ConvNextConfig(
            num_channels=1, num_labels=n_classes, problem_type="multi_label_classification", **kw
        )
        model = tf.ConvNextForImageClassification(cfg)
    elif kind == "ast":
        kw = (
            {}
            if size == "paper"
            else {
                "hidden_size": 32,
                "num_hidden_layers": 1,
                "num_attention_heads": 2,
                "intermediate_size": 64,
            }
        )
        cfg = tf.ASTConfig(
            num_mel_bins=n_mels,
            max_length=frames,
            num_labels=n_classes,
            problem_type="multi_label_classification",
            **kw,
        )
        model = tf.ASTForAudioClassification(cfg)
    else:
        raise ValueError(f"kind must be 'efficientnet', 'convnext' or 'ast', got {kind!r}")
    return HFSpectrogramClassifier(model, kind, n_classes)


def make_model(cfg: Any, n_classes: int) -> nn.Module:
    """The classifier of a run: :class:`SmallCNN` (``cfg.model == "cnn"``, ``cfg.channels``) or
    :func:`hf_audio_model` on 5-s log-mel inputs (``cfg.mel``, ``cfg.model_size``); ``cfg`` is any config with
    those fields (the experiment ``Config``)."""
    if cfg.model == "cnn":
        return SmallCNN(n_classes, cfg.channels)
    return hf_audio_model(cfg.model, n_classes, cfg.mel.n_mels, cfg.mel.n_frames(5.0), cfg.model_size)
