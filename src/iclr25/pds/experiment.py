"""Reproduction: PMP-selected data trains a target LM faster than random selection (README, "Reproduction").

Per seed: generate a Markov-chain corpus with clean / noisy / other-chain / degenerate sources (30/30/20/20 %)
and a clean downstream set (J) → warm-start a proxy HF Llama on the pool (the paper's "10K-step checkpoint")
→ PMP scores of a proxy set (T SGD steps on pool-stream batches, score every c steps) → normalise → ridge
n-gram scorer (held-out Spearman) → scorer on the whole pool → Gumbel-top-k r = 0.4, τ = 0.1 → train a
fresh target LM on PDS-40 %, random-40 %, DSIR-40 % (``data-selection`` package) and the T = 1 ablation
(same init, same batches schedule) and compare clean-test loss curves.
"""

from __future__ import annotations

import copy
import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import Claim, make_claim
from iclr25.common.lm import n_params
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import derive_seed, numpy_rng, seed_everything
from iclr25.harness.rundir import RunDir, RunResult

from . import full, real, report
from .config import PRESETS, Config, FullConfig, RealConfig
from .corpus import SOURCES, make_markov_corpus
from .dsir import dsir_log_weights
from .pmp import pmp_scores
from .scorer import normalize_scores
from .selection import gumbel_top_k_select, random_select
from .training import build_lm, fit_scorer, predict, steps_to_reach, train_on_rows

__all__ = [
    "Config",
    "FullConfig",
    "PRESETS",
    "RealConfig",
    "claims",
    "one_seed",
    "run",
]  # the config names re-exported for the registry


def downloads(cfg: Config) -> list[dict[str, str]]:
    """What ``iclr25 run pds`` with ``cfg`` fetches from the hub (empty: nothing; the full preset names models and
    data)."""
    return full.downloads(cfg) if isinstance(cfg, FullConfig) else []


def _corpus(cfg: Config, seed: int):
    if isinstance(cfg, RealConfig):
        return real.make_real_corpus(
            cfg.seq_len,
            cfg.per_source,
            cfg.n_dev,
            cfg.n_test,
            cfg.vocab,
            tuple(cfg.sources),
            cfg.max_tokens,
            seed=derive_seed(seed, "corpus"),
        )
    return make_markov_corpus(
        cfg.n_pool,
        cfg.n_dev,
        cfg.n_test,
        cfg.n_symbols,
        cfg.seq_len,
        cfg.mix,
        seed=derive_seed(seed, "corpus"),
    )


# the keys the claims read: mean PMP score per source, the scorer's Spearman, PDS vs random final loss and PDS's
# steps to reach random's final loss
REQUIRED = tuple(f"pmp/mean_z/{name}" for name in SOURCES) + (
    "scorer/spearman",
    "pds/final_loss",
    "random/final_loss",
    "pds/steps_frac_to_random_final",
)


