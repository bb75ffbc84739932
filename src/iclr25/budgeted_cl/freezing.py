"""Adaptive layer freezing (aL): freeze the leading blocks whose expected information per FLOP is lowest.

Paper Eq. 1–4 (blocks i = 0..L−1, block 0 = stem, head never frozen):

* block Fisher trace  φ_i ≈ tr F(θ_i) = E_z[Σ_{θ∈block i} (∂ℓ(z)/∂θ)²], tracked by an EMA with rate r_F
* information per compute when freezing the first n blocks (Eq. 3)
      (I/C)_n = [Σ_{i≥n} φ_i / Σ_i φ_i] · UC / (UC − Σ_{i<n} B_i)
* batch informativeness from the last-layer feature gradient only (no backward):
      b_t = ‖∇_{x_L} ℓ(z_t)‖² / EMA(‖∇_{x_L} ℓ‖²),  ∇_{x_L} ℓ = (softmax(z) − onehot(y)) W_fc
* batch-wise freezing criterion (BFC, Eq. 4), maximised over n (first maximum):
      BFC_n = b_t · Σ_{i≥n} φ_i / Σ_i φ_i + (Σ_{i<n} B_i / UC) · max_m (I/C)_m

``stem_mode="code"`` reproduces the official implementation: the stem is excluded from all sums (UC' = UC − F_0 −
B_0), n = 0 and n = 1 both score b_t, and n ≥ 2 freezes blocks 0..n−1 (the stem only ever freezes together with
block 1). ``stem_mode="paper"`` uses Eq. 3–4 over all blocks as written.
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .budget import BlockFlops

__all__ = ["info_per_compute", "bfc_scores", "bfc_decision", "feature_grad_norm", "AdaptiveLayerFreezer"]

STEM_MODES = ("code", "paper")


def _prefix_terms(
    phi: torch.Tensor, bf: BlockFlops, stem_mode: str
) -> tuple[torch.Tensor, torch.Tensor, float]:
    """For n = 0..L: kept-Fisher share Σ_{i≥n}φ/Σφ, saved-backward Σ_{i<n}B_i, and UC (stem-adjusted)."""
    if stem_mode not in STEM_MODES:
        raise ValueError(f"stem_mode must be one of {STEM_MODES}, got {stem_mode!r}")
    phi = torch.as_tensor(phi, dtype=torch.float64).flatten()
    L = bf.n_blocks
    if phi.numel() != L:
        raise ValueError(f"phi must have one entry per freezable block ({L}), got {phi.numel()}")
    if (phi < 0).any():
        raise ValueError(f"phi (Fisher traces) must be >= 0, got {phi.tolist()}")
    back = torch.tensor(bf.backward[:L], dtype=torch.float64)
    uc = bf.unit
    if stem_mode == "code":
        uc -= bf.forward[0] + bf.backward[0]
        phi = phi.clone()
        phi[0] = 0.0
        back[0] = 0.0
    zero = torch.zeros(1, dtype=torch.float64)
    frozen_phi = torch.cat([zero, phi.cumsum(0)])  # Σ_{i<n} φ_i for n = 0..L
    saved = torch.cat([zero, back.cumsum(0)])  # Σ_{i<n} B_i
    total = phi.sum()
    share = (total - frozen_phi) / total if total > 0 else torch.ones(L + 1, dtype=torch.float64)
    return share.clamp_min(0.0), saved, uc


def info_per_compute(phi: torch.Tensor, bf: BlockFlops, stem_mode: str = "code") -> torch.Tensor:
    """(I/C)_n for n = 0..L frozen leading blocks (Eq. 3), shape (L+1,)."""
    share, saved, uc = _prefix_terms(phi, bf, stem_mode)
    return share * uc / (uc - saved)


def bfc_scores(phi: torch.Tensor, bf: BlockFlops, b_t: float, stem_mode: str = "code") -> torch.Tensor:
    """BFC_n for n = 0..L (Eq. 4): b_t·share_n + (Σ_{i<n}B_i/UC)·max_m(I/C)_m."""
    if not b_t >= 0:
        raise ValueError(f"b_t must be a finite number >= 0, got {b_t}")
    share, saved, uc = _prefix_terms(phi, bf, stem_mode)
    ipc = share * uc / (uc - saved)
    return b_t * share + saved / uc * ipc.max()


def bfc_decision(phi: torch.Tensor, bf: BlockFlops, b_t: float, stem_mode: str = "code") -> int:
    """n* = argmax_n BFC_n (first maximum): the number of leading blocks to freeze."""
    s = bfc_scores(phi, bf, b_t, stem_mode)
    return int(torch.nonzero(s == s.max())[0, 0])


def feature_grad_norm(logits: torch.Tensor, y: torch.Tensor, head_weight: torch.Tensor) -> torch.Tensor:
    """Σ_batch ‖∇_{x_L} ℓ‖² with ∇_{x_L} ℓ = (softmax(z) − onehot(y)) W_fc (per-sample CE, no backward).

    ``logits`` (batch, C) should already have unseen classes masked; ``head_weight`` is W_fc (C, D).
    """
    p = torch.softmax(logits.detach().float(), dim=-1)
    g = (p - F.one_hot(y, p.shape[-1]).float()) @ head_weight.detach().float()  # (batch, D)
    return g.pow(2).sum()


class AdaptiveLayerFreezer:
    """Decides, per training step, how many leading blocks to freeze (aL; see the module docstring).

    Use: ``b = f.informativeness(logits, y, W)``; ``n = f.decide(b)``; train with blocks < n frozen; when
    ``n == 0`` call ``f.update_fisher(block_traces)`` with this step's per-block Σ clamp(∂ℓ/∂θ, −1, 1)².
    Exploration: with probability ``unfreeze_rate`` (``exploration="random"``, official code) or every
    ``period``-th step (``"periodic"``, the 2024 paper text) nothing is frozen so φ is refreshed.
    """

    def __init__(
        self,
        block_flops: BlockFlops,
        fisher_rate: float = 1e-3,
        grad_ema_rate: float = 1e-3,
        unfreeze_rate: float = 0.5,
        exploration: str = "random",
        period: int = 2,
        warmup_steps: int = 3,
        stem_mode: str = "code",
        generator: torch.Generator | None = None,
    ):
        if not 0 < fisher_rate <= 1:
            raise ValueError(f"fisher_rate must be in (0, 1], got {fisher_rate}")
        if not 0 < grad_ema_rate <= 1:
            raise ValueError(f"grad_ema_rate must be in (0, 1], got {grad_ema_rate}")
        if not 0 <= unfreeze_rate <= 1:
            raise ValueError(f"unfreeze_rate must be in [0, 1], got {unfreeze_rate}")
        if exploration not in ("random", "periodic"):
            raise ValueError(f"exploration must be 'random' or 'periodic', got {exploration!r}")
        if period < 1:
            raise ValueError(f"period must be >= 1, got {period}")
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        if stem_mode not in STEM_MODES:
            raise ValueError(f"stem_mode must be one of {STEM_MODES}, got {stem_mode!r}")
        self.bf = block_flops
        self.fisher_rate = fisher_rate
        self.grad_ema_rate = grad_ema_rate
        self.unfreeze_rate = unfreeze_rate
        self.exploration = exploration
        self.period = period
        self.warmup_steps = warmup_steps
        self.stem_mode = stem_mode
        self.generator = generator
        self.phi = torch.zeros(block_flops.n_blocks, dtype=torch.float64)  # φ_i, EMA of block Fisher traces
        self.grad_ema: float | None = None  # EMA of Σ‖∇_{x_L}ℓ‖²
        self.steps = 0
        self.n_fisher_updates = 0

    def informativeness(self, logits: torch.Tensor, y: torch.Tensor, head_weight: torch.Tensor) -> float:
        """b_t = ‖∇_{x_L}ℓ‖² / EMA; the EMA is updated after computing b_t (initialised with the first value)."""
        s = float(feature_grad_norm(logits, y, head_weight))
        if self.grad_ema is None:
            self.grad_ema = s
        b = s / self.grad_ema if self.grad_ema > 0 else 1.0
        self.grad_ema += self.grad_ema_rate * (s - self.grad_ema)
        return b

    def decide(self, b_t: float) -> int:
        """Number of leading blocks to freeze at this step (0 during warm-up, exploration, or without φ)."""
        step = self.steps
        self.steps += 1
        if step < self.warmup_steps or self.n_fisher_updates == 0 or float(self.phi.sum()) <= 0:
            return 0
        if self.exploration == "random":
            if float(torch.rand((), generator=self.generator)) < self.unfreeze_rate:
                return 0
        elif step % self.period == 0:
            return 0
        return bfc_decision(self.phi, self.bf, b_t, self.stem_mode)

    def update_fisher(self, block_traces: torch.Tensor) -> None:
        """φ_i ← φ_i + r_F (x_i − φ_i) with x_i = Σ_{θ∈block i} clamp(∂ℓ/∂θ, −1, 1)² (one entry per block)."""
        x = torch.as_tensor(block_traces, dtype=torch.float64).flatten()
        if x.numel() != self.phi.numel():
            raise ValueError(f"block_traces must have {self.phi.numel()} entries, got {x.numel()}")
        self.phi += self.fisher_rate * (x - self.phi)
        self.n_fisher_updates += 1

    @property
    def state_bytes(self) -> int:
        """Stored state: φ (L floats) + the gradient-norm EMA (fp32 accounting)."""
        return 4 * (self.phi.numel() + 1)
