"""Training of the reproduction's LMs and data scorer on rows of token ids (README, "Reproduction"): the proxy and
target LMs (tiny Hugging Face causal LMs), their AdamW training on whole rows with a cosine schedule, the data
scorer fitted on PMP scores, its batched prediction over a pool, and the steps a loss curve needs to reach a level.

The functions read their settings from ``cfg``, a :class:`iclr25.pds.config.Config` (or any object with the fields
they name): ``arch``, ``seq_len``, ``train_batch``, ``device`` and, for :func:`fit_scorer`, ``scorer``,
``scorer_val``, ``ridge_alpha``, ``scorer_hidden``, ``scorer_layers``, ``scorer_epochs``, ``scorer_batch``,
``scorer_lr``.
"""

from __future__ import annotations

import numpy as np
import torch

from iclr25.common.lm import tiny_causal_lm
from iclr25.common.train import IGNORE, LMTrainConfig, train_lm

from .scorer import NgramRidgeScorer, build_data_scorer, spearman, train_data_scorer

__all__ = ["build_lm", "fit_scorer", "predict", "steps_to_reach", "train_on_rows"]


def build_lm(cfg, hidden: int, layers: int, heads: int, vocab: int, seed: int) -> torch.nn.Module:
    """A fresh tiny causal LM (``cfg.arch``, eager attention) of the given size for rows of ``cfg.seq_len + 1`` ids."""
    return tiny_causal_lm(
        cfg.arch,
        seed=seed,
        vocab_size=vocab,
        hidden=hidden,
        layers=layers,
        heads=heads,
        intermediate=2 * hidden,
        max_positions=cfg.seq_len + 1,
        attn_implementation="eager",
    )


def train_on_rows(
    model,
    rows: torch.Tensor,
    test: torch.Tensor,
    cfg,
    steps: int,
    lr: float,
    warmup: int,
    seed: int,
    eval_every: int,
    desc: str,
    pad: int | None = 0,
) -> dict:
    """AdamW (β = 0.9/0.98 and wd 0.01 as the paper's pre-training), cosine to 0.1×, batches of whole rows."""
    per_eval = min(64, test.shape[0])

    def labels(x: torch.Tensor) -> torch.Tensor:
        return x if pad is None else x.masked_fill(x == pad, IGNORE)

    def batch_fn(step: int, g: torch.Generator):
        x = rows[torch.randint(0, rows.shape[0], (cfg.train_batch,), generator=g)]
        return x, labels(x)

    def val_fn(b: int, g: torch.Generator):
        x = test[b * per_eval : (b + 1) * per_eval]
        return x, labels(x)

    tcfg = LMTrainConfig(
        steps=steps,
        batch_size=cfg.train_batch,
        seq_len=cfg.seq_len + 1,
        lr=lr,
        warmup_steps=warmup,
        min_lr_ratio=0.1,
        weight_decay=0.01,
        beta1=0.9,
        beta2=0.98,
        grad_clip=1.0,
        eval_every=eval_every,
        eval_batches=max(1, test.shape[0] // per_eval),
        seed=seed,
    )
    return train_lm(model, cfg=tcfg, batch_fn=batch_fn, val_batch_fn=val_fn, device=cfg.device, desc=desc)


def fit_scorer(cfg, rows: torch.Tensor, z: torch.Tensor, vocab: int, seed: int):
    """Fit the scorer on proxy rows [scorer_val:], return (scorer, Spearman on the first scorer_val rows)."""
    v = cfg.scorer_val
    if cfg.scorer == "ridge":
        sc = NgramRidgeScorer(vocab, alpha=cfg.ridge_alpha, pad_id=0).fit(rows[v:], z[v:].numpy())
        return sc, spearman(sc.predict(rows[:v]), z[:v].numpy())
    sc = build_data_scorer(
        cfg.arch,
        seed=seed,
        vocab_size=vocab,
        hidden=cfg.scorer_hidden,
        layers=cfg.scorer_layers,
        heads=max(1, cfg.scorer_hidden // 32),
        max_positions=cfg.seq_len + 1,
    )
    fit = train_data_scorer(
        sc,
        rows,
        z.numpy(),
        dev_num=v,
        epochs=cfg.scorer_epochs,
        batch_size=cfg.scorer_batch,
        lr=cfg.scorer_lr,
        seed=seed,
        device=cfg.device,
    )
    return sc, fit.best_spearman


def predict(scorer, rows: torch.Tensor, batch: int = 4096) -> np.ndarray:
    """``scorer.predict`` over ``rows`` in batches of ``batch`` rows, concatenated."""
    return np.concatenate([scorer.predict(rows[i : i + batch]) for i in range(0, rows.shape[0], batch)])


def steps_to_reach(
    curve: list[tuple[int, float]], level: float, budget: int, eval_every: int
) -> tuple[float, bool]:
    """First evaluated step whose loss ≤ level, as a fraction of the budget ((budget+eval_every)/budget if never)."""
    for step, loss in curve:
        if loss <= level:
            return step / budget, True
    return (budget + eval_every) / budget, False
