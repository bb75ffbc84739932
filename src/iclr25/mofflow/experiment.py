"""Reproduction of MOFFlow's headline claims on procedural ToyMOF cells (README, "Reproduction").

Per seed: generate ToyMOF train/test cells (M = 4, 8, 16 blocks), fit the lattice log-normal prior on the train
cells, train MOFFlow-tiny and an atom-level flow of comparable size, sample k = 1 structure per test cell with 50
Euler steps, and score every method (plus random search and prior-only) with
``StructureMatcher(stol=0.5, ltol=0.3, angle_tol=10)``.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import Claim, explain_failures, make_claim
from iclr25.common.fmt import fmt_num
from iclr25.common.progress import log
from iclr25.common.results import aggregate, values
from iclr25.common.seeding import derive_seed, seed_everything
from iclr25.harness.rundir import RunDir, RunResult

from . import real, report
from .atom_flow import AtomFlowNet, train_atom_flow
from .baselines import prior_only, random_search
from .config import _TOY_ONLY, MAX_COUNT, PRESETS, Config, RealConfig
from .flow import LatticePrior
from .network import MOFFlowNet
from .sampling import atom_structures, mofflow_structures, score
from .toymof import toymof_dataset
from .training import FlowTrainConfig, train_mofflow

__all__ = [
    "Config",
    "MAX_COUNT",
    "PRESETS",
    "RealConfig",
    "_TOY_ONLY",
    "claims",
    "one_seed",
    "required_keys",
    "run",
]  # the config names re-exported for the registry


def one_seed(cfg: Config, seed: int) -> dict:
    if isinstance(cfg, RealConfig):  # CoRE MOF 2019 (real.py)
        return real.one_seed(cfg, seed)
    seed_everything(seed)
    dev = torch.device("cuda" if cfg.device == "auto" and torch.cuda.is_available() else "cpu")
    if cfg.device.startswith("cuda"):
        dev = torch.device(cfg.device)
    # CPU time of this (single-threaded) process: robust to other processes sharing the cores; wall on GPU
    clock = time.perf_counter if dev.type == "cuda" else time.process_time
    train = toymof_dataset(cfg.n_train, derive_seed(seed, "train"))
    test = {
        m: toymof_dataset(cfg.test_per_size, derive_seed(seed, "test", m), sizes=(m,)) for m in cfg.test_sizes
    }
    lp = LatticePrior.fit(np.stack([m.lattice for m in train]))
    plan, aplan = cfg.plan(), cfg.plan(atom=True)
    tc = FlowTrainConfig(steps=sum(plan.values()), batch_size=cfg.batch_size, lr=cfg.lr)
    torch.manual_seed(derive_seed(seed, "init"))
    model = MOFFlowNet(cfg.net)
    t0 = clock()
    hist = train_mofflow(model, train, lp, tc, derive_seed(seed, "train_loop"), dev, steps_per_size=plan)
    t_train = clock() - t0
    torch.manual_seed(derive_seed(seed, "init_atom"))
    amodel = AtomFlowNet(cfg.atom, cfg.net)
    atc = FlowTrainConfig(steps=sum(aplan.values()), batch_size=cfg.atom_batch_size, lr=cfg.lr)
    t0 = clock()
    ahist = train_atom_flow(
        amodel, train, lp, atc, derive_seed(seed, "train_atom"), dev, steps_per_size=aplan
    )
    t_atrain = clock() - t0
    res: dict = {"mofflow": {}, "atom": {}, "speed": {}, "train": {}, "diag": {}}
    time_mof = time_atom = 0.0
    all_m, all_a, n_all = [], [], 0
    for M, mofs in test.items():
        gts = [m.to_structure() for m in mofs]
        g = torch.Generator().manual_seed(derive_seed(seed, "sample", M))
        t0 = clock()
        pm, L = mofflow_structures(model, mofs, lp, cfg, g)
        time_mof += clock() - t0
        t0 = clock()
        pa = atom_structures(amodel, mofs, lp, cfg, g)
        time_atom += clock() - t0
        sm, sa = score(gts, pm), score(gts, pa)
        res["mofflow"][f"match_rate_M{M}"] = sm["match_rate"]
        res["atom"][f"match_rate_M{M}"] = sa["match_rate"]
        # diagnosis: which part fails — the true lattice with predicted poses, the true poses with a predicted
        # lattice (same prior draws as the plain sample), and the plain sample's lattice errors
        gl = np.stack([m.lattice for m in mofs])
        res["diag"][f"lattice_len_mae_M{M}"] = float(np.abs(L[:, :3] - gl[:, :3]).mean())
        res["diag"][f"lattice_len_rel_M{M}"] = float((np.abs(L[:, :3] - gl[:, :3]) / gl[:, :3]).mean())
        res["diag"][f"lattice_angle_mae_M{M}"] = float(np.abs(L[:, 3:] - gl[:, 3:]).mean())
        for oracle in ("lattice", "poses"):
            go = torch.Generator().manual_seed(derive_seed(seed, "sample", M))
            po, _ = mofflow_structures(model, mofs, lp, cfg, go, oracle)
            res["diag"][f"true_{oracle}_match_rate_M{M}"] = score(gts, po)["match_rate"]
        all_m += list(zip(sm["matched"], sm["rms"]))
        all_a += list(zip(sa["matched"], sa["rms"]))
        n_all += len(mofs)
    for name, rows in (("mofflow", all_m), ("atom", all_a)):
        ok = [r for k, r in rows if k]
        res[name]["match_rate"] = 100.0 * len(ok) / len(rows)
        res[name]["rmse"] = float(np.mean(ok)) if ok else float("nan")
        res[name]["n_matched"] = len(ok)
    res["n_test"] = n_all
    # baselines on M = 4 cells
    base = test[4][: cfg.baseline_n]
    gts = [m.to_structure() for m in base]
    g = torch.Generator().manual_seed(derive_seed(seed, "rs"))
    rs = [m.to_structure(*random_search(m, lp, cfg.rs_k, g)) for m in base]
    pr = [m.to_structure(*prior_only(m, lp, g)) for m in base]
    res["random_search"] = {"match_rate_M4": score(gts, rs)["match_rate"]}
    res["prior"] = {"match_rate_M4": score(gts, pr)["match_rate"]}
    res["speed"] = {
        "mofflow_s_per_structure": time_mof / n_all,
        "atom_s_per_structure": time_atom / n_all,
        "mofflow_structures_per_s": n_all / time_mof,
        "atom_structures_per_s": n_all / time_atom,
    }
    res["train"] = {
        "mofflow_s": t_train,
        "atom_s": t_atrain,
        **{
            f"{name}_cpu_s_M{M}": float(sum(h["cpu_s"] for h in hh if h["n_blocks"] == M))
            for name, hh in (("mofflow", hist), ("atom", ahist))
            for M in cfg.test_sizes
        },
        "mofflow_final_loss": float(np.mean([h["loss"] for h in hist[-20:]])),
        "atom_final_loss": float(np.mean([h["loss"] for h in ahist[-20:]])),
        "mofflow_loss_curve": [
            float(np.mean([h["loss"] for h in hist[i : i + 10]])) for i in range(0, len(hist), 10)
        ],
    }
    log(
        f"[mofflow] seed {seed}: MOFFlow {res['mofflow']['match_rate']:.1f}% atom {res['atom']['match_rate']:.1f}%"
    )
    return res


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The per-seed keys the claims and the report read: match rates overall and per size (4 and 16 are in
    every ``test_sizes``), the per-size CPU budget and diagnosis, and the sampling speed; the real preset's are
    real.py's (:data:`real.REQUIRED`)."""
    if isinstance(cfg, RealConfig):
        return real.REQUIRED
    per_size = ("mofflow/match_rate", "atom/match_rate", "train/mofflow_cpu_s", "train/atom_cpu_s")
    per_size += ("diag/true_lattice_match_rate", "diag/true_poses_match_rate")
    return (
        ("mofflow/match_rate", "atom/match_rate")
        + tuple(f"{k}_M{M}" for k in per_size for M in cfg.test_sizes)
        + ("speed/mofflow_structures_per_s", "speed/atom_structures_per_s")
    )


