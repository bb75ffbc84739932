"""A toy experiment with two ``map_seeds`` calls (a tuning grid, then the seeds, which use the tuned value), as
tool_planner and law have: spawned workers and cluster jobs must replay ``run`` up to the right call. Each
computation appends ``part seed pid CUDA_VISIBLE_DEVICES`` to ``$TOYW_LOG``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from iclr25.common.claims import make_claim
from iclr25.common.results import ExperimentConfig, aggregate, values
from iclr25.common.seeding import numpy_rng
from iclr25.harness.rundir import RunDir, RunResult


@dataclass(frozen=True)
class Config(ExperimentConfig):
    n: int = 50
    grid: tuple[float, ...] = (0.5, 1.0, 2.0)


PRESETS = {"smoke": Config(), "quick": Config(n=200), "full": Config(n=2000, device="cuda")}


def _note(part: str, i: int) -> None:
    log = os.environ.get("TOYW_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{part} {i} {os.getpid()} {os.environ.get('CUDA_VISIBLE_DEVICES') or '-'}\n")
    fail = os.environ.get("TOYW_FAIL")  # "<seed>": that seed raises (a job that dies)
    if part == "seed" and fail is not None and int(fail) == i:
        raise RuntimeError(f"seed {i} fails on purpose")


def grid_point(cfg: Config, i: int) -> dict:
    _note("grid", i)
    x = numpy_rng(1000 + i).normal(cfg.grid[i], 1.0, cfg.n)
    return {"score": float(-abs(x.mean() - 1.0))}


def one_seed(cfg: Config, seed: int, scale: float) -> dict:
    _note("seed", seed)
    x = numpy_rng(seed).normal(1.0, 0.1, cfg.n) * scale
    return {"ours": {"acc": float(x.mean())}, "base": {"acc": float(x.mean() - 0.5)}}


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg, required=("ours/acc", "base/acc"))
    grid = rd.map_seeds(lambda i: grid_point(cfg, i), range(len(cfg.grid)), part="grid", required=("score",))
    best = max(grid, key=lambda i: grid[i]["score"])
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s, cfg.grid[best]), cfg.seed_list)
    claims = [
        make_claim(
            "gain",
            "ours beats base by 0.4",
            "acc",
            values(per_seed, "ours/acc"),
            0.4,
            ">=",
            baseline=values(per_seed, "base/acc"),
            compare="difference",
        )
    ]
    return RunResult(seeds=cfg.seed_list, metrics=aggregate(per_seed), claims=claims, per_seed=per_seed)


def read_log(path: Path) -> list[tuple[str, int, int, str]]:
    if not path.exists():
        return []
    return [(a, int(b), int(c), d) for a, b, c, d in (ln.split() for ln in path.read_text().splitlines())]
