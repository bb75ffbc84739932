"""Cascading KV cache against Hugging Face's caches: prefill time, peak memory, decode throughput, needle recall.

Caches (``transformers``' own ones beside ours; random-weight Llama models, speed does not depend on the weights):

* ``cascade`` — the cascading cache (C = 4) with the strided prefill; ``compiled`` — the same cache with
  ``decode_backend="compile"`` (the single-token step as one ``torch.compile``d graph; decode only);
* ``streaming`` — StreamingLLM (C = 1, our cache) with the strided prefill;
* ``sliding`` — HF's sliding-window cache (``DynamicCache`` of ``DynamicSlidingWindowLayer`` s) on the *same weights*
  loaded into the Mistral twin of the Llama (identical architecture, ``sliding_window`` = S + N, i.e. the same number
  of cached tokens), with HF's chunked prefill at the same stride — the speed limit a fixed-size cache can approach;
* ``full`` — ``DynamicCache`` with SDPA full attention (one forward over the prompt);
* ``quantized`` — HF's ``QuantizedCache`` with the backend that installs here (``fp8``: torch only; ``quanto`` and
  ``hqq`` are not installed), one forward over the prompt.

Each (method, length) prefill runs in a fresh subprocess so that its peak memory (``ru_maxrss`` growth on CPU,
``max_memory_allocated`` on CUDA) is its own. Decode: after each ``--decode-at`` prompt one subprocess pre-fills every
decode method and times ``--decode-tokens`` greedy tokens per method in ``--rounds`` interleaved rounds, best kept
(:func:`iclr25.common.timing.best_times`; process CPU time on CPU, so other processes' load does not count; 1 thread).
The compiled step's compilation is timed separately (wall seconds of its first call) with the token count after which
it pays off. Needle recall (``--recall-steps``): the experiment's recall model (one seed, trained here) read through
each cache at equal size (S + N = 68 slots; ``quantized`` keeps every token in fp8 = ¼ of the fp32 bytes).

The goals (``results.md`` "Goals", ✓/✗; ratios of two measurements of the same run) are reported, not asserted: a
missed goal is a ✗, and the exit status is 0 whenever every measurement ran.

    python -m benchmarks.bench_cascading_kv --out DIR     # default sizes: ≈ 15 CPU-minutes (1 thread)
    python -m benchmarks.bench_cascading_kv --out DIR --lengths 2048,4096 --decode-at 2048,4096 --small-lengths '' \\
        --recall-steps 0                                   # quick look (≈ 1 CPU-minute)

Writes ``DIR/results.json``, ``DIR/results.md`` and ``DIR/prefill.png``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

METHODS = ("cascade", "streaming", "sliding", "full", "quantized")  # prefill / memory
DECODE = ("cascade", "compiled", "sliding", "full", "quantized")
QUADRATIC = ("full", "quantized")  # one forward over the prompt: skipped beyond --full-max
LABEL = {"cascade": "cascade (eager)", "compiled": "cascade (compiled)", "streaming": "StreamingLLM (C=1)",
         "sliding": "HF sliding window", "full": "DynamicCache (SDPA)", "quantized": "QuantizedCache (fp8)"}  # fmt: skip
# the realistic small model (GPT-2-small width, Llama-style GQA): shows how the cascade's fixed per-token cost amortises
SMALL = {"hidden": 768, "layers": 4, "heads": 12, "kv_heads": 4}
ROOT = Path(__file__).resolve().parent.parent


def _build(a):
    import torch

    from iclr25.common.lm import tiny_causal_lm

    torch.set_num_threads(a.threads)
    model = tiny_causal_lm(
        "llama", seed=0, vocab_size=1024, hidden=a.hidden, layers=a.layers, heads=a.heads, kv_heads=a.kv_heads,
        max_positions=1 << 17, attn_implementation="sdpa",
    )  # fmt: skip
    return model.to(a.device).eval()


def sliding_twin(model, window: int):
    """The Mistral model with ``model``'s (Llama) weights and ``sliding_window=window``: HF's own sliding window."""
    from transformers import MistralConfig, MistralForCausalLM

    d = {k: v for k, v in model.config.to_dict().items() if k not in ("model_type", "architectures")}
    cfg = MistralConfig(**{**d, "sliding_window": int(window)})
    cfg._attn_implementation = "sdpa"
    twin = MistralForCausalLM(cfg).to(next(model.parameters()).device, next(model.parameters()).dtype)
    twin.load_state_dict(model.state_dict(), strict=True)
    return twin.eval()


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _bytes(cache) -> int:
    if hasattr(cache, "cache_tensor_bytes"):
        return cache.cache_tensor_bytes()
    total = 0
    for layer in cache.layers:
        for name in ("keys", "values", "_quantized_keys", "_quantized_values"):
            t = getattr(layer, name, None)
            t = t[0] if isinstance(t, tuple) else t
            if t is not None and hasattr(t, "numel"):
                total += t.numel() * t.element_size()
    return total


def prefill(a, model, twin, method: str, ids, clock):
    """``(seconds, cache)`` of one prefill of ``ids`` with ``method``'s cache."""
    import torch
    from transformers import DynamicCache, QuantizedCache

    from iclr25.cascading_kv import CascadingKVCache, strided_prefill
    from iclr25.cascading_kv.profiling import _sync, attn_implementation

    dev = ids.device
    with torch.no_grad():
        if method in ("cascade", "compiled", "streaming"):
            cache = CascadingKVCache(model, sink_tokens=a.sinks, cache_size=a.cache_size,
                                     cascades=1 if method == "streaming" else a.cascades,
                                     decode_backend="compile" if method == "compiled" else "eager")  # fmt: skip
            _sync(dev)
            t = clock()
            strided_prefill(model, ids, cache, stride=a.stride)
        elif method == "sliding":
            cache = DynamicCache(config=twin.config)
            _sync(dev)
            t = clock()
            for chunk in ids.split(a.stride, dim=1):  # HF's chunked prefill (generate's prefill_chunk_size)
                twin(input_ids=chunk, cache=cache, use_cache=True, logits_to_keep=1)
        else:
            cache = (
                DynamicCache(config=model.config) if method == "full" else QuantizedCache("fp8", model.config)
            )
            with attn_implementation(model, "sdpa"):
                _sync(dev)
                t = clock()
                model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
        _sync(dev)
        return clock() - t, cache


