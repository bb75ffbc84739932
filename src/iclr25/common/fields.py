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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Check", "bounded", "check_fields", "check_value"]

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

    def expected(self) -> str:
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
    default_factory: Any = _MISSING,
    **field_kwargs: Any,
) -> Any:
    """A ``dataclasses.field`` whose value :func:`check_fields` checks. ``kind`` defaults to the default's type
    (``int``, ``float``, ``str`` or ``bool``); ``lo``/``hi`` are inclusive unless ``lo_open``/``hi_open``;
    ``choices`` lists the allowed values; ``optional`` also allows ``None``."""
    if kind is None:
        sample = default if default is not _MISSING else None
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


def check_fields(obj: Any) -> None:
    """Check every field of the dataclass instance ``obj`` that was declared with :func:`bounded`."""
    for f in dataclasses.fields(obj):
        check = f.metadata.get("check")
        if check is not None:
            check_value(f.name, getattr(obj, f.name), check)
