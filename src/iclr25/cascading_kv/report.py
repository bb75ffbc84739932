"""Figure and Markdown report of the cascading-KV reproduction."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iclr25.common.io import atomic_savefig
from iclr25.common.results import values
from iclr25.common.stats import mean_std

from .config import Config


def report_md(cfg: Config, per_seed: dict) -> str:
    def v(key):
        return values(per_seed, key)

    rows = ["| distance d | " + " | ".join(f"{d} ({d / cfg.cache_size:.2g}N)" for d in cfg.distances) + " |",
            "|---|" + "---|" * len(cfg.distances)]  # fmt: skip
    names = [("cascade", f"Cascade (C={cfg.cascades})"), ("streaming", "StreamingLLM (C=1)")]
    if cfg.mode == "recall":
        names.append(("full", f"full attention, length {cfg.stream_length}"))
    for key, label in names:
        rows.append(
            f"| {label} | " + " | ".join(mean_std(v(f"{key}/acc_d{d}"), 2) for d in cfg.distances) + " |"
        )
    if cfg.mode == "recall":
        for key, label in names[:2]:
            rows.append(f"| {label}: value token still cached (any layer) | "
                        + " | ".join(mean_std(v(f"{key}/kept_d{d}"), 2) for d in cfg.distances) + " |")  # fmt: skip
    t = ["| prefill | L | 4L | ratio |", "|---|---|---|---|"]
    for m in ("cascade", "streaming", "full"):
        t.append(f"| {m} | {mean_std(v(f'timing/{m}_s_1L'), 2)} s | {mean_std(v(f'timing/{m}_s_4L'), 2)} s | "
                 f"{mean_std(v(f'timing/{m}_ratio'), 2)} |")  # fmt: skip
    pre = ""
    if cfg.mode == "recall":
        pre = (f"Full-attention in-distribution accuracy (lengths {list(cfg.train_lengths)}): "
               f"{mean_std(v('full/in_dist_acc'), 2)}. Training {cfg.train.steps} steps per seed.\n\n")  # fmt: skip
    return f"""## Results

{pre}Retrieval accuracy (mean ± std over seeds {cfg.seed_list}, {cfg.trials} streams per cell, chance
{1 / cfg.n_values:.3f}); S = {cfg.sink_tokens} sinks, N = {cfg.cache_size}, W = {cfg.window}, span limit
W·(2^C−1) = {cfg.span_limit}, stride {cfg.stride}, β = {cfg.beta}, head reduction {cfg.head_reduction}:

{chr(10).join(rows)}

Prefill time (L = {cfg.timing_length}; process CPU seconds on CPU, best of {cfg.timing_repeats} interleaved rounds):

{chr(10).join(t)}

## Deviations from the paper at this scale
- A 2-layer, 64-wide Llama trained here on synthetic key–value recall replaces Llama-3.1-8B / Qwen2-7B and
  passkey/PG19/LongBench; caches of 64 slots with 4 sinks replace 16K–65K with 64 sinks; β = {cfg.beta} instead of
  0.9999 (0.9999999 in the final code release) because the streams are ~1000× shorter.
- Scores come from exact eager attention probabilities (the official CUDA path approximates them block-wise in a
  Triton flash kernel); head reduction is applied to the per-head EMA contributions.
- The prefill timing compares against eager full attention on CPU, not FlashAttention-2 on a GPU.
- The recall model uses untied embeddings and plain AdamW at a constant lr (README, "Reproduction"); with tied embeddings and
  warm-up + cosine decay the model did not attend to the needle from later tokens, its EMA score was average and it
  survived only ~50% of the cascade competitions. The cascade keeps what the model attends to.
- Id 0 is the HF padding id (zero embedding), so BOS gets its own id (100 ids instead of 99).
"""


def figure(cfg: Config, per_seed: dict, path: Path) -> Path:
    from iclr25.common.figures import subplots

    fig, ax = subplots(1, 2, figsize=(10, 3.6))
    ds = cfg.distances
    for key, label, c in (("cascade", f"cascade C={cfg.cascades}", "C0"), ("streaming", "StreamingLLM C=1", "C1"),
                          ("full", "full attention", "C2")):  # fmt: skip
        if key == "full" and cfg.mode != "recall":
            continue
        m = [np.mean(values(per_seed, f"{key}/acc_d{d}")) for d in ds]
        s = [np.std(values(per_seed, f"{key}/acc_d{d}")) for d in ds]
        ax[0].errorbar(ds, m, yerr=s, marker="o", label=label, color=c, capsize=3)
    ax[0].axvline(cfg.cache_size, ls="--", color="gray", lw=1)
    ax[0].axvline(cfg.span_limit, ls=":", color="gray", lw=1)
    ax[0].set(xlabel="needle distance d (tokens)", ylabel="accuracy", title="retrieval beyond the window")
    ax[0].legend(fontsize=8)
    for m, c in (("cascade", "C0"), ("streaming", "C1"), ("full", "C2")):
        ys = [np.mean(values(per_seed, f"timing/{m}_s_{k}L")) for k in (1, 4)]
        ax[1].plot([cfg.timing_length, 4 * cfg.timing_length], ys, marker="o", color=c, label=m)
    ax[1].set(
        xscale="log", yscale="log", xlabel="prompt length L", ylabel="prefill seconds", title="prefill time"
    )
    ax[1].legend(fontsize=8)
    fig.tight_layout()
    return atomic_savefig(fig, path)
