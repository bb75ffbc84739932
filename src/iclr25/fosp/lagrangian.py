"""Augmented Lagrangian for the cost constraint (SafeDreamer; Nocedal & Wright, Numerical Optimization, eq. 17.65).

For the constraint J_C ≤ d with violation g = J̃_C − d, multiplier λ and penalty c:

    cond = λ + c·g
    ψ(g) = λ·g + (c/2)·g²      if cond > 0
         = −λ² / (2c)          otherwise
    λ ← max(cond, 0),   c ← min(max(c·(1 + growth), c), 1)

ψ is differentiable in g (the actor minimises it); λ and c are updated without gradients after each actor step.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class AugmentedLagrangian(nn.Module):
    def __init__(self, multiplier_init: float = 1e-6, penalty_init: float = 5e-9, growth: float = 1e-5):
        super().__init__()
        for name, v in (
            ("multiplier_init", multiplier_init),
            ("penalty_init", penalty_init),
            ("growth", growth),
        ):
            if isinstance(v, bool) or not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if penalty_init <= 0:
            raise ValueError(f"penalty_init must be > 0, got {penalty_init!r}")
        self.growth = growth
        self.register_buffer("multiplier", torch.tensor(float(multiplier_init), dtype=torch.float64))
        self.register_buffer("penalty", torch.tensor(float(penalty_init), dtype=torch.float64))

    def psi(self, g: torch.Tensor) -> torch.Tensor:
        """ψ(g) with the current (λ, c); g is a scalar tensor (keeps its gradient)."""
        if not isinstance(g, torch.Tensor) or g.numel() != 1:
            raise ValueError(f"g must be a scalar tensor (the constraint violation), got {g!r}")
        lam, c = self.multiplier.to(g.dtype), self.penalty.to(g.dtype)
        cond = lam + c * g.detach()
        return torch.where(cond > 0, lam * g + 0.5 * c * g.pow(2), -lam.pow(2) / (2 * c) + 0 * g)

    @torch.no_grad()
    def update(self, g: torch.Tensor | float) -> None:
        g = float(g)
        if not math.isfinite(g):
            raise ValueError(f"constraint violation g must be finite, got {g!r}")
        cond = float(self.multiplier) + float(self.penalty) * g
        self.multiplier.fill_(max(cond, 0.0))
        c = float(self.penalty)
        self.penalty.fill_(min(max(c * (1 + self.growth), c), 1.0))

    def step(self, g: torch.Tensor) -> torch.Tensor:
        """ψ(g) with the pre-update (λ, c), then update (λ, c) from g."""
        out = self.psi(g)
        self.update(g.detach())
        return out
