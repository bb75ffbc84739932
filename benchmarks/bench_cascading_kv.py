"""Cascading KV cache: prefill time and peak memory vs prompt length, decode throughput, and the speed goals.

Methods: the cascading cache (C = 4) and StreamingLLM (C = 1), both with the strided prefill, against full
attention (one forward over the prompt with a ``DynamicCache``, SDPA). Each (method, length) runs in a fresh
subprocess so that peak memory (``ru_maxrss`` growth on CPU, ``max_memory_allocated`` on CUDA) is its own.
A randomly initialised Llama (GQA) is used: speed and memory do not depend on the weights. Times are process
CPU time on CPU (robust to other processes on a shared machine), wall time after a sync on CUDA; what counts are
the ratios measured within one run. After the prefill of each ``--decode-at`` length the same process decodes
``--decode-tokens`` tokens (greedy feedback, one token per forward).

Goals reported (``results.md``, "Goals"): decode tokens/s of the cascade ≥ 0.8× ``DynamicCache`` at 2K context and
≥ 2× at 32K; strided-prefill time ≥ 3× faster than SDPA full attention at 32K tokens.

    python -m benchmarks.bench_cascading_kv --out DIR                 # 512..32K tokens (a few minutes of CPU)
    python -m benchmarks.bench_cascading_kv --out DIR --lengths 512,2048 --decode-at 2048   # quick look

Writes ``DIR/results.json``, ``DIR/results.md`` (tables) and ``DIR/prefill.png``.
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

METHODS = ("cascade", "streaming", "full")
# the realistic small model (GPT-2-small width, Llama-style GQA): shows how the cascade's fixed per-token cost amortises
SMALL = {"hidden": 768, "layers": 4, "heads": 12, "kv_heads": 4}


def _build(a):
    import torch

    from iclr25.common.lm import tiny_causal_lm

    torch.set_num_threads(a.threads)
    model = tiny_causal_lm(
        "llama", seed=0, vocab_size=1024, hidden=a.hidden, layers=a.layers, heads=a.heads, kv_heads=a.kv_heads,
        max_positions=1 << 17, attn_implementation="sdpa",
    )  # fmt: skip
    return model.to(a.device).eval()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def one(a) -> dict:
    """Child process: one (method, length) prefill (+ decode), printed as JSON."""
    import torch

    from iclr25.cascading_kv.profiling import decode_tokens_per_s, default_clock, prefill_once

    model = _build(a)
    clock = default_clock(torch.device(a.device))
    dev = torch.device(a.device)
    g = torch.Generator().manual_seed(0)
    warm = torch.randint(0, 1024, (1, min(a.length, 2 * a.stride)), generator=g)
    prefill_once(model, warm, a.method, a.cache_size, a.sinks, a.cascades, a.stride, full_impl="sdpa")
    ids = torch.randint(0, 1024, (1, a.length), generator=g)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
    base_rss = _rss_bytes()
    secs, cache = prefill_once(
        model, ids, a.method, a.cache_size, a.sinks, a.cascades, a.stride, full_impl="sdpa", clock=clock
    )
    if dev.type == "cuda":
        peak = torch.cuda.max_memory_allocated(dev) - base
    else:
        peak = max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base_rss)
    for _ in range(a.repeats - 1):  # time = min over repeats (shared machines); memory from the first run
        del cache
        s2, cache = prefill_once(
            model, ids, a.method, a.cache_size, a.sinks, a.cascades, a.stride, full_impl="sdpa", clock=clock
        )
        secs = min(secs, s2)
    cache_bytes = (
        cache.cache_tensor_bytes()
        if hasattr(cache, "cache_tensor_bytes")
        else sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))
    )
    out = {"method": a.method, "length": a.length, "prefill_s": secs, "peak_bytes": int(peak),
           "cache_bytes": int(cache_bytes)}  # fmt: skip
    if a.decode_tokens:
        out["decode_tok_s"] = decode_tokens_per_s(
            model, cache, a.decode_tokens, 1024, full_impl="sdpa", clock=clock
        )
    return out


def decode_pair(a) -> dict:
    """Child process: decode tokens/s of the cascade and of full attention (``DynamicCache``, SDPA) after the same
    ``a.length``-token prompt, timed in ``a.rounds`` interleaved rounds (order alternating) of ``a.decode_tokens``
    tokens each; each method keeps its best round, so load spikes of a shared machine hit both alike."""
    import torch

    from iclr25.cascading_kv.profiling import decode_tokens_per_s, default_clock, prefill_once

    model = _build(a)
    clock = default_clock(torch.device(a.device))
    ids = torch.randint(0, 1024, (1, a.length), generator=torch.Generator().manual_seed(0))
    caches = {m: prefill_once(model, ids, m, a.cache_size, a.sinks, a.cascades, a.stride, full_impl="sdpa")[1]
              for m in ("cascade", "full")}  # fmt: skip
    best = {m: 0.0 for m in caches}
    for r in range(a.rounds):
        for m in ("cascade", "full") if r % 2 == 0 else ("full", "cascade"):
            tps = decode_tokens_per_s(model, caches[m], a.decode_tokens, 1024, full_impl="sdpa", clock=clock)
            best[m] = max(best[m], tps)
    return {"length": a.length, "decode_tokens": a.decode_tokens, "rounds": a.rounds,
            "cascade_tok_s": best["cascade"], "full_tok_s": best["full"]}  # fmt: skip


def _child(a, method: str, length: int, decode: int) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench_cascading_kv", "--_one", method, "--_length", str(length),
           "--_decode", str(decode), "--rounds", str(a.rounds)] + _shared_args(a)  # fmt: skip
    env = dict(os.environ, ICLR25_QUIET="1")
    r = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=Path(__file__).resolve().parent.parent
    )
    if r.returncode:
        raise RuntimeError(f"{method} L={length} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _shared_args(a) -> list[str]:
    return ["--cache-size", str(a.cache_size), "--sinks", str(a.sinks), "--cascades", str(a.cascades),
            "--stride", str(a.stride), "--hidden", str(a.hidden), "--layers", str(a.layers), "--heads", str(a.heads),
            "--kv-heads", str(a.kv_heads), "--device", a.device, "--threads", str(a.threads), "--repeats", str(a.repeats),
            "--decode-tokens", str(a.decode_tokens)]  # fmt: skip


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclr25.common.io import atomic_savefig

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    for m, c in zip(METHODS, ("C0", "C1", "C2")):
        rs = sorted((r for r in rows if r["method"] == m), key=lambda r: r["length"])
        L = [r["length"] for r in rs]
        ax[0].plot(L, [r["prefill_s"] for r in rs], marker="o", color=c, label=m)
        ax[1].plot(L, [max(r["peak_bytes"], 1) / 2**20 for r in rs], marker="o", color=c, label=m)
    ax[0].set(
        xscale="log", yscale="log", xlabel="prompt length", ylabel="prefill seconds", title="prefill time"
    )
    ax[1].set(
        xscale="log", yscale="log", xlabel="prompt length", ylabel="peak MiB (growth)", title="peak memory"
    )
    for x in ax:
        x.legend(fontsize=8)
    fig.tight_layout()
    atomic_savefig(fig, path)


def goals(rows: list[dict], pairs: list[dict]) -> list[dict]:
    """The issue's speed goals, each computed from two measurements of this run (``nan`` when not measured)."""
    by = {(r["method"], r["length"]): r for r in rows}
    for p in pairs:
        by[("cascade", p["length"])] = {
            **by.get(("cascade", p["length"]), {}),
            "decode_tok_s": p["cascade_tok_s"],
        }
        by[("full", p["length"])] = {**by.get(("full", p["length"]), {}), "decode_tok_s": p["full_tok_s"]}

    def get(m, L, k):
        r = by.get((m, L))
        return float("nan") if r is None or k not in r else float(r[k])

    out = []
    for L, target in ((2048, 0.8), (32768, 2.0)):
        c, f = get("cascade", L, "decode_tok_s"), get("full", L, "decode_tok_s")
        out.append({"goal": f"decode tokens/s, cascade / DynamicCache at {L // 1024}K context", "target": target,
                    "cascade": c, "full": f, "ratio": c / f if f > 0 else float("nan")})  # fmt: skip
    c, f = get("cascade", 32768, "prefill_s"), get("full", 32768, "prefill_s")
    out.append({"goal": "prefill speed-up, SDPA full attention s / cascade s at 32K tokens", "target": 3.0,
                "cascade": c, "full": f, "ratio": f / c if c > 0 else float("nan")})  # fmt: skip
    for g in out:
        g["met"] = bool(g["ratio"] >= g["target"])  # nan -> False
    return out


