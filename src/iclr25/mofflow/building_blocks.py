"""A MOF as a lattice plus rigid building blocks (MOFFlow §3.1), on top of pymatgen.

Preprocessing (``mof_from_blocks``), as in the paper's data pipeline:

1. Niggli-reduce the lattice and rotate every Cartesian coordinate into pymatgen's *standard orientation*
   ``L_std = Lattice.from_parameters(a, b, c, α, β, γ)`` (c along z, a in the xz-plane — NOT ASE's
   ``cellpar_to_cell`` convention, which puts a along x). With row-vector lattices ``x' = x L⁻¹ L_std``.
2. Block i keeps its atoms whole; its translation is the plain centroid ``t_i``; translations are then shifted so
   ``Σ_i t_i = 0`` (the cell origin is arbitrary).
3. Canonical frame ``R_i = F(X_i − t_i, Z_i)`` (``canonical_frame``): PCA axes sorted by variance, each flipped to
   point along ``v`` = (Z-weighted centroid − centroid) [fallback: the atom closest to the centroid], then
   ``e3 = e1 × e2``. Local coordinates ``X_i^loc = (X_i − t_i) R_i`` so that ``X_i = X_i^loc R_iᵀ + t_i``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from pymatgen.core import Lattice, Structure
from pymatgen.io.cif import CifWriter

from .validation import MAX_Z, validate_lattice, validate_structure

_TOL = 1e-6


def canonical_frame(X: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """Canonical right-handed frame ``F(X, Z)`` (3×3, columns e1 e2 e3) of a block's atoms.

    ``X`` (n, 3) Cartesian coordinates, ``Z`` (n,) atomic numbers. Equivariant for generic blocks:
    ``F(X Qᵀ, Z) = Q F(X, Z)`` for any proper rotation Q. Single-atom blocks get the identity.
    """
    X = np.asarray(X, dtype=np.float64)
    Z = np.asarray(Z, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != 3:
        raise ValueError(f"X must have shape (n, 3), got {X.shape}")
    if Z.shape != (X.shape[0],):
        raise ValueError(f"Z must have shape ({X.shape[0]},), got {Z.shape}")
    n = X.shape[0]
    if n == 1:
        return np.eye(3)
    mu = X.mean(0)
    Xc = X - mu
    v = (Z / Z.sum()) @ X - mu  # atomic-number-weighted centroid − centroid
    if np.linalg.norm(v) < 1e-4:  # symmetric block: use the atom closest to the centroid
        d = np.linalg.norm(Xc, axis=1)
        order = np.argsort(d, kind="stable")
        nz = order[d[order] > 1e-4]
        v = Xc[nz[0]] if nz.size else np.array([1.0, 0.0, 0.0])
    evals, evecs = np.linalg.eigh(np.cov(Xc.T))
    E = evecs[:, ::-1].copy()  # columns by descending variance
    sgn = np.sign(v @ E)
    sgn[sgn == 0] = 1.0
    E = E * sgn
    E[:, 2] = np.cross(E[:, 0], E[:, 1])  # right-handed
    return E


@dataclass
class MOF:
    """Lattice ``(a, b, c, α, β, γ)`` (Å, degrees) + M rigid blocks with poses ``(R_i, t_i)``.

    ``atom_types[i]`` (n_i,) atomic numbers, ``local_coords[i]`` (n_i, 3) in the block's canonical frame,
    ``rotations`` (M, 3, 3), ``translations`` (M, 3) Cartesian in pymatgen's standard orientation.
    ``connection[i]`` (n_i,) optional booleans marking connection atoms (used by the random-search energy).
    """

    lattice: np.ndarray
    atom_types: list[np.ndarray]
    local_coords: list[np.ndarray]
    rotations: np.ndarray
    translations: np.ndarray
    connection: list[np.ndarray] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    @property
    def n_blocks(self) -> int:
        return len(self.atom_types)

    @property
    def n_atoms(self) -> int:
        return int(sum(len(z) for z in self.atom_types))

    def block_coords(self, rotations: np.ndarray | None = None, translations: np.ndarray | None = None):
        """Rigid assembly ``X_i = X_i^loc R_iᵀ + t_i`` for every block (list of (n_i, 3))."""
        R = self.rotations if rotations is None else np.asarray(rotations)
        t = self.translations if translations is None else np.asarray(translations)
        return [x @ R[i].T + t[i] for i, x in enumerate(self.local_coords)]

    def to_structure(
        self,
        rotations: np.ndarray | None = None,
        translations: np.ndarray | None = None,
        lattice: np.ndarray | None = None,
    ) -> Structure:
        """pymatgen ``Structure`` (standard-orientation lattice, Cartesian coordinates) for these or given poses."""
        lat = self.lattice if lattice is None else np.asarray(lattice, dtype=float)
        X = np.concatenate(self.block_coords(rotations, translations), 0)
        species = np.concatenate(self.atom_types).astype(int).tolist()
        return Structure(
            Lattice.from_parameters(*[float(x) for x in lat]), species, X, coords_are_cartesian=True
        )

    def to_cif(self, path: str | None = None) -> str:
        """CIF text of the structure (written to ``path`` when given)."""
        w = CifWriter(self.to_structure())
        if path is not None:
            w.write_file(path)
        return str(w)


def standard_orientation(lattice: Lattice) -> tuple[Lattice, np.ndarray]:
    """Niggli-reduce and return ``(L_std, Q)`` with ``x_std = x Q`` for Cartesian row vectors.

    ``Q = L_niggli⁻¹ L_std`` maps the Niggli cell onto ``Lattice.from_parameters`` (pymatgen convention).
    """
    nig = lattice.get_niggli_reduced_lattice()
    std = Lattice.from_parameters(*nig.parameters)
    Q = np.linalg.solve(nig.matrix, std.matrix)
    return std, Q


def mof_from_blocks(
    lattice: Lattice | np.ndarray,
    blocks: list[tuple[np.ndarray, np.ndarray]],
    connection: list[np.ndarray] | None = None,
    niggli: bool = True,
    meta: dict | None = None,
) -> MOF:
    """Preprocess ``blocks = [(Z_i (n_i,), X_i (n_i,3) Cartesian, unwrapped)]`` in ``lattice`` into a :class:`MOF`."""

    lattice = validate_lattice(lattice if isinstance(lattice, Lattice) else np.asarray(lattice, dtype=float))
    if not blocks:
        raise ValueError("blocks must hold at least one (Z, X) block, got an empty list")
    if niggli:
        std, Q = standard_orientation(lattice)
    else:
        std = Lattice.from_parameters(*lattice.parameters)
        Q = np.linalg.solve(lattice.matrix, std.matrix)
    Zs, Xs = [], []
    for i, (Z, X) in enumerate(blocks):
        Z = np.asarray(Z, dtype=int)
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != 3 or Z.shape != (X.shape[0],) or X.shape[0] == 0:
            raise ValueError(f"blocks[{i}] must be (Z (n,), X (n,3)) with n >= 1, got {Z.shape}, {X.shape}")
        if Z.min() < 1 or Z.max() > MAX_Z:
            raise ValueError(
                f"blocks[{i}] atomic numbers must lie in 1..{MAX_Z}, got {sorted(set(Z.tolist()))}"
            )
        if not np.all(np.isfinite(X)):
            raise ValueError(f"blocks[{i}] coordinates must be finite, got NaN/inf")
        Zs.append(Z)
        Xs.append(X @ Q)
    t = np.stack([x.mean(0) for x in Xs])
    shift = t.mean(0)
    t = t - shift  # Σ_i t_i = 0
    Rs = np.stack([canonical_frame(x - x.mean(0), z) for x, z in zip(Xs, Zs)])
    loc = [(x - x.mean(0)) @ Rs[i] for i, x in enumerate(Xs)]
    conn = [np.asarray(c, dtype=bool) for c in connection] if connection is not None else []
    return MOF(np.asarray(std.parameters, dtype=float), Zs, loc, Rs, t, conn, dict(meta or {}))


def mof_from_structure(structure: Structure, block_index: np.ndarray) -> MOF:
    """Build a :class:`MOF` from a pymatgen ``Structure`` and a per-site block id, coordinates taken as given.

    The coordinates must already be unwrapped (each block whole). Structures read from CIF files are wrapped into
    the cell: use :func:`~.decomposition.mof_from_cif` (decomposes and unwraps), or
    :func:`~.decomposition.unwrap_blocks`. A block that is much more compact with periodic images than as
    given (split across a cell face) raises a warning.
    """

    validate_structure(structure)
    block_index = np.asarray(block_index, dtype=int)
    if block_index.shape != (len(structure),):
        raise ValueError(f"block_index must have shape ({len(structure)},), got {block_index.shape}")
    Z = np.array([s.specie.Z for s in structure])
    X = structure.cart_coords
    blocks = [(Z[block_index == b], X[block_index == b]) for b in np.unique(block_index)]
    frac = structure.frac_coords
    for b, (_, x) in zip(np.unique(block_index), blocks):
        if len(x) < 2:
            continue
        f = frac[block_index == b]
        f_mi = f[0] + (f - f[0]) - np.round(f - f[0])  # minimum-image placement around the first atom
        x_mi = f_mi @ structure.lattice.matrix
        span = float(np.linalg.norm(x[:, None] - x[None], axis=-1).max())
        span_mi = float(np.linalg.norm(x_mi[:, None] - x_mi[None], axis=-1).max())
        if span > span_mi + 1.0:
            import warnings

            warnings.warn(
                f"block {int(b)} spans {span:.1f} Å as given but {span_mi:.1f} Å with periodic images: it is "
                "probably split across the periodic boundary (CIF structures are wrapped into the cell); unwrap "
                "it with iclr25.mofflow.unwrap_blocks or use mof_from_cif",
                UserWarning,
                stacklevel=2,
            )
    return mof_from_blocks(structure.lattice, blocks)


# ----------------------------------------------------------------------------------------------------------
# Dense padded batches (B MOFs, ≤ M blocks, ≤ A atoms per block)
# ----------------------------------------------------------------------------------------------------------
@dataclass
class MOFBatch:
    """Padded tensors: ``atom_types`` (B,M,A) (0 = pad), ``local`` (B,M,A,3), ``atom_mask`` (B,M,A),
    ``block_mask`` (B,M), ``rots`` (B,M,3,3), ``trans`` (B,M,3), ``lattice`` (B,6)."""

    atom_types: torch.Tensor
    local: torch.Tensor
    atom_mask: torch.Tensor
    block_mask: torch.Tensor
    rots: torch.Tensor
    trans: torch.Tensor
    lattice: torch.Tensor

    def to(self, device) -> MOFBatch:
        return MOFBatch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))

    @property
    def size(self) -> int:
        return self.atom_types.shape[0]


def collate(mofs: list[MOF], device: str | torch.device = "cpu") -> MOFBatch:
    """Pad a list of MOFs into a :class:`MOFBatch` (float32)."""
    if not mofs:
        raise ValueError("mofs must be a non-empty list")
    B = len(mofs)
    M = max(m.n_blocks for m in mofs)
    A = max(len(z) for m in mofs for z in m.atom_types)
    types = np.zeros((B, M, A), dtype=np.int64)
    loc = np.zeros((B, M, A, 3), dtype=np.float32)
    rots = np.tile(np.eye(3, dtype=np.float32), (B, M, 1, 1))
    trans = np.zeros((B, M, 3), dtype=np.float32)
    bmask = np.zeros((B, M), dtype=bool)
    for b, m in enumerate(mofs):
        for i, (z, x) in enumerate(zip(m.atom_types, m.local_coords)):
            types[b, i, : len(z)] = z
            loc[b, i, : len(z)] = x
        bmask[b, : m.n_blocks] = True
        rots[b, : m.n_blocks] = m.rotations
        trans[b, : m.n_blocks] = m.translations
    lat = np.stack([m.lattice for m in mofs]).astype(np.float32)
    t = torch.from_numpy
    return MOFBatch(t(types), t(loc), t(types > 0), t(bmask), t(rots), t(trans), t(lat)).to(device)


def lattice_matrices(lattice: torch.Tensor) -> torch.Tensor:
    """Row-vector lattice matrices (…,3,3) from parameters (…,6) in pymatgen's ``from_parameters`` convention."""
    a, b, c = lattice[..., 0], lattice[..., 1], lattice[..., 2]
    al, be, ga = (torch.deg2rad(lattice[..., k]) for k in (3, 4, 5))
    val = (torch.cos(al) * torch.cos(be) - torch.cos(ga)) / (torch.sin(al) * torch.sin(be))
    val = val.clamp(-1.0, 1.0)
    gamma_star = torch.arccos(val)
    z = torch.zeros_like(a)
    va = torch.stack([a * torch.sin(be), z, a * torch.cos(be)], -1)
    vb = torch.stack(
        [
            -b * torch.sin(al) * torch.cos(gamma_star),
            b * torch.sin(al) * torch.sin(gamma_star),
            b * torch.cos(al),
        ],
        -1,
    )
    vc = torch.stack([z, z, c], -1)
    return torch.stack([va, vb, vc], -2)