def one(a) -> dict:
    """Child process: one (method, length) prefill, printed as JSON."""
    import torch

    from iclr25.cascading_kv.profiling import default_clock

    model = _build(a)
    twin = sliding_twin(model, a.sinks + a.cache_size) if a.method == "sliding" else None
    dev = torch.device(a.device)
    clock = default_clock(dev)
    g = torch.Generator().manual_seed(0)
    warm = torch.randint(0, 1024, (1, min(a.length, 2 * a.stride)), generator=g).to(dev)
    prefill(a, model, twin, a.method, warm, clock)
    ids = torch.randint(0, 1024, (1, a.length), generator=g).to(dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
        base = torch.cuda.memory_allocated(dev)
    base_rss = _rss_bytes()
    secs, cache = prefill(a, model, twin, a.method, ids, clock)
    if dev.type == "cuda":
        peak = torch.cuda.max_memory_allocated(dev) - base
    else:
        peak = max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - base_rss)
    for _ in range(a.repeats - 1):  # time = min over repeats (shared machines); memory from the first run
        del cache
        s2, cache = prefill(a, model, twin, a.method, ids, clock)
        secs = min(secs, s2)
    return {"method": a.method, "length": a.length, "prefill_s": secs, "peak_bytes": int(peak),
            "cache_bytes": int(_bytes(cache))}  # fmt: skip


