"""Figure and Markdown report of the Quantum-PEFT reproduction."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from iclr25.common.io import atomic_savefig
from iclr25.common.results import values
from iclr25.common.stats import mean_std

from .config import LR_GRID, TUNE_SEEDS, Config
from .params import comparison_markdown


def figure(
    cfg: Config, per_seed: dict, path: Path, counts: dict, rows: list[dict], methods: Sequence[str]
) -> Path:
    """Target accuracy of every method per width, and the parameter scaling with n."""
    from iclr25.common.figures import subplots

    fig, axes = subplots(1, len(cfg.widths) + 1, figsize=(4.2 * (len(cfg.widths) + 1), 3.4))
    for ax, w in zip(axes, cfg.widths):
        means = [np.mean(values(per_seed, f"d{w}/{m}/acc")) for m in methods]
        stds = [np.std(values(per_seed, f"d{w}/{m}/acc")) for m in methods]
        params = [int(per_seed[min(per_seed)][f"d{w}"][m]["params"]) for m in methods]
        ax.bar(range(len(methods)), means, yerr=stds, color=["#999", "#4c72b0", "#dd8452", "#55a868"])
        ax.set_xticks(range(len(methods)), [f"{m}\n{p:,} p" for m, p in zip(methods, params)], fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_title(f"rotated digits, ViT d={w}")
        ax.set_ylabel("target test accuracy")
    ax = axes[-1]
    ns = list(cfg.scaling_qubits)
    ax.semilogy(ns, [r["lora"] for r in rows], "o-", label="LoRA r=1")
    ax.semilogy(ns, [r["qpeft"] for r in rows], "s-", label="Quantum-PEFT K=1, L=1")
    ax.set_xlabel("n  (N = M = 2^n)")
    ax.set_ylabel("parameters per weight")
    ax.set_title("parameter scaling")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return atomic_savefig(fig, path)


def report_md(cfg: Config, per_seed: dict, counts: dict, rows: list[dict], methods: Sequence[str]) -> str:
    q = cfg.qpeft  # the Quantum-PEFT adapter's QuantumPEFTConfig
    lines = ["## Results (target = 90°-rotated digits, test accuracy, mean ± std over seeds)", ""]
    lines += ["| d | method | adapter params (excl. head) | accuracy |", "|---|---|---|---|"]
    for w in cfg.widths:
        for m in methods:
            v = values(per_seed, f"d{w}/{m}/acc")
            p = int(per_seed[min(per_seed)][f"d{w}"][m]["params"])
            lines.append(f"| {w} | {m} | {p:,} | {mean_std(v)} |")
        so = values(per_seed, f"d{w}/source_acc")
        zs = values(per_seed, f"d{w}/zero_shot_rotated_acc")
        lines.append(
            f"| {w} | (pre-trained: upright {np.mean(so):.3f}, rotated zero-shot {np.mean(zs):.3f}) | | |"
        )
    lines += ["", "Adapter sizes at the claim widths: " + ", ".join(
        f"d={w}: LoRA-r1 {c['lora_r1']:,} vs Quantum-PEFT {c['qpeft']:,} ({c['lora_r1'] / c['qpeft']:.1f}×)"
        for w, c in counts.items()
    ), "", "### Parameter scaling, one N×M weight (K=1, L=1 vs LoRA r=1)", "", comparison_markdown(rows), ""]  # fmt: skip
    lines += [
        "### Deviations from the paper at this scale",
        "- Paper: DeBERTaV3/Mistral-7B on GLUE, GPT-2 Medium on E2E, ViT on CIFAR-10. Here: a 2-block ViT "
        "(transformers `ViTForImageClassification` built from a config) on scikit-learn digits, adapted to rotated "
        'digits (README, "Reproduction"), 3 seeds on CPU. Absolute accuracies are not comparable with the paper\'s tables.',
        f"- Quantum-PEFT K={q.rank}, L={q.layers}, s={q.alpha}, θ~N(0,{q.init_std}²), Λ=0; LoRA r={cfg.lora_rank} "
        "(PEFT); AdamW + OneCycle, the same epochs and batches for every method. Learning rates (fair-baseline "
        "protocol): every method gets one LR for all its trainable parameters, head included, chosen from the same "
        f"grid {{{', '.join(f'{x:g}' for x in LR_GRID)}}} by mean target accuracy on held-out seeds "
        f"{', '.join(map(str, TUNE_SEEDS))} at d=64 (`sweep_learning_rates`, table in the README): head-only "
        f"{cfg.lr_head_only:g}, LoRA {cfg.lr_lora:g}, Quantum-PEFT {cfg.lr_angles:g} (angles) / {cfg.lr_lambda:g} "
        f"(Λ, head), full FT {cfg.lr_full:g}.",
        "- Intrinsic-rank masking of Λ and the Taylor/Lie node ablation of the paper are not run here; angle "
        "quantisation is implemented (`angle_bits`) but not part of the claims.",
    ]
    return "\n".join(lines)
