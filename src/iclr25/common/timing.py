"""Timing that holds up on a loaded, shared machine: best of several repeats, in interleaved order, on the
process's own CPU clock.

A wall-clock ratio such as ``time(4L) / time(L)`` measured once per arm moves with whatever else the machine
is doing. Three habits make it stable: take the *minimum* over repeats (noise only ever adds time), interleave
the arms (a, b, a, b … with the order rotated each round, so a slow patch hits every arm alike) and count the
process's CPU time (``time.process_time``: other processes' load does not enter it; with several torch threads
it sums their CPU time, so measure single-threaded or use ``clock="wall"``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

CLOCKS = {"process": time.process_time, "wall": time.perf_counter}


def best_times(
    fns: dict[str, Callable[[], Any]], repeats: int = 5, clock: str = "process", warmup: int = 1
) -> dict[str, float]:
    """``{name: best time in seconds}`` over ``repeats`` interleaved rounds (after ``warmup`` untimed rounds)."""
    if clock not in CLOCKS:
        raise ValueError(f"clock must be one of {sorted(CLOCKS)}, got {clock!r}")
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeats must be an int >= 1, got {repeats!r}")
    if not isinstance(warmup, int) or warmup < 0:
        raise ValueError(f"warmup must be an int >= 0, got {warmup!r}")
    if not fns:
        raise ValueError("fns must name at least one function")
    tick = CLOCKS[clock]
    names = list(fns)
    best = {n: float("inf") for n in names}
    for r in range(warmup + repeats):
        k = r % len(names)
        for n in names[k:] + names[:k]:  # rotate the order every round
            t0 = tick()
            fns[n]()
            dt = tick() - t0
            if r >= warmup:
                best[n] = min(best[n], dt)
    return best