def decode_group(a) -> dict:
    """Child process: tokens/s of every method in ``a.methods`` after the same ``a.length``-token prompt, best of
    ``a.rounds`` interleaved rounds of ``a.decode_tokens`` tokens (order rotated every round)."""
    import torch

    from iclr25.cascading_kv import fused
    from iclr25.cascading_kv.profiling import decode_tokens_per_s, default_clock
    from iclr25.common.timing import best_times

    model = _build(a)
    twin = sliding_twin(model, a.sinks + a.cache_size)
    dev = torch.device(a.device)
    clock = default_clock(dev)
    ids = torch.randint(0, 1024, (1, a.length), generator=torch.Generator().manual_seed(0)).to(dev)
    caches = {}
    for m in a.methods:
        if m == "compiled" and "cascade" in caches:  # the same pre-filled state, decoded by the compiled step
            caches[m] = copy.deepcopy(caches["cascade"])
            caches[
                m
            ]._config = model.config  # the model's live config (the attention switch is checked on it)
            for layer in caches[m].layers:
                layer.decode_backend = "compile"
        else:
            caches[m] = prefill(a, model, twin, m, ids, clock)[1]
    out = {"length": a.length, "decode_tokens": a.decode_tokens, "rounds": a.rounds}
    if "compiled" in caches:  # compilation (first call), wall and process time, then one compiled token
        w0, p0 = time.perf_counter(), time.process_time()
        decode_tokens_per_s(model, caches["compiled"], 1, 1024, full_impl="sdpa", clock=clock)
        out["compile_wall_s"], out["compile_cpu_s"] = time.perf_counter() - w0, time.process_time() - p0
        out["compiled_graphs"] = len(fused.COMPILE_SECONDS)
    mdl = {m: twin if m == "sliding" else model for m in caches}
    fns = {m: (lambda m=m: decode_tokens_per_s(mdl[m], caches[m], a.decode_tokens, 1024, full_impl="sdpa",
                                               clock=clock)) for m in caches}  # fmt: skip
    best = best_times(fns, repeats=a.rounds, clock="process" if dev.type == "cpu" else "wall", warmup=1)
    for m, s in best.items():
        out[f"{m}_tok_s"] = a.decode_tokens / s
    return out


