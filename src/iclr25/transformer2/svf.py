"""Singular Value Fine-tuning (SVF): an expert is one vector per weight matrix that rescales its singular values.

For a frozen weight ``W = U Σ Vᵀ`` (thin SVD, computed once) an expert holds ``z ∈ R^r`` (r = min(n, m)).

* paper form (``mode="paper"``, Sec. 3.2):      ``W' = U (Σ ⊗ diag(z)) Vᵀ``                 (z = 1 is the identity)
* official-code form (``mode="official"``):     ``m = sigmoid(z)·max_mult``,
  ``W' = U diag(σ ⊙ m) Vᵀ · (Σ_i σ_i / Σ_i σ_i m_i)``  — a sigmoid mask renormalised so the nuclear norm of W is kept
  (any constant z is the identity).

:class:`SVFLinear` wraps an ``nn.Linear`` (PEFT-style: the base layer is kept, frozen, for exact resets);
:func:`apply_svf` injects it into any model by module-name matching (``gate_proj``/``up_proj``/``down_proj`` of a
Llama-family model by default, as in the official code; applying it again is a no-op); experts are plain
``{module_name: z}`` dicts saved as small safetensors files; :func:`merge_expert` writes W' into plain ``nn.Linear``
layers for export.

W' is cached while z (or a mixture's scale override) is unchanged, so inference (e.g. a ``generate`` loop) costs
one recomposition per expert change, not one per forward — the official code likewise materialises W' once per
optimizer step. When z needs a gradient (grad mode on, ``z.requires_grad``, no override) W' is recomposed on every
forward so each backward gets its own graph.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from iclr25.common.seeding import torch_generator

MODES = ("official", "paper")
MLP_MODULES = ("gate_proj", "up_proj", "down_proj")  # official code: every "mlp" matrix
ATTN_MODULES = ("q_proj", "v_proj")  # the paper's "attention" ablation (Table 4)

Expert = dict[str, torch.Tensor]  # {module name: z (r,)}


class SVFLinear(nn.Module):
    """A frozen ``nn.Linear`` whose weight is recomposed from its SVD with scaled singular values.

    ``forward(x) = x W'ᵀ + b`` with ``W' = U diag(σ ⊙ s) Vᵀ · c`` where ``s`` is the *effective scale*
    (``z`` in paper mode, ``sigmoid(z)·max_mult`` in official mode, or a fixed override set by a mixture) and
    ``c = Σσ / Σσs`` in official mode (nuclear-norm renormalisation), ``c = 1`` in paper mode.
    """

    def __init__(
        self,
        base: nn.Linear,
        mode: str = "official",
        init_value: float | None = None,
        noise_std: float | None = None,
        max_mult: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> None:
        super().__init__()
        if not isinstance(base, nn.Linear):
            raise ValueError(f"base must be an nn.Linear, got {type(base).__name__}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not max_mult > 0:
            raise ValueError(f"max_mult must be > 0, got {max_mult!r}")
        self.base = base
        self.mode = mode
        self.max_mult = float(max_mult)
        # official init z = 0.1 + 0.01·N(0,1) (cfgs init_val); paper mode starts at the identity z = 1
        self.init_value = float(
            init_value if init_value is not None else (0.1 if mode == "official" else 1.0)
        )
        self.noise_std = float(noise_std if noise_std is not None else (0.01 if mode == "official" else 0.0))
        for p in base.parameters():
            p.requires_grad_(False)
        w = base.weight  # (n_out, n_in)
        n, m = w.shape
        r = min(n, m)
        cdtype = w.dtype if w.dtype in (torch.float32, torch.float64) else torch.float32
        if w.is_meta:  # shapes only (parameter counting on huge configs); no SVD on the meta device
            U = torch.empty(n, r, device="meta", dtype=cdtype)
            S = torch.empty(r, device="meta", dtype=cdtype)
            Vh = torch.empty(r, m, device="meta", dtype=cdtype)
        else:
            U, S, Vh = torch.linalg.svd(w.detach().to(cdtype), full_matrices=False)  # W = U diag(S) Vh
        self.register_buffer("U", U, persistent=False)  # (n, r)
        self.register_buffer("S", S, persistent=False)  # (r,)  σ, descending
        self.register_buffer("Vh", Vh, persistent=False)  # (r, m)
        self.z = nn.Parameter(torch.empty(r, device=w.device, dtype=cdtype))
        self.scale_override: torch.Tensor | None = None  # effective scale s set by a mixture (not trained)
        self.enabled = True
        self._cache: tuple[tuple, torch.Tensor | None, torch.Tensor] | None = None  # (key, override, W')
        self.reset_z(generator)

    @property
    def rank(self) -> int:
        return self.S.numel()

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

    def compose(self, scale: torch.Tensor) -> torch.Tensor:
        """W' from an effective scale s: ``U diag(σ ⊙ s) Vᵀ`` (× ``Σσ/Σσs`` in official mode)."""
        Ss = self.S * scale  # σ ⊙ s
        W = (self.U * Ss) @ self.Vh  # U diag(σ ⊙ s) Vᵀ   (n, m)
        if self.mode == "official":
            W = W * (self.S.sum() / Ss.sum())  # keep the nuclear norm Σσ
        return W

    def merged_weight(self, z: torch.Tensor | None = None) -> torch.Tensor:
        """W' for ``z`` (default: the current z or override), recomposed now (differentiable in z)."""
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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return self.base(x)
        return F.linear(x, self.adapted_weight(), self.base.bias)

    def extra_repr(self) -> str:
        n, m = self.base.weight.shape
        return f"in={m}, out={n}, rank={self.rank}, mode={self.mode}"


