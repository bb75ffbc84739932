import pytest

from iclr25.common.timing import best_times


def _busy(n: int) -> int:
    s = 0
    for i in range(n):
        s += i * i
    return s


def test_linear_work_gives_a_ratio_near_its_size_ratio():
    t = best_times({"big": lambda: _busy(400_000), "small": lambda: _busy(100_000)}, repeats=5)
    r = t["big"] / t["small"]
    assert 2.5 < r < 6.0, r


def test_arms_are_interleaved_and_rotated():
    calls = []
    best_times({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, repeats=3, warmup=1)
    assert calls == ["a", "b", "b", "a", "a", "b", "b", "a"]


class FakeClock:
    """Each timed call costs the next number from ``costs``."""

    def __init__(self, costs):
        self.t, self.costs, self.start = 0.0, list(costs), True

    def __call__(self):
        if not self.start:
            self.t += self.costs.pop(0)
        self.start = not self.start
        return self.t


def test_best_is_the_minimum_over_repeats(monkeypatch):
    from iclr25.common import timing

    monkeypatch.setitem(timing.CLOCKS, "fake", FakeClock([9.0, 4.0, 1.0, 3.0]))
    assert best_times({"x": lambda: None}, repeats=3, warmup=1, clock="fake") == {
        "x": 1.0
    }  # warm-up 9 dropped


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="clock"):
        best_times({"a": lambda: None}, clock="gpu")
    with pytest.raises(ValueError, match="repeats"):
        best_times({"a": lambda: None}, repeats=0)
