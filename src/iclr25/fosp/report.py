"""Figure and markdown report of the FOSP reproduction (``experiment.run`` calls them)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from iclr25.common.io import atomic_savefig
from iclr25.common.stats import mean_std, t_interval95

from .config import FLOOR, OFFLINE_ARMS, ONLINE_ARMS, SAFENAV_ONLY_CLAIMS, Config


def figure(cfg: Config, per_seed: dict, path: Path) -> Path:
    """Offline arms' return and cost on both layouts (a velocity task: the task); online arms' cumulative training
    cost (mean ± std over seeds)."""
    from iclr25.common.figures import subplots

    d = list(per_seed.values())
    fig, axes = subplots(1, 3, figsize=(13, 3.6))
    for ax, key in zip(axes[:2], ("return", "cost")):
        for j, layout in enumerate(cfg.settings):
            m = [np.mean([x[a][layout][key] for x in d]) for a in OFFLINE_ARMS]
            s = [np.std([x[a][layout][key] for x in d]) for a in OFFLINE_ARMS]
            ax.bar(np.arange(len(OFFLINE_ARMS)) + 0.4 * j, m, 0.4, yerr=s, label=layout)
        ax.set_xticks(np.arange(len(OFFLINE_ARMS)) + 0.2, OFFLINE_ARMS, fontsize=8)
        ax.set_title(f"offline: episode {key}")
        ax.legend(fontsize=7)
    m = [np.mean([x[a]["cum_cost"] for x in d]) for a in ONLINE_ARMS]
    s = [np.std([x[a]["cum_cost"] for x in d]) for a in ONLINE_ARMS]
    axes[2].bar(range(3), m, yerr=s, color=["C2", "C1", "C3"])
    axes[2].set_xticks(range(3), ["PEX", "direct FT", "SafeDreamer scratch"], fontsize=8)
    axes[2].set_title(f"online ({cfg.online_setting}): cumulative training cost")
    return atomic_savefig(fig, path)


def report_md(cfg: Config, per_seed: dict) -> str:
    """The run's markdown details: arm tables, paired per-seed differences, the AWR knobs, deviations at this scale."""
    if cfg.velocity:
        return _velocity_md(cfg, per_seed)
    d = list(per_seed.values())
    g = lambda *k: [get(x, k) for x in d]  # noqa: E731
    rows = [
        "| arm | return (base) | cost (base) | return (shifted) | cost (shifted) |",
        "|---|---|---|---|---|",
    ]
    arms = OFFLINE_ARMS + (("official",) if cfg.official_arm else ())
    for a in arms:
        rows.append(
            f"| {a} | {mean_std(g(a, 'base', 'return'), 1)} | {mean_std(g(a, 'base', 'cost'), 1)} | "
            f"{mean_std(g(a, 'shifted', 'return'), 1)} | {mean_std(g(a, 'shifted', 'cost'), 1)} |"
        )
    diffs = np.array(g("pex", "cum_cost")) - np.array(g("direct", "cum_cost"))
    ref_d = np.array(g("fosp", "shifted", "cost")) - np.array(g("fosp_noref", "shifted", "cost"))
    return (
        "## Offline arms (one shared world model per seed; deterministic policy, "
        f"{cfg.eval_episodes} episodes per layout)\n\n" + "\n".join(rows) + "\n\n"
        f"Behaviour data D per seed: mean episode return {mean_std(g('data', 'return'), 1)}, cost "
        f"{mean_std(g('data', 'cost'), 1)}. World-model loss {mean_std(g('wm_loss_first'), 2)} → "
        f"{mean_std(g('wm_loss_last'), 2)}.\n\n"
        f"## Online fine-tuning on the shifted layout ({cfg.online_env_steps} env steps, {cfg.online_envs} envs, "
        f"{cfg.updates_per_step} update per vectorised step, for every arm)\n\n" + _online_table(g) + "\n\n"
        f"Paired per-seed difference cum. cost PEX − direct: {np.round(diffs, 1).tolist()}; PEX chose π_off on "
        f"{mean_std(g('pex', 'pex_off_frac'), 2)} of steps. Paired per-seed shifted-layout cost difference FOSP − "
        f"FOSP without REF (offline policies): {np.round(ref_d, 1).tolist()}.\n\n"
        "## Paired per-seed differences (method − baseline)\n\n"
        + _pairs(g, "base", "shifted", True)
        + "\n\n"
        + _tail(cfg)
        + "- Environment: numpy SafeNav2D (22-d state, lidar) instead of vision Safety-Gymnasium; 200-step episodes.\n"
        + _scale(cfg)
    )


