"""The Quantum-PEFT linear layer: a frozen ``nn.Linear`` plus ΔW = s · U Λ Vᵀ with circuit-generated U, V.

Paper eq. (SVD-form update)::

    W_ft = W + ΔW,   ΔW = s · U Λ Vᵀ,   U = Q_N(θ_U)·I_{N×K} ∈ St(N, K),   V = Q_M(θ_V)·I_{M×K} ∈ St(M, K)

W ∈ R^{N×M} (out × in), Λ = diag(λ_1..λ_K). Trainable: θ_U, θ_V (O(L log N) angles each) and λ (K values).
Λ is zero-initialised, so the wrapped layer starts exactly equal to the base layer; θ ~ N(0, σ²).
The forward pass never forms ΔW: ``y = W x + b + s · U (λ ⊙ (Vᵀ x))`` costs O((N+M)K) per token.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .unitary import NODES, columns_param_count, node_columns


class _AngleSTE(torch.autograd.Function):
    """Uniform b-bit quantisation of angles on the circle [−π, π) with a straight-through gradient."""

    @staticmethod
    def forward(ctx, theta: torch.Tensor, bits: int) -> torch.Tensor:  # type: ignore[override]
        step = 2 * math.pi / (1 << bits)
        wrapped = torch.remainder(theta + math.pi, 2 * math.pi) - math.pi
        return torch.round(wrapped / step) * step

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:  # type: ignore[override]
        return grad, None


def quantize_angles(theta: torch.Tensor, bits: int | None) -> torch.Tensor:
    """θ quantised to ``bits`` bits on the circle (identity when ``bits`` is None); STE gradient."""
    if bits is None:
        return theta
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 16:
        raise ValueError(f"bits must be None or an int in [1, 16], got {bits!r}")
    return _AngleSTE.apply(theta, bits)


class QuantumPEFTLinear(nn.Module):
    """Wraps an existing ``nn.Linear`` (kept, frozen, weights not copied) with a Quantum-PEFT update.

    Parameters ``theta_u`` (count(N)), ``theta_v`` (count(M)), ``lam`` (K,). ``merge()`` adds ΔW into the
    base weight (zero inference overhead), ``unmerge()`` subtracts it again.
    """

    def __init__(
        self,
        base_layer: nn.Linear,
        rank: int = 2,
        layers: int = 1,
        alpha: float = 1.0,
        dropout: float = 0.0,
        init_std: float = 0.5,
        node: str = "qsd",
        angle_bits: int | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(base_layer, nn.Linear):
            raise ValueError(f"base_layer must be a torch.nn.Linear, got {type(base_layer).__name__}")
        n_out, m_in = base_layer.out_features, base_layer.in_features
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= min(n_out, m_in):
            raise ValueError(f"rank must be an int in [1, min(out, in) = {min(n_out, m_in)}], got {rank!r}")
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
            raise ValueError(f"layers must be an int >= 0, got {layers!r}")
        if node not in NODES:
            raise ValueError(f"node must be one of {NODES}, got {node!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if not init_std >= 0.0:
            raise ValueError(f"init_std must be >= 0, got {init_std!r}")
        quantize_angles(torch.zeros(1), angle_bits)  # validates angle_bits
        self.base_layer = base_layer
        for p in self.base_layer.parameters():
            p.requires_grad_(False)
        self.out_features, self.in_features = n_out, m_in
        self.rank, self.layers, self.node, self.angle_bits = rank, layers, node, angle_bits
        self.scaling = float(alpha)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        w = base_layer.weight
        pu, pv = columns_param_count(n_out, rank, layers, node), columns_param_count(m_in, rank, layers, node)
        kw = dict(dtype=w.dtype, device=w.device)
        # θ ~ N(0, σ²): θ = 0 would give the CZ-only ±1 matrix (a sparse, poor start)
        self.theta_u = nn.Parameter(
            torch.randn(pu, generator=generator, dtype=w.dtype).to(w.device) * init_std
        )
        self.theta_v = nn.Parameter(
            torch.randn(pv, generator=generator, dtype=w.dtype).to(w.device) * init_std
        )
        self.lam = nn.Parameter(torch.zeros(rank, **kw))  # Λ = 0 ⇒ ΔW = 0 at init
        self.merged = False
        self._factors: tuple[torch.Tensor, torch.Tensor] | None = None  # (U, V) precomputed for one forward

    # -- the update ---------------------------------------------------------------------------------
    def node_specs(self) -> tuple[tuple, tuple]:
        """(signature, angles) of the U and V nodes; equal signatures can be computed in one batched call."""
        return (
            ((self.out_features, self.rank, self.layers, self.node), self.theta_u),
            ((self.in_features, self.rank, self.layers, self.node), self.theta_v),
        )

    def u(self) -> torch.Tensor:
        """U = Q_N(θ_U)·I_{N×K}, (N, K) with orthonormal columns."""
        if self._factors is not None:
            return self._factors[0]
        th = quantize_angles(self.theta_u, self.angle_bits)
        return node_columns(th, self.out_features, self.rank, self.layers, self.node)

    def v(self) -> torch.Tensor:
        """V = Q_M(θ_V)·I_{M×K}, (M, K) with orthonormal columns."""
        if self._factors is not None:
            return self._factors[1]
        th = quantize_angles(self.theta_v, self.angle_bits)
        return node_columns(th, self.in_features, self.rank, self.layers, self.node)

    def delta_weight(self) -> torch.Tensor:
        """ΔW = s · U Λ Vᵀ, (N, M)."""
        return self.scaling * (self.u() * self.lam) @ self.v().T

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.base_layer(x)
        if self.merged:
            return y
        u, v = self.u().to(x.dtype), self.v().to(x.dtype)
        h = F.linear(self.dropout(x), v.T) * self.lam.to(x.dtype)  # λ ⊙ (Vᵀ x): (..., K)
        return y + self.scaling * F.linear(h, u)  # + s · U (λ ⊙ Vᵀ x)

    # -- merge ------------------------------------------------------------------------------------
    @torch.no_grad()
    def merge(self) -> None:
        """W ← W + ΔW (idempotent)."""
        if not self.merged:
            self.base_layer.weight += self.delta_weight().to(self.base_layer.weight.dtype)
            self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """W ← W − ΔW (idempotent)."""
        if self.merged:
            self.base_layer.weight -= self.delta_weight().to(self.base_layer.weight.dtype)
            self.merged = False

    def n_adapter_params(self) -> int:
        return self.theta_u.numel() + self.theta_v.numel() + self.lam.numel()

    def extra_repr(self) -> str:
        return (
            f"in={self.in_features}, out={self.out_features}, rank={self.rank}, layers={self.layers}, "
            f"node={self.node}, scaling={self.scaling}, angles={self.theta_u.numel()}+{self.theta_v.numel()}, "
            f"angle_bits={self.angle_bits}, merged={self.merged}"
        )
