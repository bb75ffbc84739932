"""Quantum-PEFT unmerged-inference generation speed against PEFT's LoRA (unmerged) on the same model.

A randomly initialised tiny Llama (speed does not depend on the weights) gets either PEFT ``LoraConfig(r=1)``
or Quantum-PEFT (K=2, L=1) on q_proj and v_proj, both *unmerged*; each generates ``--new-tokens`` tokens
greedily from the same prompt. Times are best-of-``--repeats`` process CPU seconds, measured interleaved
(``iclr25.common.timing.best_times``). Rows: Quantum-PEFT with its inference cache of U, V (default) and
without it (U, V rebuilt from the angles on every forward — the behaviour before the cache), and the base
model without adapters. The reported ratio is tokens/s(Quantum-PEFT) / tokens/s(LoRA): 1.0 = parity.

    python -m benchmarks.bench_quantum_peft --out DIR          # ~10 s of CPU time

Writes ``DIR/results.json`` and ``DIR/results.md``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path


def _models(a):
    import torch
    from peft import LoraConfig, get_peft_model

    from iclr25.common.lm import tiny_causal_lm
    from iclr25.quantum_peft import QuantumPEFTConfig, get_qpeft_model

    def base():
        return tiny_causal_lm(
            "llama", seed=0, vocab_size=256, hidden=a.hidden, layers=a.layers, heads=4
        ).eval()

    targets = ["q_proj", "v_proj"]
    torch.manual_seed(0)
    lora = get_peft_model(base(), LoraConfig(r=1, lora_alpha=1, target_modules=targets)).eval()
    qp = get_qpeft_model(base(), QuantumPEFTConfig(target_modules=targets, rank=2, layers=1)).eval()
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():  # non-trivial adapters (both start at ΔW = 0)
        for n, p in list(lora.named_parameters()) + list(qp.named_parameters()):
            if "lora_B" in n or n.endswith(".lam"):
                p.normal_(generator=g)
    return {"base": base(), "lora_r1": lora, "qpeft": qp}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.bench_quantum_peft", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", default="runs/benchmarks/quantum_peft")
    p.add_argument("--new-tokens", type=int, default=30)
    p.add_argument("--prompt", type=int, default=16, help="prompt length")
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    if min(a.new_tokens, a.prompt, a.hidden, a.layers, a.repeats, a.threads) < 1:
        print(
            "--new-tokens, --prompt, --hidden, --layers, --repeats, --threads must be >= 1", file=sys.stderr
        )
        return 2
    import torch

    from iclr25.common.io import atomic_write_json, atomic_write_text
    from iclr25.common.timing import best_times
    from iclr25.quantum_peft import QuantumPEFTLinear

    torch.set_num_threads(a.threads)
    models = _models(a)
    ids = torch.randint(0, 256, (1, a.prompt), generator=torch.Generator().manual_seed(2))

    def gen(m):
        return lambda: m.generate(input_ids=ids, max_new_tokens=a.new_tokens, min_new_tokens=a.new_tokens,
                                  do_sample=False, pad_token_id=0)  # fmt: skip

    def gen_nocache():
        orig = QuantumPEFTLinear.cached_factors
        QuantumPEFTLinear.cached_factors = lambda self: None  # rebuild U, V on every forward
        try:
            return gen(models["qpeft"])()
        finally:
            QuantumPEFTLinear.cached_factors = orig

    t0 = time.perf_counter()
    with torch.no_grad():
        outs = {k: gen(m)() for k, m in models.items()}
    assert all(o.shape[-1] == a.prompt + a.new_tokens for o in outs.values())
    times = best_times(
        {"base": gen(models["base"]), "lora_r1": gen(models["lora_r1"]), "qpeft": gen(models["qpeft"]),
         "qpeft_nocache": gen_nocache},
        repeats=a.repeats,
    )  # fmt: skip
    tps = {k: a.new_tokens / v if v > 0 else float("nan") for k, v in times.items()}
    ratio = tps["qpeft"] / tps["lora_r1"]
    ratio_nocache = tps["qpeft_nocache"] / tps["lora_r1"]
    res = {"args": vars(a), "best_cpu_s": times, "tokens_per_s": tps,
           "ratio_qpeft_over_lora": ratio, "ratio_qpeft_nocache_over_lora": ratio_nocache,
           "seconds": time.perf_counter() - t0}  # fmt: skip
    md = [
        f"Greedy generation of {a.new_tokens} tokens after a {a.prompt}-token prompt, tiny Llama (hidden {a.hidden}, "
        f"{a.layers} layers), adapters on q_proj, v_proj, unmerged; best of {a.repeats} (process CPU time, "
        f"{a.threads} thread(s)).",
        "",
        "| model | tokens/s (CPU) | vs LoRA r=1 unmerged |",
        "|---|---|---|",
        *(f"| {k} | {tps[k]:.1f} | {tps[k] / tps['lora_r1']:.2f}× |" for k in ("base", "lora_r1", "qpeft", "qpeft_nocache")),
        "",
        f"**Ratio (tokens/s Quantum-PEFT / PEFT LoRA, unmerged): {ratio:.2f}** (without the U/V cache: {ratio_nocache:.2f})",
    ]  # fmt: skip
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out / "results.json", res)
    atomic_write_text(out / "results.md", "\n".join(md) + "\n")
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
