"""Optimisation-free baselines on the block representation: prior only and random search (RS).

RS draws K assemblies from MOFFlow's prior (uniform rotations, 10 Å Gaussian translations, lattice prior) and keeps
the one with the lowest cheap energy: ``E = Σ_{i<j, different blocks} relu(1.2 Å − d_ij)² +
Σ_{connection atoms} (min_j d_ij − 1.4 Å)²`` with minimum-image distances.
"""

from __future__ import annotations

import numpy as np
import torch

from .building_blocks import MOF, lattice_matrices
from .flow import LatticePrior, centered_gaussian
from .so3 import uniform_so3


def sample_prior_poses(mof: MOF, lattice_prior: LatticePrior, k: int, generator: torch.Generator):
    """``k`` random assemblies of one MOF: (R (k,M,3,3), t (k,M,3), l (k,6))."""
    M = mof.n_blocks
    t = centered_gaussian(torch.ones(k, M, dtype=torch.bool), generator)
    R = uniform_so3((k, M), generator)
    lat = lattice_prior.sample(k, generator)
    return R, t, lat


def assembly_energy(mof: MOF, R: torch.Tensor, t: torch.Tensor, lat: torch.Tensor) -> torch.Tensor:
    """Energy of ``k`` candidate assemblies (k,) — vectorised over candidates and atom pairs."""
    loc = torch.from_numpy(np.concatenate(mof.local_coords)).float()
    bid = torch.from_numpy(np.concatenate([np.full(len(z), i) for i, z in enumerate(mof.atom_types)]))
    X = torch.einsum("knij,nj->kni", R[:, bid], loc) + t[:, bid]  # (k,N,3)
    L = lattice_matrices(lat.double()).float()  # (k,3,3) rows
    f = torch.linalg.solve(L.transpose(1, 2), X.transpose(1, 2)).transpose(1, 2)  # frac: X = f L
    df = f[:, :, None] - f[:, None]
    df = df - torch.round(df)
    d = torch.einsum("kijc,kcd->kijd", df, L).norm(dim=-1)
    other = bid[:, None] != bid[None]
    rep = (torch.relu(1.2 - d) ** 2 * other).sum((1, 2)) / 2
    if mof.connection:
        conn = torch.from_numpy(np.concatenate(mof.connection))
        dc = d[:, conn][:, :, conn].masked_fill(~other[conn][:, conn], 1e9)
        bond = ((dc.min(-1).values - 1.4) ** 2).sum(-1)
    else:
        bond = torch.zeros_like(rep)
    return rep + bond


def random_search(
    mof: MOF, lattice_prior: LatticePrior, k: int = 20, generator: torch.Generator | None = None
):
    """Best of ``k`` prior assemblies by :func:`assembly_energy`: returns (R, t, lattice) numpy arrays."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    g = generator or torch.Generator().manual_seed(0)
    R, t, lat = sample_prior_poses(mof, lattice_prior, k, g)
    e = assembly_energy(mof, R, t, lat)
    i = int(torch.argmin(e))
    return R[i].double().numpy(), t[i].double().numpy(), lat[i].double().numpy()


def prior_only(mof: MOF, lattice_prior: LatticePrior, generator: torch.Generator | None = None):
    """One random assembly from the prior (sanity floor)."""
    g = generator or torch.Generator().manual_seed(0)
    R, t, lat = sample_prior_poses(mof, lattice_prior, 1, g)
    return R[0].double().numpy(), t[0].double().numpy(), lat[0].double().numpy()