def _matches(name: str, target_modules: str | Sequence[str]) -> bool:
    """PEFT's rule: a string is a full-match regex; a list matches the exact name or a ``.suffix``."""
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, name) is not None
    return any(name == t or name.endswith("." + t) for t in target_modules)


def find_targets(model: nn.Module, target_modules: str | Sequence[str] = MLP_MODULES) -> list[str]:
    """Names of the linear layers of ``model`` selected by ``target_modules``: plain ``nn.Linear`` modules and
    layers already wrapped by :class:`SVFLinear` (the frozen ``.base`` inside a wrapper is never a target itself)."""
    wrapped = {n for n, mod in model.named_modules() if isinstance(mod, SVFLinear)}
    out = []
    for n, mod in model.named_modules():
        parent, _, child = n.rpartition(".")
        if isinstance(mod, nn.Linear) and child == "base" and parent in wrapped:
            continue  # the frozen layer inside an SVFLinear
        if isinstance(mod, (nn.Linear, SVFLinear)) and _matches(n, target_modules):
            out.append(n)
    return out


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
) -> nn.Module:
    """Replace the targeted ``nn.Linear`` modules of ``model`` by :class:`SVFLinear` (in place) and freeze the rest.

    Returns ``model``; its only trainable parameters are then the z vectors. Raises ``ValueError`` when no module
    matches. Works on any HF Llama-family model (names ``gate_proj``/``up_proj``/``down_proj``, ``q_proj``/``v_proj``).
    Idempotent: layers already wrapped are left as they are (their z untouched; a different ``mode`` or
    ``max_mult`` is a ``ValueError``), so applying it twice never wraps a layer twice.
    """
    names = find_targets(model, target_modules)
    if not names:
        raise ValueError(
            f"target_modules={target_modules!r} matched no nn.Linear module of {type(model).__name__}"
        )
    mods = dict(model.named_modules())
    for name in names:
        m = mods[name]
        if isinstance(m, SVFLinear) and (m.mode != mode or m.max_mult != float(max_mult)):
            raise ValueError(
                f"{name!r} is already an SVFLinear with mode={m.mode!r}, max_mult={m.max_mult}; "
                f"apply_svf was asked for mode={mode!r}, max_mult={max_mult}"
            )
    g = torch_generator(seed)
    for name in names:
        if isinstance(mods[name], SVFLinear):
            continue
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(
            parent,
            child,
            SVFLinear(getattr(parent, child), mode, init_value, noise_std, max_mult, generator=g),
        )
    zs = {id(m.z) for m in svf_modules(model).values()}
    for p in model.parameters():
        if id(p) not in zs:
            p.requires_grad_(False)
    return model


def merge_expert(model: nn.Module, expert: Mapping[str, torch.Tensor] | None = None) -> nn.Module:
    """Replace every :class:`SVFLinear` by a plain ``nn.Linear`` holding its adapted weight W' (in place).

    Uses ``expert`` when given, else each layer's current z or mixture override (a disabled layer keeps W). The
    result has the original model's module names and ``state_dict`` keys, so ``save_pretrained`` exports a
    standard checkpoint; the merged layers stay frozen. Returns ``model``.
    """
    mods = _svf_or_raise(model)
    if expert is not None:
        set_expert(model, expert)
    for name, m in mods.items():
        base = m.base
        with torch.no_grad():
            W = m.merged_weight() if m.enabled else base.weight
            lin = nn.Linear(
                base.in_features,
                base.out_features,
                bias=base.bias is not None,
                device=base.weight.device,
                dtype=base.weight.dtype,
            )
            lin.weight.copy_(W)
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


def set_expert(model: nn.Module, expert: Mapping[str, torch.Tensor]) -> None:
    """Load z vectors (names and lengths must match the model's SVF modules exactly)."""
    mods = _svf_or_raise(model)
    if set(expert) != set(mods):
        missing, extra = sorted(set(mods) - set(expert)), sorted(set(expert) - set(mods))
        raise ValueError(
            f"expert keys must equal the SVF modules; missing {missing[:3]}, unexpected {extra[:3]}"
        )
    with torch.no_grad():
        for n, m in mods.items():
            z = expert[n]
            if z.shape != m.z.shape:
                raise ValueError(f"expert[{n!r}] must have shape {tuple(m.z.shape)}, got {tuple(z.shape)}")
            m.z.copy_(z.to(m.z))
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
