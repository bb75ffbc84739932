"""A tiny DDP experiment for the torchrun tests: each seed trains a tiny causal LM with common.train.train_lm
(DDP under torchrun: every rank takes its slice of the global batch) and logs one line from run()."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from iclr25.common.claims import make_claim
from iclr25.common.lm import tiny_causal_lm
from iclr25.common.progress import log
from iclr25.common.results import ExperimentConfig, aggregate, values
from iclr25.common.train import LMTrainConfig, train_lm
from iclr25.harness.rundir import RunDir, RunResult


@dataclass(frozen=True)
class Config(ExperimentConfig):
    steps: int = 6


PRESETS = {"smoke": Config(seeds=2), "quick": Config(seeds=2), "full": Config(seeds=2)}


def one_seed(cfg: Config, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, 60, (2000,), generator=g)
    tokens[1::2] = (tokens[0::2] * 7) % 56 + 4
    model = tiny_causal_lm("llama", seed=seed, vocab_size=64, hidden=16, layers=1, heads=2, kv_heads=1)
    res = train_lm(
        model,
        tokens,
        cfg=LMTrainConfig(
            steps=cfg.steps, batch_size=4, seq_len=16, lr=1e-2, warmup_steps=1, eval_every=0, seed=seed
        ),
    )
    return {
        "loss": res["final_train_loss"],
        "first": res["history"][0]["train_loss"],
        "world": res["world_size"],
    }


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg, required=("loss", "first"))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    log("toy_ddp: trained every seed")
    claims = [
        make_claim(
            "learns",
            "loss falls",
            "loss",
            values(per_seed, "first"),
            0.0,
            ">=",
            baseline=values(per_seed, "loss"),
            compare="difference",
        )
    ]
    return RunResult(seeds=cfg.seed_list, metrics=aggregate(per_seed), claims=claims, per_seed=per_seed)
