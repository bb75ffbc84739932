"""The effective config of a run: the preset, then ``--set`` overrides, then seeds / seed / device — every value
checked by the config dataclass — and the switches that keep a run off the network.

:func:`effective_config` builds it (once per run: the CLI builds it for every system before running any and
passes it on); :func:`parse_overrides` reads ``field=value`` (and nested ``field.sub=value``) against the
dataclass; :func:`resolve_device` turns ``None`` / ``auto`` into the device the run uses.
"""

from __future__ import annotations

import ast
import dataclasses
import os
import types
import typing
from types import ModuleType
from typing import Any

from .. import registry
from ..common.fields import apply_overrides
from ..common.results import PRESET_NAMES
from ..errors import UsageError

# Runs never touch the network: the Hugging Face hub (and TRL, which reports trainer use through it) is put
# offline and its telemetry off before any experiment imports it. An explicit HF_HUB_OFFLINE=0 is respected for
# the hub (a user's own loader may want it); telemetry is always off.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
NO_TELEMETRY_ENV = {
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_DISABLE_IMPLICIT_TOKEN": "1",
}


def no_network_env() -> None:
    """Set the offline / no-telemetry switches (environment, and the hub's constants if already imported)."""
    import sys

    for k, v in OFFLINE_ENV.items():
        os.environ.setdefault(k, v)
    os.environ.update(NO_TELEMETRY_ENV)
    hub = sys.modules.get("huggingface_hub.constants")
    if hub is not None:  # imported before us: its constants were read at import time
        hub.HF_HUB_DISABLE_TELEMETRY = True
        if os.environ.get("HF_HUB_OFFLINE") == "1":
            hub.HF_HUB_OFFLINE = True


def experiment_module(slug: str) -> ModuleType:
    """The experiment module of a registered system (``UsageError`` with suggestions otherwise)."""
    system = registry.runnable(slug)
    no_network_env()
    return system.experiment()


def resolve_device(device: str | None, preset_device: str, check: bool = True) -> str:
    """``None`` → the preset's device; ``auto`` → ``cuda`` when CUDA is present, else ``cpu``; validated.

    ``check=False`` validates the name only (``cuda`` is kept on a machine without CUDA): for printing the config
    a run would use elsewhere."""
    from ..common.device import VALID_DEVICES, get_device

    name = preset_device if device is None else device
    if not check and isinstance(name, str) and (name == "cuda" or name.startswith("cuda:")):
        if name != "cuda" and not name[5:].isdigit():
            raise UsageError(f"device must be one of {VALID_DEVICES} (or 'cuda:N'), got {name!r}")
        return name
    if name == "auto":
        return get_device("auto").type
    try:
        return str(get_device(name))
    except ValueError as e:
        if device is None:
            raise UsageError(f"{e} (the preset asks for {name!r}; pass --device cpu or auto)") from None
        raise UsageError(str(e)) from None


# -- config overrides -------------------------------------------------------------------------------------


def config_fields(cfg_cls: type) -> dict[str, Any]:
    """``{field name: type}`` of an experiment's config dataclass (annotations resolved)."""
    try:
        hints = typing.get_type_hints(cfg_cls)
    except Exception:  # unresolvable annotations: fall back to the declared (string) types
        hints = {}
    return {f.name: hints.get(f.name, f.type) for f in dataclasses.fields(cfg_cls) if f.init}


def _type_name(t: Any) -> str:
    return getattr(t, "__name__", None) or str(t).replace("typing.", "")


def _coerce(name: str, raw: Any, t: Any, default: Any) -> Any:
    """``raw`` (a string from the command line, or any value) as type ``t``; ``UsageError`` otherwise."""
    bad = UsageError(f"--set {name}: expected {_type_name(t)}, got {raw!r}")
    if isinstance(t, str):  # annotation we could not resolve: follow the default's type
        t = type(default) if default is not None else Any
    origin = typing.get_origin(t)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(t)
        if type(None) in args and (raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null"))):
            return None
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(name, raw, a, default)
            except UsageError:
                continue
        raise bad
    if t is Any:
        return _literal(raw)
    if t is bool:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "1", "yes", "false", "0", "no"):
            return raw.lower() in ("true", "1", "yes")
        raise bad
    if t is int:
        v = _literal(raw)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
        raise bad
    if t is float:
        v = _literal(raw)
        if isinstance(v, str) and v.lower() in ("nan", "inf", "-inf", "infinity", "-infinity"):
            return float(v)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
        raise bad
    if t is str:
        return raw if isinstance(raw, str) else str(raw)
    if origin in (tuple, list) or t in (tuple, list):
        v = _literal(raw)
        if isinstance(v, (int, float, str)) and not isinstance(v, bool):
            v = [v]
        if not isinstance(v, (list, tuple)):
            raise bad
        args = typing.get_args(t)
        if origin is tuple and args and args[-1] is not Ellipsis and len(args) != len(v):
            raise bad
        item_t = args[0] if args else Any
        fixed = origin is tuple and args and args[-1] is not Ellipsis
        try:
            items = [_coerce(name, x, args[i] if fixed else item_t, None) for i, x in enumerate(v)]
        except UsageError:
            raise bad from None
        return tuple(items) if (origin or t) is tuple else list(items)
    if typing.get_origin(t) is typing.Literal:
        v = _literal(raw)
        if v in typing.get_args(t):
            return v
        raise UsageError(f"--set {name}: expected one of {list(typing.get_args(t))}, got {raw!r}")
    v = _literal(raw)
    if isinstance(t, type) and not isinstance(v, t):
        raise bad
    return v


