"""MOFFlow: Flow Matching for Structure Prediction of Metal-Organic Frameworks (Kim et al., ICLR 2025).

arXiv 2410.17270. A MOF unit cell is a lattice plus M rigid building blocks (metal nodes, organic linkers) whose
atoms are known; structure prediction generates one SE(3) pose per block and the lattice. MOFFlow learns a flow
matching model on SO(3)^M × R^{3M} × R^6 (uniform SO(3) prior + geodesics, centred Gaussian translations,
log-normal/uniform lattice prior), predicting the clean endpoint with an IPA-style network that also sees the
lattice, and samples with Euler steps using an exponential schedule for rotations. Working at the block level
cuts the state from 3N atom coordinates to 6M+6 numbers, which is why it beats atom-level generators and scales
to large cells.

Example::

    from iclr25.mofflow import toymof_dataset, MOFFlowNet, LatticePrior, train_mofflow, predict
    mofs = toymof_dataset(200, seed=0); lp = LatticePrior.fit([m.lattice for m in mofs])
    model = MOFFlowNet(); train_mofflow(model, mofs, lp)
    structures = predict(model, mofs[:4], lp)      # list of pymatgen Structures
"""

from __future__ import annotations

import numpy as np
import torch

from .atom_flow import AtomFlowConfig, AtomFlowNet, sample_atom_flow, train_atom_flow
from .baselines import assembly_energy, prior_only, random_search
from .building_blocks import MOF, MOFBatch, canonical_frame, collate, mof_from_blocks, mof_from_structure
from .decomposition import (
    BlockDecomposition,
    PeriodicBlockError,
    bond_graph,
    decompose_mof,
    mof_from_cif,
    unwrap_blocks,
    validate_lattice,
    validate_structure,
)
from .evaluation import MATCHER_KWARGS, default_matcher, match_structures
from .flow import (
    LatticePrior,
    euler_sample,
    flow_matching_loss,
    interpolate,
    loss_scale,
    model_predictor,
    sample_prior,
)
from .network import MOFFlowConfig, MOFFlowNet
from .so3 import calc_rot_vf, exp_map, geodesic, log_map, uniform_so3
from .toymof import ToyMOFConfig, make_toymof, toymof_dataset
from .training import FlowTrainConfig, load_checkpoint, save_checkpoint, train_mofflow


def predict(
    model: MOFFlowNet, mofs: list[MOF], lattice_prior: LatticePrior, n_steps: int = 50, seed: int = 0
) -> list:
    """Sample one structure per MOF (its blocks' atoms and local coordinates are used; poses are generated)."""
    from .evaluation import safe_structure

    g = torch.Generator().manual_seed(int(seed))
    batch = collate(mofs, next(model.parameters()).device)
    out = euler_sample(model_predictor(model, batch), batch, lattice_prior, n_steps, generator=g)
    R, t, L = (out[k].double().cpu().numpy() for k in ("rots", "trans", "lattice"))
    res = []
    for i, m in enumerate(mofs):
        X = np.concatenate(m.block_coords(R[i, : m.n_blocks], t[i, : m.n_blocks]), 0)
        res.append(safe_structure(L[i], np.concatenate(m.atom_types).tolist(), X))
    return res


__all__ = [
    "MOF", "MOFBatch", "canonical_frame", "collate", "mof_from_blocks", "mof_from_structure",
    "BlockDecomposition", "bond_graph", "decompose_mof", "mof_from_cif", "unwrap_blocks", "validate_lattice",
    "validate_structure", "PeriodicBlockError",
    "ToyMOFConfig", "make_toymof", "toymof_dataset",
    "LatticePrior", "sample_prior", "interpolate", "loss_scale", "flow_matching_loss", "euler_sample",
    "model_predictor", "MOFFlowConfig", "MOFFlowNet", "FlowTrainConfig", "train_mofflow", "save_checkpoint",
    "load_checkpoint", "predict", "match_structures", "default_matcher", "MATCHER_KWARGS",
    "AtomFlowConfig", "AtomFlowNet", "train_atom_flow", "sample_atom_flow", "random_search", "prior_only",
    "assembly_energy", "geodesic", "exp_map", "log_map", "calc_rot_vf", "uniform_so3",
]  # fmt: skip