def one_seed(cfg: Config, seed: int) -> dict:
    t0 = time.perf_counter()
    seed_everything(seed)
    dev = torch.device(cfg.device)
    if isinstance(cfg, FullConfig):  # the paper's proxy checkpoint and its tokenizer
        proxy, tok = full.load_proxy(cfg)
        data = full.make_full_corpus(cfg, tok, derive_seed(seed, "corpus"))
    else:
        data = _corpus(cfg, seed)
    V = data.vocab_size
    names = getattr(data, "sources", SOURCES)
    pad = getattr(data, "pad_id", 0)  # None: rows hold no padding

    # 1. proxy LM θ_0: a short conventional warm start on the pool (the paper starts from a 10K-step checkpoint)
    if not isinstance(cfg, FullConfig):
        proxy = build_lm(
            cfg, cfg.proxy_hidden, cfg.proxy_layers, cfg.proxy_heads, V, derive_seed(seed, "proxy")
        )
        proxy = proxy.to(dev)
    if cfg.warm_steps:
        train_on_rows(
            proxy,
            data.pool,
            data.dev,
            cfg,
            cfg.warm_steps,
            cfg.warm_lr,
            min(10, cfg.warm_steps),
            derive_seed(seed, "warm"),
            0,
            "warm-start",
            pad,
        )

    # 2. PMP solver on the proxy set; trajectory batches = the pool stream in corpus order (not the proxy set)
    rng = numpy_rng(derive_seed(seed, "proxy_set"))
    proxy_idx = torch.as_tensor(rng.choice(cfg.n_pool, cfg.proxy_size, replace=False))
    proxy_rows = data.pool[proxy_idx]
    batches = data.pool[: cfg.pmp_steps * cfg.pmp_batch].view(cfg.pmp_steps, cfg.pmp_batch, -1)
    t1 = time.perf_counter()
    raw, trace = pmp_scores(
        proxy,
        proxy_rows,
        batches,
        data.dev,
        lr=cfg.pmp_lr,
        steps=cfg.pmp_steps,
        score_every=cfg.score_every,
        chunk_size=cfg.chunk_size,
        pad_id="auto" if pad == 0 else pad,
        return_trace=True,
    )
    solver_s = time.perf_counter() - t1
    z = normalize_scores(raw.double().cpu())
    src = data.source[proxy_idx]
    mean_z = {
        name: float(z[src == i].mean()) if (src == i).any() else float("nan") for i, name in enumerate(names)
    }

    # 3. data scorer on proxy rows → whole pool;  4. Gumbel-top-k selection
    scorer, rho = fit_scorer(cfg, proxy_rows, z, V, derive_seed(seed, "scorer"))
    pool_scores = predict(scorer, data.pool)
    sel = {
        "random": random_select(cfg.n_pool, cfg.ratio, derive_seed(seed, "random")),
        "pds": gumbel_top_k_select(pool_scores, cfg.ratio, cfg.tau, derive_seed(seed, "gumbel")),
    }
    out: dict = {
        "pmp": {
            "mean_z": mean_z,
            "dev_loss_T0": trace.dev_losses[0],
            "dev_loss_T": trace.dev_losses[-1],
            "solver_s": solver_s,
        },
        "scorer": {"spearman": rho},
    }
    mean_z_t1 = None
    if cfg.run_t1:  # ablation: T = 1, score = η⟨∇J(θ_1), ∇l(x_n, θ_0)⟩ (no co-state propagation)
        z1 = normalize_scores(
            pmp_scores(
                proxy,
                proxy_rows,
                batches,
                data.dev,
                lr=cfg.pmp_lr,
                steps=1,
                score_every=1,
                chunk_size=cfg.chunk_size,
                pad_id="auto" if pad == 0 else pad,
            )
            .double()
            .cpu()
        )
        mean_z_t1 = {
            name: float(z1[src == i].mean()) if (src == i).any() else float("nan")
            for i, name in enumerate(names)
        }
        sc1, rho1 = fit_scorer(cfg, proxy_rows, z1, V, derive_seed(seed, "scorer_t1"))
        sel["pds_t1"] = gumbel_top_k_select(
            predict(sc1, data.pool), cfg.ratio, cfg.tau, derive_seed(seed, "gumbel")
        )
        out["pmp_t1"] = {"mean_z": mean_z_t1, "spearman": rho1}
    if cfg.run_dsir:  # DSIR: importance resampling = Gumbel-top-k on log w with τ = 1
        t2 = time.perf_counter()
        logw = dsir_log_weights(data.pool, data.dev, backend=cfg.dsir_backend)
        sel["dsir"] = gumbel_top_k_select(logw, cfg.ratio, 1.0, derive_seed(seed, "dsir"))
        out["dsir_s"] = time.perf_counter() - t2

    # 5. train the same fresh target LM on each selection, evaluate clean-test loss
    curves = {}
    if isinstance(cfg, FullConfig):  # the paper's target architecture, fresh weights
        init = full.target_init(cfg, V, derive_seed(seed, "target"))
    else:
        init = build_lm(
            cfg, cfg.target_hidden, cfg.target_layers, cfg.target_heads, V, derive_seed(seed, "target")
        )
    for arm, idx in sel.items():
        model = copy.deepcopy(init)  # the same initial weights for every arm
        res = train_on_rows(
            model,
            data.pool[idx],
            data.test,
            cfg,
            cfg.train_steps,
            cfg.train_lr,
            cfg.train_warmup,
            derive_seed(seed, "train"),
            cfg.eval_every,
            f"train[{arm}]",
            pad,
        )
        curves[arm] = [(h["step"], h["val_loss"]) for h in res["history"] if "val_loss" in h]
        out[arm] = {
            "final_loss": res["final_val_loss"],
            "mix": data.source_fractions(idx),
            "curve": [loss for _, loss in curves[arm]],
        }
    out["curve_steps"] = [s for s, _ in curves["random"]]
    ref = out["random"]["final_loss"]
    for arm in sel:
        if arm == "random":
            continue
        frac, reached = steps_to_reach(curves[arm], ref, cfg.train_steps, cfg.eval_every)
        out[arm]["loss_ratio"] = out[arm]["final_loss"] / ref
        out[arm]["steps_frac_to_random_final"] = frac
        out[arm]["reached_random_final"] = reached
    others = [mean_z[s] for s in names[1:] if np.isfinite(mean_z[s])]
    if others:
        out["pmp"]["clean_margin"] = mean_z[names[0]] - max(others)
    if isinstance(cfg, RealConfig):
        out.update(real.diagnostics(cfg, data, sel, pool_scores, z, src, curves))
        # the solver's health: the largest co-state norm over t (it grows exponentially where (I − ηH) expands)
        out["pmp"]["lambda_norm_max"] = max(trace.lambda_norms.values())
        out["pmp"]["dev_loss_max"] = max(trace.dev_losses)
    out["n_params_target"] = n_params(model)
    out["seed_s"] = time.perf_counter() - t0
    return out


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The '/'-joined per-seed keys the claims always read: :data:`REQUIRED` (the generated and full presets'
    claims), the real preset's :data:`iclr25.pds.real.REQUIRED`."""
    return real.REQUIRED if isinstance(cfg, RealConfig) else REQUIRED