def _literal(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return ast.literal_eval(raw.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw


def _is_secret(field: str) -> bool:
    """A config field that would hold a credential (``llm_api_key``, ``hf_token``, ...)."""
    f = field.strip().lower()
    return f.endswith(("api_key", "apikey", "_token", "_secret", "password")) or f in ("token", "secret")


def _nested_class(t: Any) -> type | None:
    """The dataclass type of a field that nests a library config (``Optional`` unwrapped), else ``None``."""
    if typing.get_origin(t) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(t) if a is not type(None)]
        t = args[0] if len(args) == 1 else None
    return t if isinstance(t, type) and dataclasses.is_dataclass(t) else None


def _field_listing(cfg_cls: type, prefix: str = "") -> list[str]:
    out = []
    for k, t in config_fields(cfg_cls).items():
        sub = _nested_class(t)
        if sub is not None:
            out += _field_listing(sub, f"{prefix}{k}.")
        else:
            out.append(f"{prefix}{k} ({_type_name(t)})")
    return out


def _parse_one(cfg_cls: type, key: str, raw: Any, full: str) -> Any:
    """The typed value of ``key`` (``field`` or ``field.sub.…``) of ``cfg_cls``; ``full`` names it in errors."""
    head, _, rest = key.partition(".")
    prefix = full[: len(full) - len(key)]
    fields = config_fields(cfg_cls)
    if head not in fields:
        listing = _field_listing(cfg_cls, prefix)
        near = [x.split(" ")[0] for x in listing if x.split(" ")[0].rsplit(".", 1)[-1] == head]
        hint = f" (did you mean {' or '.join(near)}?)" if near else ""
        raise UsageError(
            f"unknown config field {full!r}{hint}; fields of {cfg_cls.__name__}: {', '.join(listing)}"
        )
    sub = _nested_class(fields[head])
    if sub is not None:
        if not rest:
            raise UsageError(
                f"--set {full}: {full} is a nested {sub.__name__}; set its fields one by one, as "
                f"{full}.<field>=value (fields: {', '.join(_field_listing(sub, full + '.'))})"
            )
        return _parse_one(sub, rest, raw, full)
    if rest:
        raise UsageError(f"--set {full}: {prefix}{head} is not a nested config")
    default = next(f.default for f in dataclasses.fields(cfg_cls) if f.name == head)
    return _coerce(full, raw, fields[head], None if default is dataclasses.MISSING else default)


def parse_overrides(cfg_cls: type, items: list[str] | dict[str, Any] | None) -> dict[str, Any]:
    """``["field=value", ...]`` (or a dict) → ``{field: typed value}``, checked against the config dataclass.

    A field that nests a library config (a dataclass-typed field, e.g. fosp's ``agent: FOSPConfig``) is set
    field by field with a dotted name: ``agent.hidden=128`` (keys stay dotted in the result). Unknown fields and
    values of the wrong type raise :class:`UsageError` listing the valid fields.
    """
    if not items:
        return {}
    pairs: list[tuple[str, Any]] = []
    if isinstance(items, dict):
        pairs = list(items.items())
    else:
        for it in items:
            if not isinstance(it, str) or "=" not in it:
                raise UsageError(f"--set takes field=value, got {it!r}")
            k, v = it.split("=", 1)
            pairs.append((k.strip(), v))
    out: dict[str, Any] = {}
    for k, v in pairs:
        if not isinstance(k, str) or not k or any(not part for part in k.split(".")):
            raise UsageError(f"--set takes field=value (or nested.field=value), got field {k!r}")
        if _is_secret(k.rsplit(".", 1)[-1]):
            raise UsageError(
                f"--set {k}=... is refused: API keys are never passed on the command line (they would be written "
                "to config.json, the provenance and the config hash); set them in the environment instead "
                "(OPENAI_API_KEY for an OpenAI-compatible server)"
            )
        out[k] = _parse_one(cfg_cls, k, v, k)
    return out


def effective_config(
    exp: ModuleType,
    preset: str = "quick",
    *,
    seeds: int | None = None,
    seed: int | None = None,
    device: str | None = None,
    overrides: list[str] | dict[str, Any] | None = None,
    check_device: bool = True,
) -> tuple[Any, dict[str, Any]]:
    """The config a run would use, and the overrides applied. ``UsageError`` for anything invalid.

    ``check_device=False`` does not require the device to be present (``iclr25 config`` of a CUDA preset on a
    laptop)."""
    presets = getattr(exp, "PRESETS", None)
    if not isinstance(presets, dict):
        raise UsageError(f"experiment module {exp.__name__} has no PRESETS dict")
    if preset not in presets:
        raise UsageError(
            f"unknown preset {preset!r}; valid: {', '.join(p for p in PRESET_NAMES if p in presets)}"
        )
    base = presets[preset]
    user = parse_overrides(type(base), overrides)
    changes = dict(user)
    for name, v in (("seeds", seeds), ("seed", seed)):
        if v is not None:
            if not isinstance(v, int) or isinstance(v, bool):
                raise UsageError(f"{name} must be an int, got {v!r}")
            changes[name] = v
    dev_field = changes.get("device", device)
    changes["device"] = resolve_device(dev_field, base.device, check=check_device)
    try:
        cfg = apply_overrides(base, changes)
    except (ValueError, TypeError) as e:
        raise UsageError(str(e)) from None
    return cfg, user
