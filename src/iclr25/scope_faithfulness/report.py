"""Figure and markdown report of the SCOPE reproduction (``experiment.run`` calls them): every arm of the paper's
Fig. 1 pipeline (SFT p_θ₀, continued SFT, CAD, SCOPE at each noise level α) on the faithful test records."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iclr25.common.io import atomic_savefig
from iclr25.common.results import values
from iclr25.common.stats import mean_std

from .config import Config


def arms(cfg: Config) -> list[tuple[str, str]]:
    """``(per-seed key, table name)`` of every arm, SCOPE once per α in ``cfg.alphas``."""
    return [
        ("sft", "SFT on D₁ (p_θ₀)"),
        ("cont_sft", "p_θ₀ + continued SFT on D₂"),
        ("cad", f"CAD on p_θ₀ (α = {cfg.cad_alpha:g})"),
    ] + [(f"scope@{a:g}", f"SCOPE α = {a:g}") for a in cfg.alphas]


def report_md(cfg: Config, per_seed: dict) -> str:
    """The arms' table (mean ± std over seeds), one example preference pair and the deviations from the paper."""
    seeds = sorted(per_seed)
    rows = [
        f"Greedy decoding on {cfg.n_test} faithful test records; mean ± std over seeds {seeds}.",
        "",
        "| model | hallucination rate ↓ | field recall ↑ | SacreBLEU ↑ | halluc. of samples (T = %g) ↓ | "
        "field recall of samples ↑ | unfaithful y⁻ on D₂ | DPO final loss |" % cfg.temperature,
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, name in arms(cfg):
        v = lambda k, key=key: values(per_seed, f"{key}/{k}")  # noqa: E731
        neg = mean_std(v("neg_halluc"), digits=3) if key.startswith("scope") else (
            mean_std(values(per_seed, "neg_halluc_alpha0"), digits=3) + " (α = 0)" if key == "sft" else "—"
        )  # fmt: skip
        loss = mean_std(v("dpo_last_loss"), digits=3) if key.startswith("scope") else "—"
        samp = mean_std(v("halluc_sampled"), digits=3) if key != "cad" else "—"
        srec = mean_std(v("recall_sampled"), digits=3) if key != "cad" else "—"
        rows.append(
            f"| {name} | {mean_std(v('halluc'), digits=3)} | {mean_std(v('recall'), digits=3)} | "
            f"{mean_std(v('bleu'), digits=1)} | {samp} | {srec} | {neg} | {loss} |"
        )
    ex = per_seed[seeds[0]].get("example_pair")
    if ex:
        rows += ["", f"Example pair (seed {seeds[0]}, α = {cfg.alpha:g}): prompt `{ex['prompt']}` — chosen "
                 f"`{ex['chosen'].strip()}` — rejected `{ex['rejected'].strip()}`"]  # fmt: skip
    rows += [
        "",
        "Deviations from the paper (toy scale): word-level synthetic biographies instead of ToTTo/WebNLG/XSum; "
        f"a {cfg.layers}-layer {cfg.arch} of width {cfg.hidden} instead of Llama-2-7B; DPO lr {cfg.tune_lr:g} and "
        f"{cfg.tune_epochs} epochs (paper: 1e-6, 1 epoch — a 7B model's setting, which does not move a random-init "
        f"toy model); max {cfg.max_new_tokens} new tokens (paper 90); exact hallucination/recall instead of "
        "PARENT/AlignScore/NLI. Continued SFT gets the same data, steps, batch, lr and warm-up as DPO (cosine "
        "decay to 0 instead of TRL's linear decay).",
    ]
    return "\n".join(rows)


def figure(cfg: Config, per_seed: dict, path: Path) -> Path:
    """Left: greedy hallucination rate of every arm (mean ± std over seeds). Right: the α sweep of SCOPE
    (hallucination and field recall) against continued SFT's hallucination."""
    from iclr25.common.figures import subplots

    fig, axes = subplots(1, 2, figsize=(10, 3.6))
    labels, means, stds = [], [], []
    for key, name in arms(cfg):
        v = values(per_seed, f"{key}/halluc")
        short = {"sft": "SFT\n(p_θ₀)", "cont_sft": "cont.\nSFT", "cad": "CAD"}
        labels.append(short.get(key, name.replace("SCOPE ", "SCOPE\n")))
        means.append(np.mean(v))
        stds.append(np.std(v))
    axes[0].bar(
        range(len(labels)), means, yerr=stds, color=["#999"] * 3 + ["#1f77b4"] * len(cfg.alphas), capsize=3
    )
    axes[0].set_xticks(range(len(labels)), labels, fontsize=7)
    axes[0].set_ylabel("hallucination rate (test)")
    axes[0].set_title("Hallucination by model")
    al = list(cfg.alphas)
    for k, name, c in (("halluc", "hallucination", "#d62728"), ("recall", "field recall", "#2ca02c")):
        m = [np.mean(values(per_seed, f"scope@{a:g}/{k}")) for a in al]
        s = [np.std(values(per_seed, f"scope@{a:g}/{k}")) for a in al]
        axes[1].errorbar(al, m, yerr=s, marker="o", label=f"SCOPE {name}", color=c, capsize=3)
    axes[1].axhline(
        np.mean(values(per_seed, "cont_sft/halluc")),
        ls="--",
        color="#d62728",
        lw=1,
        label="cont. SFT halluc.",
    )
    axes[1].set_xlabel("noise level α")
    axes[1].set_title("α sweep")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    atomic_savefig(fig, path)
    return path
