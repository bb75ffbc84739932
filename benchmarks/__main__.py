"""Run every ``benchmarks/bench_*.py`` (or the ones named): ``python -m benchmarks --out DIR [NAME ...]``.

Each benchmark module exposes ``main(argv) -> int`` and accepts ``--out DIR``; it writes its table and plot
there. Benchmarks report ratios against a baseline timed in the same process, never absolute thresholds; a goal
that is missed is a ✗ in the benchmark's table, not an error. The exit status is 0 when every benchmark ran
(returned 0 or ``None``), 1 when one raised or returned a non-zero status, 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback
from pathlib import Path


def discover() -> list[str]:
    return sorted(p.stem.removeprefix("bench_") for p in Path(__file__).parent.glob("bench_*.py"))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks")
    p.add_argument("names", nargs="*", help=f"benchmarks to run (default all): {', '.join(discover())}")
    p.add_argument("--out", default="runs/benchmarks")
    a = p.parse_args(argv)
    names = a.names or discover()
    unknown = [n for n in names if n not in discover()]
    if unknown:
        print(f"unknown benchmark(s) {unknown}; valid: {', '.join(discover())}", file=sys.stderr)
        return 2
    failed = []
    for n in names:
        t = time.perf_counter()
        try:
            mod = importlib.import_module(f"benchmarks.bench_{n}")
            r = mod.main(["--out", str(Path(a.out) / n)])
        except Exception:  # one broken benchmark must not hide the others' tables
            traceback.print_exc()
            r = "raised"
        ok = r is None or r == 0
        if not ok:
            failed.append(n)
        status = "ok" if ok else f"FAILED ({r})"
        print(f"[bench] {n}: {status} ({time.perf_counter() - t:.1f} s) -> {Path(a.out) / n}")
    if failed:
        print(f"[bench] failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