_NOTES = {  # attached when a claim fails
    "match_rate": "small scale (ToyMOF, tiny models trained for minutes on CPU); paper: 31.69% on BW-DB",
}


def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The four claims from per-seed results (ids and thresholds fixed by the issue that specifies MOFFlow).

    ``beats_atom_level`` is the plain ratio of mean match rates: against a zero atom-level rate it is undefined
    (NaN, does not hold), never floored. A failed ``match_rate`` carries the note of :data:`_NOTES`.
    """
    if isinstance(cfg, RealConfig):  # CoRE MOF 2019 (real.py)
        return real.claims(cfg, per_seed)
    mof = values(per_seed, "mofflow/match_rate")
    atom = values(per_seed, "atom/match_rate")
    drop_atom = [
        a - b for a, b in zip(values(per_seed, "atom/match_rate_M4"), values(per_seed, "atom/match_rate_M16"))
    ]
    drop_mof = [
        a - b
        for a, b in zip(values(per_seed, "mofflow/match_rate_M4"), values(per_seed, "mofflow/match_rate_M16"))
    ]

    def mean(k):
        return fmt_num(np.mean(values(per_seed, k)), 3)

    budget = "; ".join(
        f"M={M}: MOFFlow {mean(f'train/mofflow_cpu_s_M{M}')} CPU-s ({n} steps) vs atom-level "
        f"{mean(f'train/atom_cpu_s_M{M}')} CPU-s ({na} steps)"
        for M, n, na in zip(cfg.test_sizes, cfg.steps_per_size, cfg.atom_steps_per_size)
    )
    per_size = ", ".join(
        f"M={M} {mean(f'mofflow/match_rate_M{M}')} vs {mean(f'atom/match_rate_M{M}')}" for M in cfg.test_sizes
    )
    match_rate = make_claim(
        "match_rate",
        "MOFFlow-tiny k=1 match rate ≥ 30% on ToyMOF test cells",
        "match rate (%) over all test cells, k=1",
        method=mof,
        threshold=30.0,
    )
    return [
        *explain_failures([match_rate], _NOTES),  # the other claims' notes are descriptive, always attached
        make_claim(
            "beats_atom_level",
            "MOFFlow's match rate ≥ 2× the atom-level flow's",
            "match rate ratio MOFFlow / atom-level over all test cells (mean over seeds; NaN if the atom-level "
            "mean is 0)",
            method=mof,
            baseline=atom,
            threshold=2.0,
            compare="ratio",
            note=f"per-size CPU budget, the same target (≈ 15 idle CPU-s) for both methods; measured {budget}. "
            f"Match rate % MOFFlow vs atom-level: {per_size}",
        ),
        make_claim(
            "scales_with_size",
            "from M=4 to M=16 blocks the atom-level match rate drops ≥ 15 points more than MOFFlow's",
            "(atom M4 − atom M16) − (MOFFlow M4 − MOFFlow M16), points",
            method=drop_atom,
            baseline=drop_mof,
            threshold=15.0,
            compare="difference",
            note=f"match rate % MOFFlow vs atom-level: {per_size}. MOFFlow with the true lattice and its own poses: "
            + ", ".join(f"M={M} {mean(f'diag/true_lattice_match_rate_M{M}')}" for M in cfg.test_sizes)
            + "; with the true poses and its own lattice: "
            + ", ".join(f"M={M} {mean(f'diag/true_poses_match_rate_M{M}')}" for M in cfg.test_sizes)
            + " — where MOFFlow fails on large cells the poses are wrong, not the lattice",
        ),
        make_claim(
            "speed",
            "MOFFlow samples a structure ≥ 2× faster than the atom-level flow (same run, same Euler grid)",
            "structures/s MOFFlow ÷ structures/s atom-level",
            method=values(per_seed, "speed/mofflow_structures_per_s"),
            baseline=values(per_seed, "speed/atom_structures_per_s"),
            threshold=2.0,
            compare="ratio",
        ),
    ]


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg, required=required_keys(cfg))
    if isinstance(cfg, RealConfig):  # CoRE MOF 2019: loaded before the seeds (forked workers inherit it)
        real.data_of(cfg)
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    if isinstance(cfg, RealConfig):
        return real.result(cfg, per_seed, claims(cfg, per_seed), rd.figures)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[report.figure(cfg, per_seed, rd.figures / "match_rate_vs_size.png")],
        report_md=report.report_md(cfg, per_seed),
    )