def _table(rows: list[dict], pairs: list[dict], a) -> str:
    lengths = sorted({r["length"] for r in rows})
    by = {(r["method"], r["length"]): r for r in rows}
    head = "| method | " + " | ".join(f"L={L}" for L in lengths) + " |"
    sep = "|---|" + "---|" * len(lengths)
    clock = "process CPU seconds" if a.device == "cpu" else "seconds (wall, synchronised)"
    t = ["Goals (ratios of two measurements of this run):", "", "| goal | cascade | DynamicCache / SDPA | ratio | target | met |",
         "|---|---|---|---|---|---|"]  # fmt: skip
    for g in goals(rows, pairs):
        unit = "tok/s" if "decode" in g["goal"] else "s"
        if g["ratio"] != g["ratio"]:  # nan: this length was not run for this model
            t.append(f"| {g['goal']} | — | — | not measured | ≥ {g['target']:g} | — |")
            continue
        t.append(f"| {g['goal']} | {g['cascade']:.3g} {unit} | {g['full']:.3g} {unit} | {g['ratio']:.2f} | "
                 f"≥ {g['target']:g} | {'✓' if g['met'] else '✗'} |")  # fmt: skip
    t += ["", f"Prefill {clock} (cache N={a.cache_size}, S={a.sinks}, C={a.cascades}, stride {a.stride}; "
          f"model hidden {a.hidden}, {a.layers} layers, {a.heads}/{a.kv_heads} heads, {a.device}, {a.threads} thread(s)):",
          "", head, sep]  # fmt: skip
    for m in METHODS:
        t.append(f"| {m} | " + " | ".join(f"{by[(m, L)]['prefill_s']:.3f}" for L in lengths) + " |")
    t += ["", "Peak memory growth during prefill (MiB) / cache tensors after prefill (MiB):", "", head, sep]
    for m in METHODS:
        cells = [
            f"{by[(m, L)]['peak_bytes'] / 2**20:.1f} / {by[(m, L)]['cache_bytes'] / 2**20:.2f}"
            for L in lengths
        ]
        t.append(f"| {m} | " + " | ".join(cells) + " |")
    ratios = []
    for m in METHODS:
        rs = [by[(m, L)]["prefill_s"] for L in lengths]
        ratios.append(f"| {m} | {rs[-1] / rs[0]:.2f} (×{lengths[-1] // lengths[0]} length) |")
    t += ["", "Growth of prefill time over the range:", "", "| method | time ratio |", "|---|---|", *ratios]
    if pairs:
        t += ["", f"Decode tokens/s (best of {a.rounds} interleaved rounds of {a.decode_tokens} tokens after the "
              f"prompt, same process; {clock.split()[0]} time):", "",
              "| prompt length | cascade | full (DynamicCache, SDPA) | ratio |", "|---|---|---|---|"]  # fmt: skip
        for p in pairs:
            t.append(f"| {p['length']} | {p['cascade_tok_s']:.1f} | {p['full_tok_s']:.1f} | "
                     f"{p['cascade_tok_s'] / p['full_tok_s']:.2f} |")  # fmt: skip
    return "\n".join(t) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_cascading_kv", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", default="runs/benchmarks/cascading_kv")
    p.add_argument("--lengths", default="512,2048,8192,32768", help="comma-separated prompt lengths")
    p.add_argument("--decode-at", default="2048,32768", help="prompt lengths after which decoding is timed")
    p.add_argument("--cache-size", type=int, default=256)
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--cascades", type=int, default=4)
    p.add_argument("--stride", type=int, default=256)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--small-lengths", default="2048",
                   help=f"prompt lengths for the small model {SMALL} ('' skips it; 32K full attention costs minutes)")  # fmt: skip
    p.add_argument(
        "--small-decode-at", default="2048", help="small model: prompt lengths after which decoding is timed"
    )
    p.add_argument("--decode-tokens", type=int, default=64, help="decode steps per timed round")
    p.add_argument("--rounds", type=int, default=4, help="interleaved decode rounds (best kept)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--repeats", type=int, default=3, help="prefill time = min over this many runs (2 from 16K on)"
    )
    p.add_argument("--_one", choices=METHODS, help=argparse.SUPPRESS)
    p.add_argument("--_length", type=int, help=argparse.SUPPRESS)
    p.add_argument("--_decode", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--_pair", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._pair:
        a.length = a._pair
        print(json.dumps(decode_pair(a)))
        return 0
    if a._one:
        a.method, a.length, a.decode_tokens = a._one, a._length, a._decode
        if a.length >= 16384:
            a.repeats = min(a.repeats, 2)
        print(json.dumps(one(a)))
        return 0
    try:
        lengths = [int(x) for x in a.lengths.split(",")]
        decode_at = [int(x) for x in a.decode_at.split(",") if x.strip()]
    except ValueError:
        print(
            f"--lengths/--decode-at must be comma-separated ints, got {a.lengths!r} / {a.decode_at!r}",
            file=sys.stderr,
        )
        return 2
    if any(L < 1 for L in lengths) or a.cache_size % a.cascades or not set(decode_at) <= set(lengths):
        print(f"bad --lengths {lengths}, --decode-at {decode_at} (must be among the lengths) or --cache-size "
              f"{a.cache_size} not divisible by --cascades", file=sys.stderr)  # fmt: skip
        return 2
    try:
        small_lengths = [int(x) for x in a.small_lengths.split(",") if x.strip()]
        small_decode = [int(x) for x in a.small_decode_at.split(",") if x.strip()]
    except ValueError:
        print(f"--small-lengths/--small-decode-at must be comma-separated ints, got {a.small_lengths!r} / "
              f"{a.small_decode_at!r}", file=sys.stderr)  # fmt: skip
        return 2
    if not set(small_decode) <= set(small_lengths) or any(L < 1 for L in small_lengths):
        print(f"bad --small-lengths {small_lengths} / --small-decode-at {small_decode}", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    runs = {"tiny": (a, lengths, decode_at)}
    if small_lengths:
        s_args = argparse.Namespace(**{**vars(a), **SMALL})
        runs["small"] = (s_args, small_lengths, small_decode)
    results = {}
    for name, (ma, Ls, Ds) in runs.items():
        rows, pairs = _measure(ma, Ls, Ds, name)
        results[name] = {"model": _model_desc(ma), "args": vars(ma), "prefill": rows, "decode": pairs,
                         "goals": goals(rows, pairs)}  # fmt: skip
    from iclr25.common.io import atomic_write_json, atomic_write_text

    tiny = results["tiny"]
    atomic_write_json(out / "results.json", {"args": vars(a), "prefill": tiny["prefill"], "decode": tiny["decode"],
                                             "goals": tiny["goals"], "models": results,
                                             "load_avg": os.getloadavg(), "seconds": time.perf_counter() - t0})  # fmt: skip
    md = _goals_overview(results) + "\n"
    for name, (ma, _ls, _ds) in runs.items():
        md += f"\n## {name} model ({_model_desc(ma)})\n\n" + _table(
            results[name]["prefill"], results[name]["decode"], ma
        )
    atomic_write_text(out / "results.md", md)
    _plot(results["tiny"]["prefill"], out / "prefill.png")
    print((out / "results.md").read_text())
    return 0


def _model_desc(a) -> str:
    return f"hidden {a.hidden}, {a.layers} layers, {a.heads}/{a.kv_heads} heads"


def _goals_overview(results: dict) -> str:
    """One table with every goal for every model size ("not measured" where a length was not run for that model)."""
    t = ["Goals per model size (ratios of two measurements of the same run; process CPU time on CPU):", "",
         "| goal | " + " | ".join(f"{n} ({r['model']})" for n, r in results.items()) + " | target |",
         "|---|" + "---|" * (len(results) + 1)]  # fmt: skip
    names = list(results)
    for i, g0 in enumerate(results[names[0]]["goals"]):
        cells = []
        for n in names:
            g = results[n]["goals"][i]
            cells.append(
                "not measured" if g["ratio"] != g["ratio"] else f"{g['ratio']:.2f} {'✓' if g['met'] else '✗'}"
            )
        t.append(f"| {g0['goal']} | " + " | ".join(cells) + f" | ≥ {g0['target']:g} |")
    return "\n".join(t) + "\n"


def _measure(a, lengths: list[int], decode_at: list[int], name: str) -> tuple[list[dict], list[dict]]:
    rows = []
    for L in lengths:
        for m in METHODS:
            r = _child(a, m, L, 0)
            rows.append(r)
            print(f"[bench_cascading_kv] {name} {m:9s} L={L:6d} prefill {r['prefill_s']:.3f} s "
                  f"peak {r['peak_bytes'] / 2**20:.1f} MiB", flush=True)  # fmt: skip
    pairs = []
    for L in decode_at:
        cmd = [
            sys.executable,
            "-m",
            "benchmarks.bench_cascading_kv",
            "--_pair",
            str(L),
            "--rounds",
            str(a.rounds),
        ]
        r = subprocess.run(cmd + _shared_args(a), capture_output=True, text=True, env=dict(os.environ, ICLR25_QUIET="1"),
                           cwd=Path(__file__).resolve().parent.parent)  # fmt: skip
        if r.returncode:
            raise RuntimeError(f"decode L={L} failed:\n{r.stderr[-3000:]}")
        pairs.append(json.loads(r.stdout.strip().splitlines()[-1]))
        print(f"[bench_cascading_kv] {name} decode L={L}: cascade {pairs[-1]['cascade_tok_s']:.1f} tok/s, "
              f"full {pairs[-1]['full_tok_s']:.1f} tok/s", flush=True)  # fmt: skip
    return rows, pairs


if __name__ == "__main__":
    sys.exit(main())
