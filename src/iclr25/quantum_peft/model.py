"""PEFT-shaped injector: ``QuantumPEFTConfig`` + ``get_qpeft_model`` for any PyTorch / Hugging Face model.

Mirrors HF PEFT's LoRA ergonomics (``peft.LoraConfig`` / ``get_peft_model``): target modules are picked by
name suffix (list) or full-name regex (str) with PEFT's own matching rules, every other parameter is frozen
(``modules_to_save`` stay trainable, e.g. a fresh classification head), ``merge_and_unload`` folds ΔW into the
base weights, and ``save_pretrained`` writes only the adapter (``qpeft_adapter_model.safetensors`` +
``qpeft_adapter_config.json``). The file names are our own, not PEFT's: ``peft.PeftModel.from_pretrained`` on a
folder named like a PEFT adapter looks ``peft_type`` up in PEFT's closed registry and fails with
``KeyError: 'QUANTUM_PEFT'``; with these names it reports that the folder holds no PEFT adapter, and
:meth:`QuantumPEFTModel.from_pretrained` is the loader. Folders written with PEFT's names by earlier versions
still load.

Why not ``peft.register_peft_method``: in PEFT 0.21 it only accepts names that already exist in the closed
``peft.utils.PeftType`` enum ("Unknown PEFT type …, please add an entry to PeftType"), so a third-party tuner
cannot be registered without patching PEFT itself. We therefore keep PEFT's shapes and semantics here.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import json
import re
import tempfile
import types
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from ..common.fields import bounded, check_fields
from .layer import (
    BASE_ADAPTER,
    MixedBatch,
    QuantumPEFTLayer,
    QuantumPEFTLinear,
    _check_adapter_name,
    _groups,
    is_linear_like,
    quantize_angles,
    unsupported_reason,
    wrap,
)
from .unitary import NODES, node_columns

ADAPTER_WEIGHTS = "qpeft_adapter_model.safetensors"
ADAPTER_CONFIG = "qpeft_adapter_config.json"
LEGACY_ADAPTER_WEIGHTS = "adapter_model.safetensors"  # PEFT's names, written by earlier versions: still read
LEGACY_ADAPTER_CONFIG = "adapter_config.json"
ALL_LINEAR = "all-linear"  # PEFT's shorthand: every nn.Linear / Conv1D except the output head
SEQ_CLS_HEAD_NAMES = ("score", "classifier")  # heads PEFT excludes from all-linear on classifiers
DEFAULT_ADAPTER = "default"


@dataclass(frozen=True)
class QuantumPEFTConfig:
    """Configuration of a Quantum-PEFT adapter (field names follow ``peft.LoraConfig`` where they overlap).

    target_modules: list of module-name suffixes (``["query", "value"]``), one regex matched against the
        full module name (``r".*\\.attention\\.(query|value)"``), or ``"all-linear"`` (every ``nn.Linear`` /
        GPT-2 ``Conv1D`` except the output head), as in PEFT.
    rank: K, the intrinsic rank (number of singular directions, Λ = diag(λ_1..λ_K)).
    layers: L, entangling layers of each Pauli node ((2L+1)·n − 2L angles per 2^n node).
    alpha: the scale s in ΔW = s·UΛVᵀ (not divided by K: Λ carries the per-direction magnitudes).
    init_std: θ ~ N(0, init_std²). node: ``"qsd"`` (default) or ``"pad_qr"`` for non-power-of-two sizes.
    angle_bits: optional b-bit angle quantisation (straight-through). modules_to_save: extra modules kept
        trainable and stored with the adapter. init_seed: seed of the angle initialisation.
    """

    target_modules: list[str] | str = field(default_factory=lambda: ["q_proj", "v_proj"])
    rank: int = bounded(2, lo=1)
    layers: int = bounded(1, lo=0)
    alpha: float = bounded(1.0)
    dropout: float = bounded(0.0, lo=0, hi=1, hi_open=True)
    init_std: float = bounded(0.5, lo=0)
    node: str = bounded("qsd", choices=NODES)
    angle_bits: int | None = bounded(None, kind=int, lo=1, hi=16, optional=True)
    modules_to_save: list[str] | None = None
    exclude_modules: list[str] | str | None = None
    init_seed: int = bounded(0, lo=0)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above; below: the list fields
        tm = self.target_modules
        if isinstance(tm, tuple):
            object.__setattr__(self, "target_modules", list(tm))
            tm = self.target_modules
        if not (isinstance(tm, str) and tm) and not (
            isinstance(tm, list) and tm and all(isinstance(t, str) for t in tm)
        ):
            raise ValueError(
                f"target_modules must be a non-empty list of names or a regex string, got {tm!r}"
            )
        mts = self.modules_to_save
        if isinstance(mts, tuple):
            object.__setattr__(self, "modules_to_save", list(mts))
            mts = self.modules_to_save
        if mts is not None and not (isinstance(mts, list) and all(isinstance(t, str) and t for t in mts)):
            raise ValueError(f"modules_to_save must be None or a list of module names, got {mts!r}")

    def to_dict(self) -> dict[str, Any]:
        return {"peft_type": "QUANTUM_PEFT", **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> QuantumPEFTConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in names})


def _matches(name: str, patterns: list[str] | str | None) -> bool:
    """PEFT's rule: a str is a full-name regex; a list matches the name or a ``.suffix`` of it."""
    if not patterns:
        return False
    if isinstance(patterns, str):
        return re.fullmatch(patterns, name) is not None
    return any(name == t or name.endswith("." + t) for t in patterns)


