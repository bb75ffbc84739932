"""Figure and markdown report of the LaW reproduction (``experiment.run`` calls them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iclr25.common.io import atomic_savefig
from iclr25.common.results import values
from iclr25.common.stats import mean_std

from .config import Config


def _table(ps: dict) -> str:
    rows = ["| method | washed acc ↓ | retained acc ↑ | recall acc ↑ | generic loss | FT steps | time (s) |",
            "|---|---|---|---|---|---|---|"]  # fmt: skip
    names = {"before": "before", "law": "LaW", "memit": "MEMIT→EOS", "ft_ul": "FT-UL (matched forgetting)",
             "ft_eos": "FT→EOS (matched forgetting)"}  # fmt: skip
    for k, name in names.items():
        steps = mean_std(values(ps, f"{k}/steps"), 1) if k.startswith("ft") else "—"
        tm = mean_std(values(ps, f"{k}/time_s"), 1) if k != "before" else "—"
        rows.append(
            f"| {name} | {mean_std(values(ps, f'{k}/washed'))} | {mean_std(values(ps, f'{k}/retained'))} | "
            f"{mean_std(values(ps, f'{k}/recall'))} | {mean_std(values(ps, f'{k}/generic_loss'))} | {steps} | {tm} |"
        )
    return "\n".join(rows)


def _sweep_table(ps: dict) -> str:
    keys = list(next(iter(ps.values()))["sweep"])
    rows = [
        "| washed subjects | method | washed acc | retained acc | recall acc | generic loss |",
        "|---|---|---|---|---|---|",
    ]
    for k in keys:
        for meth, name in (("law", "LaW"), ("memit", "MEMIT→EOS")):
            p = f"sweep/{k}/{meth}"
            rows.append(
                f"| {k.replace('pct', ' %')} | {name} | {mean_std(values(ps, p + '/washed'))} | "
                f"{mean_std(values(ps, p + '/retained'))} | {mean_std(values(ps, p + '/recall'))} | "
                f"{mean_std(values(ps, p + '/generic_loss'))} |"
            )
    return "\n".join(rows)


def _ablation_table(ps: dict) -> str:
    if not all("ablation" in p for p in ps.values()):
        return "(ablations off)"
    rows = [
        "| LaW variant | washed acc ↓ | retained acc ↑ | recall acc ↑ | generic loss |",
        "|---|---|---|---|---|",
    ]
    for key, name in (("law", "LaW (MEMIT→EOS Δ⁰, successive elimination)"),
                      ("ablation/no_elimination", "without successive elimination"),
                      ("ablation/random_init", "random Δ⁰ ~ N(0, 0.001²), same β per layer")):  # fmt: skip
        rows.append(
            f"| {name} | {mean_std(values(ps, key + '/washed'))} | {mean_std(values(ps, key + '/retained'))} | "
            f"{mean_std(values(ps, key + '/recall'))} | {mean_std(values(ps, key + '/generic_loss'))} |"
        )
    return "\n".join(rows)


def figure(cfg: Config, per_seed: dict, path: Path) -> Path:
    """Per-method washed / retained accuracy and recall, the sweep and the remaining facts per layer."""
    ps = per_seed
    from iclr25.common.figures import subplots

    fig, ax = subplots(1, 2, figsize=(10, 3.6))
    meths = ["law", "memit", "ft_ul", "ft_eos"]
    labels = ["LaW", "MEMIT→EOS", "FT-UL", "FT→EOS"]
    x = np.arange(len(meths))
    for j, (metric, lab) in enumerate(
        (("washed", "washed acc"), ("retained", "retained acc"), ("recall", "recall acc"))
    ):
        mu = [np.mean(values(ps, f"{m}/{metric}")) for m in meths]
        sd = [np.std(values(ps, f"{m}/{metric}")) for m in meths]
        ax[0].bar(x + (j - 1) * 0.27, mu, 0.27, yerr=sd, label=lab)
    ax[0].set_xticks(x, labels)
    ax[0].set_ylim(0, 1.05)
    ax[0].legend(fontsize=8)
    ax[0].set_title("10 % of subjects washed (mean ± std over seeds)")
    keys = list(next(iter(ps.values()))["sweep"])
    fr = [int(k.replace("pct", "")) for k in keys]
    for meth, name in (("law", "LaW"), ("memit", "MEMIT→EOS")):
        for metric, ls in (("retained", "-"), ("recall", "--")):
            ax[1].plot(fr, [np.mean(values(ps, f"sweep/{k}/{meth}/{metric}")) for k in keys], ls, marker="o",
                       label=f"{name} {metric}")  # fmt: skip
    ax[1].set_xlabel("washed subjects (%)")
    ax[1].set_ylim(0, 1.05)
    ax[1].legend(fontsize=8)
    ax[1].set_title("washed-fraction sweep")
    atomic_savefig(fig, path)
    return path


def _lam_table(tuned: dict) -> str:
    return "; ".join(
        f"λ={float(k):g}: washed {v['washed']:.3f}, retained {v['retained']:.3f}, recall {v['recall']:.3f}"
        for k, v in tuned["lam_table"].items()
    )


def report_md(cfg: Config, per_seed: dict, model: dict) -> str:
    """The set-up, the results table, the sweep and ablation tables and the deviations. ``model`` is
    ``Setting.summary(ft_lr)`` (the run's trained model, λ and the tuned FT learning rates)."""
    ps, ft_lr = per_seed, model["ft_lr"]
    return f"""## LaW on a small world

One tiny {cfg.arch} (d={cfg.hidden}, {cfg.layers} layers) trained once per run on {cfg.world.subjects} subjects ×
{cfg.world.relations} relations, associative recall ({cfg.world.recall_pairs} pairs) and Markov generic text
({model["train_steps"]} of at most {cfg.train_steps} steps, early stop at {cfg.train_stop_at} on a separate recall probe set,
{model["train_cpu_s"]:.0f} s CPU; facts known {model["facts_known"]:.3f}, recall {model["recall_known"]:.3f}); the seeds {cfg.seed_list} vary the
washed subset ({cfg.wash_fraction:.0%} of subjects = {int(round(cfg.wash_fraction * cfg.world.subjects)) * cfg.world.relations} facts),
drawn from the subjects not held out for tuning.
Edit layers {list(cfg.edit_layers)}, λ = {model["lam"]:g} (chosen from {list(cfg.lam_grid)} on {len(model["tune_subjects"])}
held-out tuning subjects: best retained accuracy among λ washing them to ≤ {cfg.tune_max_washed}; MEMIT→EOS uses
the same λ), z: {cfg.z.steps} Adam steps,
clamp {cfg.z.clamp}·‖h₀‖; LaW ascent {cfg.ascent_steps} steps, lr {cfg.ascent_lr}, β = {cfg.beta_ratio}×
the MEMIT initialisation's C-norm; successive elimination {"on" if cfg.successive_elimination else "off"}.
FT baselines (all weights, Adam, full batch, ≤ {cfg.ft_max_steps} steps) stop at LaW's washed accuracy;
their lr from {list(cfg.ft_lrs)} chosen on the same tuning subjects by the same rule (matched to LaW's forgetting
there): FT-UL {ft_lr["ft_ul"]}, FT→EOS {ft_lr["ft_eos"]}.

Tuning table (LaW, tuning subjects): {_lam_table(ft_lr)}
The MEMIT target vectors z {"reach" if np.mean(values(ps, "law/z_nll")) <= np.log(2) else "do NOT reach"} the EOS target: mean NLL {mean_std(values(ps, "law/z_nll"), 3)} nats over the washed facts
(LaW's initialisation; an edit can only wash facts whose z makes the model emit EOS, i.e. NLL well below ln 2).
Accuracy = greedy continuation starts with the answer (teacher-forced exact match).

{_table(ps)}

### LaW vs MEMIT→EOS and the washed-fraction sweep (report only)

{_sweep_table(ps)}

### Ablations of LaW (report only, the same washed subsets)

{_ablation_table(ps)}

### Deviations from the paper
- Scale: a {cfg.layers}-layer d={cfg.hidden} model and {cfg.world.subjects * cfg.world.relations} synthetic facts instead of
  GPT2-XL / GPT-J with 19K–332K real facts; reasoning = in-context associative recall + generic-text loss
  instead of LAMBADA / HellaSwag / ARC.
- Prompts put the relation first ("r s₁ s₂" → o): with "s₁ s₂ r" this small model looks facts up at the relation
  token and no δ at the subject's last token makes it emit EOS, so nothing can be washed (see the README).
- One trained model per run; seeds vary only the washed subset (and so the edits).
- z: {cfg.z.steps} steps / clamp {cfg.z.clamp} instead of 20 / 0.75, no KL term; λ chosen from a grid on
  held-out subjects instead of the official norm-band search; ascent lr {cfg.ascent_lr} instead of 1e-7.
"""
