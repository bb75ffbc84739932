"""Reproduction of MOFFlow's headline claims on procedural ToyMOF cells (README, "Reproduction").

Per seed: generate ToyMOF train/test cells (M = 4, 8, 16 blocks), fit the lattice log-normal prior on the train
cells, train MOFFlow-tiny and an atom-level flow of comparable size, sample k = 1 structure per test cell with 50
Euler steps, and score every method (plus random search and prior-only) with
``StructureMatcher(stol=0.5, ltol=0.3, angle_tol=10)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from iclr25.common.claims import make_claim
from iclr25.common.io import atomic_savefig
from iclr25.common.progress import log
from iclr25.common.results import ExperimentConfig, RunDir, RunResult, aggregate, mean_std, values
from iclr25.common.seeding import derive_seed, seed_everything

from .atom_flow import AtomFlowConfig, AtomFlowNet, atom_collate, sample_atom_flow, train_atom_flow
from .baselines import prior_only, random_search
from .building_blocks import MOF, collate
from .evaluation import default_matcher, match_structures, safe_structure
from .flow import LatticePrior, euler_sample, model_predictor
from .network import MOFFlowConfig, MOFFlowNet
from .toymof import toymof_dataset
from .training import TrainConfig, train_mofflow


@dataclass(frozen=True)
class Config(ExperimentConfig):
    n_train: int = 400
    test_per_size: int = 12
    test_sizes: tuple[int, ...] = (4, 8, 16)
    steps: int = 1200  # MOFFlow-tiny optimiser steps
    atom_steps: int = 250  # atom-level optimiser steps: chosen so both flows get about the same CPU time
    batch_size: int = 32
    atom_batch_size: int = 16
    lr: float = 3e-3  # paper 1e-4 (full model, days); 3e-3 trains lower loss than 1e-3 on the tiny model
    n_euler: int = 50  # paper: 50 at inference
    rot_rate: float = 10.0  # exponential rotation schedule
    c_s: int = 64
    c_z: int = 32
    n_trunk: int = 2
    atom_width: int = 64
    atom_layers: int = 3
    rs_k: int = 20
    baseline_n: int = 16  # test cells (M = 4) scored for random search / prior only

    def __post_init__(self) -> None:
        super().__post_init__()
        for k in (
            "n_train",
            "test_per_size",
            "steps",
            "atom_steps",
            "batch_size",
            "atom_batch_size",
            "n_euler",
        ):
            v = getattr(self, k)
            if not isinstance(v, int) or v < (2 if k == "n_euler" else 1):
                raise ValueError(f"{k} must be a positive int (n_euler >= 2), got {v!r}")
        if 4 not in self.test_sizes or 16 not in self.test_sizes:
            raise ValueError(
                f"test_sizes must contain 4 and 16 (for scales_with_size), got {self.test_sizes}"
            )
        if self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")

    def net(self) -> MOFFlowConfig:
        return MOFFlowConfig(c_s=self.c_s, c_z=self.c_z, n_trunk=self.n_trunk)


PRESETS = {
    "smoke": Config(
        seeds=1, n_train=60, test_per_size=2, steps=8, atom_steps=4, batch_size=8, atom_batch_size=4, n_euler=6,
        rs_k=4, baseline_n=2,
    ),
    "quick": Config(),
    "full": Config(
        n_train=20000, test_per_size=100, steps=30000, atom_steps=30000, batch_size=160, atom_batch_size=32,
        c_s=256, c_z=128, n_trunk=6, atom_width=256, atom_layers=6, lr=1e-4, baseline_n=100, device="auto",
    ),
}  # fmt: skip


def _mofflow_structures(model, mofs: list[MOF], lp: LatticePrior, cfg: Config, g) -> list:
    batch = collate(mofs, next(model.parameters()).device)
    out = euler_sample(model_predictor(model, batch), batch, lp, cfg.n_euler, "exp", cfg.rot_rate, g)
    R, t, L = (out[k].double().cpu().numpy() for k in ("rots", "trans", "lattice"))
    res = []
    for i, m in enumerate(mofs):
        X = np.concatenate(m.block_coords(R[i, : m.n_blocks], t[i, : m.n_blocks]), 0)
        res.append(safe_structure(L[i], np.concatenate(m.atom_types).tolist(), X))
    return res


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
    tc = TrainConfig(steps=cfg.steps, batch_size=cfg.batch_size, lr=cfg.lr)
    torch.manual_seed(derive_seed(seed, "init"))
    model = MOFFlowNet(cfg.net())
    t0 = clock()
    hist = train_mofflow(model, train, lp, tc, derive_seed(seed, "train_loop"), dev)
    t_train = clock() - t0
    torch.manual_seed(derive_seed(seed, "init_atom"))
    amodel = AtomFlowNet(AtomFlowConfig(cfg.atom_width, cfg.atom_layers), cfg.net())
    atc = TrainConfig(steps=cfg.atom_steps, batch_size=cfg.atom_batch_size, lr=cfg.lr)
    t0 = clock()
    ahist = train_atom_flow(amodel, train, lp, atc, derive_seed(seed, "train_atom"), dev)
    t_atrain = clock() - t0
    res: dict = {"mofflow": {}, "atom": {}, "speed": {}, "train": {}}
    time_mof = time_atom = 0.0
    all_m, all_a, n_all = [], [], 0
    for M, mofs in test.items():
        gts = [m.to_structure() for m in mofs]
        g = torch.Generator().manual_seed(derive_seed(seed, "sample", M))
        t0 = clock()
        pm = _mofflow_structures(model, mofs, lp, cfg, g)
        time_mof += clock() - t0
        t0 = clock()
        pa = _atom_structures(amodel, mofs, lp, cfg, g)
        time_atom += clock() - t0
        sm, sa = _score(gts, pm), _score(gts, pa)
        res["mofflow"][f"match_rate_M{M}"] = sm["match_rate"]
        res["atom"][f"match_rate_M{M}"] = sa["match_rate"]
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


def run(cfg: Config, out: Path) -> RunResult:
    rd = RunDir(out, cfg)
    per_seed = rd.map_seeds(lambda s: one_seed(cfg, s), cfg.seed_list)
    n_test = per_seed[cfg.seed_list[0]]["n_test"]
    floor = 100.0 / n_test  # one match's worth: a zero baseline is replaced by this (conservative ratio)
    mof = values(per_seed, "mofflow/match_rate")
    atom = values(per_seed, "atom/match_rate")
    atom_floored = [max(a, floor) for a in atom]
    drop_atom = [
        a - b for a, b in zip(values(per_seed, "atom/match_rate_M4"), values(per_seed, "atom/match_rate_M16"))
    ]
    drop_mof = [
        a - b
        for a, b in zip(values(per_seed, "mofflow/match_rate_M4"), values(per_seed, "mofflow/match_rate_M16"))
    ]
    small = "ToyMOF, tiny models trained for minutes on CPU"
    claims = [
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
            "match rate ratio MOFFlow / atom-level (atom-level floored at one match)",
            method=mof,
            baseline=atom_floored,
            threshold=2.0,
            compare="ratio",
            note=f"atom-level zero rates are floored at {floor:.2f}% (one match of {n_test}) to keep the ratio finite",
        ),
        make_claim(
            "scales_with_size",
            "from M=4 to M=16 blocks the atom-level match rate drops ≥ 15 points more than MOFFlow's",
            "(atom M4 − atom M16) − (MOFFlow M4 − MOFFlow M16), points",
            method=drop_atom,
            baseline=drop_mof,
            threshold=15.0,
            compare="difference",
            note="needs a non-trivial atom-level rate at M=4 (at equal CPU time it is ~0, so its drop cannot reach "
            "15) and a MOFFlow rate that holds up at M=16 (supercells with repeated identical blocks are the "
            "hardest case for the tiny model at this budget)",
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
    figs = []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(1, 2, figsize=(9, 3.4))
        for name, lab in (("mofflow", "MOFFlow-tiny"), ("atom", "atom-level flow")):
            ys = np.array([values(per_seed, f"{name}/match_rate_M{M}") for M in cfg.test_sizes])
            ax[0].errorbar(cfg.test_sizes, ys.mean(1), ys.std(1), marker="o", capsize=3, label=lab)
        ax[0].set_xlabel("blocks per cell M")
        ax[0].set_ylabel("match rate (%) k=1")
        ax[0].set_xticks(cfg.test_sizes)
        ax[0].legend()
        for s in cfg.seed_list:
            c = per_seed[s]["train"]["mofflow_loss_curve"]
            ax[1].plot(np.arange(len(c)) * 10, c, label=f"seed {s}")
        ax[1].set_xlabel("step")
        ax[1].set_ylabel("MOFFlow loss")
        ax[1].legend()
        fig.tight_layout()
        figs.append(atomic_savefig(fig, rd.figures / "match_rate_vs_size.png"))
    except ImportError:  # pragma: no cover
        pass
    agg = aggregate(per_seed)

    def f(k):
        return "n/a" if k not in agg else mean_std(agg[k]["values"], digits=1)

    rows = ["| method | M=4 | M=8 | M=16 | all | RMSE |", "|---|---|---|---|---|---|"]
    for name, lab in (("mofflow", "MOFFlow-tiny"), ("atom", "atom-level flow")):
        cells = [f(f"{name}/match_rate_M{M}") if M in cfg.test_sizes else "—" for M in (4, 8, 16)]
        rmse = agg.get(f"{name}/rmse")
        r = "n/a" if rmse is None or rmse["mean"] is None else f"{rmse['mean']:.3f}"
        rows.append(f"| {lab} | " + " | ".join(cells) + f" | {f(f'{name}/match_rate')} | {r} |")
    rows.append(f"| random search (K={cfg.rs_k}) | {f('random_search/match_rate_M4')} | — | — | — | — |")
    rows.append(f"| prior only | {f('prior/match_rate_M4')} | — | — | — | — |")
    report = (
        "## Results (match rate %, k=1, StructureMatcher stol=0.5 ltol=0.3 angle_tol=10)\n\n"
        + "\n".join(rows)
        + f"\n\nSampling: MOFFlow {f('speed/mofflow_s_per_structure')} s/structure vs atom-level "
        f"{f('speed/atom_s_per_structure')} s/structure ({cfg.n_euler} Euler steps, CPU).\n\n"
        "## Deviations at this scale\n"
        f"- Data: procedural ToyMOF pcu cells ({cfg.n_train} train, {cfg.test_per_size} test per size), not BW-DB.\n"
        f"- MOFFlow-tiny (c_s={cfg.c_s}, c_z={cfg.c_z}, {cfg.n_trunk} trunk blocks) trained {cfg.steps} steps "
        f"(batch {cfg.batch_size}, lr {cfg.lr}, cosine) instead of the official model for days on 8 GPUs; "
        f"{f('train/mofflow_s')} CPU s per seed.\n"
        f"- Atom-level baseline: our own DiffCSP-like Cartesian flow (transformer over atoms), not DiffCSP; "
        f"{cfg.atom_steps} steps (batch {cfg.atom_batch_size}), chosen so that it gets about the same CPU time as "
        f"MOFFlow ({f('train/atom_s')} CPU s per seed): the comparison is at equal compute, not equal steps.\n"
        "- Random search / prior only are scored on M=4 cells only (StructureMatcher cost).\n"
    )
    return RunResult(
        seeds=cfg.seed_list,
        metrics=agg,
        claims=claims,
        per_seed=per_seed,
        figures=figs,
        report_md=report,
    )
