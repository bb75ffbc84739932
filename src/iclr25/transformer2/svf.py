"""Singular Value Fine-tuning (SVF): an expert is one vector per weight matrix that rescales its singular values.

For a frozen weight ``W = U Σ Vᵀ`` (thin SVD, computed once per weight and cached: ``svd_cache.py``) an expert holds
``z ∈ R^r`` (r = min(n, m)).

* paper form (``mode="paper"``, Sec. 3.2):      ``W' = U (Σ ⊗ diag(z)) Vᵀ``                 (z = 1 is the identity)
* official-code form (``mode="official"``):     ``m = sigmoid(z)·max_mult``,
  ``W' = U diag(σ ⊙ m) Vᵀ · (Σ_i σ_i / Σ_i σ_i m_i)``  — a sigmoid mask renormalised so the nuclear norm of W is kept
  (any constant z is the identity).

:class:`SVFLinear` wraps an ``nn.Linear`` or GPT-2's ``Conv1D`` (PEFT-style: the base layer is kept, frozen, for
exact resets; besides it only σ and the square singular-vector factor of the smaller side are stored);
:func:`apply_svf` injects it into any model by module-name matching (``gate_proj``/``up_proj``/``down_proj`` of a
Llama-family model by default, as in the official code; ``GPT2_MLP_MODULES`` for GPT-2; applying it again is a
no-op); experts are plain ``{module_name: z}`` dicts saved as small safetensors files; :func:`using_row_experts`
gives every row of a batch its own expert (vectorised); :func:`merge_expert` writes W' into plain layers for export.

W' is cached while z (or a mixture's scale override) is unchanged, so inference (e.g. a ``generate`` loop) costs
one recomposition per expert change, not one per forward — the official code likewise materialises W' once per
optimizer step. When z needs a gradient (grad mode on, ``z.requires_grad``, no override) W' is recomposed on every
forward so each backward gets its own graph.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common.seeding import torch_generator

from .svd_cache import MEMORY_SVD_CACHE, SVDCache, as_svd_cache, decompose

MODES = ("official", "paper")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")  # official code: every "mlp" matrix
ATTN_MODULES = ("q_proj", "v_proj")  # the paper's "attention" ablation (Table 4)
GPT2_MLP_MODULES = (
    "mlp.c_fc",
    "mlp.c_proj",
)  # GPT-2's MLP (Conv1D layers; "c_proj" alone also hits attn.c_proj)

Expert = dict[str, torch.Tensor]  # {module name: z (r,)}


def _conv1d_type() -> type | None:
    """``transformers.pytorch_utils.Conv1D`` (GPT-2's linear layer, weight stored as (in, out)), if importable."""
    try:
        from transformers.pytorch_utils import Conv1D
    except ImportError:  # pragma: no cover - transformers is a core dependency
        return None
    return Conv1D


def is_conv1d(module: nn.Module) -> bool:
    c = _conv1d_type()
    return c is not None and isinstance(module, c)


def _is_linear_like(module: nn.Module) -> bool:
    return isinstance(module, nn.Linear) or is_conv1d(module)


FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _check_base(base: nn.Module, name: str = "base") -> None:
    if not _is_linear_like(base):
        raise ValueError(
            f"{name} must be an nn.Linear or a transformers Conv1D (GPT-2), got {type(base).__name__}"
        )
    if base.weight.dtype not in FLOAT_DTYPES:
        raise ValueError(
            f"{name}.weight must have a floating dtype {[str(d) for d in FLOAT_DTYPES]}, got {base.weight.dtype} "
            f"({type(base).__name__}): quantised layers (bitsandbytes, GPTQ, fp8, …) are refused — SVF needs the "
            "SVD of a dense weight; dequantise the model first"
        )


class SVFLinear(nn.Module):
    """A frozen linear layer (``nn.Linear``, or GPT-2's ``Conv1D``) whose singular values are rescaled.

    For the base weight ``W = U diag(σ) Vᵀ`` (out × in) the adapted weight is ``W' = U diag(σ ⊙ s·c) Vᵀ`` where ``s`` is
    the *effective scale* (``z`` in paper mode, ``sigmoid(z)·max_mult`` in official mode, or a fixed override set by
    a mixture) and ``c = Σσ / Σσs`` in official mode (nuclear-norm renormalisation), ``c = 1`` in paper mode.

    Stored: the base layer (untouched, so :func:`svf_disabled` is exact), σ (``S``) and only the *square* factor
    ``Q`` of the smaller side of the stored matrix ``A`` (``A = W`` for ``nn.Linear``, ``Wᵀ`` for ``Conv1D``):
    ``Q = U`` if rows(A) ≤ cols(A), else ``Q = V``. With ``d = s·c − 1``,

        ``A' = A + Q diag(d) Qᵀ A``   (Q = U)        ``A' = A + A Q diag(d) Qᵀ``   (Q = V)

    which equals ``U diag(σ ⊙ s·c) Vᵀ`` because ``UᵀA = diag(σ)Vᵀ`` (resp. ``AV = U diag(σ)``); the other singular
    vector factor is never needed, and ``d = 0`` (paper mode, z = 1) gives back ``A`` bit for bit.
    """

    def __init__(
        self,
        base: nn.Module,
        mode: str = "official",
        init_value: float | None = None,
        noise_std: float | None = None,
        max_mult: float = 1.0,
        generator: torch.Generator | None = None,
        svd_cache: SVDCache | str | os.PathLike | None = MEMORY_SVD_CACHE,
    ) -> None:
        super().__init__()
        _check_base(base)
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not max_mult > 0:
            raise ValueError(f"max_mult must be > 0, got {max_mult!r}")
        self.base = base
        self.mode = mode
        self.max_mult = float(max_mult)
        self.transposed = is_conv1d(base)  # Conv1D stores A = Wᵀ (in, out) and computes x A + b
        # official init z = 0.1 + 0.01·N(0,1) (cfgs init_val); paper mode starts at the identity z = 1
        self.init_value = float(
            init_value if init_value is not None else (0.1 if mode == "official" else 1.0)
        )
        self.noise_std = float(noise_std if noise_std is not None else (0.01 if mode == "official" else 0.0))
        for p in base.parameters():
            p.requires_grad_(False)
        A = base.weight  # (out, in) for nn.Linear, (in, out) for Conv1D
        S, Q, self.left = decompose(A, as_svd_cache(svd_cache))  # σ (r,), Q (r, r); see svd_cache.py
        self.register_buffer("S", S, persistent=False)  # (r,)  σ, descending
        self.register_buffer("Q", Q, persistent=False)  # (r, r)  U if self.left else V
        self.z = nn.Parameter(torch.empty(S.numel(), device=A.device, dtype=S.dtype))
        self.scale_override: torch.Tensor | None = None  # effective scale s set by a mixture (not trained)
        self.enabled = True
        self.row_experts: tuple[torch.Tensor, torch.Tensor] | None = (
            None  # (d (E, r), index (B,)), see using_row_experts
        )
        self._cache: tuple[tuple, torch.Tensor | None, torch.Tensor] | None = None  # (key, override, W')
        self.reset_z(generator)

    @property
    def rank(self) -> int:
        return self.S.numel()

    @property
    def in_features(self) -> int:
        return self.base.weight.shape[0 if self.transposed else 1]

    @property
    def out_features(self) -> int:
        return self.base.weight.shape[1 if self.transposed else 0]

    def reset_z(self, generator: torch.Generator | None = None) -> None:
        """z ← init_value + noise_std·N(0, 1) (the official init); noise drawn from ``generator`` on CPU."""
        if self.z.is_meta:
            return
        noise = torch.randn(self.rank, generator=generator, dtype=torch.float64) if self.noise_std else 0.0
        with torch.no_grad():
            self.z.copy_(
                (self.init_value + self.noise_std * noise) * torch.ones(self.rank, dtype=torch.float64)
            )

    def effective_scale(self, z: torch.Tensor | None = None) -> torch.Tensor:
        """s = z (paper) or sigmoid(z)·max_mult (official); a mixture's override wins when set and z is None."""
        if z is None and self.scale_override is not None:
            return self.scale_override
        z = self.z if z is None else z
        return torch.sigmoid(z) * self.max_mult if self.mode == "official" else z

    def scale_delta(self, scale: torch.Tensor) -> torch.Tensor:
        """d = s·c − 1 with c = Σσ/Σσs in official mode (keeps the nuclear norm Σσ), c = 1 in paper mode."""
        if self.mode == "official":
            scale = scale * (self.S.sum() / (self.S * scale).sum())
        return scale - 1

    def compose(self, scale: torch.Tensor) -> torch.Tensor:
        """A' from an effective scale s, in the base layer's own layout and the compute dtype:
        ``A + Q diag(d) Qᵀ A`` (Q = U) or ``A + A Q diag(d) Qᵀ`` (Q = V), d = s·c − 1."""
        Q = self.Q
        # autocast off: under torch.autocast(bf16) (e.g. Trainer(bf16=True)) these products would run in bf16 and the
        # cached W' would keep that error after the autocast region; the layer's own matmul still follows autocast
        with (
            torch.autocast(Q.device.type, enabled=False)
            if Q.device.type in ("cpu", "cuda")
            else nullcontext()
        ):
            d = self.scale_delta(scale.to(Q.dtype))
            A = self.base.weight.to(Q.dtype)
            if self.left:
                return A + (Q * d) @ (Q.mT @ A)  # U diag(d) (Uᵀ A)
            return A + ((A @ Q) * d) @ Q.mT  # (A V) diag(d) Vᵀ

    def merged_weight(self, z: torch.Tensor | None = None) -> torch.Tensor:
        """The adapted weight for ``z`` (default: the current z or override), recomposed now (differentiable in z),
        in the base layer's layout and dtype: W' (out, in) for ``nn.Linear``, W'ᵀ (in, out) for ``Conv1D``."""
        return self.compose(self.effective_scale(z)).to(self.base.weight.dtype)

    def _cache_key(self) -> tuple:
        z, w, o = self.z, self.base.weight, self.scale_override
        # in-place updates (optimizer steps, copy_) bump ``_version``; ``.to()``/``.data =`` change data_ptr
        return (
            z._version,
            z.data_ptr(),
            w._version,
            w.data_ptr(),
            w.dtype,
            w.device,
            self.S.data_ptr(),
            self.Q.data_ptr(),
            None if o is None else o._version,
            self.mode,
            self.max_mult,
            torch.is_inference_mode_enabled(),
        )

    def adapted_weight(self) -> torch.Tensor:
        """W' used by ``forward``: cached while z / the override are unchanged; recomposed (with its graph) on every
        call when z needs a gradient, since a graph is freed by the backward that uses it."""
        o = self.scale_override
        if o is None and self.z.requires_grad and torch.is_grad_enabled():
            return self.merged_weight()
        key = self._cache_key()
        c = self._cache
        if c is not None and c[1] is o and c[0] == key:
            return c[2]
        with torch.no_grad():
            W = self.merged_weight()
        self._cache = (key, o, W)
        return W

    def clear_cache(self) -> None:
        """Drop the cached W' (needed only after editing ``z.data`` in place, which bypasses version tracking)."""
        self._cache = None

    def _apply(self, fn, *args, **kwargs):  # .to() / .half() / .cuda(): the cached W' is stale
        self._cache = None
        return super()._apply(fn, *args, **kwargs)

    def _layer(self, x: torch.Tensor, A: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        """The base layer's own operation with weight ``A`` (its layout): ``x Aᵀ + b`` or, for Conv1D, ``x A + b``."""
        if not self.transposed:
            return F.linear(x, A, bias)
        x2 = x.reshape(-1, x.shape[-1])
        y = torch.addmm(bias, x2, A) if bias is not None else x2 @ A  # as Conv1D.forward
        return y.view(*x.shape[:-1], A.shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return self.base(x)
        if self.row_experts is not None:
            return self._forward_rows(x)
        return self._layer(x, self.adapted_weight(), self.base.bias)

    def _forward_rows(self, x: torch.Tensor) -> torch.Tensor:
        """Row b uses its own d_b (``using_row_experts``), in factorised form — no W' per expert, no loop over rows:
        Q on the output side: ``y = h + ((h Q) ⊙ d_b) Qᵀ + b`` with ``h = x Wᵀ``; on the input side:
        ``y = layer(x + ((x Q) ⊙ d_b) Qᵀ)``."""
        delta, index = self.row_experts  # (E, r), (B,)
        B = index.numel()
        if x.dim() < 2 or x.shape[0] != B:
            raise ValueError(
                f"using_row_experts: index has {B} rows, but this layer got input of shape {tuple(x.shape)} "
                f"(expected leading dimension {B}); beam search, num_return_sequences > 1 or packed sequences change "
                "the batch — repeat the index to match"
            )
        Q = self.Q
        d = delta[index].view(B, *([1] * (x.dim() - 2)), -1)  # (B, 1, …, r)
        if self.left != self.transposed:  # Q lives in the output space (Linear with Q = U, Conv1D with Q = V)
            h = self._layer(x, self.base.weight, None).to(Q.dtype)  # x Wᵀ  (B, …, out)
            y = h + ((h @ Q) * d) @ Q.mT
            y = y.to(x.dtype)
            return y if self.base.bias is None else y + self.base.bias
        xc = x.to(Q.dtype)
        return self.base((xc + ((xc @ Q) * d) @ Q.mT).to(x.dtype))  # (x + x V diag(d) Vᵀ) Wᵀ + b

    def extra_repr(self) -> str:
        kind = "Conv1D" if self.transposed else "Linear"
        return (
            f"in={self.in_features}, out={self.out_features}, rank={self.rank}, mode={self.mode}, base={kind}"
        )


def _matches(name: str, target_modules: str | Sequence[str]) -> bool:
    """PEFT's rule: a string is a full-match regex; a list matches the exact name or a ``.suffix``."""
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, name) is not None
    return any(name == t or name.endswith("." + t) for t in target_modules)


def find_targets(model: nn.Module, target_modules: str | Sequence[str] = MLP_MODULES) -> list[str]:
    """Names of the linear layers of ``model`` selected by ``target_modules``: ``nn.Linear`` and GPT-2 ``Conv1D``
    modules and layers already wrapped by :class:`SVFLinear` (the frozen ``.base`` inside a wrapper is never a target
    itself)."""
    wrapped = {n for n, mod in model.named_modules() if isinstance(mod, SVFLinear)}
    out = []
    for n, mod in model.named_modules():
        parent, _, child = n.rpartition(".")
        if _is_linear_like(mod) and child == "base" and parent in wrapped:
            continue  # the frozen layer inside an SVFLinear
        if (isinstance(mod, SVFLinear) or _is_linear_like(mod)) and _matches(n, target_modules):
            out.append(n)
    return out


def _layer_suffixes(model: nn.Module) -> list[str]:
    """The distinct last name parts of the model's linear layers (for error messages)."""
    seen = dict.fromkeys(
        n.rpartition(".")[2] for n, mod in model.named_modules() if n and _is_linear_like(mod)
    )
    return [k for k in seen if k != "base"]


def count_svf_params(model: nn.Module, target_modules: str | Sequence[str] = MLP_MODULES) -> int:
    """Trainable parameters of one SVF expert: Σ min(n_out, n_in) over the targeted matrices (no SVD needed; the
    same number before and after :func:`apply_svf`)."""
    mods = dict(model.named_modules())
    total = 0
    for n in find_targets(model, target_modules):
        mod = mods[n]
        total += mod.rank if isinstance(mod, SVFLinear) else min(mod.weight.shape)
    return total


def apply_svf(
    model: nn.Module,
    target_modules: str | Sequence[str] = MLP_MODULES,
    mode: str = "official",
    init_value: float | None = None,
    noise_std: float | None = None,
    max_mult: float = 1.0,
    seed: int = 0,
    svd_cache: SVDCache | str | os.PathLike | None = MEMORY_SVD_CACHE,
) -> nn.Module:
    """Replace the targeted linear layers of ``model`` by :class:`SVFLinear` (in place) and freeze the rest.

    Returns ``model``; its only trainable parameters are then the z vectors. Targets are ``nn.Linear`` modules and
    GPT-2's ``Conv1D`` (``GPT2_MLP_MODULES``); a quantised layer (non-float weight) is refused, naming it, before
    anything is changed. Raises ``ValueError`` when no module matches (listing the model's linear layer names).
    Idempotent: layers already wrapped are left as they are (their z untouched; a different ``mode`` or
    ``max_mult`` is a ``ValueError``), so applying it twice never wraps a layer twice.

    ``svd_cache``: where the SVD of each weight is looked up and kept (keyed by the SHA-256 of the weight) — the
    process-wide in-memory cache by default (weak: no extra memory, nothing written), a folder path or
    ``SVDCache(folder)`` to keep ``<sha256>.safetensors`` files across processes, ``None`` to always recompute.
    """
    cache = as_svd_cache(svd_cache)
    names = find_targets(model, target_modules)
    if not names:
        raise ValueError(
            f"target_modules={target_modules!r} matched no nn.Linear or Conv1D module of {type(model).__name__}; "
            f"its linear layers are named …{', …'.join(_layer_suffixes(model)[:12]) or ' (none)'}"
        )
    mods = dict(model.named_modules())
    for name in names:
        m = mods[name]
        if isinstance(m, SVFLinear):
            if m.mode != mode or m.max_mult != float(max_mult):
                raise ValueError(
                    f"{name!r} is already an SVFLinear with mode={m.mode!r}, max_mult={m.max_mult}; "
                    f"apply_svf was asked for mode={mode!r}, max_mult={max_mult}"
                )
        else:
            _check_base(m, f"module {name!r}")
    g = torch_generator(seed)
    for name in names:
        if isinstance(mods[name], SVFLinear):
            continue
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(
            parent,
            child,
            SVFLinear(
                getattr(parent, child), mode, init_value, noise_std, max_mult, generator=g, svd_cache=cache
            ),
        )
    zs = {id(m.z) for m in svf_modules(model).values()}
    for p in model.parameters():
        if id(p) not in zs:
            p.requires_grad_(False)
    return model


def merge_expert(model: nn.Module, expert: Mapping[str, torch.Tensor] | None = None) -> nn.Module:
    """Replace every :class:`SVFLinear` by a plain layer of its base's kind (``nn.Linear`` or ``Conv1D``) holding its
    adapted weight W' (in place).

    Uses ``expert`` when given, else each layer's current z or mixture override (a disabled layer keeps W). The
    result has the original model's module names and ``state_dict`` keys, so ``save_pretrained`` exports a
    standard checkpoint; the merged layers stay frozen. Returns ``model``.
    """
    mods = _svf_or_raise(model)
    if expert is not None:
        set_expert(model, expert)
    for name, m in mods.items():
        base = m.base
        w = base.weight
        with torch.no_grad():
            A = m.merged_weight() if m.enabled else w  # in the base layer's own layout
            if m.transposed:
                with torch.device(w.device):
                    lin = type(base)(m.out_features, m.in_features).to(w.dtype)
            else:
                lin = nn.Linear(
                    m.in_features, m.out_features, bias=base.bias is not None, device=w.device, dtype=w.dtype
                )
            lin.weight.copy_(A)
            if base.bias is not None:
                lin.bias.copy_(base.bias)
        lin.requires_grad_(False)
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, lin)
    return model


def svf_modules(model: nn.Module) -> dict[str, SVFLinear]:
    """``{name: SVFLinear}`` in module order (the coordinate order of an expert)."""
    return {n: m for n, m in model.named_modules() if isinstance(m, SVFLinear)}


def _svf_or_raise(model: nn.Module) -> dict[str, SVFLinear]:
    mods = svf_modules(model)
    if not mods:
        raise ValueError("model has no SVFLinear module; call apply_svf(model, ...) first")
    return mods


def svf_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [m.z for m in _svf_or_raise(model).values()]


def reset_svf(model: nn.Module, seed: int = 0) -> None:
    """Re-initialise every z (official init noise from ``seed``) and clear overrides."""
    g = torch_generator(seed)
    for m in _svf_or_raise(model).values():
        m.reset_z(g)
        m.scale_override = None


def get_expert(model: nn.Module) -> Expert:
    """A detached copy ``{name: z}`` of the current expert."""
    return {n: m.z.detach().clone() for n, m in _svf_or_raise(model).items()}


def _check_expert(
    mods: Mapping[str, SVFLinear], expert: Mapping[str, torch.Tensor], what: str = "expert"
) -> None:
    if set(expert) != set(mods):
        missing, extra = sorted(set(mods) - set(expert)), sorted(set(expert) - set(mods))
        raise ValueError(
            f"{what} keys must equal the SVF modules; missing {missing[:3]}, unexpected {extra[:3]}"
        )
    for n, m in mods.items():
        if expert[n].shape != m.z.shape:
            raise ValueError(
                f"{what}[{n!r}] must have shape {tuple(m.z.shape)}, got {tuple(expert[n].shape)}"
            )


def set_expert(model: nn.Module, expert: Mapping[str, torch.Tensor]) -> None:
    """Load z vectors (names and lengths must match the model's SVF modules exactly)."""
    mods = _svf_or_raise(model)
    _check_expert(mods, expert)
    with torch.no_grad():
        for n, m in mods.items():
            m.z.copy_(expert[n].to(m.z))
            m.scale_override = None


def set_scales(model: nn.Module, scales: Mapping[str, torch.Tensor] | None) -> None:
    """Fix the effective scales s (e.g. a mixture of experts); ``None`` clears the overrides."""
    mods = _svf_or_raise(model)
    if scales is not None and set(scales) != set(mods):
        raise ValueError("scales keys must equal the SVF module names")
    for n, m in mods.items():
        m.scale_override = None if scales is None else scales[n].to(m.S).detach()


@contextmanager
def svf_disabled(model: nn.Module) -> Iterator[nn.Module]:
    """Run the base weights W exactly (the 'other' route and the KL reference policy)."""
    mods = _svf_or_raise(model)
    prev = {n: m.enabled for n, m in mods.items()}
    for m in mods.values():
        m.enabled = False
    try:
        yield model
    finally:
        for n, m in mods.items():
            m.enabled = prev[n]


@contextmanager
def using_expert(model: nn.Module, expert: Mapping[str, torch.Tensor] | None) -> Iterator[nn.Module]:
    """Temporarily load ``expert`` (``None`` = base weights); the previous z and overrides are restored."""
    if expert is None:
        with svf_disabled(model):
            yield model
        return
    mods = _svf_or_raise(model)
    saved = get_expert(model)
    saved_over = {n: m.scale_override for n, m in mods.items()}
    set_expert(model, expert)
    try:
        yield model
    finally:
        set_expert(model, saved)
        for n, m in mods.items():
            m.scale_override = saved_over[n]


@contextmanager
def using_scales(model: nn.Module, scales: Mapping[str, torch.Tensor]) -> Iterator[nn.Module]:
    """Temporarily fix the effective scales (a mixed expert)."""
    mods = _svf_or_raise(model)
    saved_over = {n: m.scale_override for n, m in mods.items()}
    set_scales(model, scales)
    try:
        yield model
    finally:
        for n, m in mods.items():
            m.scale_override = saved_over[n]


@contextmanager
def using_row_experts(
    model: nn.Module,
    experts: Sequence[Mapping[str, torch.Tensor] | None],
    index: torch.Tensor | Sequence[int],
    scales: bool = False,
) -> Iterator[nn.Module]:
    """Every row of a batch with its own expert, in one forward: row b uses ``experts[index[b]]``.

    ``experts``: z dicts (as :func:`get_expert` returns them; ``scales=True``: effective scales, e.g. a
    :func:`~.adaptation.mix_experts` mixture) or ``None`` for the base weights (the 'other' route). ``index``: (B,)
    integers in ``[0, len(experts))``. Inside the context every SVF layer computes, per row, the factorised form of
    its own W'_b (see :meth:`SVFLinear._forward_rows`): no W' is built per expert and there is no loop over rows, so
    a mixed batch costs one forward. The batch of every forward inside must have ``B`` rows (``generate`` with
    greedy/sampled decoding keeps it; beam search and ``num_return_sequences > 1`` do not: repeat the index).
    Disabled layers (:func:`svf_disabled`) still run the base weights.
    """
    mods = _svf_or_raise(model)
    if len(experts) == 0:
        raise ValueError("experts must hold at least one expert (or None for the base weights), got none")
    idx = torch.as_tensor(index)
    if idx.dim() != 1 or idx.dtype.is_floating_point or idx.dtype == torch.bool or idx.is_complex():
        raise ValueError(
            f"index must be a 1-D integer sequence (one expert per row), got {idx.dtype} {tuple(idx.shape)}"
        )
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= len(experts)):
        raise ValueError(
            f"index must hold values in [0, {len(experts)}) (the experts given), got min {int(idx.min())}, "
            f"max {int(idx.max())}"
        )
    for k, e in enumerate(experts):
        if e is not None:
            _check_expert(mods, e, f"experts[{k}]")
    saved = {n: m.row_experts for n, m in mods.items()}
    with torch.no_grad():
        for n, m in mods.items():
            rows = [
                torch.zeros_like(m.S)
                if e is None
                else m.scale_delta(e[n].to(m.S) if scales else m.effective_scale(e[n].to(m.S)))
                for e in experts
            ]
            m.row_experts = (torch.stack(rows), idx.to(device=m.S.device, dtype=torch.long))  # (E, r), (B,)
    try:
        yield model
    finally:
        for n, m in mods.items():
            m.row_experts = saved[n]


def expert_scales(model: nn.Module, expert: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Effective scales s of an expert under the model's SVF modes (sigmoid·max_mult in official mode)."""
    mods = _svf_or_raise(model)
    return {n: mods[n].effective_scale(expert[n].to(mods[n].S)).detach() for n in mods}


def save_expert(
    expert: Mapping[str, torch.Tensor], path: str | Path, metadata: Mapping[str, str] | None = None
) -> Path:
    """Write an expert as a small safetensors file (a few KB: one vector per matrix)."""
    from safetensors.torch import save_file

    from iclr25.common.io import atomic_write_with

    tensors = {k: v.detach().cpu().contiguous() for k, v in expert.items()}
    return atomic_write_with(path, lambda tmp: save_file(tensors, tmp, metadata=dict(metadata or {})))


def load_expert(path: str | Path) -> Expert:
    from safetensors.torch import load_file

    return dict(load_file(str(path)))
