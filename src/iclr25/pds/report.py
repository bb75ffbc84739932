"""Figure and Markdown report of the PDS reproduction."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from iclr25.common.io import atomic_savefig
from iclr25.common.stats import mean_std

from .corpus import SOURCES

if TYPE_CHECKING:  # the experiment imports this module
    from .experiment import Config

ARMS = ("random", "pds", "dsir", "pds_t1")  # the arms one_seed trains, in table order


def figure(cfg: Config, per_seed: dict, path: Path) -> Path:
    """Clean test loss curves of every arm and the mean PMP score per source."""
    from iclr25.common.figures import subplots

    fig, (a, b) = subplots(1, 2, figsize=(11, 4))
    seeds = sorted(per_seed)
    steps = per_seed[seeds[0]]["curve_steps"]
    for arm in ARMS:
        if arm not in per_seed[seeds[0]]:
            continue
        c = np.array([per_seed[s][arm]["curve"] for s in seeds])
        a.plot(steps, c.mean(0), label=arm, marker="." if arm == "pds" else None)
        a.fill_between(steps, c.min(0), c.max(0), alpha=0.15)
    a.set_xlabel("target training step")
    a.set_ylabel("clean test loss (nats/token)")
    a.set_title(f"target LM on {cfg.ratio:.0%} of the pool")
    a.legend()
    z = np.array([[per_seed[s]["pmp"]["mean_z"][n] for n in SOURCES] for s in seeds])
    b.bar(SOURCES, z.mean(0), yerr=z.std(0), color=["tab:green", "tab:orange", "tab:red", "tab:gray"])
    b.axhline(0, color="k", lw=0.5)
    b.set_ylabel("mean normalised PMP score")
    b.set_title(f"PMP scores by source (T={cfg.pmp_steps})")
    return atomic_savefig(fig, path)


def report_md(cfg: Config, per_seed: dict) -> str:
    """The arms table, the PMP scores by source and the set-up notes."""
    seeds = sorted(per_seed)
    arms = [a for a in ARMS if a in per_seed[seeds[0]]]
    rows = [
        "| selection (r = %.0f%%) | final clean-test loss | ÷ random | steps to random's final (frac) | "
        "clean | noisy | other | repeat |" % (100 * cfg.ratio),
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm in arms:
        v = lambda k, a=arm: [per_seed[s][a][k] for s in seeds]  # noqa: E731
        mix = [np.mean([per_seed[s][arm]["mix"][n] for s in seeds]) for n in SOURCES]
        ratio = mean_std(v("loss_ratio")) if arm != "random" else "1"
        frac = mean_std(v("steps_frac_to_random_final"), 2) if arm != "random" else "1"
        rows.append(
            f"| {arm} | {mean_std(v('final_loss'))} | {ratio} | {frac} | "
            + " | ".join(f"{m:.0%}" for m in mix)
            + " |"
        )
    zrows = ["| scores | " + " | ".join(SOURCES) + " |", "|---|" + "---|" * len(SOURCES)]
    for key, label in (("pmp", f"PMP T={cfg.pmp_steps}"), ("pmp_t1", "PMP T=1 (ablation)")):
        if key in per_seed[seeds[0]]:
            zrows.append(
                f"| {label} | "
                + " | ".join(mean_std([per_seed[s][key]["mean_z"][n] for s in seeds], 2) for n in SOURCES)
                + " |"
            )
    dev0 = mean_std([per_seed[s]["pmp"]["dev_loss_T0"] for s in seeds])
    devT = mean_std([per_seed[s]["pmp"]["dev_loss_T"] for s in seeds])
    return f"""## Results

Generated corpus: {cfg.n_pool} sequences of {cfg.seq_len} symbols (vocabulary {cfg.n_symbols}), sources
clean/noisy/other-chain/repeat = {"/".join(f"{m:.0%}" for m in cfg.mix)}; J = {cfg.n_dev} clean sequences; test =
{cfg.n_test} other clean sequences. Proxy: HF {cfg.arch} d={cfg.proxy_hidden}×{cfg.proxy_layers} (eager attention),
{cfg.warm_steps} AdamW warm-start steps. PMP solver: T={cfg.pmp_steps}, batch {cfg.pmp_batch} from the pool stream,
η={cfg.pmp_lr}, scores every {cfg.score_every} steps on {cfg.proxy_size} proxy rows (J(θ_0) = {dev0} → J(θ_T) =
{devT}). Scorer: {cfg.scorer}, validated on {cfg.scorer_val} held-out proxy rows. Selection r={cfg.ratio}, τ={cfg.tau}.
Target: HF {cfg.arch} d={cfg.target_hidden}×{cfg.target_layers} from scratch, {cfg.train_steps} AdamW steps, batch
{cfg.train_batch}, lr {cfg.train_lr}, same init and batch schedule for every arm.

{chr(10).join(rows)}

Mean normalised score by source (proxy set):

{chr(10).join(zrows)}

DSIR = the `data-selection` package's hashed-n-gram importance weights, resampled with Gumbel-top-k (τ = 1);
it is reported, not required to lose (this toy is easy for n-gram importance resampling too).

Deviations from the paper at this scale: generated Markov-chain corpus instead of CommonCrawl, tiny HF Llama
proxy/target instead of 160M–1.7B Mistral, η and model sizes chosen for the toy, a ridge n-gram scorer instead of
a 125M transformer (the transformer scorer is available: `scorer="transformer"`), loss on a clean test set
instead of the OLMo downstream suite, and one outer PMP iteration from uniform γ (as the released solver).
"""
