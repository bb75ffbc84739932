"""Reproduction of MOFFlow's headline claims on procedural ToyMOF cells (README, "Reproduction").

Per seed: generate ToyMOF train/test cells (M = 4, 8, 16 blocks), fit the lattice log-normal prior on the train
cells, train MOFFlow-tiny and an atom-level flow of comparable size, sample k = 1 structure per test cell with 50
Euler steps, and score every method (plus random search and prior-only) with
``StructureMatcher(stol=0.5, ltol=0.3, angle_tol=10)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import Claim, make_claim
from iclr25.common.fields import bounded, check_nested
from iclr25.common.fmt import fmt_num
from iclr25.common.progress import log
from iclr25.common.results import ExperimentConfig, aggregate, values
from iclr25.common.seeding import derive_seed, seed_everything
from iclr25.harness.rundir import RunDir, RunResult

from . import real, report
from .atom_flow import AtomFlowConfig, AtomFlowNet, atom_collate, sample_atom_flow, train_atom_flow
from .baselines import prior_only, random_search
from .building_blocks import MOF, MOFBatch, collate
from .evaluation import default_matcher, match_structures, safe_structure
from .flow import LatticePrior, euler_sample, model_predictor
from .network import MOFFlowConfig, MOFFlowNet
from .toymof import toymof_dataset
from .training import FlowTrainConfig, train_mofflow

# Per-step CPU cost (1 thread, idle 2-core machine) of one optimiser step on M-block cells, measured to convert
# one CPU-time budget per size into steps: MOFFlow-tiny (batch 32) ≈ 29 / 36 / 63 ms, atom-level flow (batch 16)
# ≈ 42 / 109 / 660 ms for M = 4 / 8 / 16 (the ratios re-measured under load: 1 : 1.3 : 2.0 and 1 : 2.6 : 16).
# The quick preset gives each method ≈ 15 CPU-s per size (45 CPU-s in all); the run measures and reports the
# CPU time each method actually spent on each size.


# upper bound on counts of structures, batch sizes and Euler steps held in memory (a typo such as 1e11 would only
# die later in a MemoryError)
MAX_COUNT = 10_000_000


@dataclass(frozen=True)
class Config(ExperimentConfig):
    n_train: int = bounded(400, lo=1, hi=MAX_COUNT)
    test_per_size: int = bounded(12, lo=1, hi=MAX_COUNT)
    test_sizes: tuple[int, ...] = (4, 8, 16)
    # optimiser steps on M-block cells, M in test_sizes order: ≈ equal CPU time per size and per method
    # (each tuple: one entry per size in test_sizes, checked below)
    steps_per_size: tuple[int, ...] = bounded((520, 420, 240), lo=1, each=True)  # MOFFlow-tiny
    atom_steps_per_size: tuple[int, ...] = bounded((360, 140, 23), lo=1, each=True)  # atom-level flow
    batch_size: int = bounded(32, lo=1, hi=MAX_COUNT)
    atom_batch_size: int = bounded(16, lo=1, hi=MAX_COUNT)
    # paper 1e-4 (full model, days); 3e-3 trains lower loss than 1e-3 on the tiny model
    lr: float = bounded(3e-3, lo=0, lo_open=True)
    n_euler: int = bounded(50, lo=2, hi=MAX_COUNT)  # paper: 50 at inference
    rot_rate: float = 10.0  # exponential rotation schedule
    # MOFFlow-tiny's widths, every MOFFlowConfig field a dotted override (``--set net.c_s=128``); the atom-level
    # baseline's transformer (``--set atom.layers=4``) and its block encoder (``net``)
    net: MOFFlowConfig = MOFFlowConfig()
    atom: AtomFlowConfig = AtomFlowConfig()
    rs_k: int = 20
    baseline_n: int = 16  # test cells (M = 4) scored for random search / prior only

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (tuples element-wise); below: rules across fields
        if 4 not in self.test_sizes or 16 not in self.test_sizes:
            raise ValueError(
                f"test_sizes must contain 4 and 16 (for scales_with_size), got {self.test_sizes}"
            )
        check_nested(self, "net", MOFFlowConfig)
        check_nested(self, "atom", AtomFlowConfig)
        for k in ("steps_per_size", "atom_steps_per_size"):
            v = getattr(self, k)
            if not isinstance(v, tuple) or len(v) != len(self.test_sizes):
                raise ValueError(
                    f"{k} must be a tuple of {len(self.test_sizes)} ints >= 1 (one per size in test_sizes="
                    f"{self.test_sizes}), got {v!r}"
                )

    def plan(self, atom: bool = False) -> dict[int, int]:
        """``{M: steps}`` for MOFFlow (or the atom-level flow)."""
        return dict(zip(self.test_sizes, self.atom_steps_per_size if atom else self.steps_per_size))


PRESETS = {
    "smoke": Config(
        seeds=1, n_train=60, test_per_size=2, steps_per_size=(3, 3, 2), atom_steps_per_size=(2, 1, 1),
        batch_size=8, atom_batch_size=4, n_euler=6, rs_k=4, baseline_n=2,
    ),
    "quick": Config(),
    # GPU scale; per-size steps not calibrated on a GPU (equal steps per size)
    "full": Config(
        n_train=20000, test_per_size=100, steps_per_size=(10000, 10000, 10000),
        atom_steps_per_size=(10000, 10000, 10000), batch_size=160, atom_batch_size=32,
        net=replace(Config.net, c_s=256, c_z=128, n_trunk=6), atom=replace(Config.atom, width=256, layers=6),
        lr=1e-4, baseline_n=100, device="auto",
    ),
}  # fmt: skip


# fields of the ToyMOF presets that the real preset does not use (they keep their defaults there)
_TOY_ONLY = (
    "n_train",
    "test_per_size",
    "test_sizes",
    "steps_per_size",
    "atom_steps_per_size",
    "rs_k",
    "baseline_n",
)


@dataclass(frozen=True)
class RealConfig(Config):
    """The ``real`` preset's config: CoRE MOF 2019 frameworks (``real.py``). A subclass, so that the ToyMOF presets
    keep their fields and config hash; the ToyMOF fields (``n_train`` … ``baseline_n``) are not used and must keep
    their defaults. Widths, lr, batch sizes and the Euler grid are the quick preset's fields."""

    max_atoms: int = bounded(100, lo=1)  # atoms per cell (CIF), filter 2
    pool: int = bounded(300, lo=2)  # MOFs decomposed, first of a fixed random order (data_seed), filter 3
    max_blocks: int = bounded(16, lo=1)  # building blocks per MOF (the largest ToyMOF cells), filter 6
    data_seed: int = bounded(0, lo=0)  # fixes the pool; the run's seeds do not change the data
    test_frac: float = bounded(0.2, lo=0, hi=1, lo_open=True, hi_open=True)
    # optimiser steps per seed, set for equal CPU time of the two flows (the run measures and reports it): the
    # c2ed4f6 reference measured MOFFlow-tiny 134–144 CPU-s for 1,000 steps and the atom-level flow 46–56 CPU-s for
    # 300 (≈ 0.17 CPU-s a step), so 800 atom-level steps ≈ 140 CPU-s
    real_steps: int = bounded(1000, lo=1, hi=MAX_COUNT)
    real_atom_steps: int = bounded(800, lo=1, hi=MAX_COUNT)
    # diagnosis: both step counts × train_mult (the card's 3× run); 1 in the preset
    train_mult: int = bounded(1, lo=1, hi=1000)

    def __post_init__(self) -> None:
        super().__post_init__()
        base = Config()
        for name in _TOY_ONLY:
            if getattr(self, name) != getattr(base, name):
                raise ValueError(
                    f"{name} is a field of the ToyMOF presets, not used by the real preset; leave it at "
                    f"{getattr(base, name)!r}, got {getattr(self, name)!r}"
                )


