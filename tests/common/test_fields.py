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
