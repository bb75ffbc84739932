"""SpottingModel: a per-frame backbone and the paper's two heads.

Paper (ICLR 2025; arXiv 2511.16952): the **two-branch framework** — a class-agnostic expression intensity branch
(supervised by GIM's soft pseudo-labels) and a class-aware apex classification branch that tells macro- from
micro-expressions from their pseudo-apex frames; at inference the two work independently. Layer shapes, dropout
and initialisation follow the released code (``model.py::CO2``).

Paper location: the two-branch framework and both branches are named in the abstract of arXiv 2511.16952
(https://arxiv.org/html/2511.16952) and of the ICLR 2025 paper; the section describing the heads is not
confirmed (its text could not be read here, issue #39), so no § / Eq. is cited.

* Class-agnostic intensity branch: ``G = Dropout(LeakyReLU_0.2(Conv1x1(F)))`` (attention features),
  ``a_t = σ(Dropout(Conv1x1_{C→1}(G)))``.
* Class-aware apex branch: ``q_t = σ(Dropout(Conv1x1_{C→2}(F)))`` — "is a MaE apex", "is a ME apex".

Dropout 0.7, Kaiming-uniform weights and zero biases as in the released code. The backbone is any
``nn.Module`` mapping ``(B, T, D_in)`` to ``(B, T, C)``; :class:`ConvBackbone` (dilated 1-D convolutions) is the
default. ROI-flow windows ``(B, T, W, R, 2)`` are flattened per frame before the backbone.
"""

from __future__ import annotations

import torch
from torch import nn


class ConvBackbone(nn.Module):
    """``layers`` 1-D conv blocks (kernel 5, the second dilated ×2), BatchNorm + LeakyReLU: ``(B,T,D) → (B,T,C)``."""

    def __init__(self, in_features: int, channels: int = 64, layers: int = 3, kernel: int = 5):
        super().__init__()
        if in_features < 1 or channels < 1 or layers < 1 or kernel < 1 or kernel % 2 == 0:
            raise ValueError(
                f"need in_features, channels, layers >= 1 and an odd kernel, got {in_features}, {channels}, "
                f"{layers}, {kernel}"
            )
        blocks: list[nn.Module] = []
        d_in = in_features
        for i in range(layers):
            dil = 2 if i == 1 else 1
            blocks += [
                nn.Conv1d(d_in, channels, kernel, padding=dil * (kernel // 2), dilation=dil),
                nn.BatchNorm1d(channels),
                nn.LeakyReLU(0.2),
            ]
            d_in = channels
        self.net = nn.Sequential(*blocks)
        self.out_features = channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x.transpose(1, 2)).transpose(1, 2)


def _kaiming(m: nn.Module) -> None:
    if isinstance(m, (nn.Conv1d, nn.Linear)):
        nn.init.kaiming_uniform_(m.weight)
        if m.bias is not None:
            nn.init.zeros_(m.bias)


class SpottingModel(nn.Module):
    """Backbone + intensity branch + apex branch.

    ``forward(x)`` with ``x`` of shape ``(B, T, D)``, ``(T, D)`` or ``(B, T, W, R, 2)`` returns a dict:
    ``feat`` ``(B, T, C)`` backbone features F, ``attn_feat`` ``(B, T, C)`` G, ``intensity`` ``(B, T)`` a,
    ``apex`` ``(B, T, 2)`` q.
    """

    def __init__(
        self,
        in_features: int,
        backbone: nn.Module | None = None,
        feat_dim: int | None = None,
        dropout: float = 0.7,
    ):
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.in_features = int(in_features)
        self.backbone = backbone if backbone is not None else ConvBackbone(in_features)
        c = feat_dim or getattr(self.backbone, "out_features", None)
        if c is None:
            raise ValueError("feat_dim is required when the backbone has no 'out_features' attribute")
        self.attn_feature = nn.Sequential(nn.Conv1d(c, c, 1), nn.LeakyReLU(0.2), nn.Dropout(dropout))
        self.attention = nn.Sequential(nn.Conv1d(c, 1, 1), nn.Dropout(dropout), nn.Sigmoid())
        self.apex_classifier = nn.Sequential(nn.Conv1d(c, 2, 1), nn.Dropout(dropout), nn.Sigmoid())
        for head in (self.attn_feature, self.attention, self.apex_classifier):
            head.apply(_kaiming)

    def forward(self, x: torch.Tensor) -> dict[str, torch.Tensor]:
        if x.ndim == 2:
            x = x[None]
        if x.ndim == 5:
            x = x.reshape(x.shape[0], x.shape[1], -1)
        if x.ndim != 3 or x.shape[-1] != self.in_features:
            raise ValueError(
                f"x must have shape (B, T, {self.in_features}) (or (B, T, W, R, 2) flattening to it), "
                f"got {tuple(x.shape)}"
            )
        feat = self.backbone(x)  # (B, T, C)
        f = feat.transpose(1, 2)
        g = self.attn_feature(f)
        a = self.attention(g)[:, 0]  # (B, T)
        q = self.apex_classifier(f).transpose(1, 2)  # (B, T, 2)
        return {"feat": feat, "attn_feat": g.transpose(1, 2), "intensity": a, "apex": q}
