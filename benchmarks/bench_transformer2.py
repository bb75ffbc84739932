"""Transformer² SVF inference cost: greedy ``generate`` with SVF experts against the base model.

A randomly initialised Llama (speed does not depend on the weights) gets SVF on all seven projection matrices
of every block (``apply_svf``, official mode, a random non-trivial expert). Three rows generate the same tokens
from the same prompt: the base model, SVF with its adapted-weight cache (W′ = U diag(σ ⊙ s) Vᵀ built once while
z is unchanged — the default), and SVF with the cache disabled (W′ recomposed on every forward, the behaviour
before the cache). Times are best-of-``--repeats`` process CPU seconds, measured interleaved
(``iclr25.common.timing.best_times``). The reported ratio is time(SVF) / time(base): 1.0 = no overhead.

    python -m benchmarks.bench_transformer2 --out DIR          # ~20 s of CPU time

Writes ``DIR/results.json`` and ``DIR/results.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ALL = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_transformer2", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", default="runs/benchmarks/transformer2")
    p.add_argument("--new-tokens", type=int, default=16)
    p.add_argument("--prompt", type=int, default=8, help="prompt length")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    if min(a.new_tokens, a.prompt, a.batch, a.hidden, a.layers, a.repeats, a.threads) < 1:
        print("every numeric option must be >= 1", file=sys.stderr)
        return 2
    import copy

    import torch

    from iclr25.common.io import atomic_write_json, atomic_write_text
    from iclr25.common.lm import tiny_causal_lm
    from iclr25.common.timing import best_times
    from iclr25.transformer2 import SVFLinear, apply_svf

    torch.set_num_threads(a.threads)
    base = tiny_causal_lm(
        "llama", seed=0, vocab_size=256, hidden=a.hidden, layers=a.layers, heads=4, intermediate=4 * a.hidden
    ).eval()
    svf = apply_svf(copy.deepcopy(base), ALL).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # a non-trivial expert: z away from its initial value
        for m in svf.modules():
            if isinstance(m, SVFLinear):
                m.z.add_(0.1 * torch.randn(m.z.shape, generator=g, dtype=torch.float64).to(m.z.dtype))
    ids = torch.randint(3, 256, (a.batch, a.prompt), generator=torch.Generator().manual_seed(2))

    def gen(m):
        def f():
            with torch.no_grad():
                return m.generate(
                    input_ids=ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=a.new_tokens,
                    min_new_tokens=a.new_tokens,
                    do_sample=False,
                    pad_token_id=0,
                )

        return f

    def gen_nocache():
        orig = SVFLinear.adapted_weight
        SVFLinear.adapted_weight = lambda self: self.merged_weight()  # recompose W′ on every forward
        try:
            return gen(svf)()
        finally:
            SVFLinear.adapted_weight = orig

    t0 = time.perf_counter()
    same = torch.equal(gen(svf)(), gen_nocache())
    times = best_times({"base": gen(base), "svf": gen(svf), "svf_nocache": gen_nocache}, repeats=a.repeats)
    ratio = times["svf"] / times["base"]
    ratio_nocache = times["svf_nocache"] / times["base"]
    res = {
        "args": vars(a),
        "best_cpu_s": times,
        "ratio_svf_over_base": ratio,
        "ratio_svf_nocache_over_base": ratio_nocache,
        "cached_equals_uncached": same,
        "seconds": time.perf_counter() - t0,
    }
    md = [
        f"Greedy generation of {a.new_tokens} tokens after a {a.prompt}-token prompt, batch {a.batch}, Llama "
        f"(hidden {a.hidden}, {a.layers} blocks), SVF on all 7 projections per block; best of {a.repeats} "
        f"(process CPU time, {a.threads} thread(s)).",
        "",
        "| model | CPU s | vs base |",
        "|---|---|---|",
        *(
            f"| {k} | {times[k]:.3f} | {times[k] / times['base']:.2f}× |"
            for k in ("base", "svf", "svf_nocache")
        ),
        "",
        f"**Ratio time(SVF) / time(base): {ratio:.2f}** (without the W′ cache: {ratio_nocache:.2f}); "
        f"cached and uncached generations identical: {same}",
    ]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "results.json", res)
    atomic_write_text(out / "results.md", "\n".join(md) + "\n")
    print("\n".join(md))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