def _run_child(a, extra: list[str]) -> dict:
    cmd = [sys.executable, "-m", "benchmarks.bench_cascading_kv", *extra, *_shared_args(a)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, ICLR25_QUIET="1"), cwd=ROOT)
    if r.returncode:
        raise RuntimeError(f"{' '.join(extra)} failed:\n{r.stderr[-3000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _shared_args(a) -> list[str]:
    return ["--cache-size", str(a.cache_size), "--sinks", str(a.sinks), "--cascades", str(a.cascades),
            "--stride", str(a.stride), "--hidden", str(a.hidden), "--layers", str(a.layers), "--heads", str(a.heads),
            "--kv-heads", str(a.kv_heads), "--device", a.device, "--threads", str(a.threads), "--repeats", str(a.repeats),
            "--decode-tokens", str(a.decode_tokens), "--rounds", str(a.rounds)]  # fmt: skip


def recall(a) -> dict:
    """Child process: needle recall of each cache at equal size, from the experiment's recall model (seed 0)."""
    import torch
    from transformers import DynamicCache, QuantizedCache

    from iclr25.cascading_kv import experiment as ex
    from iclr25.cascading_kv.profiling import attn_implementation
    from iclr25.common.seeding import derive_seed, torch_generator

    torch.set_num_threads(a.threads)
    cfg = ex.Config(seeds=1, train=replace(ex.Config.train, steps=a.recall_steps), trials=a.recall_trials)
    dev = torch.device("cpu")
    model, _ = ex.train_recall_model(cfg, 0, dev)
    twin = sliding_twin(model, cfg.sink_tokens + cfg.cache_size)
    res: dict = {"train_steps": cfg.train.steps, "trials": cfg.trials, "slots": cfg.sink_tokens + cfg.cache_size,
                 "stream_length": cfg.stream_length, "stride": cfg.stride, "acc": {}}  # fmt: skip
    for d in cfg.distances:
        g = torch_generator(derive_seed(0, "eval", d))  # the experiment's streams of seed 0
        ids, vals = ex.recall_batch(cfg, cfg.trials, cfg.stream_length, d, g)
        row = {"full": ex.full_attention_accuracy(cfg, model, ids, vals)}
        row["cascade"] = ex.cache_accuracy(cfg, model, ids, vals, cfg.cascades)[0]
        row["streaming"] = ex.cache_accuracy(cfg, model, ids, vals, 1)[0]
        with torch.no_grad():
            for name, mdl, mk in (("sliding", twin, lambda: DynamicCache(config=twin.config)),
                                  ("quantized", model, lambda: QuantizedCache("fp8", model.config))):  # fmt: skip
                cache = mk()
                with attn_implementation(mdl, "sdpa"):
                    for chunk in ids.split(cfg.stride, dim=1):  # chunked prefill at the experiment's stride
                        logits = mdl(input_ids=chunk, cache=cache, use_cache=True, logits_to_keep=1).logits
                row[name] = float((logits[:, -1].argmax(-1) == vals).float().mean())
        res["acc"][str(d)] = row
    return res


def _plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from iclr25.common.io import atomic_savefig

    fig, ax = plt.subplots(1, 2, figsize=(10, 3.8))
    for i, m in enumerate(METHODS):
        rs = sorted((r for r in rows if r["method"] == m), key=lambda r: r["length"])
        if not rs:
            continue
        L = [r["length"] for r in rs]
        ax[0].plot(L, [r["prefill_s"] for r in rs], marker="o", color=f"C{i}", label=LABEL[m])
        ax[1].plot(
            L, [max(r["peak_bytes"], 1) / 2**20 for r in rs], marker="o", color=f"C{i}", label=LABEL[m]
        )
    ax[0].set(
        xscale="log", yscale="log", xlabel="prompt length", ylabel="prefill seconds", title="prefill time"
    )
    ax[1].set(
        xscale="log", yscale="log", xlabel="prompt length", ylabel="peak MiB (growth)", title="peak memory"
    )
    for x in ax:
        x.legend(fontsize=7)
    fig.tight_layout()
    atomic_savefig(fig, path)


# (goal, numerator method, denominator method, quantity, length, target, "≥" or "≤"); ratio = num / den, where a
# time or a memory is turned into a speed (den / num) so that every "≥" goal reads "cascade is at least x× as fast"
GOALS = [
    (
        "decode tok/s, cascade (compiled) / HF sliding window, 4K",
        "compiled",
        "sliding",
        "decode",
        4096,
        0.8,
        "≥",
    ),
    (
        "decode tok/s, cascade (compiled) / HF sliding window, 32K",
        "compiled",
        "sliding",
        "decode",
        32768,
        0.8,
        "≥",
    ),
    ("decode tok/s, cascade (eager) / HF sliding window, 4K", "cascade", "sliding", "decode", 4096, 0.8, "≥"),
    (
        "decode tok/s, cascade (eager) / HF sliding window, 32K",
        "cascade",
        "sliding",
        "decode",
        32768,
        0.8,
        "≥",
    ),
    ("decode tok/s, cascade (compiled) / DynamicCache, 2K", "compiled", "full", "decode", 2048, 0.8, "≥"),
    ("decode tok/s, cascade (eager) / DynamicCache, 2K", "cascade", "full", "decode", 2048, 0.8, "≥"),
    ("decode tok/s, cascade (compiled) / DynamicCache, 32K", "compiled", "full", "decode", 32768, 2.0, "≥"),
    (
        "prefill speed, HF chunked sliding window s / cascade s, 16K",
        "cascade",
        "sliding",
        "prefill",
        16384,
        1.0,
        "≥",
    ),
    (
        "prefill speed, HF chunked sliding window s / cascade s, 32K",
        "cascade",
        "sliding",
        "prefill",
        32768,
        1.0,
        "≥",
    ),
    ("prefill speed, SDPA full attention s / cascade s, 32K", "cascade", "full", "prefill", 32768, 3.0, "≥"),
    (
        "peak prefill memory, cascade / HF sliding window, 32K",
        "cascade",
        "sliding",
        "memory",
        32768,
        1.5,
        "≤",
    ),
]


def goals(rows: list[dict], pairs: list[dict]) -> list[dict]:
    """The issue's goals, each the ratio of two measurements of this run (``nan`` = not measured)."""
    pre = {(r["method"], r["length"]): r for r in rows}
    dec = {p["length"]: p for p in pairs}
    nan = float("nan")
    out = []
    for goal, num, den, kind, L, target, op in GOALS:
        if kind == "decode":
            x, y = dec.get(L, {}).get(f"{num}_tok_s", nan), dec.get(L, {}).get(f"{den}_tok_s", nan)
            ratio = x / y
        else:
            key = "prefill_s" if kind == "prefill" else "peak_bytes"
            x, y = pre.get((num, L), {}).get(key, nan), pre.get((den, L), {}).get(key, nan)
            ratio = y / x if kind == "prefill" else (x / y if y > 0 else nan)
        met = bool(ratio >= target) if op == "≥" else bool(ratio <= target)  # nan -> False
        out.append({"goal": goal, "num": x, "den": y, "ratio": ratio, "target": target, "op": op, "met": met,
                    "kind": kind})  # fmt: skip
    return out


def _fmt(v: float, kind: str) -> str:
    if v != v:
        return "—"
    return {"decode": f"{v:.0f} tok/s", "prefill": f"{v:.3g} s", "memory": f"{v / 2**20:.1f} MiB"}[kind]


def _table(rows: list[dict], pairs: list[dict], a) -> str:
    lengths = sorted({r["length"] for r in rows})
    by = {(r["method"], r["length"]): r for r in rows}
    clock = "process CPU seconds" if a.device == "cpu" else "seconds (wall, synchronised)"
    t = ["| goal | measured | vs | ratio | target |", "|---|---|---|---|---|"]
    for g in goals(rows, pairs):
        if g["ratio"] != g["ratio"]:
            continue
        mark = "✓" if g["met"] else "✗"
        t.append(f"| {g['goal']} | {_fmt(g['num'], g['kind'])} | {_fmt(g['den'], g['kind'])} | "
                 f"{g['ratio']:.2f} {mark} | {g['op']} {g['target']:g} |")  # fmt: skip
    head = "| method | " + " | ".join(f"L={L}" for L in lengths) + " |"
    sep = "|---|" + "---|" * len(lengths)
    t += ["", f"Prefill {clock} (cache N={a.cache_size}, S={a.sinks}, C={a.cascades}, stride {a.stride}; "
          f"{a.device}, {a.threads} thread(s); — = not run):", "", head, sep]  # fmt: skip

    def cell(m, L, f):
        r = by.get((m, L))
        return "—" if r is None else f(r)

    ms = [m for m in METHODS if any((m, L) in by for L in lengths)]
    for m in ms:
        t.append(
            f"| {LABEL[m]} | "
            + " | ".join(cell(m, L, lambda r: f"{r['prefill_s']:.3f}") for L in lengths)
            + " |"
        )
    t += ["", "Peak memory growth during prefill (MiB) / cache tensors after prefill (MiB):", "", head, sep]
    for m in ms:
        f = lambda r: f"{r['peak_bytes'] / 2**20:.1f} / {r['cache_bytes'] / 2**20:.2f}"  # noqa: E731
        t.append(f"| {LABEL[m]} | " + " | ".join(cell(m, L, f) for L in lengths) + " |")
    if len(lengths) > 1:
        t += ["", f"Growth of prefill time L={lengths[0]} → {lengths[-1]} (×{lengths[-1] // lengths[0]} length):", "",
              "| method | time ratio |", "|---|---|"]  # fmt: skip
        for m in ms:
            if (m, lengths[0]) in by and (m, lengths[-1]) in by:
                t.append(
                    f"| {LABEL[m]} | {by[(m, lengths[-1])]['prefill_s'] / by[(m, lengths[0])]['prefill_s']:.2f} |"
                )
    if pairs:
        dm = [m for m in DECODE if any(f"{m}_tok_s" in p for p in pairs)]
        t += ["", f"Decode tokens/s (best of {a.rounds} interleaved rounds of {a.decode_tokens} tokens after the "
              f"prompt, same process; {clock.split()[0]} time):", "",
              "| prompt length | " + " | ".join(LABEL[m] for m in dm) + " |", "|---|" + "---|" * len(dm)]  # fmt: skip
        for p in pairs:
            cells = [f"{p[f'{m}_tok_s']:.1f}" if f"{m}_tok_s" in p else "—" for m in dm]
            t.append(f"| {p['length']} | " + " | ".join(cells) + " |")
        comp = [p for p in pairs if "compile_wall_s" in p and "cascade_tok_s" in p]
        if comp:
            t += ["", "Compiled decode step: compilation (first call) and when it pays off "
                  "(compile CPU s / (eager − compiled CPU s per token)):", "",
                  "| prompt length | compile wall s | compile CPU s | eager ms/token | compiled ms/token | pays off after |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
            for p in comp:
                e, c = 1e3 / p["cascade_tok_s"], 1e3 / p["compiled_tok_s"]
                pay = f"{p['compile_cpu_s'] / ((e - c) / 1e3):,.0f} tokens" if e > c else "never (not faster)"
                t.append(f"| {p['length']} | {p['compile_wall_s']:.1f} | {p['compile_cpu_s']:.1f} | {e:.2f} | {c:.2f} "
                         f"| {pay} |")  # fmt: skip
    return "\n".join(t) + "\n"


def _recall_table(r: dict) -> str:
    ds = list(r["acc"])
    cols = ["cascade", "streaming", "sliding", "quantized", "full"]
    size = {"cascade": f"{r['slots']} slots", "streaming": f"{r['slots']} slots", "sliding": f"{r['slots']} tokens",
            "quantized": f"all {r['stream_length']} tokens in fp8 (≈ {r['stream_length'] // 4} fp32 tokens)",
            "full": f"all {r['stream_length']} tokens"}  # fmt: skip
    t = [f"Needle recall (accuracy, {r['trials']} streams of {r['stream_length']} tokens per distance d; the "
         f"experiment's recall model, seed 0, {r['train_steps']} training steps; chunked prefill, stride "
         f"{r['stride']}):", "", "| cache (size) | " + " | ".join(f"d={d}" for d in ds) + " |",
         "|---|" + "---|" * len(ds)]  # fmt: skip
    for c in cols:
        t.append(f"| {LABEL[c]} ({size[c]}) | " + " | ".join(f"{r['acc'][d][c]:.2f}" for d in ds) + " |")
    return "\n".join(t) + "\n"


def _measure(a, lengths: list[int], decode_at: list[int], name: str) -> tuple[list[dict], list[dict]]:
    rows = []
    for L in lengths:
        for m in METHODS:
            if m in QUADRATIC and L > a.full_max:
                continue
            r = _run_child(a, ["--_one", m, "--_length", str(L)])
            rows.append(r)
            print(f"[bench_cascading_kv] {name} {m:9s} L={L:6d} prefill {r['prefill_s']:.3f} s "
                  f"peak {r['peak_bytes'] / 2**20:.1f} MiB (load {os.getloadavg()[0]:.1f})", flush=True)  # fmt: skip
    pairs = []
    for L in decode_at:
        ms = [m for m in DECODE if not (m in QUADRATIC and L > a.full_max)]
        pairs.append(_run_child(a, ["--_decode", str(L), "--_methods", ",".join(ms)]))
        print(f"[bench_cascading_kv] {name} decode L={L}: "
              + ", ".join(f"{m} {pairs[-1][f'{m}_tok_s']:.1f}" for m in ms) + " tok/s", flush=True)  # fmt: skip
    return rows, pairs


def _ints(s: str, name: str) -> list[int]:
    try:
        v = [int(x) for x in s.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"{name} must be comma-separated ints, got {s!r}") from None
    if any(x < 1 for x in v):
        raise SystemExit(f"{name} must be positive, got {v}")
    return v


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_cascading_kv", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", default="runs/benchmarks/cascading_kv")
    p.add_argument(
        "--lengths", default="2048,4096,16384,32768", help="comma-separated prompt lengths (tiny model)"
    )
    p.add_argument(
        "--decode-at", default="2048,4096,32768", help="prompt lengths after which decoding is timed"
    )
    p.add_argument("--cache-size", type=int, default=256)
    p.add_argument("--sinks", type=int, default=4)
    p.add_argument("--cascades", type=int, default=4)
    p.add_argument("--stride", type=int, default=256)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--kv-heads", type=int, default=2)
    p.add_argument("--full-max", type=int, default=32768,
                   help="longest prompt for the one-forward caches (full, quantized) of the tiny model")  # fmt: skip
    p.add_argument(
        "--small-lengths",
        default="4096,32768",
        help=f"prompt lengths for the small model {SMALL} ('' skips it)",
    )
    p.add_argument("--small-decode-at", default="4096,32768", help="small model: prompt lengths for decoding")
    p.add_argument("--small-full-max", type=int, default=4096,
                   help="small model: longest prompt for full/quantized (a 32K SDPA prefill costs CPU-minutes)")  # fmt: skip
    p.add_argument("--decode-tokens", type=int, default=48, help="decode steps per timed round")
    p.add_argument("--rounds", type=int, default=4, help="interleaved decode rounds (best kept)")
    p.add_argument(
        "--recall-steps", type=int, default=300, help="training steps of the recall model (0 skips it)"
    )
    p.add_argument("--recall-trials", type=int, default=50, help="streams per distance for the recall table")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--repeats", type=int, default=2, help="prefill time = min over this many runs (1 from 16K on)"
    )
    p.add_argument("--_one", choices=METHODS, help=argparse.SUPPRESS)
    p.add_argument("--_length", type=int, help=argparse.SUPPRESS)
    p.add_argument("--_decode", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--_methods", default="", help=argparse.SUPPRESS)
    p.add_argument("--_recall", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a._recall:
        print(json.dumps(recall(a)))
        return 0
    if a._decode:
        a.length, a.methods = a._decode, a._methods.split(",")
        print(json.dumps(decode_group(a)))
        return 0
    if a._one:
        a.method, a.length = a._one, a._length
        if a.length >= 16384:
            a.repeats = 1
        print(json.dumps(one(a)))
        return 0
    lengths, decode_at = _ints(a.lengths, "--lengths"), _ints(a.decode_at, "--decode-at")
    small_lengths, small_decode = (
        _ints(a.small_lengths, "--small-lengths"),
        _ints(a.small_decode_at, "--small-decode-at"),
    )
    if a.cache_size % a.cascades or a.stride < 1 or a.decode_tokens < 1 or a.rounds < 1:
        print(f"--cache-size {a.cache_size} must be divisible by --cascades {a.cascades}; --stride, --decode-tokens, "
              "--rounds must be >= 1", file=sys.stderr)  # fmt: skip
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    load = [os.getloadavg()]
    runs = {"tiny": (a, lengths, decode_at)}
    if small_lengths or small_decode:
        runs["small"] = (argparse.Namespace(**{**vars(a), **SMALL, "full_max": a.small_full_max}), small_lengths,
                         small_decode)  # fmt: skip
    results = {}
    for name, (ma, Ls, Ds) in runs.items():
        rows, pairs = _measure(ma, Ls, Ds, name)
        results[name] = {"model": _model_desc(ma), "args": vars(ma), "prefill": rows, "decode": pairs,
                         "goals": goals(rows, pairs)}  # fmt: skip
        load.append(os.getloadavg())
    rec = _run_child(a, ["--_recall", "--recall-steps", str(a.recall_steps), "--recall-trials",
                         str(a.recall_trials)]) if a.recall_steps > 0 else None  # fmt: skip
    load.append(os.getloadavg())
    from iclr25.common.io import atomic_write_json, atomic_write_text

    secs = time.perf_counter() - t0
    atomic_write_json(out / "results.json", {"args": vars(a), "models": results, "recall": rec, "load_avg": load,
                                             "seconds": secs})  # fmt: skip
    lmin, lmax = min(x[0] for x in load), max(x[0] for x in load)
    md = (f"Command: `python -m benchmarks.bench_cascading_kv {' '.join(argv or sys.argv[1:])}`; {secs:.0f} s wall; "
          f"1-minute load average {lmin:.1f}–{lmax:.1f} on {os.cpu_count()} CPUs.\n\n") + _goals_overview(results) + "\n"  # fmt: skip
    for name, (ma, _ls, _ds) in runs.items():
        md += f"\n## {name} model ({_model_desc(ma)})\n\n" + _table(
            results[name]["prefill"], results[name]["decode"], ma
        )
    if rec is not None:
        md += "\n## Needle recall at equal cache size\n\n" + _recall_table(rec)
    atomic_write_text(out / "results.md", md)
    if results["tiny"]["prefill"]:
        _plot(results["tiny"]["prefill"], out / "prefill.png")
    print((out / "results.md").read_text())
    return 0


def _model_desc(a) -> str:
    return f"hidden {a.hidden}, {a.layers} layers, {a.heads}/{a.kv_heads} heads"


def _goals_overview(results: dict) -> str:
    """Every goal for every model size (✓/✗; "not measured" where a length was not run for that model)."""
    names = list(results)
    t = ["Goals (ratio of two measurements of the same run; process CPU time on CPU):", "",
         "| goal | " + " | ".join(f"{n} ({results[n]['model']})" for n in names) + " | target |",
         "|---|" + "---|" * (len(names) + 1)]  # fmt: skip
    for i, g0 in enumerate(results[names[0]]["goals"]):
        cells = []
        for n in names:
            g = results[n]["goals"][i]
            cells.append(
                "not measured" if g["ratio"] != g["ratio"] else f"{g['ratio']:.2f} {'✓' if g['met'] else '✗'}"
            )
        t.append(f"| {g0['goal']} | " + " | ".join(cells) + f" | {g0['op']} {g0['target']:g} |")
    return "\n".join(t) + "\n"


if __name__ == "__main__":
    sys.exit(main())
