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


def conv1d_class() -> type | None:
    """transformers' GPT-2 ``Conv1D`` (weight stored (in, out), y = x W + b), or None without transformers."""
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers is a dependency of the package
        return None
    return Conv1D


def is_linear_like(module: nn.Module) -> bool:
    """``nn.Linear`` or transformers' ``Conv1D`` — the layers Quantum-PEFT (like PEFT's LoRA) can wrap."""
    c1d = conv1d_class()
    return isinstance(module, nn.Linear) or (c1d is not None and isinstance(module, c1d))


class QuantumPEFTLinear(nn.Module):
    """Wraps an existing ``nn.Linear`` or GPT-2 ``Conv1D`` (kept, frozen, weights not copied) with ΔW = s·UΛVᵀ.

    Parameters ``theta_u`` (count(N)), ``theta_v`` (count(M)), ``lam`` (K,) are kept in float32 (float64 for a
    float64 base) whatever the base dtype — bf16/fp16 angles would lose orthogonality and most AdamW updates —
    and the update is computed in that dtype, the input cast to it and the result cast back (as PEFT's LoRA).

    In inference (no gradient needed for the angles) U and V are cached and reused until the angles change:
    the cache key holds the parameters' in-place version counters and storage, so an optimizer step,
    ``load_state_dict`` or ``.to()`` invalidates it. ``merge()`` adds ΔW into the base weight (zero
    inference overhead), ``unmerge()`` subtracts it again; ``disabled = True`` runs the base layer alone.
    """

    def __init__(
        self,
        base_layer: nn.Module,
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
        if not is_linear_like(base_layer):
            raise ValueError(
                f"base_layer must be a torch.nn.Linear or transformers Conv1D, got {type(base_layer).__name__}"
            )
        self.fan_in_fan_out = not isinstance(base_layer, nn.Linear)  # Conv1D: weight is (in, out)
        w = base_layer.weight
        m_in, n_out = (w.shape[0], w.shape[1]) if self.fan_in_fan_out else (w.shape[1], w.shape[0])
        if isinstance(rank, bool) or not isinstance(rank, int) or not 1 <= rank <= min(n_out, m_in):
            raise ValueError(f"rank must be an int in [1, min(out, in) = {min(n_out, m_in)}], got {rank!r}")
        if isinstance(layers, bool) or not isinstance(layers, int) or layers < 0:
            raise ValueError(f"layers must be an int >= 0, got {layers!r}")
        if node not in NODES:
            raise ValueError(f"node must be one of {NODES}, got {node!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout!r}")
        if not init_std >= 0.0 or not math.isfinite(init_std):
            raise ValueError(f"init_std must be a finite float >= 0, got {init_std!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
            raise ValueError(f"alpha must be a finite float, got {alpha!r}")
        quantize_angles(torch.zeros(1), angle_bits)  # validates angle_bits
        self.base_layer = base_layer
        for p in self.base_layer.parameters():
            p.requires_grad_(False)
        self.out_features, self.in_features = n_out, m_in
        self.rank, self.layers, self.node, self.angle_bits = rank, layers, node, angle_bits
        self.scaling = float(alpha)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        pu, pv = columns_param_count(n_out, rank, layers, node), columns_param_count(m_in, rank, layers, node)
        dtype = torch.float64 if w.dtype == torch.float64 else torch.float32  # adapter dtype, never bf16/fp16
        # θ ~ N(0, σ²): θ = 0 would give the CZ-only ±1 matrix (a sparse, poor start)
        self.theta_u = nn.Parameter(torch.randn(pu, generator=generator, dtype=dtype).to(w.device) * init_std)
        self.theta_v = nn.Parameter(torch.randn(pv, generator=generator, dtype=dtype).to(w.device) * init_std)
        self.lam = nn.Parameter(torch.zeros(rank, dtype=dtype, device=w.device))  # Λ = 0 ⇒ ΔW = 0 at init
        self.merged = False
        self.disabled = False
        self._factors: tuple[torch.Tensor, torch.Tensor] | None = None  # (U, V) precomputed for one forward
        self._cache: tuple[tuple, torch.Tensor, torch.Tensor] | None = None  # (key, U, V) for inference

    # -- the update ---------------------------------------------------------------------------------
    def node_specs(self) -> tuple[tuple, tuple]:
        """(signature, angles) of the U and V nodes; equal signatures can be computed in one batched call."""
        return (
            ((self.out_features, self.rank, self.layers, self.node), self.theta_u),
            ((self.in_features, self.rank, self.layers, self.node), self.theta_v),
        )

    def grad_needed(self) -> bool:
        """Whether this forward must build U, V inside the autograd graph (else the cache may be used)."""
        return torch.is_grad_enabled() and (self.theta_u.requires_grad or self.theta_v.requires_grad)

    def _cache_key(self) -> tuple:
        tu, tv = self.theta_u, self.theta_v
        return (tu._version, tv._version, tu.data_ptr(), tv.data_ptr(), tu.device, tu.dtype, self.angle_bits)

    def cached_factors(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The cached (U, V) if they are valid for the current angles and no gradient is needed."""
        if self._cache is None or self.grad_needed() or self._cache[0] != self._cache_key():
            return None
        return self._cache[1], self._cache[2]

    def store_factors(self, u: torch.Tensor, v: torch.Tensor) -> None:
        """Cache (U, V) for later inference forwards (only when built without gradient)."""
        if not self.grad_needed():
            self._cache = (self._cache_key(), u.detach(), v.detach())

    def clear_cache(self) -> None:
        self._cache = None

    def factors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(U, V): precomputed for this forward, cached, or built from the angles."""
        if self._factors is not None:
            return self._factors
        cached = self.cached_factors()
        if cached is not None:
            return cached
        grad = self.grad_needed()
        # inference tensors must not be cached: they could not be used later outside inference mode
        with torch.inference_mode(False), torch.set_grad_enabled(grad):
            u = node_columns(
                quantize_angles(self.theta_u, self.angle_bits),
                self.out_features,
                self.rank,
                self.layers,
                self.node,
            )
            v = node_columns(
                quantize_angles(self.theta_v, self.angle_bits),
                self.in_features,
                self.rank,
                self.layers,
                self.node,
            )
        self.store_factors(u, v)
        return u, v

    def u(self) -> torch.Tensor:
        """U = Q_N(θ_U)·I_{N×K}, (N, K) with orthonormal columns."""
        return self.factors()[0]

    def v(self) -> torch.Tensor:
        """V = Q_M(θ_V)·I_{M×K}, (M, K) with orthonormal columns."""
        return self.factors()[1]

    def delta_weight(self) -> torch.Tensor:
        """ΔW = s · U Λ Vᵀ, (N, M) = (out, in), in the adapter dtype."""
        u, v = self.factors()
        return self.scaling * (u * self.lam) @ v.T

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.disabled and self.merged:
            self.unmerge()
        y = self.base_layer(x)
        if self.merged or self.disabled:
            return y
        u, v = self.factors()
        xa = self.dropout(x).to(self.lam.dtype)  # compute the update in the adapter dtype (fp32)
        h = F.linear(xa, v.T) * self.lam  # λ ⊙ (Vᵀ x): (..., K)
        return y + (self.scaling * F.linear(h, u)).to(y.dtype)  # + s · U (λ ⊙ Vᵀ x)

    # -- merge ------------------------------------------------------------------------------------
    def _delta_for_base(self) -> torch.Tensor:
        d = self.delta_weight()
        return (d.T if self.fan_in_fan_out else d).to(self.base_layer.weight.dtype)

    @torch.no_grad()
    def merge(self) -> None:
        """W ← W + ΔW (idempotent)."""
        if not self.merged:
            self.base_layer.weight += self._delta_for_base()
            self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """W ← W − ΔW (idempotent; exact only up to the base dtype's rounding)."""
        if self.merged:
            self.base_layer.weight -= self._delta_for_base()
            self.merged = False

    def n_adapter_params(self) -> int:
        return self.theta_u.numel() + self.theta_v.numel() + self.lam.numel()

    def extra_repr(self) -> str:
        return (
            f"in={self.in_features}, out={self.out_features}, rank={self.rank}, layers={self.layers}, "
            f"node={self.node}, scaling={self.scaling}, angles={self.theta_u.numel()}+{self.theta_v.numel()}, "
            f"angle_bits={self.angle_bits}, merged={self.merged}, fan_in_fan_out={self.fan_in_fan_out}"
        )
