"""Declared field bounds (iclr25.common.fields): the validator accepts exactly the declared values and names the
field, the value and the expectation when it refuses one."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from iclr25.common.fields import bounded, check_fields
from iclr25.common.results import ExperimentConfig


@dataclasses.dataclass(frozen=True)
class _Cfg(ExperimentConfig):
    steps: int = bounded(10, lo=1)
    warm: int = bounded(0, lo=0)
    lr: float = bounded(1e-3, lo=0, lo_open=True)
    ratio: float = bounded(0.5, lo=0, hi=1, lo_open=True)
    mode: str = bounded("a", choices=("a", "b"))
    cap: int | None = bounded(None, kind=int, lo=1, optional=True)
    flag: bool = bounded(True)


def test_defaults_pass_and_numpy_ints_count():
    _Cfg()
    _Cfg(steps=np.int64(3), ratio=1, cap=4)


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"steps": 0}, "steps must be a positive int, got 0"),
        ({"steps": True}, "steps must be a positive int, got True"),
        ({"steps": 2.0}, "steps must be a positive int, got 2.0"),
        ({"warm": -1}, "warm must be a non-negative int, got -1"),
        ({"lr": 0.0}, "lr must be a positive number (finite), got 0.0"),
        ({"lr": math.nan}, "lr must be a positive number (finite), got nan"),
        ({"lr": math.inf}, "lr must be a positive number (finite), got inf"),
        ({"ratio": 0}, "ratio must be a number in (0, 1] (finite), got 0"),
        ({"ratio": 1.5}, "ratio must be a number in (0, 1] (finite), got 1.5"),
        ({"mode": "c"}, "mode must be one of 'a', 'b', got 'c'"),
        ({"cap": 0}, "cap must be None or a positive int, got 0"),
        ({"flag": 1}, "flag must be a bool, got 1"),
    ],
)
def test_bad_values_are_refused_with_field_value_and_expectation(kw, msg):
    with pytest.raises(ValueError) as e:
        _Cfg(**kw)
    assert str(e.value) == msg


def test_base_fields_are_still_checked_and_a_bad_default_is_refused_at_definition():
    with pytest.raises(ValueError, match="seeds must be an int"):
        _Cfg(seeds=0)
    with pytest.raises(ValueError, match="the default 0 is not a positive int"):
        bounded(0, lo=1)


def test_plain_dataclasses_can_use_check_fields():
    @dataclasses.dataclass
    class Lib:
        k: int = bounded(2, lo=1)

        def __post_init__(self):
            check_fields(self)

    with pytest.raises(ValueError, match="k must be a positive int, got -3"):
        Lib(k=-3)


@dataclasses.dataclass(frozen=True)
class _Seqs:
    widths: tuple[int, ...] = bounded((16, 32), lo=1, each=True)
    mix: tuple[float, float] = bounded((0.5, 0.5), kind=float, lo=0, hi=1, each=True, length=2)
    names: tuple[str, ...] = bounded(("a",), choices=("a", "b"), each=True, length=(1, 3))
    opt: tuple[float, ...] | None = bounded(None, kind=float, lo=0, lo_open=True, each=True, optional=True)

    def __post_init__(self):
        check_fields(self)


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"widths": ()}, "widths must be a tuple of one or more, each a positive int, got ()"),
        ({"widths": (16, 0)}, "widths must be a tuple of one or more, each a positive int, got (16, 0)"),
        ({"widths": (True,)}, "widths must be a tuple of one or more, each a positive int, got (True,)"),
        ({"widths": 16}, "widths must be a tuple of one or more, each a positive int, got 16"),
        ({"mix": (0.5,)}, "mix must be a tuple of 2, each a number in [0, 1] (finite), got (0.5,)"),
        ({"mix": (0.5, math.nan)}, "mix must be a tuple of 2, each a number in [0, 1] (finite), got (0.5, nan)"),
        ({"names": ("a", "c")}, "names must be a tuple of 1 to 3, each one of 'a', 'b', got ('a', 'c')"),
        ({"names": ("a",) * 4}, "names must be a tuple of 1 to 3, each one of 'a', 'b', got ('a', 'a', 'a', 'a')"),
        ({"opt": (1.0, -1.0)}, "opt must be None or a tuple of one or more, each a positive number (finite), got (1.0, -1.0)"),
    ],
)  # fmt: skip
def test_tuple_fields_check_every_element_and_the_length(kw, msg):
    _Seqs(widths=[8, 8], mix=(0, 1), names=("b", "a", "b"), opt=(0.1,))  # lists and edge values pass
    with pytest.raises(ValueError) as e:
        _Seqs(**kw)
    assert str(e.value) == msg


def test_an_empty_tuple_can_be_allowed():
    @dataclasses.dataclass(frozen=True)
    class Any_:
        fracs: tuple[float, ...] = bounded(
            (), kind=float, lo=0, hi=1, lo_open=True, each=True, length=(0, None)
        )

        def __post_init__(self):
            check_fields(self)

    assert Any_().fracs == () and Any_(fracs=(0.5,)).fracs == (0.5,)
    with pytest.raises(ValueError) as e:
        Any_(fracs=(0.0,))
    assert str(e.value) == "fracs must be a tuple of any length, each a number in (0, 1] (finite), got (0.0,)"


def test_length_needs_each():
    with pytest.raises(ValueError, match="pass each=True"):
        bounded((1, 2), length=2)
    with pytest.raises(ValueError, match=r"length must be an int or a \(min, max\) pair"):
        bounded((1, 2), each=True, length="2")
