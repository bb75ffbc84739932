"""Figure and Markdown report of the PDS reproduction."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iclr25.common.io import atomic_savefig
from iclr25.common.stats import mean_std

from .config import Config
from .corpus import SOURCES

ARMS = ("random", "pds", "dsir", "pds_t1")  # the arms one_seed trains, in table order


def _names(per_seed: dict) -> list[str]:
    """The pool's sources, in order (the generated corpus's or the real preset's)."""
    return list(per_seed[sorted(per_seed)[0]]["pmp"]["mean_z"])


def _is_real(cfg: Config) -> bool:
    return hasattr(cfg, "per_source")


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
    a.set_ylabel(f"{'Wikipedia' if _is_real(cfg) else 'clean'} test loss (nats/token)")
    a.set_title(f"target LM on {cfg.ratio:.0%} of the pool")
    a.legend()
    names = _names(per_seed)
    z = np.array([[per_seed[s]["pmp"]["mean_z"][n] for n in names] for s in seeds])
    colors = ["tab:green", "tab:orange", "tab:red", "tab:gray"] if tuple(names) == SOURCES else None
    b.bar(names, z.mean(0), yerr=z.std(0), color=colors)
    b.axhline(0, color="k", lw=0.5)
    b.set_ylabel("mean normalised PMP score")
    b.set_title(f"PMP scores by source (T={cfg.pmp_steps})")
    return atomic_savefig(fig, path)


def report_md(cfg: Config, per_seed: dict) -> str:
    """The arms table, the PMP scores by source and the set-up notes."""
    seeds = sorted(per_seed)
    names = _names(per_seed)
    arms = [a for a in ARMS if a in per_seed[seeds[0]]]
    rows = [
        "| selection (r = %.0f%%) | final test loss | ÷ random | steps to random's final (frac) | "
        % (100 * cfg.ratio)
        + " | ".join(names)
        + " |",
        "|---|---|---|---|" + "---|" * len(names),
    ]
    for arm in arms:
        v = lambda k, a=arm: [per_seed[s][a][k] for s in seeds]  # noqa: E731
        mix = [np.mean([per_seed[s][arm]["mix"][n] for s in seeds]) for n in names]
        ratio = mean_std(v("loss_ratio")) if arm != "random" else "1"
        frac = mean_std(v("steps_frac_to_random_final"), 2) if arm != "random" else "1"
        rows.append(
            f"| {arm} | {mean_std(v('final_loss'))} | {ratio} | {frac} | "
            + " | ".join(f"{m:.0%}" for m in mix)
            + " |"
        )
    zrows = ["| scores | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for key, label in (("pmp", f"PMP T={cfg.pmp_steps}"), ("pmp_t1", "PMP T=1 (ablation)")):
        if key in per_seed[seeds[0]]:
            zrows.append(
                f"| {label} | "
                + " | ".join(mean_std([per_seed[s][key]["mean_z"][n] for s in seeds], 2) for n in names)
                + " |"
            )
    dev0 = mean_std([per_seed[s]["pmp"]["dev_loss_T0"] for s in seeds])
    devT = mean_std([per_seed[s]["pmp"]["dev_loss_T"] for s in seeds])
    if _is_real(cfg):
        return _real_md(cfg, per_seed, rows, zrows, dev0, devT)
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


def _real_md(cfg: Config, per_seed: dict, rows: list[str], zrows: list[str], dev0: str, devT: str) -> str:
    seeds = sorted(per_seed)
    per = [
        "| seed | PDS | random | DSIR | PDS − random | PDS steps to random's final | Wikipedia share PDS / random / "
        "DSIR | scorer ρ | ln V − random |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for s in seeds:
        d = per_seed[s]
        per.append(
            f"| {s} | {d['pds']['final_loss']:.4f} | {d['random']['final_loss']:.4f} | {d['dsir']['final_loss']:.4f} | "
            f"{d['pds']['final_loss'] - d['random']['final_loss']:+.4f} | {d['pds']['steps_frac_to_random_final']:.2f} | "
            f"{d['pool']['pds_target_share']:.2f} / {d['pool']['random_target_share']:.2f} / "
            f"{d['pool']['dsir_target_share']:.2f} | {d['scorer']['spearman']:.3f} | {d['learned']['drop']:.2f} |"
        )
    return f"""## Results (real preset)

Pool: {cfg.per_source} chunks of {cfg.seq_len} SmolLM2 tokens from each of {", ".join(cfg.sources)}; J = {cfg.n_dev}
chunks of held-out Wikipedia dev articles, test = {cfg.n_test} chunks of other held-out Wikipedia articles;
vocabulary: the pool's {cfg.vocab - 3} most frequent token ids (+ pad/BOS/UNK). Proxy: HF {cfg.arch}
d={cfg.proxy_hidden}×{cfg.proxy_layers}, {cfg.warm_steps} warm-start steps. PMP: T={cfg.pmp_steps}, batch
{cfg.pmp_batch}, η={cfg.pmp_lr}, every {cfg.score_every} steps on {cfg.proxy_size} proxy rows (J(θ_0) = {dev0} →
J(θ_T) = {devT}). Scorer: {cfg.scorer}. Selection r={cfg.ratio}, τ={cfg.tau}. Target: HF {cfg.arch}
d={cfg.target_hidden}×{cfg.target_layers} from scratch, {cfg.train_steps} steps, batch {cfg.train_batch}, the same
init and batch schedule for every arm.

{chr(10).join(rows)}

Per seed:

{chr(10).join(per)}

Mean normalised PMP score by source (proxy set):

{chr(10).join(zrows)}
"""
