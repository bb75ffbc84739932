"""A toy experiment obeying the experiment contract, used to test the foundation end to end."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from iclr25.common.claims import make_claim  # noqa: E402
from iclr25.common.io import atomic_savefig  # noqa: E402
from iclr25.common.results import ExperimentConfig, aggregate, values  # noqa: E402
from iclr25.common.seeding import numpy_rng  # noqa: E402
from iclr25.harness.rundir import RunDir, RunResult  # noqa: E402


@dataclass(frozen=True)
class Config(ExperimentConfig):
    n: int = 200

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.n < 2:
            raise ValueError(f"n must be >= 2, got {self.n}")


PRESETS = {"smoke": Config(n=50), "quick": Config(n=200), "full": Config(n=2000, device="cuda")}


def one_seed(cfg: Config, seed: int) -> dict:
    log = os.environ.get("TOY_CALL_LOG")
    if log:
        with open(log, "a") as f:
            f.write(f"{seed}\n")
    time.sleep(float(os.environ.get("TOY_SLEEP", "0")))  # lets a test kill the run mid-way
    rng = numpy_rng(seed)
    x = rng.normal(1.0, 0.1, cfg.n)
    nan_seed = os.environ.get("TOY_NAN")  # lets a test produce a NaN metric for one seed
    acc = float("nan") if nan_seed is not None and int(nan_seed) == seed else float(x.mean())
    out: dict = {"ours": {"acc": acc}, "base": {"acc": float(x.mean() - 0.5)}}
    bad = os.environ.get(
        "TOY_BAD"
    )  # "<seed>:<json>" sets base/acc of that seed to the JSON value; "drop" deletes it
    if bad:
        s, _, v = bad.partition(":")
        if int(s) == seed:
            if v == "drop":
                del out["base"]["acc"]
            else:
                out["base"]["acc"] = json.loads(v)
    if os.environ.get("TOY_TIMING"):  # a per-seed timing, as most systems record (differs on every run)
        out["timing"] = {"one_seed_s": time.perf_counter()}
        out["ours"]["time_s"] = time.process_time() + time.perf_counter()
    return out


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg, required=("ours/acc", "base/acc"))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
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
        ),
        make_claim(
            "too_good",
            "ours beats base by 0.9",
            "acc",
            values(per_seed, "ours/acc"),
            0.9,
            ">=",
            baseline=values(per_seed, "base/acc"),
            compare="difference",
            note=os.environ.get("TOY_NOTE", "fails by design"),
        ),
    ]
    fig, ax = plt.subplots()
    ax.plot(values(per_seed, "ours/acc"))
    atomic_savefig(fig, rd.figures / "acc.png")
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims,
        per_seed=per_seed,
        figures=[rd.figures / "acc.png"],
        report_md=os.environ.get("TOY_REPORT", "## Toy\nA toy."),
        # lets a test mark the run as missing its precondition (as law / cascading_kv do at toy size)
        valid=not os.environ.get("TOY_INVALID"),
        invalid_reason=os.environ.get("TOY_INVALID", ""),
    )