def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The four claims (ids and thresholds fixed): clean scores highest, scorer fidelity, final loss, acceleration;
    the real preset's are :func:`iclr25.pds.real.claims`."""
    if isinstance(cfg, RealConfig):
        return real.claims(cfg, per_seed)
    mz = lambda name: values(per_seed, f"pmp/mean_z/{name}")  # noqa: E731
    best_other = [max(o) for o in zip(*(mz(n) for n in SOURCES[1:]))]
    small = cfg.n_pool < 12000 or cfg.train_steps < 400
    note_small = " (smoke-scale run: too small for the claim)" if small else ""
    return [
        make_claim(
            "clean_scores_highest",
            "Clean target-chain documents get the highest mean PMP score of all sources",
            "mean z(clean) − max over other sources of mean z",
            method=mz("clean"),
            baseline=best_other,
            threshold=0.0,
            direction=">=",
            compare="difference",
            reduce="all",
            note="strict '>' tested as '>= 0' on every seed" + note_small,
        ),
        make_claim(
            "scorer_fidelity",
            "The data scorer predicts PMP scores on held-out proxy rows",
            "Spearman(scorer, z) on held-out proxy rows",
            method=values(per_seed, "scorer/spearman"),
            threshold=0.6,
            direction=">=",
            reduce="all",
            note=note_small.strip(" ()"),
        ),
        make_claim(
            "final_loss",
            "PDS-40% reaches a lower final test loss than random-40%",
            "final clean-test loss, PDS / random",
            method=values(per_seed, "pds/final_loss"),
            baseline=values(per_seed, "random/final_loss"),
            threshold=0.93,
            direction="<=",
            compare="ratio",
            reduce="all",
            note=note_small.strip(" ()"),
        ),
        make_claim(
            "acceleration",
            "PDS reaches random-40%'s final test loss in at most half the steps (≈2×)",
            "steps for PDS to reach random's final loss / step budget",
            method=values(per_seed, "pds/steps_frac_to_random_final"),
            threshold=0.5,
            direction="<=",
            reduce="all",
            note=("a value > 1 means never reached within the budget" + note_small),
        ),
    ]


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg, required=required_keys(cfg))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[report.figure(cfg, per_seed, rd.figures / "pds_curves.png")],
        report_md=report.report_md(cfg, per_seed),
    )
