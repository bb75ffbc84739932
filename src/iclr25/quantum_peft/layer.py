"""The Quantum-PEFT layers: a frozen ``nn.Linear`` (or conv / embedding) plus ΔW = s · U Λ Vᵀ with circuit U, V.

Paper eq. (SVD-form update)::

    W_ft = W + ΔW,   ΔW = s · U Λ Vᵀ,   U = Q_N(θ_U)·I_{N×K} ∈ St(N, K),   V = Q_M(θ_V)·I_{M×K} ∈ St(M, K)

W ∈ R^{N×M} (out × in), Λ = diag(λ_1..λ_K). Trainable: θ_U, θ_V (O(L log N) angles each) and λ (K values).
Λ is zero-initialised, so the wrapped layer starts exactly equal to the base layer; θ ~ N(0, σ²).
The forward pass never forms ΔW: ``y = W x + b + s · U (λ ⊙ (Vᵀ x))`` costs O((N+M)K) per token.

The update is defined for any N×M weight matrix; the paper applies it to the linear projections of transformers.
``QuantumPEFTConv`` (W = the out × in·k view of a kernel) and ``QuantumPEFTEmbedding`` (W = the embedding table)
use the same matrix views as PEFT's LoRA for those layers — our extension, not evaluated in the paper.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .kbit import add_to_quantised, bnb_kind, unsupported_quantised
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


class QuantumPEFTAdapter(nn.Module):
    """One named adapter of a :class:`QuantumPEFTLinear`: θ_U, θ_V, λ, its hyper-parameters, dropout, U/V cache.

    Parameters are kept in float32 (float64 for a float64 base) whatever the base dtype. ``_cache`` holds
    (key, U, V) for inference; the key holds the angles' in-place version counters and storage, so an optimizer
    step, ``load_state_dict`` or ``.to()`` invalidates it. Each adapter has its own cache, so switching the
    active adapter never reuses another adapter's factors.
    """

    def __init__(
        self,
        n_out: int,
        m_in: int,
        rank: int,
        layers: int,
        alpha: float,
        dropout: float,
        init_std: float,
        node: str,
        angle_bits: int | None,
        generator: torch.Generator | None,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        super().__init__()
        self.out_features, self.in_features = n_out, m_in
        self.rank, self.layers, self.node, self.angle_bits = rank, layers, node, angle_bits
        self.scaling = float(alpha)
        self.dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        pu, pv = columns_param_count(n_out, rank, layers, node), columns_param_count(m_in, rank, layers, node)
        # θ ~ N(0, σ²): θ = 0 would give the CZ-only ±1 matrix (a sparse, poor start)
        self.theta_u = nn.Parameter(torch.randn(pu, generator=generator, dtype=dtype).to(device) * init_std)
        self.theta_v = nn.Parameter(torch.randn(pv, generator=generator, dtype=dtype).to(device) * init_std)
        self.lam = nn.Parameter(torch.zeros(rank, dtype=dtype, device=device))  # Λ = 0 ⇒ ΔW = 0 at init
        # (key, U, V) precomputed by the model for a forward (and, under gradient checkpointing, its recomputation
        # in backward); used only while the key (the angles' versions) still matches
        self._factors: tuple[tuple, torch.Tensor, torch.Tensor] | None = None
        self._cache: tuple[tuple, torch.Tensor, torch.Tensor] | None = None  # (key, U, V) for inference

    def node_specs(self) -> tuple[tuple, tuple]:
        return (
            ((self.out_features, self.rank, self.layers, self.node), self.theta_u),
            ((self.in_features, self.rank, self.layers, self.node), self.theta_v),
        )

    def grad_needed(self) -> bool:
        return torch.is_grad_enabled() and (self.theta_u.requires_grad or self.theta_v.requires_grad)

    def cache_key(self) -> tuple:
        tu, tv = self.theta_u, self.theta_v
        return (tu._version, tv._version, tu.data_ptr(), tv.data_ptr(), tu.device, tu.dtype, self.angle_bits)

    def cached_factors(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        if self._cache is None or self.grad_needed() or self._cache[0] != self.cache_key():
            return None
        return self._cache[1], self._cache[2]

    def store_factors(self, u: torch.Tensor, v: torch.Tensor) -> None:
        if not self.grad_needed():
            self._cache = (self.cache_key(), u.detach(), v.detach())

    def build_factors(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(U, V) from the angles (inside the autograd graph when a gradient is needed)."""
        # inference tensors must not be cached: they could not be used later outside inference mode; autocast
        # (Trainer's bf16=True) would run the circuit's chained matmuls in bf16: U, V lose orthonormality
        with (
            torch.inference_mode(False),
            torch.set_grad_enabled(self.grad_needed()),
            torch.autocast(self.theta_u.device.type, enabled=False),
        ):
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
        return u, v

    def n_params(self) -> int:
        return self.theta_u.numel() + self.theta_v.numel() + self.lam.numel()

    def extra_repr(self) -> str:
        return (
            f"rank={self.rank}, layers={self.layers}, node={self.node}, scaling={self.scaling}, "
            f"angles={self.theta_u.numel()}+{self.theta_v.numel()}, angle_bits={self.angle_bits}"
        )


