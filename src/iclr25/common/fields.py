"""Config fields that declare their own bounds: one validator instead of a range check per field.

A dataclass field made with :func:`bounded` carries its rule in ``field.metadata["check"]``; :func:`check_fields`
(called by :class:`iclr25.common.results.ExperimentConfig.__post_init__`, or by any dataclass's own
``__post_init__``) checks every such field and raises a ``ValueError`` naming the field, its value and what was
expected — the same message a hand-written check gave::

    @dataclass(frozen=True)
    class Config(ExperimentConfig):
        steps: int = bounded(400, lo=1)                       # "steps must be a positive int, got 0"
        lr: float = bounded(1e-3, kind=float, lo=0, lo_open=True)
        ratio: float = bounded(0.5, kind=float, lo=0, hi=1, lo_open=True)
        scorer: str = bounded("ridge", choices=("ridge", "transformer"))

        def __post_init__(self):
            super().__post_init__()                           # bounds of every field
            ...                                               # cross-field rules only

Bools are never numbers, numpy integers count as ints, a float field accepts ints, and NaN/±inf are refused
unless ``finite=False``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Check", "apply_overrides", "bounded", "check_fields", "check_value"]

_MISSING = dataclasses.MISSING


@dataclass(frozen=True)
class Check:
    """The rule of one field: a kind (``int``, ``float``, ``str``, ``bool``), optional bounds, optional choices."""

    kind: type = int
    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    choices: tuple | None = None
    optional: bool = False  # None allowed
    finite: bool = True
    each: bool = False  # the value is a tuple/list and the rule applies to every element
    min_len: int = 1  # with ``each``: the fewest elements
    max_len: int | None = None  # with ``each``: the most elements (None: no limit)

    def expected(self) -> str:
        if self.each:
            one = dataclasses.replace(self, each=False, optional=False).expected()
            if self.max_len == self.min_len:
                size = f"{self.min_len}"
            elif self.max_len is None:
                size = {0: "any length", 1: "one or more"}.get(self.min_len, f"{self.min_len} or more")
            else:
                size = f"{self.min_len} to {self.max_len}"
            text = f"a tuple of {size}, each {one}"
            return f"None or {text}" if self.optional else text
        if self.choices is not None:
            text = "one of " + ", ".join(repr(c) for c in self.choices)
        elif self.kind is bool:
            text = "a bool"
        elif self.kind is str:
            text = "a str"
        else:
            noun = "int" if self.kind is int else "number"
            article = "an" if noun == "int" else "a"
            if self.lo is not None and self.hi is not None:
                lb, rb = "(" if self.lo_open else "[", ")" if self.hi_open else "]"
                text = f"{article} {noun} in {lb}{self.lo}, {self.hi}{rb}"
            elif self.lo == 0 and self.lo_open:
                text = f"a positive {noun}"
            elif self.lo == 1 and not self.lo_open and self.kind is int:
                text = "a positive int"
            elif self.lo == 0:
                text = f"a non-negative {noun}"
            elif self.lo is not None:
                text = f"{article} {noun} {'>' if self.lo_open else '>='} {self.lo}"
            elif self.hi is not None:
                text = f"{article} {noun} {'<' if self.hi_open else '<='} {self.hi}"
            else:
                text = f"{article} {noun}"
            if self.kind is float and self.finite:
                text += " (finite)"
        return f"None or {text}" if self.optional else text

    def ok(self, v: Any) -> bool:
        if v is None:
            return self.optional
        if self.each:
            if not isinstance(v, (tuple, list)) or len(v) < self.min_len:
                return False
            if self.max_len is not None and len(v) > self.max_len:
                return False
            one = dataclasses.replace(self, each=False, optional=False)
            return all(one.ok(x) for x in v)
        if self.choices is not None:
            return not isinstance(v, (bool, np.bool_)) and any(
                v == c and type(v) is type(c) for c in self.choices
            )
        if self.kind is bool:
            return isinstance(v, bool)
        if self.kind is str:
            return isinstance(v, str)
        if isinstance(v, (bool, np.bool_)):
            return False
        if self.kind is int:
            if not isinstance(v, (int, np.integer)):
                return False
        elif not isinstance(v, (int, float, np.integer, np.floating)):
            return False
        elif self.finite and not math.isfinite(v):
            return False
        elif math.isnan(v):
            return False
        if self.lo is not None and not (v > self.lo if self.lo_open else v >= self.lo):
            return False
        return self.hi is None or (v < self.hi if self.hi_open else v <= self.hi)


def bounded(
    default: Any = _MISSING,
    *,
    kind: type | None = None,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    hi_open: bool = False,
    choices: Sequence | None = None,
    optional: bool = False,
    finite: bool = True,
    each: bool = False,
    length: int | tuple[int, int | None] | None = None,
    default_factory: Any = _MISSING,
    **field_kwargs: Any,
) -> Any:
    """A ``dataclasses.field`` whose value :func:`check_fields` checks. ``kind`` defaults to the default's type
    (``int``, ``float``, ``str`` or ``bool``); ``lo``/``hi`` are inclusive unless ``lo_open``/``hi_open``;
    ``choices`` lists the allowed values; ``optional`` also allows ``None``. ``each=True``: the value is a tuple
    (or list) and the rule applies to every element; ``length`` is its exact length or a ``(min, max)`` pair
    (``max`` None: no limit; default: at least one element)::

        widths: tuple[int, ...] = bounded((16, 32), lo=1, each=True)            # "a tuple of one or more, each
        mix: tuple[float, ...] = bounded((0.5, 0.5), kind=float, lo=0, each=True, length=2)   # a positive int"
    """
    if each and length is None:
        min_len, max_len = 1, None
    elif each and isinstance(length, int) and not isinstance(length, bool):
        min_len, max_len = length, length
    elif each and isinstance(length, tuple) and len(length) == 2:
        min_len, max_len = length
    elif each:
        raise ValueError(f"length must be an int or a (min, max) pair, got {length!r}")
    elif length is not None:
        raise ValueError("length is a rule on tuples: pass each=True with it")
    else:
        min_len, max_len = 1, None
    if kind is None:
        sample = default if default is not _MISSING else None
        if each and isinstance(sample, (tuple, list)) and sample:
            sample = sample[0]
        kind = type(sample) if isinstance(sample, (bool, int, float, str)) else int
        if choices is not None:
            kind = type(choices[0])
    if kind not in (int, float, str, bool):
        raise ValueError(f"kind must be int, float, str or bool, got {kind!r}")
    check = Check(
        kind=kind,
        lo=lo,
        hi=hi,
        lo_open=lo_open,
        hi_open=hi_open,
        choices=tuple(choices) if choices is not None else None,
        optional=optional,
        finite=finite,
        each=each,
        min_len=min_len,
        max_len=max_len,
    )
    meta = dict(field_kwargs.pop("metadata", None) or {})
    meta["check"] = check
    if default is not _MISSING and not check.ok(default):
        raise ValueError(f"bounded(): the default {default!r} is not {check.expected()}")
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta, **field_kwargs)
    return dataclasses.field(default=default, metadata=meta, **field_kwargs)


def check_value(name: str, v: Any, check: Check) -> None:
    """Raise ``ValueError("<name> must be <expected>, got <v>")`` unless ``v`` satisfies ``check``."""
    if not check.ok(v):
        raise ValueError(f"{name} must be {check.expected()}, got {v!r}")


def check_nested(
    cfg: Any, name: str, cls: type, fixed: Sequence[str] = (), why: str | Mapping[str, str] = ""
) -> None:
    """``cfg.<name>`` is a ``cls``: a library config nested whole in an experiment config (dotted overrides reach
    its fields). Its ``fixed`` fields — those the experiment sets itself per arm, seed or run — must keep ``cls``'s
    defaults; ``why`` says where they are set (one text, or one per field) for the error::

        check_nested(self, "train", SpottingTrainConfig, ("pseudo_labels",), "set per arm in one_seed")
        # ValueError: train.pseudo_labels is set per arm in one_seed; leave it at 'gim', got 'hard'
    """
    v = getattr(cfg, name)
    if not isinstance(v, cls):
        raise ValueError(f"{name} must be of type {cls.__name__}, got {type(v).__name__}")
    if fixed:
        ref = cls()
        for f in fixed:
            if getattr(v, f) != getattr(ref, f):
                w = why[f] if isinstance(why, Mapping) else why
                raise ValueError(f"{name}.{f} is {w}; leave it at {getattr(ref, f)!r}, got {getattr(v, f)!r}")


def check_fields(obj: Any) -> None:
    """Check every field of the dataclass instance ``obj`` that was declared with :func:`bounded`."""
    for f in dataclasses.fields(obj):
        check = f.metadata.get("check")
        if check is not None:
            check_value(f.name, getattr(obj, f.name), check)


def apply_overrides(cfg: Any, overrides: dict[str, Any]) -> Any:
    """``cfg`` with ``{field or dotted.field: value}`` applied (nested configs rebuilt, so each re-validates).

    A nested config's own ``ValueError`` is re-raised naming the nested field (``agent: hidden must be …``)."""
    flat = {k: v for k, v in overrides.items() if "." not in k}
    nested: dict[str, dict[str, Any]] = {}
    for k, v in overrides.items():
        if "." in k:
            head, rest = k.split(".", 1)
            nested.setdefault(head, {})[rest] = v
    for head, sub in nested.items():
        try:
            flat[head] = apply_overrides(getattr(cfg, head), sub)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{head}: {e}") from None
    return dataclasses.replace(cfg, **flat)
