"""Sampling structures from the trained flows and scoring them against the ground truth (the evaluation of §5.1).

``mofflow_structures`` (MOFFlow: building-block poses + lattice → atoms), ``atom_structures`` (the atom-level
baseline), ``score`` (``StructureMatcher`` match rate / RMSE, k = 1) and ``oracle_predictor`` (the diagnosis that
replaces the lattice or the poses by the ground truth at every Euler step). ``cfg`` is any config with
``n_euler`` and ``rot_rate`` (the experiment's ``Config``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .atom_flow import atom_collate, sample_atom_flow
from .building_blocks import MOF, MOFBatch, collate
from .evaluation import default_matcher, match_structures, safe_structure
from .flow import LatticePrior, euler_sample, model_predictor


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


def mofflow_structures(
    model, mofs: list[MOF], lp: LatticePrior, cfg: Any, g, oracle: str = ""
) -> tuple[list, np.ndarray]:
    """Sample one structure per MOF with MOFFlow (``cfg.n_euler`` Euler steps, exp rotation schedule at
    ``cfg.rot_rate``); ``oracle`` = "lattice" / "poses" feeds the ground truth of that component (the diagnosis).
    Returns (pymatgen structures or None, predicted lattices)."""
    batch = collate(mofs, next(model.parameters()).device)
    pred = oracle_predictor(model_predictor(model, batch), batch, oracle == "lattice", oracle == "poses")
    out = euler_sample(pred, batch, lp, cfg.n_euler, "exp", cfg.rot_rate, g)
    R, t, L = (out[k].double().cpu().numpy() for k in ("rots", "trans", "lattice"))
    res = []
    for i, m in enumerate(mofs):
        X = np.concatenate(m.block_coords(R[i, : m.n_blocks], t[i, : m.n_blocks]), 0)
        res.append(safe_structure(L[i], np.concatenate(m.atom_types).tolist(), X))
    return res, L


def atom_structures(model, mofs: list[MOF], lp: LatticePrior, cfg: Any, g) -> list:
    """Sample one structure per MOF with the atom-level flow (``cfg.n_euler`` Euler steps)."""
    ab = atom_collate(mofs, next(model.parameters()).device)
    out = sample_atom_flow(model, ab, lp, cfg.n_euler, g)
    X, L = out["x"].double().cpu().numpy(), out["lattice"].double().cpu().numpy()
    return [
        safe_structure(L[i], np.concatenate(m.atom_types).tolist(), X[i, : m.n_atoms])
        for i, m in enumerate(mofs)
    ]


def score(gts, preds) -> dict:
    """Match rate and RMSE of one predicted structure per ground truth (None = no structure), the paper's
    Table 1 ``StructureMatcher``."""
    keep = [(g, p) for g, p in zip(gts, preds)]
    r = match_structures(
        [g for g, _ in keep], [[p] if p is not None else [] for _, p in keep], default_matcher()
    )
    return r
