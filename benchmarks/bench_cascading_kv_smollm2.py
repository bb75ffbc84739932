"""Cascading KV cache on SmolLM2-135M-Instruct (fp32) against transformers' caches: prefill, decode, peak memory.

Caches of the same size (``S`` sinks + ``N`` slots = the sliding window):

* ``cascade`` — :class:`~iclr25.cascading_kv.CascadingKVCache` (C = 4) with the strided prefill;
* ``streaming`` — the same cache with C = 1 (StreamingLLM), prefill only;
* ``sliding`` — transformers' sliding-window cache (``DynamicCache`` of ``DynamicSlidingWindowLayer`` s) on SmolLM2's
  weights in its Mistral twin (``sliding_window = S + N``), with transformers' chunked prefill at the same stride;
* ``full`` — ``DynamicCache``, SDPA full attention, chunked at the same stride (only up to ``--full-max`` tokens).

Each (method, length) prefill runs in a fresh subprocess (its peak memory is its own: ``ru_maxrss`` growth on CPU).
Decode: after each prompt one subprocess pre-fills every decode method and times ``--decode-tokens`` greedy tokens,
best of ``--rounds`` interleaved rounds (process CPU time on CPU, so others' load does not count). A missed goal
gets a per-op profile (``torch.profiler``, top ops by self CPU time) of the two methods it compares.

    python -m benchmarks.bench_cascading_kv_smollm2 --out DIR            # 8K and 32K (CPU-minutes: ~15 on 1 thread)
    python -m benchmarks.bench_cascading_kv_smollm2 --out DIR --lengths 1024 --full-max 1024 --cache-size 128 \\
        --stride 64 --decode-tokens 8 --rounds 2                          # a quick look

Writes ``DIR/results.json`` and ``DIR/results.md``; goals are ratios of two measurements of this run, reported (✓/✗),
never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PREFILL = ("cascade", "streaming", "sliding", "full")
DECODE = ("cascade", "sliding", "full")
# (goal, numerator, denominator, quantity, target): every ratio reads "cascade is x× as fast / as small"
GOALS = (
    ("decode tok/s, cascade / HF sliding window", "cascade", "sliding", "decode", 0.9),
    ("prefill speed, HF chunked sliding window s / cascade s", "cascade", "sliding", "prefill", 0.8),
    ("decode tok/s, cascade / DynamicCache", "cascade", "full", "decode", None),
    ("prefill speed, DynamicCache s / cascade s", "cascade", "full", "prefill", None),
    ("peak prefill memory, HF sliding window / cascade", "cascade", "sliding", "memory", None),
)


def _model(a):
    import torch

    from iclr25.assets import load_causal_lm
    from iclr25.cascading_kv.real import sliding_twin

    torch.set_num_threads(a.threads)
    model, _ = load_causal_lm("smollm2-135m-instruct")
    return model, sliding_twin(model, a.sinks + a.cache_size)


def _cache(a, model, twin, method: str):
    from transformers import DynamicCache

    from iclr25.cascading_kv import CascadingKVCache

    if method in ("cascade", "streaming"):
        return CascadingKVCache(model, sink_tokens=a.sinks, cache_size=a.cache_size,
                                cascades=1 if method == "streaming" else a.cascades)  # fmt: skip
    return DynamicCache(config=(twin if method == "sliding" else model).config)


def _prefill(a, model, twin, method: str, ids):
    import torch

    from iclr25.cascading_kv import strided_prefill

    cache = _cache(a, model, twin, method)
    with torch.no_grad():
        if method in ("cascade", "streaming"):
            strided_prefill(model, ids, cache, stride=a.stride)
        else:
            mdl = twin if method == "sliding" else model
            for chunk in ids.split(a.stride, dim=1):  # transformers' chunked prefill (prefill_chunk_size)
                mdl(input_ids=chunk, cache=cache, use_cache=True, logits_to_keep=1)
    return cache


def _step(model, twin, method: str, cache, tok):
    """One greedy decode step: the next token ``(1, 1)``."""
    mdl = twin if method == "sliding" else model
    return mdl(input_ids=tok, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)


def _ids(a, length: int):
    import torch

    return torch.randint(0, 49152, (1, length), generator=torch.Generator().manual_seed(0))


def child_prefill(a) -> dict:
    model, twin = _model(a)
    _prefill(a, model, twin, a.method, _ids(a, 2 * a.stride))  # warm-up
    ids = _ids(a, a.length)
    rss0 = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    c0 = time.process_time()
    _prefill(a, model, twin, a.method, ids)
    secs = time.process_time() - c0
    peak = max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0)
    return {"method": a.method, "length": a.length, "prefill_cpu_s": secs, "peak_bytes": peak}


def child_decode(a) -> dict:
    import torch

    model, twin = _model(a)
    ids = _ids(a, a.length)
    methods = [m for m in DECODE if m != "full" or a.length <= a.full_max]
    caches = {m: _prefill(a, model, twin, m, ids) for m in methods}
    tok = {m: torch.tensor([[1]]) for m in methods}
    best = {m: float("inf") for m in methods}
    with torch.no_grad():
        for m in methods:  # warm-up step
            tok[m] = _step(model, twin, m, caches[m], tok[m])
        for r in range(a.rounds):
            for m in methods[r % len(methods) :] + methods[: r % len(methods)]:
                c0 = time.process_time()
                for _ in range(a.decode_tokens):
                    tok[m] = _step(model, twin, m, caches[m], tok[m])
                best[m] = min(best[m], time.process_time() - c0)
    out = {"length": a.length, **{f"{m}_tok_s": a.decode_tokens / best[m] for m in methods}}
    if a.profile:
        out["profile"] = {
            m: _profile(lambda m=m: _step(model, twin, m, caches[m], tok[m])) for m in a.profile
        }
    return out


def _profile(fn, top: int = 12) -> list[dict]:
    import torch
    from torch.profiler import ProfilerActivity, profile

    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(4):
            fn()
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    return [{"op": e.key, "self_cpu_ms": e.self_cpu_time_total / 4e3, "calls": e.count // 4} for e in rows]


def child_profile_prefill(a) -> dict:
    model, twin = _model(a)
    ids = _ids(a, min(a.length, 8 * a.stride))
    return {m: _profile(lambda m=m: _prefill(a, model, twin, m, ids)) for m in a.profile}


def _child(a, extra: list[str]) -> dict:
    shared = ["--cache-size", str(a.cache_size), "--sinks", str(a.sinks), "--cascades", str(a.cascades), "--stride",
              str(a.stride), "--threads", str(a.threads), "--decode-tokens", str(a.decode_tokens), "--rounds",
              str(a.rounds), "--full-max", str(a.full_max)]  # fmt: skip
    cmd = [sys.executable, "-m", "benchmarks.bench_cascading_kv_smollm2", *extra, *shared]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, ICLR25_QUIET="1"), cwd=ROOT)
    if r.returncode:
        raise RuntimeError(f"{' '.join(extra)} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _commit() -> str:
    """The checkout's short commit (``+dirty`` when tracked files under ``src/`` or ``benchmarks/`` differ from it),
    ``?`` outside a git checkout."""
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT,
                             check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "src", "benchmarks"],
                               capture_output=True, text=True, cwd=ROOT).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return sha + ("+dirty" if dirty else "")


def goals(prefill: list[dict], decode: list[dict]) -> list[dict]:
    out = []
    pre = {(r["method"], r["length"]): r for r in prefill}
    for L in sorted({r["length"] for r in prefill} | {r["length"] for r in decode}):
        dec = next((r for r in decode if r["length"] == L), {})
        for name, num, den, q, target in GOALS:
            if q == "decode":
                a, b = dec.get(f"{num}_tok_s"), dec.get(f"{den}_tok_s")
                ratio = a / b if a and b else float("nan")
            else:
                key = "prefill_cpu_s" if q == "prefill" else "peak_bytes"
                a, b = pre.get((num, L), {}).get(key), pre.get((den, L), {}).get(key)
                ratio = b / a if a and b else float("nan")
            met = None if target is None or ratio != ratio else ratio >= target
            out.append({"goal": name, "length": L, "ratio": ratio, "target": target, "met": met})
    return out


def _md(res: dict) -> str:
    a = res["args"]
    lines = [f"SmolLM2-135M-Instruct fp32, S + N = {a['sinks']} + {a['cache_size']}, C = {a['cascades']}, stride "
             f"{a['stride']}, {a['threads']} thread(s); commit {res.get('commit', '?')}, started "
             f"{res.get('started_utc', '?')} UTC, torch {res.get('torch', '?')}; {res['seconds']:.0f} s wall, 1-minute "
             f"load {min(res['load']):.1f}–{max(res['load']):.1f} on {os.cpu_count()} CPUs; process CPU time.", "",
             "| goal | length | ratio | target |", "|---|---|---|---|"]  # fmt: skip
    for g in res["goals"]:
        mark = "" if g["met"] is None else (" ✓" if g["met"] else " ✗")
        tgt = "—" if g["target"] is None else f"≥ {g['target']}"
        lines.append(f"| {g['goal']} | {g['length']} | {g['ratio']:.2f}{mark} | {tgt} |")
    lines += ["", "| method | length | prefill CPU s | peak MiB |", "|---|---|---|---|"]
    for r in res["prefill"]:
        lines.append(
            f"| {r['method']} | {r['length']} | {r['prefill_cpu_s']:.2f} | {r['peak_bytes'] / 2**20:.0f} |"
        )
    lines += [
        "",
        "| length | " + " | ".join(f"{m} tok/s" for m in DECODE) + " |",
        "|---|" + "---|" * len(DECODE),
    ]
    for r in res["decode"]:
        lines.append(f"| {r['length']} | " + " | ".join(f"{r.get(f'{m}_tok_s', float('nan')):.1f}" for m in DECODE)
                     + " |")  # fmt: skip
    for what, prof in res.get("profiles", {}).items():
        for m, rows in prof.items():
            if not isinstance(rows, list):
                continue
            lines += ["", f"Per-op profile, {what}, {m} (top ops by self CPU time, per {what.split(' of ')[0]}):", "",
                      "| op | self CPU ms | calls |", "|---|---|---|"]  # fmt: skip
            lines += [f"| `{r['op']}` | {r['self_cpu_ms']:.2f} | {r['calls']} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_cascading_kv_smollm2", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", default="runs/benchmarks/cascading_kv_smollm2")
    p.add_argument("--lengths", default="8192,32768")
    p.add_argument("--cache-size", type=int, default=1024)
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--cascades", type=int, default=4)
    p.add_argument("--stride", type=int, default=512)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--full-max", type=int, default=8192, help="longest prompt for DynamicCache (full attention)"
    )
    p.add_argument("--decode-tokens", type=int, default=16)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--_prefill", default="", help=argparse.SUPPRESS)
    p.add_argument("--_decode", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--_profile_prefill", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--_length", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--profile", default="", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    a.profile = [m for m in a.profile.split(",") if m]
    if a._prefill or a._decode or a._profile_prefill:
        a.length, a.method = a._length, a._prefill
        fn = child_prefill if a._prefill else child_decode if a._decode else child_profile_prefill
        print(json.dumps(fn(a)))
        return 0
    try:
        lengths = [int(x) for x in a.lengths.split(",") if x.strip()]
    except ValueError:
        print(f"--lengths must be comma-separated ints, got {a.lengths!r}", file=sys.stderr)
        return 2
    if a.cache_size % a.cascades or min(lengths, default=0) < 2 * a.stride:
        print(f"--cache-size {a.cache_size} must be divisible by --cascades {a.cascades} and every length >= 2 × "
              f"--stride {a.stride}, got lengths {lengths}", file=sys.stderr)  # fmt: skip
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0, load = time.perf_counter(), [os.getloadavg()[0]]
    started = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    prefill, decode = [], []
    for L in lengths:
        for m in PREFILL:
            if m == "full" and L > a.full_max:
                continue
            prefill.append(_child(a, ["--_prefill", m, "--_length", str(L)]))
            print(f"[smollm2] prefill {m:9s} L={L}: {prefill[-1]['prefill_cpu_s']:.2f} CPU-s", flush=True)
        decode.append(_child(a, ["--_decode", "--_length", str(L)]))
        print(f"[smollm2] decode L={L}: {decode[-1]}", flush=True)
        load.append(os.getloadavg()[0])
    import torch

    res = {
        "commit": _commit(),
        "started_utc": started,
        "torch": torch.__version__,
        "args": {k: v for k, v in vars(a).items() if not k.startswith("_")},
        "prefill": prefill,
        "decode": decode,
    }
    res["goals"] = goals(prefill, decode)
    missed = [g for g in res["goals"] if g["met"] is False]
    res["profiles"] = {}
    if missed:  # a missed goal gets a per-op profile at the longest length, not a guess
        L = max(lengths)
        if any("decode" in g["goal"] for g in missed):
            d = _child(a, ["--_decode", "--_length", str(L), "--profile", "cascade,sliding"])
            res["profiles"][f"one decode step after {L} tokens"] = d["profile"]
        if any("prefill" in g["goal"] for g in missed):
            res["profiles"][f"prefill of {min(L, 8 * a.stride)} tokens"] = _child(
                a, ["--_profile_prefill", "--_length", str(L), "--profile", "cascade,sliding"]
            )
    res["seconds"], res["load"] = time.perf_counter() - t0, load + [os.getloadavg()[0]]
    from iclr25.common.io import atomic_write_json, atomic_write_text

    atomic_write_json(out / "results.json", res)
    atomic_write_text(out / "results.md", _md(res))
    print(_md(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