def _velocity_md(cfg: Config, per_seed: dict) -> str:
    """The report of a velocity-task run: one evaluation setting (the task), the claims that apply there."""
    d = list(per_seed.values())
    g = lambda *k: [get(x, k) for x in d]  # noqa: E731
    arms = OFFLINE_ARMS + (("official",) if cfg.official_arm else ())
    rows = ["| arm | return | cost |", "|---|---|---|"] + [
        f"| {a} | {mean_std(g(a, 'task', 'return'), 1)} | {mean_std(g(a, 'task', 'cost'), 1)} |" for a in arms
    ]
    beh = ["| behaviour | episode return | episode cost | mean x-velocity (m/s) |", "|---|---|---|---|"] + [
        f"| {b} | {mean_std(g('data', b, 'return'), 1)} | {mean_std(g('data', b, 'cost'), 1)} | "
        f"{mean_std(g('data', b, 'mean_x_velocity'), 2)} |"
        for b in d[0]["data"]
        if isinstance(d[0]["data"][b], dict)
    ]
    skipped = "\n".join(
        f"- `{k}` is SafeNav2D-only and not computed here: it {why}."
        for k, why in SAFENAV_ONLY_CLAIMS.items()
    )
    return (
        f"## Environment: {cfg.env_id} (gymnasium MuJoCo + Safety-Gymnasium's velocity cost, velocity.py)\n\n"
        "Claims on this environment: `offline_safe` (offline, on the task), `online_safe_expansion` and "
        "`no_collapse` (online fine-tuning on the task itself: offline-to-online without a layout shift).\n"
        + skipped
        + "\n\n"
        "## Offline arms (one shared world model per seed; deterministic policy, "
        f"{cfg.eval_episodes} episodes of {cfg.max_steps} steps)\n\n" + "\n".join(rows) + "\n\n"
        f"Behaviour data D per seed ({cfg.episodes_per_policy} episodes per behaviour): mean episode return "
        f"{mean_std(g('data', 'return'), 1)}, cost {mean_std(g('data', 'cost'), 1)}; per behaviour:\n\n"
        + "\n".join(beh)
        + "\n\n"
        f"World-model loss {mean_std(g('wm_loss_first'), 2)} → {mean_std(g('wm_loss_last'), 2)}.\n\n"
        f"## Online fine-tuning on the task ({cfg.online_env_steps} env steps, {cfg.online_envs} envs, "
        f"{cfg.updates_per_step} update per vectorised step, for every arm)\n\n" + _online_table(g) + "\n\n"
        f"PEX chose π_off on {mean_std(g('pex', 'pex_off_frac'), 2)} of steps.\n\n"
        "## Paired per-seed differences (method − baseline)\n\n"
        + _pairs(g, "task", "task", False)
        + "\n\n"
        + _tail(cfg)
        + f"- Environment: {cfg.env_id} rebuilt on gymnasium's HalfCheetah-v5 (Safety-Gymnasium does not import on "
        f"Python 3.11), state observations, {cfg.max_steps}-step episodes; offline data from scripted behaviours "
        "(fast gait, half-amplitude gait, uniform random), not trained agents.\n" + _scale(cfg)
    )


def _online_table(g) -> str:
    on = [
        "| arm | cumulative training cost | cumulative training return | final return | final cost |",
        "|---|---|---|---|---|",
    ]
    for a in ONLINE_ARMS:
        on.append(
            f"| {a} | {mean_std(g(a, 'cum_cost'), 1)} | {mean_std(g(a, 'cum_return'), 1)} | "
            f"{mean_std(g(a, 'final', 'return'), 1)} | {mean_std(g(a, 'final', 'cost'), 1)} |"
        )
    return "\n".join(on)