PRESETS["real"] = RealConfig()


def oracle_predictor(predict, batch: MOFBatch, lattice: bool = False, poses: bool = False):
    """Diagnosis: replace the network's lattice (or pose) predictions by the ground truth at every Euler step.

    With x1-prediction the replaced component then follows the straight / exp-schedule path to the truth and
    the final structure carries the true lattice (poses) with the model's poses (lattice), generated while
    the model sees the true component's trajectory — isolating which part makes a sample fail.
    """

    def p(t, trans, rots, lat, sc):
        out = dict(predict(t, trans, rots, lat, sc))
        if lattice:
            out["lattice"] = batch.lattice
        if poses:
            out["trans"], out["rots"] = batch.trans, batch.rots
        return out

    return p


def _mofflow_structures(
    model, mofs: list[MOF], lp: LatticePrior, cfg: Config, g, oracle: str = ""
) -> tuple[list, np.ndarray]:
    batch = collate(mofs, next(model.parameters()).device)
    pred = oracle_predictor(model_predictor(model, batch), batch, oracle == "lattice", oracle == "poses")
    out = euler_sample(pred, batch, lp, cfg.n_euler, "exp", cfg.rot_rate, g)
    R, t, L = (out[k].double().cpu().numpy() for k in ("rots", "trans", "lattice"))
    res = []
    for i, m in enumerate(mofs):
        X = np.concatenate(m.block_coords(R[i, : m.n_blocks], t[i, : m.n_blocks]), 0)
        res.append(safe_structure(L[i], np.concatenate(m.atom_types).tolist(), X))
    return res, L


