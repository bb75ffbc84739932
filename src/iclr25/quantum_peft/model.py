"""PEFT-shaped injector: ``QuantumPEFTConfig`` + ``get_qpeft_model`` for any PyTorch / Hugging Face model.

Mirrors HF PEFT's LoRA ergonomics (``peft.LoraConfig`` / ``get_peft_model``): target modules are picked by
name suffix (list) or full-name regex (str) with PEFT's own matching rules, every other parameter is frozen
(``modules_to_save`` stay trainable, e.g. a fresh classification head), ``merge_and_unload`` folds ΔW into the
base weights, and ``save_pretrained`` writes only the adapter (``adapter_model.safetensors`` +
``adapter_config.json``).

Why not ``peft.register_peft_method``: in PEFT 0.21 it only accepts names that already exist in the closed
``peft.utils.PeftType`` enum ("Unknown PEFT type …, please add an entry to PeftType"), so a third-party tuner
cannot be registered without patching PEFT itself. We therefore keep PEFT's shapes and semantics here.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch import nn

from .layer import QuantumPEFTLinear, quantize_angles
from .unitary import NODES, node_columns

ADAPTER_WEIGHTS = "adapter_model.safetensors"
ADAPTER_CONFIG = "adapter_config.json"


@dataclass(frozen=True)
class QuantumPEFTConfig:
    """Configuration of a Quantum-PEFT adapter (field names follow ``peft.LoraConfig`` where they overlap).

    target_modules: list of module-name suffixes (``["query", "value"]``) or one regex matched against the
        full module name (``r".*\\.attention\\.(query|value)"``), as in PEFT.
    rank: K, the intrinsic rank (number of singular directions, Λ = diag(λ_1..λ_K)).
    layers: L, entangling layers of each Pauli node ((2L+1)·n − 2L angles per 2^n node).
    alpha: the scale s in ΔW = s·UΛVᵀ (not divided by K: Λ carries the per-direction magnitudes).
    init_std: θ ~ N(0, init_std²). node: ``"qsd"`` (default) or ``"pad_qr"`` for non-power-of-two sizes.
    angle_bits: optional b-bit angle quantisation (straight-through). modules_to_save: extra modules kept
        trainable and stored with the adapter. init_seed: seed of the angle initialisation.
    """

    target_modules: list[str] | str = field(default_factory=lambda: ["q_proj", "v_proj"])
    rank: int = 2
    layers: int = 1
    alpha: float = 1.0
    dropout: float = 0.0
    init_std: float = 0.5
    node: str = "qsd"
    angle_bits: int | None = None
    modules_to_save: list[str] | None = None
    exclude_modules: list[str] | str | None = None
    init_seed: int = 0

    def __post_init__(self) -> None:
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
        if isinstance(self.rank, bool) or not isinstance(self.rank, int) or self.rank < 1:
            raise ValueError(f"rank must be an int >= 1, got {self.rank!r}")
        if isinstance(self.layers, bool) or not isinstance(self.layers, int) or self.layers < 0:
            raise ValueError(f"layers must be an int >= 0, got {self.layers!r}")
        if self.node not in NODES:
            raise ValueError(f"node must be one of {NODES}, got {self.node!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {self.dropout!r}")
        if not self.init_std >= 0:
            raise ValueError(f"init_std must be >= 0, got {self.init_std!r}")
        quantize_angles(torch.zeros(1), self.angle_bits)
        if isinstance(self.init_seed, bool) or not isinstance(self.init_seed, int) or self.init_seed < 0:
            raise ValueError(f"init_seed must be an int >= 0, got {self.init_seed!r}")

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


class QuantumPEFTModel(nn.Module):
    """A model with Quantum-PEFT layers injected (returned by :func:`get_qpeft_model`).

    Calls are forwarded to the wrapped model (``.base_model``); attributes not found here are looked up on it.
    """

    def __init__(self, model: nn.Module, config: QuantumPEFTConfig, generator: torch.Generator | None = None):
        super().__init__()
        self.base_model = model
        self.peft_config = config
        if generator is None:
            generator = torch.Generator().manual_seed(config.init_seed)
        for p in model.parameters():
            p.requires_grad_(False)
        targets = [
            (n, m)
            for n, m in model.named_modules()
            if n and _matches(n, config.target_modules) and not _matches(n, config.exclude_modules)
        ]
        if not targets:
            raise ValueError(
                f"target_modules={config.target_modules!r} matched no module of {type(model).__name__}"
            )
        for name, module in targets:
            if not isinstance(module, nn.Linear):
                raise ValueError(
                    f"target module {name!r} is a {type(module).__name__}; Quantum-PEFT wraps torch.nn.Linear only"
                )
            layer = QuantumPEFTLinear(
                module,
                rank=config.rank,
                layers=config.layers,
                alpha=config.alpha,
                dropout=config.dropout,
                init_std=config.init_std,
                node=config.node,
                angle_bits=config.angle_bits,
                generator=generator,
            )
            _set_submodule(model, name, layer)
        self.targeted_module_names = [n for n, _ in targets]
        for name, module in model.named_modules():
            if name and _matches(name, config.modules_to_save):
                for p in module.parameters():
                    p.requires_grad_(True)

    # -- delegation ---------------------------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Run the wrapped model; the U, V factors of all layers are first built in batched calls.

        Nodes with the same (size, K, L, node) signature — e.g. every q/v projection of a transformer — are
        stacked along θ's batch dimension and computed by one ``node_columns`` call, instead of one small
        circuit simulation per layer (same numbers, far fewer kernel launches).
        """
        layers = [m for _, m in self.qpeft_layers() if not m.merged]
        if len(layers) > 1:
            self._precompute_factors(layers)
        try:
            return self.base_model(*args, **kwargs)
        finally:
            for m in layers:
                m._factors = None

    def _precompute_factors(self, layers: list[QuantumPEFTLinear]) -> None:
        groups: dict[tuple, list[tuple[int, int, torch.Tensor]]] = {}
        for i, m in enumerate(layers):
            for j, (sig, th) in enumerate(m.node_specs()):
                groups.setdefault(sig + (m.angle_bits,), []).append((i, j, th))
        out: dict[tuple[int, int], torch.Tensor] = {}
        for (dim, k, n_layers, node, bits), items in groups.items():
            theta = quantize_angles(torch.stack([th for _, _, th in items]), bits)  # (G, P)
            cols = node_columns(theta, dim, k, n_layers, node)  # (G, dim, K)
            for g, (i, j, _) in enumerate(items):
                out[(i, j)] = cols[g]
        for i, m in enumerate(layers):
            m._factors = (out[(i, 0)], out[(i, 1)])

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name == "base_model":
                raise
            return getattr(self.base_model, name)

    # -- introspection ------------------------------------------------------------------------------
    def qpeft_layers(self) -> Iterator[tuple[str, QuantumPEFTLinear]]:
        for n, m in self.base_model.named_modules():
            if isinstance(m, QuantumPEFTLinear):
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

    def n_adapter_params(self) -> int:
        """Trainable Quantum-PEFT parameters (angles + Λ), excluding ``modules_to_save``."""
        return sum(m.n_adapter_params() for _, m in self.qpeft_layers())

    def get_nb_trainable_parameters(self) -> tuple[int, int]:
        params = list(self.base_model.parameters())
        return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)

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

    def merge_and_unload(self) -> nn.Module:
        """Fold ΔW into every wrapped ``nn.Linear`` and return the plain base model (adapters removed)."""
        for name, m in list(self.qpeft_layers()):
            m.merge()
            _set_submodule(self.base_model, name, m.base_layer)
        return self.base_model

    def unload(self) -> nn.Module:
        """Remove the adapters without merging (the original model back)."""
        for name, m in list(self.qpeft_layers()):
            m.unmerge()
            _set_submodule(self.base_model, name, m.base_layer)
        return self.base_model

    # -- adapter-only save / load -------------------------------------------------------------------
    def adapter_state_dict(self) -> dict[str, torch.Tensor]:
        """θ_U, θ_V, λ of every layer plus ``modules_to_save`` parameters — nothing of the frozen model."""
        keep = {}
        for n, p in self.base_model.named_parameters():
            leaf = n.rsplit(".", 1)[-1]
            mod = n.rsplit(".", 1)[0]
            if (
                leaf in ("theta_u", "theta_v", "lam")
                or p.requires_grad
                or _matches(mod, self.peft_config.modules_to_save)
            ):
                keep[n] = p.detach().contiguous().clone()
        return keep

    def save_pretrained(self, directory: str | Path) -> Path:
        """Write ``adapter_model.safetensors`` and ``adapter_config.json`` into ``directory``."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if any(m.merged for _, m in self.qpeft_layers()):
            raise ValueError("cannot save a merged adapter: call unmerge_adapter() first")
        save_file(self.adapter_state_dict(), str(d / ADAPTER_WEIGHTS), metadata={"format": "pt"})
        (d / ADAPTER_CONFIG).write_text(json.dumps(self.peft_config.to_dict(), indent=2) + "\n")
        return d

    def load_adapter_weights(self, directory: str | Path) -> None:
        """Load adapter weights saved by :meth:`save_pretrained` (strict: every key must match)."""
        state = load_file(str(Path(directory) / ADAPTER_WEIGHTS))
        own = dict(self.base_model.named_parameters())
        missing = sorted(set(self.adapter_state_dict()) - set(state))
        unexpected = sorted(set(state) - set(own))
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

    @classmethod
    def from_pretrained(cls, model: nn.Module, directory: str | Path) -> QuantumPEFTModel:
        """Inject the saved config into ``model`` and load the saved adapter weights."""
        cfg = QuantumPEFTConfig.from_dict(json.loads((Path(directory) / ADAPTER_CONFIG).read_text()))
        out = cls(model, cfg)
        out.load_adapter_weights(directory)
        return out


def get_qpeft_model(
    model: nn.Module, config: QuantumPEFTConfig, generator: torch.Generator | None = None
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
    return QuantumPEFTModel(model, config, generator)