def _pairs(g, off: str, on: str, shift: bool) -> str:
    """Paired per-seed differences with 95 % t-intervals (the FOSP-vs-no-REF rows only with a shifted layout)."""
    pairs = [
        (f"cost FOSP − DreamerV3-offline ({off})", ("fosp", off, "cost"), ("dreamerv3", off, "cost")),
        (
            f"return FOSP − SafeDreamer-offline ({off})",
            ("fosp", off, "return"),
            ("safedreamer", off, "return"),
        ),
    ]
    if shift:
        pairs += [
            (
                "cost FOSP − FOSP w/o REF (shifted)",
                ("fosp", "shifted", "cost"),
                ("fosp_noref", "shifted", "cost"),
            ),
            (
                "return FOSP − FOSP w/o REF (shifted)",
                ("fosp", "shifted", "return"),
                ("fosp_noref", "shifted", "return"),
            ),
        ]
    pairs += [
        ("cum. cost PEX − direct", ("pex", "cum_cost"), ("direct", "cum_cost")),
        ("cum. return PEX − direct", ("pex", "cum_return"), ("direct", "cum_return")),
        ("cum. cost direct − scratch", ("direct", "cum_cost"), ("scratch", "cum_cost")),
        ("cum. return direct − scratch", ("direct", "cum_return"), ("scratch", "cum_return")),
        (f"final return PEX − offline FOSP ({on})", ("pex", "final", "return"), ("fosp", on, "return")),
    ]
    pr = ["| paired per-seed difference | per seed | mean | 95 % t-interval |", "|---|---|---|---|"]
    for name, ka, kb in pairs:
        dd = np.array(g(*ka)) - np.array(g(*kb))
        lo, hi = t_interval95(dd)
        pr.append(f"| {name} | {np.round(dd, 1).tolist()} | {dd.mean():.1f} | [{lo:.1f}, {hi:.1f}] |")
    return "\n".join(pr)


def _tail(cfg: Config) -> str:
    """Return floors, the AWR knobs and the heading of the deviations (both environments)."""
    tuning = cfg.tuning_record or "none recorded"
    return (
        f"Return floor of every cost comparison: the lower-cost arm must keep ≥ {FLOOR:g} × the other arm's return "
        "(when positive), so an arm that stops moving cannot win a cost claim.\n\n"
        "## Advantage temperature and cost gate of the AWR arms (FOSP, FOSP w/o REF)\n\n"
        f"FOSP: β = {cfg.agent.adv_temperature:g}, gate tolerance {cfg.agent.qc_tolerance:g}; FOSP w/o REF: β = "
        f"{cfg.noref_adv_temperature:g}, gate tolerance {cfg.noref_qc_tolerance:g}. Tuning: {tuning}\n\n"
        "## Deviations at this scale\n"
    )


def _scale(cfg: Config) -> str:
    """The deviation lines on sizes, rates, constraint handling and the online budget."""
    return (
        f"- World model: deterministic-latent RSSM (GRU {cfg.agent.deter}, embedding {cfg.agent.latent}, MLP heads "
        f"{cfg.agent.hidden}) with MSE/BCE heads instead of symlog two-hot; pre-trained once per seed "
        f"({cfg.wm_updates} updates) and frozen during the {cfg.offline_updates} offline behaviour updates of every "
        "arm (shared by all four offline arms).\n"
        f"- Batch {cfg.agent.batch}×{cfg.agent.seq_len}, H = {cfg.agent.horizon}, γ = {cfg.agent.gamma:g}; lrs {cfg.agent.wm_lr:g}/{cfg.agent.critic_lr:g}/"
        f"{cfg.agent.actor_lr:g} (paper 1e-4/3e-5/3e-5).\n"
        f"- Augmented Lagrangian for every constrained arm: λ₀ = {cfg.agent.multiplier_init:g}, c₀ = {cfg.agent.penalty_init:g} "
        "(paper 1e-6 / 5e-9, which leaves the penalty inert for ~10⁶ updates), "
        f"{'summed' if cfg.agent.pessimistic else 'averaged'} over the horizon.\n"
        f"- Online: {cfg.online_env_steps} env steps (paper 750k), replay = D ∪ online with "
        f"{'uniform sampling' if cfg.agent.online_frac is None else f'{cfg.agent.online_frac:g} of each batch online'}.\n"
    )


def get(x: dict, keys: tuple) -> float:
    """``x[k0][k1]…`` as a float."""
    for k in keys:
        x = x[k]
    return float(x)