def _set_submodule(root: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    setattr(root.get_submodule(parent_name) if parent_name else root, child, new)


class ModulesToSave(nn.Module):
    """A module listed in ``modules_to_save``: the original is kept untouched, one trainable copy per adapter.

    As PEFT's ``ModulesToSaveWrapper``: the active adapter's copy is used (the original when the adapter has no
    copy here or adapters are disabled); ``unload()`` / ``disable_adapter()`` give back the original module,
    ``merge_and_unload()`` keeps the active copy. Attributes not found here are read from the module in use.
    """

    def __init__(self, module: nn.Module, adapter_name: str = "default") -> None:
        super().__init__()
        self.original_module = module
        self.trained_modules = nn.ModuleDict()
        self.active_adapter = adapter_name
        self.disabled = False
        self.mixed: MixedBatch | None = None  # set by the model for one mixed-adapter call
        for p in self.original_module.parameters():
            p.requires_grad_(False)
        self.add_copy(adapter_name)

    def add_copy(self, adapter_name: str) -> None:
        """A fresh trainable copy of the original for ``adapter_name`` (frozen unless that adapter is active)."""
        if adapter_name in self.trained_modules:
            raise ValueError(f"adapter_name {adapter_name!r} already has a copy of this module")
        copy_ = copy.deepcopy(self.original_module)
        copy_.requires_grad_(adapter_name == self.active_adapter)
        self.trained_modules[adapter_name] = copy_

    def set_adapter(self, adapter_name: str) -> None:
        self.active_adapter = adapter_name
        for name, m in self.trained_modules.items():
            m.requires_grad_(name == adapter_name)

    def delete_copy(self, adapter_name: str) -> None:
        if adapter_name in self.trained_modules:
            del self.trained_modules[adapter_name]

    @property
    def trained_module(self) -> nn.Module | None:
        """The active adapter's trained copy (None if it has none)."""
        return (
            self.trained_modules[self.active_adapter] if self.active_adapter in self.trained_modules else None
        )

    def active(self) -> nn.Module:
        trained = self.trained_module
        return self.original_module if self.disabled or trained is None else trained

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.mixed is None or self.disabled or not args:
            return self.active()(*args, **kwargs)
        return self._mixed_forward(*args, **kwargs)

    def _mixed_forward(self, x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        """Each batch row through its adapter's copy (``"__base__"`` or no copy: the original module)."""
        names = self.mixed.rows(x.shape[0])  # type: ignore[union-attr]
        groups = _groups(names)
        trained = self.trained_modules
        pick = {n: trained[n] if n in trained else self.original_module for n in groups}
        if len({id(m) for m in pick.values()}) == 1:  # every row uses the same module
            return next(iter(pick.values()))(x, *args, **kwargs)
        out: torch.Tensor | None = None
        for name, rows in groups.items():
            idx = torch.tensor(rows, device=x.device)  # (rows,)
            o = pick[name](x.index_select(0, idx), *args, **kwargs)
            if not isinstance(o, torch.Tensor):
                raise TypeError(
                    f"adapter_names: mixed batches need modules_to_save that return one tensor, "
                    f"{type(self.original_module).__name__} returned {type(o).__name__}"
                )
            if out is None:
                out = o.new_empty((x.shape[0], *o.shape[1:]))
            out = out.index_copy(0, idx, o)
        return out  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name in ("original_module", "trained_modules"):
                raise
            return getattr(self.active(), name)


def _user_modules(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """``named_modules`` without the insides of Quantum-PEFT layers and ``ModulesToSave`` wrappers."""
    inside: list[str] = []
    for n, m in model.named_modules():
        if any(n.startswith(w + ".") for w in inside):
            continue
        yield n, m
        if isinstance(m, (QuantumPEFTLayer, ModulesToSave)):
            inside.append(n)


def _file_key(name: str) -> str:
    """Adapter-file key of a parameter name: the adapter-name segment removed (PEFT's on-disk convention)."""
    return re.sub(r"(^|\.)(qpeft_adapters|trained_modules)\.[^.]+\.", r"\1", name)


_NOT_SUPPORTED = {  # transformers' own PEFT-integration methods: never fall through to them silently
    "get_adapter_state_dict": "use QuantumPEFTModel.adapter_state_dict(adapter_name)",
}


class QuantumPEFTModel(nn.Module):
    """A model with Quantum-PEFT layers injected (returned by :func:`get_qpeft_model`).

    Calls are forwarded to the wrapped model (``.base_model``); attributes not found here are looked up on it,
    except transformers' adapter-management methods, which would otherwise silently inject *LoRA* through
    transformers' PEFT integration: they are answered here, PEFT-style. ``forward`` carries the wrapped model's
    signature, so ``transformers.Trainer`` (``remove_unused_columns=True``) sees the real input names.

    Several named adapters (as ``peft.PeftModel``): ``add_adapter(name, config)``, ``set_adapter(name)``,
    ``active_adapter``, ``delete_adapter(name)``, ``load_adapter(directory, adapter_name)``; ``peft_config``
    maps names to configs. Only the active adapter is applied and trainable; ``save_pretrained`` writes every
    adapter (``"default"`` in the directory itself, the others in a sub-folder named after the adapter).
    """

    def __init__(
        self,
        model: nn.Module,
        config: QuantumPEFTConfig,
        generator: torch.Generator | None = None,
        adapter_name: str = DEFAULT_ADAPTER,
    ):
        super().__init__()
        if not isinstance(config, QuantumPEFTConfig):
            raise ValueError(f"config must be a QuantumPEFTConfig, got {type(config).__name__}")
        _check_adapter_name(adapter_name)
        self.base_model = model
        self.peft_config: dict[str, QuantumPEFTConfig] = {}
        self._active_adapter = adapter_name
        self._targets: dict[str, list[str]] = {}
        # gradient checkpointing: the batched-factor pre-hooks of the checkpointed blocks, and whether this
        # forward built every factor at once (non-reentrant)
        self._block_hooks: dict[int, Any] = {}
        self._gc_global = False
        self._saves: dict[str, list[str]] = {}
        for p in model.parameters():
            p.requires_grad_(False)
        self._inject(adapter_name, config, generator)
        self._expose_forward_signature(model)
        self.training = model.training  # the wrapper starts in the wrapped model's mode (model.eval() before)
        if _checkpointing(model):  # enabled before wrapping (as PEFT checks)
            self._enable_input_require_grads()

    def _inject(
        self, adapter_name: str, config: QuantumPEFTConfig, generator: torch.Generator | None
    ) -> None:
        """Add adapter ``adapter_name`` to every target (wrapping new ones, extending wrapped ones)."""
        model = self.base_model
        if generator is None:
            generator = torch.Generator().manual_seed(config.init_seed)
        save_names = self._modules_to_save_names(model, config)
        targets = [
            (n, m)
            for n, m in _user_modules(model)
            if n
            and self._is_target(n, m, model, config)
            and not _matches(n, config.exclude_modules)
            and not any(n == s or n.startswith(s + ".") for s in save_names)
        ]
        if not targets:
            raise ValueError(
                f"target_modules={config.target_modules!r} matched no module of {type(model).__name__}"
            )
        for name, module in targets:  # validate everything before changing the model
            why = None if isinstance(module, QuantumPEFTLayer) else unsupported_reason(module)
            if why is not None:
                raise ValueError(f"target module {name!r} is {why}")
        for name in save_names:
            if isinstance(model.get_submodule(name), QuantumPEFTLayer):
                raise ValueError(
                    f"modules_to_save entry {name!r} is a Quantum-PEFT target of another adapter; "
                    "a module cannot be both"
                )
        kw = dict(rank=config.rank, layers=config.layers, alpha=config.alpha, dropout=config.dropout,
                  init_std=config.init_std, node=config.node, angle_bits=config.angle_bits)  # fmt: skip
        owners: dict[int, list[str]] = {}  # id(weight) -> modules holding it (tied weights: several)
        for n, m in model.named_modules():
            w = m._parameters.get("weight")
            if w is not None:
                owners.setdefault(id(w), []).append(n)
        for name, module in targets:
            if isinstance(module, QuantumPEFTLayer):
                module.add_adapter(adapter_name, generator=generator, **kw)
            else:
                layer = wrap(module, generator=generator, adapter_name=adapter_name, **kw)
                layer.set_adapter(self._active_adapter)
                w = module._parameters.get("weight")
                layer.tied_with = [o for o in owners.get(id(w), []) if o != name] if w is not None else []
                _set_submodule(model, name, layer)
        for name in save_names:  # a trainable copy; the original stays untouched for unload()
            m = model.get_submodule(name)
            if isinstance(m, ModulesToSave):
                m.add_copy(adapter_name)
            else:
                wrapper = ModulesToSave(m, adapter_name)
                wrapper.set_adapter(self._active_adapter)
                _set_submodule(model, name, wrapper)
        self.peft_config[adapter_name] = config
        self._targets[adapter_name] = [n for n, _ in targets]
        self._saves[adapter_name] = save_names

    @property
    def targeted_module_names(self) -> list[str]:
        """Names of the wrapped modules (all adapters)."""
        return list(dict.fromkeys(n for names in self._targets.values() for n in names))

    @property
    def modules_to_save_names(self) -> list[str]:
        return list(dict.fromkeys(n for names in self._saves.values() for n in names))

    @staticmethod
    def _is_target(name: str, module: nn.Module, model: nn.Module, config: QuantumPEFTConfig) -> bool:
        tm = config.target_modules
        if isinstance(tm, str) and tm.lower() == ALL_LINEAR:
            linear = is_linear_like(module) or isinstance(module, QuantumPEFTLinear)
            return linear and name not in _head_names(model)
        return _matches(name, tm)

    @staticmethod
    def _modules_to_save_names(model: nn.Module, config: QuantumPEFTConfig) -> list[str]:
        """Full names of the ``modules_to_save`` (outermost matches); every listed name must match something."""
        if not config.modules_to_save:
            return []
        names = [n for n, _ in _user_modules(model) if n and _matches(n, config.modules_to_save)]
        for want in config.modules_to_save:
            if not any(_matches(n, [want]) for n in names):
                raise ValueError(
                    f"modules_to_save entry {want!r} matches no module of {type(model).__name__} "
                    f"(top-level modules: {[n for n, _ in model.named_children()]})"
                )
        return [n for n in names if not any(n.startswith(o + ".") for o in names if o != n)]

    def _expose_forward_signature(self, model: nn.Module) -> None:
        """Give this instance a ``forward`` whose signature is the wrapped model's (``inspect.signature``)."""
        try:
            sig = inspect.signature(model.forward)
        except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
            return

        def forward(self: QuantumPEFTModel, *args: Any, **kwargs: Any) -> Any:
            return QuantumPEFTModel.forward(self, *args, **kwargs)

        self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
        forward.__signature__ = sig.replace(parameters=[self_param, *sig.parameters.values()])  # type: ignore[attr-defined]
        forward.__doc__ = QuantumPEFTModel.forward.__doc__
        object.__setattr__(self, "forward", types.MethodType(forward, self))

    # -- delegation ---------------------------------------------------------------------------------
    def forward(self, *args: Any, adapter_names: list[str] | None = None, **kwargs: Any) -> Any:
        """Run the wrapped model; the U, V factors of all layers are first built in batched calls.

        Nodes with the same (size, K, L, node) signature — e.g. every q/v projection of a transformer — are
        stacked along θ's batch dimension and computed by one ``node_columns`` call, instead of one small
        circuit simulation per layer (same numbers, far fewer kernel launches). In inference the factors are
        cached in each layer and rebuilt only after the angles change. Under gradient checkpointing each layer
        builds its own factors inside the checkpointed block instead (so the recomputation matches).

        ``adapter_names`` (as PEFT, inference only): one adapter name per batch row — each row runs through its
        own adapter, ``"__base__"`` through none; rows are grouped by adapter (one update per adapter and layer).
        """
        if adapter_names is not None:
            with self._mixed_batch(adapter_names, expand=False, args=args, kwargs=kwargs):
                return self._forward(*args, **kwargs)
        return self._forward(*args, **kwargs)

    def _forward(self, *args: Any, **kwargs: Any) -> Any:
        if self.training and _checkpointing(self.base_model):
            # the factors must still be there when a block is recomputed in backward, so they are kept (keyed by
            # the angles' versions) until the next forward. Non-reentrant: one batched build for the whole model,
            # as without checkpointing. Reentrant (or unknown): one batched build per checkpointed block, in a
            # pre-hook — each block back-propagates on its own there, and a graph shared by all blocks would be
            # traversed (and freed) by the first one
            for _, m in self.qpeft_layers():
                for ad in m.qpeft_adapters.values():
                    ad._factors = None  # last step's
            blocks = self._install_block_precompute()
            self._gc_global = bool(blocks) and all(_reentrant(b) is False for b in blocks)
            if self._gc_global:
                layers = [m for _, m in self.qpeft_layers() if _needs_factors(m)]
                if len(layers) > 1:
                    self._precompute_factors(layers)
            return self.base_model(*args, **kwargs)
        layers = [m for _, m in self.qpeft_layers() if _needs_factors(m)]
        if len(layers) > 1:
            self._precompute_factors(layers)
        try:
            return self.base_model(*args, **kwargs)
        finally:
            for m in layers:
                m.set_precomputed(None)

    def _install_block_precompute(self) -> list[nn.Module]:
        """The checkpointed blocks of the wrapped model, each with the batched-factor pre-hook installed."""
        try:
            from transformers.modeling_layers import GradientCheckpointingLayer
        except ImportError:  # pragma: no cover - transformers < 4.52: layers then build their own factors
            return []
        blocks = [
            b
            for b in self.base_model.modules()
            if isinstance(b, GradientCheckpointingLayer) and getattr(b, "gradient_checkpointing", False)
        ]
        for block in blocks:
            if id(block) not in self._block_hooks:
                self._block_hooks[id(block)] = block.register_forward_pre_hook(self._precompute_block)
        return blocks

    def _precompute_block(self, block: nn.Module, args: Any) -> None:
        """Forward pre-hook of a checkpointed block: its layers' U, V in batched calls (a graph per block)."""
        if self._gc_global or not (self.training and getattr(block, "gradient_checkpointing", False)):
            return
        layers = [m for m in block.modules() if isinstance(m, QuantumPEFTLayer) and _needs_factors(m)]
        if len(layers) > 1:
            self._precompute_factors(layers)

    def _remove_block_hooks(self) -> None:
        for h in self._block_hooks.values():
            h.remove()
        self._block_hooks.clear()

    def generate(self, *args: Any, adapter_names: list[str] | None = None, **kwargs: Any) -> Any:
        """The wrapped model's ``generate``; ``adapter_names`` (one per prompt) as in :meth:`forward` (beam
        search and ``num_return_sequences`` repeat a prompt's rows; its name covers all of them)."""
        gen = getattr(self.base_model, "generate", None)
        if gen is None:
            raise AttributeError(f"{type(self.base_model).__name__} has no generate()")
        if adapter_names is None:
            return gen(*args, **kwargs)
        with self._mixed_batch(adapter_names, expand=True, args=args, kwargs=kwargs):
            return gen(*args, **kwargs)

    @contextlib.contextmanager
    def _mixed_batch(self, adapter_names: object, expand: bool, args: tuple, kwargs: dict) -> Iterator[None]:
        """Validate ``adapter_names`` and route each row of the next call(s) through its adapter."""
        if isinstance(adapter_names, tuple):
            adapter_names = list(adapter_names)
        if not (
            isinstance(adapter_names, list)
            and adapter_names
            and all(isinstance(n, str) for n in adapter_names)
        ):
            raise ValueError(
                f"adapter_names must be a non-empty list of adapter names, got {adapter_names!r}"
            )
        if self.base_model.training:
            raise ValueError(
                "adapter_names is for inference (as in PEFT): call model.eval() first; training trains the active "
                "adapter (set_adapter)"
            )
        unknown = sorted({n for n in adapter_names if n != BASE_ADAPTER and n not in self.peft_config})
        if unknown:
            raise ValueError(
                f"adapter_names: unknown adapter(s) {unknown}; this model holds {sorted(self.peft_config)} "
                f"(and {BASE_ADAPTER!r} for the base model)"
            )
        if any(m.merged for _, m in self.qpeft_layers()):
            raise ValueError(
                "adapter_names cannot be used with a merged adapter: call unmerge_adapter() first"
            )
        batch = _batch_size(args, kwargs)
        if batch is not None and batch != len(adapter_names):
            raise ValueError(
                f"adapter_names has {len(adapter_names)} names for a batch of {batch} rows (one name per row expected)"
            )
        mixed = MixedBatch(adapter_names, expand)
        wrapped = [m for m in self.base_model.modules() if isinstance(m, (QuantumPEFTLayer, ModulesToSave))]
        for m in wrapped:
            m.mixed = mixed
        try:
            yield
        finally:
            for m in wrapped:
                m.mixed = None

    def _precompute_factors(self, layers: list[QuantumPEFTLayer]) -> None:
        groups: dict[tuple, list[tuple[int, int, torch.Tensor]]] = {}
        for i, m in enumerate(layers):
            for j, (sig, th) in enumerate(m.node_specs()):
                groups.setdefault(sig + (m.angle_bits, th.dtype, th.device), []).append((i, j, th))
        out: dict[tuple[int, int], torch.Tensor] = {}
        grad = any(m.grad_needed() for m in layers)
        device = layers[0].theta_u.device.type
        with torch.inference_mode(False), torch.set_grad_enabled(grad), torch.autocast(device, enabled=False):
            for (dim, k, n_layers, node, bits, _, _), items in groups.items():
                theta = quantize_angles(torch.stack([th for _, _, th in items]), bits)  # (G, P)
                cols = node_columns(theta, dim, k, n_layers, node)  # (G, dim, K)
                for g, (i, j, _) in enumerate(items):
                    out[(i, j)] = cols[g]
        for i, m in enumerate(layers):
            m.set_precomputed((out[(i, 0)], out[(i, 1)]))
            m.store_factors(out[(i, 0)], out[(i, 1)])

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "base_model":
                raise
            if name in _NOT_SUPPORTED:
                raise ValueError(
                    f"{name}() is not supported by QuantumPEFTModel: {_NOT_SUPPORTED[name]}"
                ) from None
            return getattr(self.base_model, name)

    def get_base_model(self) -> nn.Module:
        """The wrapped model (with the Quantum-PEFT layers inside), as ``peft.PeftModel.get_base_model``."""
        return self.base_model

    # -- gradient checkpointing (as PEFT: the wrapped model's, plus inputs that require grad) ------
    def gradient_checkpointing_enable(self, *args: Any, **kwargs: Any) -> None:
        """The wrapped model's ``gradient_checkpointing_enable`` (reentrant or not), then make the input
        embeddings' output require grad, so a reentrant checkpoint of frozen blocks still reaches the adapter
        (PEFT does the same)."""
        self.base_model.gradient_checkpointing_enable(*args, **kwargs)
        self._enable_input_require_grads()

    def activation_checkpointing_enable(self, *args: Any, **kwargs: Any) -> None:
        """transformers 5's name of :meth:`gradient_checkpointing_enable`."""
        self.base_model.activation_checkpointing_enable(*args, **kwargs)
        self._enable_input_require_grads()

    def _enable_input_require_grads(self) -> None:
        if getattr(self.base_model, "_require_grads_hook", None) is not None:
            return  # already on (transformers' own hook)
        if hasattr(self.base_model, "enable_input_require_grads"):
            self.base_model.enable_input_require_grads()

    def add_weighted_adapter(self, *args: Any, **kwargs: Any) -> None:
        """Refused: PEFT's ``add_weighted_adapter`` builds one new LoRA from a weighted sum of others (by
        concatenating A, B or by an SVD of Σ wᵢΔWᵢ). A Quantum-PEFT update's U, V must be circuit outputs Q(θ)·I,
        a polylog-dimensional family: Σ wᵢUᵢΛᵢVᵢᵀ is in general not of that form, so there is no exact
        combination (only a lossy refit of the angles)."""
        raise NotImplementedError(
            "add_weighted_adapter is not supported by QuantumPEFTModel: a weighted sum of Quantum-PEFT updates "
            "ΣwᵢUᵢΛᵢVᵢᵀ is in general not representable by one circuit-generated U, V (their angles are a "
            "polylog-dimensional family), so no exact combined adapter exists; use adapter_names=[...] to run "
            "batch rows through different adapters"
        )

    # -- named adapters (as peft.PeftModel; never transformers' LoRA integration) ------------------
    @property
    def active_adapter(self) -> str:
        return self._active_adapter

    @property
    def active_adapters(self) -> list[str]:
        return [self._active_adapter]

    @property
    def active_peft_config(self) -> QuantumPEFTConfig:
        return self.peft_config[self._active_adapter]

    def _check_known(self, adapter_name: object, what: str) -> str:
        if isinstance(adapter_name, (list, tuple)):
            raise ValueError(
                f"{what}: expected one adapter name, got {adapter_name!r}; several adapters active at once are not "
                "supported (one update per layer; use adapter_names=[...] in forward/generate for per-row adapters)"
            )
        if adapter_name not in self.peft_config:
            raise ValueError(
                f"{what}: unknown adapter {adapter_name!r}; this model holds {sorted(self.peft_config)}"
            )
        return adapter_name  # type: ignore[return-value]

    def add_adapter(
        self, adapter_name: str, peft_config: QuantumPEFTConfig, generator: torch.Generator | None = None
    ) -> None:
        """Add a new adapter (as ``peft.PeftModel.add_adapter``); it is not activated and stays frozen until
        :meth:`set_adapter`. Its angles are initialised from ``peft_config.init_seed`` (or ``generator``)."""
        _check_adapter_name(adapter_name)
        if adapter_name in self.peft_config:
            raise ValueError(f"add_adapter: adapter {adapter_name!r} already exists")
        if not isinstance(peft_config, QuantumPEFTConfig):
            raise ValueError(f"peft_config must be a QuantumPEFTConfig, got {type(peft_config).__name__}")
        self._inject(adapter_name, peft_config, generator)

    def set_adapter(self, adapter_name: str, inference_mode: bool = False) -> None:
        """Make ``adapter_name`` the active (applied) adapter, trainable unless ``inference_mode`` (as
        ``peft.PeftModel.set_adapter``); a merged adapter is unmerged first."""
        self._check_known(adapter_name, "set_adapter")
        if not isinstance(inference_mode, bool):
            raise ValueError(f"inference_mode must be a bool, got {inference_mode!r}")
        if any(m.merged for _, m in self.qpeft_layers()) and adapter_name != self._active_adapter:
            warnings.warn("set_adapter on a merged model: unmerging the merged adapter first", stacklevel=2)
            self.unmerge_adapter()
        for _, m in self.qpeft_layers():
            m.set_adapter(adapter_name)
        for m in self.base_model.modules():
            if isinstance(m, ModulesToSave):
                m.set_adapter(adapter_name)
        self._active_adapter = adapter_name
        if inference_mode:
            self._freeze_active()

    def _freeze_active(self) -> None:
        """requires_grad=False on every parameter of the active adapter (inference mode, ``is_trainable=False``)."""
        for p in self._adapter_params(self._active_adapter).values():
            p.requires_grad_(False)

    def delete_adapter(self, adapter_name: str) -> None:
        """Remove an adapter (unmerged first if merged); deleting the active one activates the first left.

        Layers and ``modules_to_save`` left without any adapter get their original module back.
        """
        self._check_known(adapter_name, "delete_adapter")
        if len(self.peft_config) == 1:
            raise ValueError(
                f"delete_adapter: {adapter_name!r} is the only adapter; use unload() to remove it"
            )
        for name, m in list(self.qpeft_layers()):
            if adapter_name in m.qpeft_adapters:
                m.delete_adapter(adapter_name)
                if not len(m.qpeft_adapters):
                    _set_submodule(self.base_model, name, m.base_layer)
        for name, m in list(self.base_model.named_modules()):
            if isinstance(m, ModulesToSave):
                m.delete_copy(adapter_name)
                if not len(m.trained_modules):
                    _set_submodule(self.base_model, name, m.original_module)
        del self.peft_config[adapter_name], self._targets[adapter_name], self._saves[adapter_name]
        if adapter_name == self._active_adapter:
            new = next(iter(self.peft_config))
            warnings.warn(
                f"deleted the active adapter {adapter_name!r}; the active adapter is now {new!r}",
                stacklevel=2,
            )
            self.set_adapter(new)

    def enable_adapters(self) -> None:
        self._set_disabled(False)

    def disable_adapters(self) -> None:
        self._set_disabled(True)

    def _set_disabled(self, flag: bool) -> None:
        for _, m in self.qpeft_layers():
            m.disabled = flag
        for m in self.base_model.modules():
            if isinstance(m, ModulesToSave):
                m.disabled = flag

    @contextlib.contextmanager
    def disable_adapter(self) -> Iterator[None]:
        """Context manager: inside it the model is the base model (merged layers are unmerged first)."""
        self.disable_adapters()
        try:
            yield
        finally:
            self.enable_adapters()

    # -- introspection ------------------------------------------------------------------------------
    def qpeft_layers(self) -> Iterator[tuple[str, QuantumPEFTLayer]]:
        for n, m in self.base_model.named_modules():
            if isinstance(m, QuantumPEFTLayer):
                yield n, m

    def adapter_parameters(self) -> dict[str, list[nn.Parameter]]:
        """``{"angles": [θ…], "lambda": [λ…], "other": [modules_to_save params]}`` for separate LR groups."""
        groups: dict[str, list[nn.Parameter]] = {"angles": [], "lambda": [], "other": []}
        for n, p in self.base_model.named_parameters():
            if not p.requires_grad:
                continue
            leaf = n.rsplit(".", 1)[-1]
            groups[
                "angles" if leaf in ("theta_u", "theta_v") else "lambda" if leaf == "lam" else "other"
            ].append(p)
        return groups

    def param_groups(
        self, lr_angles: float, lr_lambda: float, lr_other: float, weight_decay: float = 0.0
    ) -> list[dict]:
        """Optimizer groups: the angles tolerate (and need) a much larger learning rate than Λ or a head."""
        g = self.adapter_parameters()
        out = [
            {"params": g["angles"], "lr": lr_angles, "weight_decay": 0.0, "name": "angles"},
            {"params": g["lambda"], "lr": lr_lambda, "weight_decay": 0.0, "name": "lambda"},
            {"params": g["other"], "lr": lr_other, "weight_decay": weight_decay, "name": "other"},
        ]
        return [d for d in out if d["params"]]

    def n_adapter_params(self, adapter_name: str | None = None) -> int:
        """Quantum-PEFT parameters (angles + Λ) of one adapter (default: the active one), no ``modules_to_save``."""
        if adapter_name is not None:
            self._check_known(adapter_name, "n_adapter_params")
        return sum(m.n_adapter_params(adapter_name) for _, m in self.qpeft_layers())

    def get_nb_trainable_parameters(self) -> tuple[int, int]:
        params = [p for n, p in self.base_model.named_parameters() if ".original_module." not in f".{n}"]

        def count(p: torch.Tensor) -> int:  # a bitsandbytes 4-bit weight packs two values per uint8 (as PEFT)
            return p.numel() * 2 if type(p).__name__ == "Params4bit" else p.numel()

        return sum(count(p) for p in params if p.requires_grad), sum(count(p) for p in params)

    def print_trainable_parameters(self) -> None:
        t, a = self.get_nb_trainable_parameters()
        print(f"trainable params: {t:,} || all params: {a:,} || trainable%: {100 * t / max(a, 1):.4f}")

    # -- merge --------------------------------------------------------------------------------------
    def merge_adapter(self) -> None:
        for _, m in self.qpeft_layers():
            m.merge()

    def unmerge_adapter(self) -> None:
        for _, m in self.qpeft_layers():
            m.unmerge()

    def _replace_modules_to_save(self, trained: bool) -> None:
        for name, m in list(self.base_model.named_modules()):
            if isinstance(m, ModulesToSave):
                keep = m.trained_module if trained and m.trained_module is not None else m.original_module
                _set_submodule(self.base_model, name, keep)

    def merge_and_unload(self) -> nn.Module:
        """Fold the active adapter's ΔW into every wrapped layer and return the plain base model
        (``modules_to_save``: the active adapter's trained copy); the other adapters are dropped."""
        self.enable_adapters()
        self._remove_block_hooks()
        for name, m in list(self.qpeft_layers()):
            m.merge()
            _set_submodule(self.base_model, name, m.base_layer)
        self._replace_modules_to_save(trained=True)
        return self.base_model

    def unload(self) -> nn.Module:
        """Remove all adapters without merging: the original model back (``modules_to_save``: the originals)."""
        self._remove_block_hooks()
        for name, m in list(self.qpeft_layers()):
            m.unmerge()
            _set_submodule(self.base_model, name, m.base_layer)
        self._replace_modules_to_save(trained=False)
        return self.base_model

    # -- adapter-only save / load -------------------------------------------------------------------
    def _adapter_params(self, adapter_name: str) -> dict[str, nn.Parameter]:
        """{file key: parameter} of one adapter: its θ_U, θ_V, λ and its ``modules_to_save`` copies."""
        seg_a, seg_m = f".qpeft_adapters.{adapter_name}.", f".trained_modules.{adapter_name}."
        return {
            _file_key(n): p
            for n, p in self.base_model.named_parameters()
            if seg_a in f".{n}" or seg_m in f".{n}"
        }

    def adapter_state_dict(self, adapter_name: str | None = None) -> dict[str, torch.Tensor]:
        """θ_U, θ_V, λ of every layer plus the trained ``modules_to_save`` of one adapter (default: the active
        one) — nothing of the frozen model. Keys are the wrapped model's parameter names without the adapter
        name (``…q_proj.theta_u``, ``classifier.weight``), as in PEFT's adapter files."""
        name = self._check_known(
            self._active_adapter if adapter_name is None else adapter_name, "adapter_state_dict"
        )
        return {k: p.detach().contiguous().clone() for k, p in self._adapter_params(name).items()}

    def save_pretrained(
        self,
        save_directory: str | Path,
        safe_serialization: bool = True,
        is_main_process: bool = True,
        state_dict: dict | None = None,
        selected_adapters: list[str] | None = None,
        **kwargs: Any,
    ) -> Path:
        """Write ``qpeft_adapter_model.safetensors`` and ``qpeft_adapter_config.json`` of every adapter (or of
        ``selected_adapters``): ``"default"`` into ``save_directory``, any other into ``save_directory/<name>``
        (PEFT's layout; reload with ``load_adapter(save_directory / name, name)``).

        Accepts the keyword arguments ``transformers.Trainer`` / ``PreTrainedModel.save_pretrained`` pass
        (``is_main_process=False`` writes nothing; a full ``state_dict`` is ignored: only the adapters are
        saved); ``safe_serialization=False`` (pickle) is refused.
        """
        if not safe_serialization:
            raise ValueError("safe_serialization must be True: adapters are only written as safetensors")
        names = list(self.peft_config) if selected_adapters is None else list(selected_adapters)
        for n in names:
            self._check_known(n, "save_pretrained(selected_adapters)")
        d = Path(save_directory)
        if not is_main_process:
            return d
        if any(m.merged for _, m in self.qpeft_layers()):
            raise ValueError("cannot save a merged adapter: call unmerge_adapter() first")
        for name in names:
            out = d if name == DEFAULT_ADAPTER else d / name
            out.mkdir(parents=True, exist_ok=True)
            tmp = out / (ADAPTER_WEIGHTS + ".tmp")
            save_file(self.adapter_state_dict(name), str(tmp), metadata={"format": "pt"})
            tmp.replace(out / ADAPTER_WEIGHTS)
            tmpc = out / (ADAPTER_CONFIG + ".tmp")
            tmpc.write_text(json.dumps(self.peft_config[name].to_dict(), indent=2) + "\n")
            tmpc.replace(out / ADAPTER_CONFIG)
        return d

    def load_adapter_weights(self, directory: str | Path, adapter_name: str | None = None) -> None:
        """Load weights saved by :meth:`save_pretrained` into one adapter (strict: every key must match)."""
        name = self._check_known(
            self._active_adapter if adapter_name is None else adapter_name, "load_adapter_weights"
        )
        state = load_file(str(adapter_files(directory)[1]))
        own = self._adapter_params(name)
        missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
        if missing or unexpected:
            raise ValueError(
                f"adapter weights do not fit this model: missing={missing[:5]}, unexpected={unexpected[:5]}"
            )
        with torch.no_grad():
            for k, v in state.items():
                if own[k].shape != v.shape:
                    raise ValueError(
                        f"adapter weight {k!r} has shape {tuple(v.shape)}, model expects {tuple(own[k].shape)}"
                    )
                own[k].copy_(v)

    def load_adapter(
        self,
        directory: str | Path,
        adapter_name: str,
        is_trainable: bool = False,
        revision: str | None = None,
        subfolder: str | None = None,
        token: str | bool | None = None,
    ) -> None:
        """Add the adapter saved in ``directory`` (a folder, or a Hugging Face Hub repo id) under
        ``adapter_name``, not activated, as ``peft.PeftModel.load_adapter``: it stays frozen until
        ``set_adapter(adapter_name)``; ``is_trainable=False`` (PEFT's default) also puts the model in eval mode."""
        _check_bool(is_trainable, "is_trainable")
        d = _resolve_adapter_dir(directory, "load_adapter", revision, subfolder, token)
        cfg = _read_config(adapter_files(d, "load_adapter")[0])
        self.add_adapter(adapter_name, cfg)
        try:
            self.load_adapter_weights(d, adapter_name)
        except ValueError:
            self.delete_adapter(adapter_name)
            raise
        if not is_trainable:
            self.eval()

    @classmethod
    def from_pretrained(
        cls,
        model: nn.Module,
        directory: str | Path,
        adapter_name: str = DEFAULT_ADAPTER,
        is_trainable: bool = False,
        revision: str | None = None,
        subfolder: str | None = None,
        token: str | bool | None = None,
    ) -> QuantumPEFTModel:
        """Inject the saved config into ``model`` and load the saved adapter weights (as ``adapter_name``), as
        ``peft.PeftModel.from_pretrained``: ``directory`` is a folder written by :meth:`save_pretrained` or a
        Hugging Face Hub repo id written by :meth:`push_to_hub` (``revision``, ``subfolder``, ``token``).

        ``is_trainable=False`` (PEFT's default) loads for inference: the adapter is frozen and the model put in
        eval mode; ``is_trainable=True`` to continue training it.
        """
        _check_bool(is_trainable, "is_trainable")
        d = _resolve_adapter_dir(directory, "from_pretrained", revision, subfolder, token)
        cfg = _read_config(adapter_files(d, "from_pretrained")[0])
        out = cls(model, cfg, adapter_name=adapter_name)
        out.load_adapter_weights(d)
        if not is_trainable:
            out._freeze_active()
            out.eval()
        return out

    def push_to_hub(
        self,
        repo_id: str,
        commit_message: str = "Upload Quantum-PEFT adapter",
        private: bool | None = None,
        token: str | bool | None = None,
        revision: str | None = None,
        create_pr: bool = False,
        selected_adapters: list[str] | None = None,
    ) -> Any:
        """Upload the adapter(s) only — the files :meth:`save_pretrained` writes plus a short README — to the
        Hugging Face Hub repo ``repo_id`` (created if missing), as ``peft.PeftModel.push_to_hub``; never the base
        model's weights. Reload with ``QuantumPEFTModel.from_pretrained(base, repo_id)``. Returns the commit info."""
        if not isinstance(repo_id, str) or not re.fullmatch(r"[\w.-]+/[\w.-]+|[\w.-]+", repo_id):
            raise ValueError(f"repo_id must be a Hub repo id like 'user/name', got {repo_id!r}")
        from huggingface_hub import HfApi

        api = HfApi(token=token)
        url = api.create_repo(repo_id, private=private, exist_ok=True, repo_type="model")
        with tempfile.TemporaryDirectory() as tmp:
            self.save_pretrained(tmp, selected_adapters=selected_adapters)
            (Path(tmp) / "README.md").write_text(self._model_card(getattr(url, "repo_id", repo_id)))
            return api.upload_folder(
                repo_id=getattr(url, "repo_id", repo_id),
                folder_path=tmp,
                commit_message=commit_message,
                revision=revision,
                create_pr=create_pr,
                repo_type="model",
            )

    def _model_card(self, repo_id: str) -> str:
        base = getattr(getattr(self.base_model, "config", None), "_name_or_path", "") or ""
        lines = ["---", "library_name: iclr25", "tags: [quantum-peft, peft, adapter]"]
        if base and not Path(base).is_absolute():
            lines.append(f"base_model: {base}")
        lines += [
            "---",
            "",
            f"# Quantum-PEFT adapter ({', '.join(self.peft_config)})",
            "",
            "Adapter weights only (Quantum-PEFT, Koike-Akino et al., ICLR 2025, arXiv 2503.05431); load onto the base "
            f"model{' ' + base if base else ''}:",
            "",
            "```python",
            "from iclr25.quantum_peft import QuantumPEFTModel",
            f'model = QuantumPEFTModel.from_pretrained(base_model, "{repo_id}")',
            "```",
            "",
        ]
        return "\n".join(lines)


def _check_bool(value: object, name: str) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be a bool, got {value!r}")


_REPO_ID = re.compile(r"[\w.-]+/[\w.-]+")


def _resolve_adapter_dir(
    directory: str | Path,
    caller: str,
    revision: str | None = None,
    subfolder: str | None = None,
    token: str | bool | None = None,
) -> Path:
    """A local adapter folder as is; a Hub repo id (``user/name``, not a local path) downloaded (adapter files
    only) with ``huggingface_hub.snapshot_download``."""
    d = Path(directory)
    if d.exists() or not isinstance(directory, str) or not _REPO_ID.fullmatch(directory):
        return d / subfolder if subfolder else d
    from huggingface_hub import snapshot_download

    names = (ADAPTER_CONFIG, ADAPTER_WEIGHTS, LEGACY_ADAPTER_CONFIG, LEGACY_ADAPTER_WEIGHTS)
    prefix = f"{subfolder.strip('/')}/" if subfolder else ""
    try:
        local = snapshot_download(
            repo_id=directory, revision=revision, token=token, allow_patterns=[prefix + n for n in names]
        )
    except Exception as e:  # offline, missing repo, no access: say what was tried
        raise ValueError(
            f"{caller}: {directory!r} is not a local folder and could not be fetched as a Hugging Face Hub repo "
            f"({type(e).__name__}: {e})"
        ) from e
    return Path(local) / prefix if prefix else Path(local)


def adapter_files(directory: str | Path, caller: str = "load_adapter_weights") -> tuple[Path, Path]:
    """(config, weights) of the adapter saved in ``directory``: our own names, else PEFT's names of folders
    written by earlier versions; ``ValueError`` naming both when neither is there."""
    d = Path(directory)
    for cfg, weights in ((ADAPTER_CONFIG, ADAPTER_WEIGHTS), (LEGACY_ADAPTER_CONFIG, LEGACY_ADAPTER_WEIGHTS)):
        if (d / cfg).is_file() or (d / weights).is_file():
            return d / cfg, d / weights
    raise ValueError(
        f"{caller}: no Quantum-PEFT adapter in {str(d)!r} (expected {ADAPTER_CONFIG} + {ADAPTER_WEIGHTS}, "
        "written by QuantumPEFTModel.save_pretrained)"
    )


def _read_config(path: Path) -> QuantumPEFTConfig:
    """The adapter config at ``path``; a PEFT adapter of another type (LoRA, ...) is refused by name."""
    if not path.is_file():
        raise ValueError(f"no adapter config {path.name} in {str(path.parent)!r}")
    d = json.loads(path.read_text())
    if not isinstance(d, dict):
        raise ValueError(f"{path} must hold a JSON object, got {type(d).__name__}")
    kind = d.get("peft_type", "QUANTUM_PEFT")
    if kind != "QUANTUM_PEFT":
        raise ValueError(
            f"{path} is a PEFT {kind!r} adapter, not a Quantum-PEFT one: load it with peft.PeftModel.from_pretrained"
        )
    return QuantumPEFTConfig.from_dict(d)


def _needs_factors(m: QuantumPEFTLayer) -> bool:
    """Whether the next forward of ``m`` builds its active adapter's U, V (applied, and no valid cache)."""
    return not m.merged and not m.disabled and m.active() is not None and m.cached_factors() is None


def _reentrant(block: nn.Module) -> bool | None:
    """The ``use_reentrant`` a transformers checkpointed block runs with (None when it cannot be read)."""
    func = getattr(block, "_gradient_checkpointing_func", None)
    kw = getattr(func, "keywords", None)
    if not isinstance(kw, dict):
        return None
    value = kw.get("use_reentrant", True)  # torch.utils.checkpoint's default when not given is reentrant
    return value if isinstance(value, bool) else True


def _checkpointing(model: nn.Module) -> bool:
    """Whether transformers' gradient (activation) checkpointing is on in ``model``."""
    for attr in ("is_activation_checkpointing", "is_gradient_checkpointing"):  # transformers 5 name first
        if isinstance(getattr(type(model), attr, None), property):
            return bool(getattr(model, attr))
    return False


_BATCH_INPUTS = ("input_ids", "inputs_embeds", "pixel_values", "input_values", "input_features")


def _batch_size(args: tuple, kwargs: dict) -> int | None:
    """Rows of the batch a call runs on (the first tensor argument or a known input keyword), if visible."""
    for x in (*args, *(kwargs.get(k) for k in _BATCH_INPUTS)):
        if isinstance(x, torch.Tensor) and x.dim() > 0:
            return int(x.shape[0])
    return None


def _head_names(model: nn.Module) -> set[str]:
    """PEFT's all-linear exclusions: the output embedding (LM head), else a ``score``/``classifier`` head."""
    out: set[str] = set()
    get_out = getattr(model, "get_output_embeddings", None)
    head = get_out() if callable(get_out) else None
    if head is None:
        for attr in SEQ_CLS_HEAD_NAMES:
            head = getattr(model, attr, None)
            if isinstance(head, nn.Module):
                break
    if isinstance(head, nn.Module):
        out |= {n for n, m in model.named_modules() if m is head}
    return out


def get_qpeft_model(
    model: nn.Module,
    config: QuantumPEFTConfig,
    generator: torch.Generator | None = None,
    adapter_name: str = DEFAULT_ADAPTER,
) -> QuantumPEFTModel:
    """Inject Quantum-PEFT layers into ``model`` (in place) by module name; freeze everything else.

    Example::

        cfg = QuantumPEFTConfig(target_modules=["query", "value"], rank=2, layers=1, modules_to_save=["classifier"])
        model = get_qpeft_model(ViTForImageClassification(ViTConfig(...)), cfg)
        model.print_trainable_parameters()
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(config, QuantumPEFTConfig):
        raise ValueError(f"config must be a QuantumPEFTConfig, got {type(config).__name__}")
    return QuantumPEFTModel(model, config, generator, adapter_name)