def _check_adapter_name(adapter_name: object) -> str:
    if not isinstance(adapter_name, str) or not adapter_name or "." in adapter_name:
        raise ValueError(f"adapter_name must be a non-empty str without '.', got {adapter_name!r}")
    return adapter_name


BASE_ADAPTER = (
    "__base__"  # in ``adapter_names`` of a mixed batch: this row runs through the base model (as PEFT)
)


def _groups(names: list[str]) -> dict[str, list[int]]:
    """{adapter name: the batch rows that use it} for a mixed-adapter batch."""
    out: dict[str, list[int]] = {}
    for i, n in enumerate(names):
        out.setdefault(n, []).append(i)
    return out


class MixedBatch:
    """Per-row adapter names of a mixed-adapter batch, set on every wrapped module for one forward / generate.

    ``expand`` allows a batch that is a multiple of the names (``generate`` with beams or several returned
    sequences repeats every row in place), each name then covering its row's copies.
    """

    def __init__(self, names: list[str], expand: bool) -> None:
        self.names, self.expand = list(names), expand

    def rows(self, batch: int) -> list[str]:
        n = len(self.names)
        if batch == n:
            return self.names
        if self.expand and batch % n == 0:
            return [name for name in self.names for _ in range(batch // n)]
        raise ValueError(
            f"adapter_names has {n} names but a wrapped layer received a batch of {batch} rows "
            "(one name per row of the batch expected)"
        )


class QuantumPEFTLayer(nn.Module):
    """Wraps an existing layer (kept, frozen, weights not copied) with ΔW = s·UΛVᵀ on its weight matrix W (N×M).

    Subclasses say what W is and how the update acts on an input: :class:`QuantumPEFTLinear` (``nn.Linear``,
    GPT-2 ``Conv1D``, bitsandbytes 4-/8-bit linears), :class:`QuantumPEFTConv` (``nn.Conv1d/2d/3d``, W viewed as
    out × in·k) and :class:`QuantumPEFTEmbedding` (``nn.Embedding``, W = the num_embeddings × dim table).

    The layer holds one or several named adapters (``qpeft_adapters``, a ``ModuleDict`` of
    :class:`QuantumPEFTAdapter`, as PEFT's LoRA layers hold ``lora_A[name]``); only the active one
    (``active_adapter``) is applied and trainable — the others' parameters have ``requires_grad=False``.
    ``theta_u``, ``theta_v``, ``lam``, ``rank``, ``scaling``, … read the active adapter. A mixed-adapter batch
    (``mixed`` set by the model for one call) sends each row through its own adapter instead.

    Parameters ``theta_u`` (count(N)), ``theta_v`` (count(M)), ``lam`` (K,) are kept in float32 (float64 for a
    float64 base) whatever the base dtype — bf16/fp16 angles would lose orthogonality and most AdamW updates —
    and the update is computed in that dtype, the input cast to it and the result cast back (as PEFT's LoRA).

    In inference (no gradient needed for the angles) U and V are cached per adapter and reused until the angles
    change: the cache key holds the parameters' in-place version counters and storage, so an optimizer step,
    ``load_state_dict`` or ``.to()`` invalidates it. ``merge()`` adds the active adapter's ΔW into the base
    weight (zero inference overhead), ``unmerge()`` subtracts it again; ``disabled = True`` runs the base
    layer alone. A layer whose adapters do not include the active name acts as the base layer.
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
        adapter_name: str = "default",
    ) -> None:
        super().__init__()
        self._check_base(base_layer)
        self.out_features, self.in_features = self._matrix_shape(base_layer)  # N, M of W (N × M)
        self.base_layer = base_layer
        self.qpeft_adapters = nn.ModuleDict()
        self.active_adapter: str = _check_adapter_name(adapter_name)
        self.merged_adapter: str | None = None
        self.disabled = False
        self.mixed: MixedBatch | None = None  # set by the model for one mixed-adapter call
        self.tied_with: list[str] = []  # other modules sharing the base weight (set by the model): no merge
        self.add_adapter(adapter_name, rank, layers, alpha, dropout, init_std, node, angle_bits, generator)
        for p in self.base_layer.parameters():
            p.requires_grad_(False)

    # -- what W is and how ΔW acts (subclasses) ----------------------------------------------------
    @staticmethod
    def _check_base(base_layer: nn.Module) -> None:
        raise NotImplementedError

    @staticmethod
    def _matrix_shape(base_layer: nn.Module) -> tuple[int, int]:
        """(N, M) of the weight matrix W the update ΔW (N × M) is added to."""
        raise NotImplementedError

    def _update(
        self, x: torch.Tensor, ad: QuantumPEFTAdapter, u: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        """ΔW applied to the input ``x`` (the part added to the base output), in the adapter dtype."""
        raise NotImplementedError

    def _delta_for_base(self, adapter_name: str) -> torch.Tensor:
        """ΔW of an adapter in the layout and dtype of the base weight."""
        raise NotImplementedError

    # -- named adapters ----------------------------------------------------------------------------
    def add_adapter(
        self,
        adapter_name: str,
        rank: int = 2,
        layers: int = 1,
        alpha: float = 1.0,
        dropout: float = 0.0,
        init_std: float = 0.5,
        node: str = "qsd",
        angle_bits: int | None = None,
        generator: torch.Generator | None = None,
    ) -> None:
        """Add an adapter (trainable only if ``adapter_name`` is the active adapter); the active one is unchanged."""
        _check_adapter_name(adapter_name)
        if adapter_name in self.qpeft_adapters:
            raise ValueError(f"adapter_name {adapter_name!r} already exists in this layer")
        n_out, m_in = self.out_features, self.in_features
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
        w = self.base_layer.weight
        dtype = torch.float64 if w.dtype == torch.float64 else torch.float32  # adapter dtype, never bf16/fp16
        ad = QuantumPEFTAdapter(
            n_out, m_in, rank, layers, alpha, dropout, init_std, node, angle_bits, generator, dtype, w.device
        )
        ad.requires_grad_(adapter_name == self.active_adapter)
        self.qpeft_adapters[adapter_name] = ad

    def set_adapter(self, adapter_name: str) -> None:
        """Make ``adapter_name`` active (and the only trainable one); a merged other adapter is unmerged first.

        A name this layer does not hold is allowed (the model validates names): the layer then acts as its base.
        """
        if self.merged and self.merged_adapter != adapter_name:
            self.unmerge()
        self.active_adapter = adapter_name
        for name, ad in self.qpeft_adapters.items():
            ad.requires_grad_(name == adapter_name)

    def delete_adapter(self, adapter_name: str) -> None:
        """Remove ``adapter_name`` (unmerged first if merged)."""
        if adapter_name not in self.qpeft_adapters:
            raise ValueError(
                f"adapter_name {adapter_name!r} is not in this layer ({list(self.qpeft_adapters)})"
            )
        if self.merged_adapter == adapter_name:
            self.unmerge()
        del self.qpeft_adapters[adapter_name]

    @property
    def adapter_names(self) -> list[str]:
        return list(self.qpeft_adapters)

    def active(self) -> QuantumPEFTAdapter | None:
        """The active adapter, or None if this layer does not hold it."""
        # plain dict access: this is on the per-token inference path (nn.Module.__getattr__ is slow)
        return self._modules["qpeft_adapters"]._modules.get(self.active_adapter)  # type: ignore[union-attr,return-value]

    def _adapter(self, adapter_name: str | None = None) -> QuantumPEFTAdapter:
        name = self.active_adapter if adapter_name is None else adapter_name
        ad = self._modules["qpeft_adapters"]._modules.get(name)  # type: ignore[union-attr]
        if ad is None:
            raise ValueError(
                f"this layer holds no adapter named {name!r} (adapters: {list(self.qpeft_adapters)})"
            )
        return ad  # type: ignore[return-value]

    # the active adapter's parameters and hyper-parameters
    theta_u = property(lambda self: self._adapter().theta_u)
    theta_v = property(lambda self: self._adapter().theta_v)
    lam = property(lambda self: self._adapter().lam)
    rank = property(lambda self: self._adapter().rank)
    layers = property(lambda self: self._adapter().layers)
    node = property(lambda self: self._adapter().node)
    angle_bits = property(lambda self: self._adapter().angle_bits)
    scaling = property(lambda self: self._adapter().scaling)
    dropout = property(lambda self: self._adapter().dropout)

    @property
    def merged(self) -> bool:
        return self.merged_adapter is not None

    # model code reads e.g. ``projection.weight.dtype`` (HF ViT): the base layer's, as PEFT's layers expose
    weight = property(lambda self: self.base_layer.weight)
    bias = property(lambda self: self.base_layer.bias)

    # -- the factors --------------------------------------------------------------------------------
    def node_specs(self) -> tuple[tuple, tuple]:
        """(signature, angles) of the active adapter's U and V nodes; equal signatures are batched together."""
        return self._adapter().node_specs()

    def grad_needed(self) -> bool:
        """Whether this forward must build U, V inside the autograd graph (else the cache may be used)."""
        ad = self.active()
        return ad is not None and ad.grad_needed()

    def cached_factors(self) -> tuple[torch.Tensor, torch.Tensor] | None:
        """The active adapter's cached (U, V) if valid for its current angles and no gradient is needed."""
        ad = self._modules["qpeft_adapters"]._modules.get(self.active_adapter)  # type: ignore[union-attr]
        return None if ad is None else ad.cached_factors()  # type: ignore[operator]

    def store_factors(self, u: torch.Tensor, v: torch.Tensor) -> None:
        """Cache (U, V) of the active adapter for later inference forwards (only when built without gradient)."""
        self._adapter().store_factors(u, v)

    def set_precomputed(self, factors: tuple[torch.Tensor, torch.Tensor] | None) -> None:
        """(U, V) of the active adapter computed by the model for one forward (None clears them)."""
        ad = self._adapter()
        ad._factors = None if factors is None else (ad.cache_key(), *factors)

    def clear_cache(self) -> None:
        for ad in self.qpeft_adapters.values():
            ad._cache = None

    def factors(self, adapter_name: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """(U, V) of an adapter (default: the active one): precomputed for this forward, cached, or built."""
        is_active = adapter_name is None or adapter_name == self.active_adapter
        ad = self._adapter(adapter_name)
        pre = ad._factors
        if is_active and pre is not None and pre[0] == ad.cache_key():
            return pre[1], pre[2]
        cached = self.cached_factors() if is_active else ad.cached_factors()
        if cached is not None:
            return cached
        u, v = ad.build_factors()
        ad.store_factors(u, v)
        return u, v

    def u(self) -> torch.Tensor:
        """U = Q_N(θ_U)·I_{N×K}, (N, K) with orthonormal columns (active adapter)."""
        return self.factors()[0]

    def v(self) -> torch.Tensor:
        """V = Q_M(θ_V)·I_{M×K}, (M, K) with orthonormal columns (active adapter)."""
        return self.factors()[1]

    def delta_weight(self, adapter_name: str | None = None) -> torch.Tensor:
        """ΔW = s · U Λ Vᵀ, (N, M), in the adapter dtype (default: the active adapter)."""
        ad = self._adapter(adapter_name)
        u, v = self.factors(adapter_name)
        return ad.scaling * (u * ad.lam) @ v.T

    # -- forward ------------------------------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.disabled and self.merged:
            self.unmerge()
        if self.mixed is not None and not self.disabled:
            return self._mixed_forward(x, self.mixed.rows(x.shape[0]))
        y = self.base_layer(x)
        ad = self.active()
        if self.merged or self.disabled or ad is None:
            return y
        u, v = self.factors()
        return y + self._update(x, ad, u, v).to(y.dtype)

    def _mixed_forward(self, x: torch.Tensor, names: list[str]) -> torch.Tensor:
        """Each batch row through its own adapter (``"__base__"``: none): one update per adapter on its rows."""
        if self.merged:
            raise ValueError(
                "adapter_names cannot be used with a merged adapter: call unmerge_adapter() first"
            )
        y = self.base_layer(x)
        adapters = self._modules["qpeft_adapters"]._modules  # type: ignore[union-attr]
        for name, rows in _groups(names).items():
            ad = adapters.get(name)
            if ad is None:  # "__base__", or an adapter that does not wrap this layer
                continue
            u, v = self.factors(name)
            if len(rows) == x.shape[0]:
                y = y + self._update(x, ad, u, v).to(y.dtype)  # type: ignore[arg-type]
                continue
            idx = torch.tensor(rows, device=x.device)  # (rows,)
            upd = self._update(x.index_select(0, idx), ad, u, v)  # type: ignore[arg-type]
            y = y.index_add(0, idx, upd.to(y.dtype))
        return y

    # -- merge ------------------------------------------------------------------------------------
    def _check_mergeable(self) -> None:
        if self.tied_with:
            raise ValueError(
                f"cannot merge into a weight tied with {self.tied_with} (e.g. tie_word_embeddings): merging would "
                "change those modules too; keep the adapter unmerged (forward, generate and save work unmerged)"
            )

    @torch.no_grad()
    def merge(self) -> None:
        """W ← W + ΔW of the active adapter (idempotent; no-op if this layer does not hold it)."""
        if not self.merged and self.active() is not None:
            self._check_mergeable()
            self._add_to_weight(self.active_adapter, +1.0)
            self.merged_adapter = self.active_adapter

    @torch.no_grad()
    def unmerge(self) -> None:
        """W ← W − ΔW of the merged adapter (idempotent; exact only up to the base dtype's rounding)."""
        if self.merged_adapter is not None:
            self._add_to_weight(self.merged_adapter, -1.0)
            self.merged_adapter = None

    def _add_to_weight(self, adapter_name: str, sign: float) -> None:
        d = self._delta_for_base(adapter_name)
        if sign > 0:
            self.base_layer.weight += d
        else:
            self.base_layer.weight -= d

    def n_adapter_params(self, adapter_name: str | None = None) -> int:
        """Parameters of one adapter (default: the active one; 0 if this layer does not hold it)."""
        name = self.active_adapter if adapter_name is None else adapter_name
        return self.qpeft_adapters[name].n_params() if name in self.qpeft_adapters else 0

    def extra_repr(self) -> str:
        return (
            f"in={self.in_features}, out={self.out_features}, adapters={list(self.qpeft_adapters)}, "
            f"active={self.active_adapter!r}, merged={self.merged_adapter!r}"
        )


class QuantumPEFTLinear(QuantumPEFTLayer):
    """Quantum-PEFT on an ``nn.Linear``, a GPT-2 ``Conv1D`` or a bitsandbytes ``Linear4bit`` / ``Linear8bitLt``.

    ``y = W x + b + s · U (λ ⊙ (Vᵀ x))`` — ΔW is never formed; a quantised base weight is only read by the base
    layer itself (merging dequantises, adds ΔW and re-quantises, see :mod:`.kbit`).
    """

    @staticmethod
    def _check_base(base_layer: nn.Module) -> None:
        if not is_linear_like(base_layer):
            raise ValueError(
                f"base_layer must be a torch.nn.Linear or transformers Conv1D, got {type(base_layer).__name__} "
                "(QuantumPEFTConv wraps convolutions, QuantumPEFTEmbedding embeddings)"
            )
        why = unsupported_quantised(base_layer)
        if why is not None:
            raise ValueError(f"base_layer: {why}")

    @staticmethod
    def _matrix_shape(base_layer: nn.Module) -> tuple[int, int]:
        if isinstance(base_layer, nn.Linear):  # in/out_features: a packed 4-bit weight has another shape
            return base_layer.out_features, base_layer.in_features
        w = base_layer.weight  # GPT-2 Conv1D: weight is (in, out)
        return w.shape[1], w.shape[0]

    @property
    def fan_in_fan_out(self) -> bool:
        return not isinstance(self.base_layer, nn.Linear)  # Conv1D: weight is (in, out)

    def _update(
        self, x: torch.Tensor, ad: QuantumPEFTAdapter, u: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        xa = ad.dropout(x).to(ad.lam.dtype)  # compute the update in the adapter dtype (fp32)
        h = F.linear(xa, v.T) * ad.lam  # λ ⊙ (Vᵀ x): (..., K)
        return ad.scaling * F.linear(h, u)  # s · U (λ ⊙ Vᵀ x): (..., N)

    def _delta_for_base(self, adapter_name: str) -> torch.Tensor:
        d = self.delta_weight(adapter_name)
        return (d.T if self.fan_in_fan_out else d).to(self.base_layer.weight.dtype)

    def _add_to_weight(self, adapter_name: str, sign: float) -> None:
        if bnb_kind(self.base_layer) is not None:
            add_to_quantised(self.base_layer, sign * self.delta_weight(adapter_name))
            return
        super()._add_to_weight(adapter_name, sign)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", fan_in_fan_out={self.fan_in_fan_out}"


CONV_TYPES = (nn.Conv1d, nn.Conv2d, nn.Conv3d)
_CONV_FN = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}


class QuantumPEFTConv(QuantumPEFTLayer):
    """Quantum-PEFT on an ``nn.Conv1d/2d/3d`` (``groups=1``): W viewed as the (out, in·k₁·…) matrix, as PEFT's LoRA.

    ΔW = s·UΛVᵀ reshaped to the kernel; the forward pass never forms it: Vᵀ is a K-channel convolution with the
    base layer's kernel size, stride, padding (mode) and dilation, λ scales its channels and U is a 1×1
    convolution back to ``out`` channels — ``y = conv(x; W) + s · conv₁ₓ₁(λ ⊙ conv(x; Vᵀ); U)``.
    """

    @staticmethod
    def _check_base(base_layer: nn.Module) -> None:
        if not isinstance(base_layer, CONV_TYPES):
            raise ValueError(f"base_layer must be a torch.nn.Conv1d/2d/3d, got {type(base_layer).__name__}")
        if base_layer.groups != 1:
            raise ValueError(
                f"base_layer: a {type(base_layer).__name__} with groups={base_layer.groups} is not supported "
                "(expected groups=1: ΔW = sUΛVᵀ is one out × in·k matrix, a grouped kernel is block-diagonal)"
            )

    @staticmethod
    def _matrix_shape(base_layer: nn.Module) -> tuple[int, int]:
        w = base_layer.weight  # (out, in, *kernel)
        return w.shape[0], int(math.prod(w.shape[1:]))

    def _update(
        self, x: torch.Tensor, ad: QuantumPEFTAdapter, u: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        base = self.base_layer
        w = base.weight
        nd = w.dim() - 2
        xa = ad.dropout(x).to(ad.lam.dtype)
        v_kernel = v.T.reshape(ad.rank, *w.shape[1:])  # Vᵀ as K filters (K, in, *kernel)
        h = base._conv_forward(xa, v_kernel, None)  # (B, K, *spatial), the base layer's stride/padding
        h = h * ad.lam.view(1, -1, *([1] * nd))  # λ ⊙ (Vᵀ x)
        return ad.scaling * _CONV_FN[nd](
            h, u.reshape(*u.shape, *([1] * nd))
        )  # s · U (…): 1×1 conv → (B, N, …)

    def _delta_for_base(self, adapter_name: str) -> torch.Tensor:
        w = self.base_layer.weight
        return self.delta_weight(adapter_name).reshape(w.shape).to(w.dtype)


class QuantumPEFTEmbedding(QuantumPEFTLayer):
    """Quantum-PEFT on an ``nn.Embedding``: W is the (num_embeddings, dim) table, ΔW = s·UΛVᵀ of the same shape.

    A lookup of ΔW is ``ΔW[ids] = s · (U[ids] ⊙ λ) Vᵀ``: the rows of U picked by the ids, never the full table.
    Dropout is not applied to embeddings (the input is ids), as in PEFT's LoRA.
    """

    @staticmethod
    def _check_base(base_layer: nn.Module) -> None:
        if not isinstance(base_layer, nn.Embedding):
            raise ValueError(f"base_layer must be a torch.nn.Embedding, got {type(base_layer).__name__}")

    @staticmethod
    def _matrix_shape(base_layer: nn.Module) -> tuple[int, int]:
        return base_layer.num_embeddings, base_layer.embedding_dim

    def _update(
        self, x: torch.Tensor, ad: QuantumPEFTAdapter, u: torch.Tensor, v: torch.Tensor
    ) -> torch.Tensor:
        h = F.embedding(x, u) * ad.lam  # U[ids] ⊙ λ: (..., K)
        return ad.scaling * F.linear(h, v)  # s · (U[ids] ⊙ λ) Vᵀ: (..., dim)

    def _delta_for_base(self, adapter_name: str) -> torch.Tensor:
        return self.delta_weight(adapter_name).to(self.base_layer.weight.dtype)


def layer_class(module: nn.Module) -> type[QuantumPEFTLayer] | None:
    """The Quantum-PEFT wrapper for ``module`` (None when there is none)."""
    if is_linear_like(module):
        return QuantumPEFTLinear
    if isinstance(module, CONV_TYPES):
        return QuantumPEFTConv
    if isinstance(module, nn.Embedding):
        return QuantumPEFTEmbedding
    return None


def unsupported_reason(module: nn.Module) -> str | None:
    """Why ``module`` cannot be a Quantum-PEFT target (None when it can)."""
    cls = layer_class(module)
    if cls is None:
        return (
            f"a {type(module).__name__}; Quantum-PEFT wraps torch.nn.Linear, transformers Conv1D, bitsandbytes "
            "Linear4bit / Linear8bitLt, torch.nn.Conv1d/2d/3d (groups=1) and torch.nn.Embedding only"
        )
    try:
        cls._check_base(module)
    except ValueError as e:
        return f"a {type(module).__name__}: {str(e).removeprefix('base_layer: ')}"
    return None


def wrap(module: nn.Module, **kwargs) -> QuantumPEFTLayer:
    """``module`` wrapped by the Quantum-PEFT layer of its kind (``kwargs`` as :class:`QuantumPEFTLayer`)."""
    cls = layer_class(module)
    if cls is None:
        raise ValueError(f"cannot wrap {unsupported_reason(module)}")
    return cls(module, **kwargs)