def _atom_structures(model, mofs: list[MOF], lp: LatticePrior, cfg: Config, g) -> list:
    ab = atom_collate(mofs, next(model.parameters()).device)
    out = sample_atom_flow(model, ab, lp, cfg.n_euler, g)
    X, L = out["x"].double().cpu().numpy(), out["lattice"].double().cpu().numpy()
    return [
        safe_structure(L[i], np.concatenate(m.atom_types).tolist(), X[i, : m.n_atoms])
        for i, m in enumerate(mofs)
    ]


def _score(gts, preds) -> dict:
    keep = [(g, p) for g, p in zip(gts, preds)]
    r = match_structures(
        [g for g, _ in keep], [[p] if p is not None else [] for _, p in keep], default_matcher()
    )
    return r


def one_seed(cfg: Config, seed: int) -> dict:
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
        pm, L = _mofflow_structures(model, mofs, lp, cfg, g)
        time_mof += clock() - t0
        t0 = clock()
        pa = _atom_structures(amodel, mofs, lp, cfg, g)
        time_atom += clock() - t0
        sm, sa = _score(gts, pm), _score(gts, pa)
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
            po, _ = _mofflow_structures(model, mofs, lp, cfg, go, oracle)
            res["diag"][f"true_{oracle}_match_rate_M{M}"] = _score(gts, po)["match_rate"]
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
    res["random_search"] = {"match_rate_M4": _score(gts, rs)["match_rate"]}
    res["prior"] = {"match_rate_M4": _score(gts, pr)["match_rate"]}
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


def claims(cfg: Config, per_seed: dict) -> list[Claim]:
    """The four claims from per-seed results (ids and thresholds fixed by the issue that specifies MOFFlow).

    ``beats_atom_level`` is the plain ratio of mean match rates: against a zero atom-level rate it is undefined
    (NaN, does not hold), never floored.
    """
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
    small = "ToyMOF, tiny models trained for minutes on CPU"
    return [
        make_claim(
            "match_rate",
            "MOFFlow-tiny k=1 match rate ≥ 30% on ToyMOF test cells",
            "match rate (%) over all test cells, k=1",
            method=mof,
            threshold=30.0,
            note="" if np.mean(mof) >= 30 else f"small scale ({small}); paper: 31.69% on BW-DB",
        ),
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


def required_keys(cfg: Config) -> tuple[str, ...]:
    """The per-seed keys the claims and the report read: match rates overall and per size (4 and 16 are in
    every ``test_sizes``), the per-size CPU budget and diagnosis, and the sampling speed."""
    per_size = ("mofflow/match_rate", "atom/match_rate", "train/mofflow_cpu_s", "train/atom_cpu_s")
    per_size += ("diag/true_lattice_match_rate", "diag/true_poses_match_rate")
    return (
        ("mofflow/match_rate", "atom/match_rate")
        + tuple(f"{k}_M{M}" for k in per_size for M in cfg.test_sizes)
        + ("speed/mofflow_structures_per_s", "speed/atom_structures_per_s")
    )


def run(cfg: Config, out: Path) -> RunResult:
    if isinstance(cfg, RealConfig):  # CoRE MOF 2019 (real.py)
        return real.run(cfg, out)
    rd = RunDir(out, cfg, required=required_keys(cfg))
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    return RunResult(
        seeds=cfg.seed_list,
        metrics=aggregate(per_seed),
        claims=claims(cfg, per_seed),
        per_seed=per_seed,
        figures=[report.figure(cfg, per_seed, rd.figures / "match_rate_vs_size.png")],
        report_md=report.report_md(cfg, per_seed),
    )
