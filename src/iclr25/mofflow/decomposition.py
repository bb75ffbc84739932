"""From a user's MOF (CIF file or pymatgen ``Structure``) to MOFFlow's rigid building blocks.

MOFFlow (§3.1) treats a MOF as metal nodes and organic linkers, each kept *whole* (rigid). Structures read from
CIF files are wrapped into the cell, so a linker that crosses a cell face comes back in pieces on opposite sides
of the cell; taking such a block as it is gives 10+ Å "bonds" and a meaningless centroid / canonical frame.

This module

* validates a structure (``validate_structure``): atomic numbers 1..100, finite coordinates, a finite,
  non-degenerate, right-handed lattice — clear ``ValueError`` otherwise;
* builds the bond graph with pymatgen (``StructureGraph.from_local_env_strategy``; default neighbour finder
  ``JmolNN``, covalent radii), with periodic images on every edge;
* decomposes it into metal nodes and organic linkers (``decompose_mof``), the metal-oxo rule of MOFid-style
  decompositions: bonds between a metal and a non-metal are cut, except that a non-metal atom bonded *only* to
  metals (μ-oxo / μ-hydroxo O, with its H) stays in the metal node; carboxylate O bonded to C stay in the linker;
* unwraps every block across periodic boundaries by walking its bond graph (``unwrap_blocks``): each atom is
  placed at its bonded neighbour's position plus the bond vector *to the bonded periodic image*, so a block is
  contiguous in Cartesian space. A block whose bonds close a loop through the lattice (an infinite rod or
  sheet) cannot be a rigid block and is refused;
* ``mof_from_cif`` chains all of it into a :class:`~.building_blocks.MOF`.
"""

from __future__ import annotations

import os
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from pymatgen.core import Structure

from .building_blocks import MOF, mof_from_blocks
from .validation import validate_lattice, validate_structure

__all__ = [
    "validate_lattice",
    "validate_structure",
    "bond_graph",
    "BlockDecomposition",
    "decompose_mof",
    "unwrap_blocks",
    "mof_from_cif",
    "PeriodicBlockError",
]


def _read(source: str | os.PathLike | Structure) -> Structure:
    if isinstance(source, Structure):
        return source
    path = os.fspath(source)
    if not os.path.exists(path):
        raise ValueError(f"CIF file {path!r} does not exist")
    return Structure.from_file(path)


def bond_graph(structure: Structure, strategy=None):
    """pymatgen ``StructureGraph`` of ``structure`` (default neighbour finder: ``JmolNN``)."""
    from pymatgen.analysis.graphs import StructureGraph
    from pymatgen.analysis.local_env import JmolNN

    return StructureGraph.from_local_env_strategy(structure, strategy if strategy is not None else JmolNN())


def _edges(sg) -> list[tuple[int, int, np.ndarray]]:
    """(i, j, image) for every bond: site j's image ``frac_j + image`` is bonded to site i."""
    out = []
    for i, j, d in sg.graph.edges(data=True):
        out.append((int(i), int(j), np.asarray(d["to_jimage"], dtype=int)))
    return out


class PeriodicBlockError(ValueError):
    """A block whose bonds close a loop through the lattice (infinite rod / sheet node, or an infinite organic
    chain): it has no finite rigid shape. ``block`` the block id, ``site`` the site reached at two images,
    ``kind`` ``"metal_node"`` / ``"organic_linker"`` (set by :func:`decompose_mof`; ``"user"`` otherwise)."""

    def __init__(self, message: str, block: int, site: int, kind: str = "user"):
        super().__init__(message)
        self.block, self.site, self.kind = block, site, kind


@dataclass
class BlockDecomposition:
    """Result of :func:`decompose_mof`.

    ``block_index`` (n_sites,) block id per site; ``kinds[b]`` ``"metal_node"`` or ``"organic_linker"``;
    ``cart_coords`` (n_sites, 3) unwrapped Cartesian coordinates (each block contiguous); ``graph`` the
    pymatgen ``StructureGraph`` used; ``max_bond`` the longest bond inside any block after unwrapping (Å).
    """

    structure: Structure
    block_index: np.ndarray
    kinds: list[str]
    cart_coords: np.ndarray
    graph: object = None
    max_bond: float = 0.0
    meta: dict = field(default_factory=dict)

    @property
    def n_blocks(self) -> int:
        return len(self.kinds)

    def blocks(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``[(Z_b, X_b)]`` per block (unwrapped), the input of :func:`~.building_blocks.mof_from_blocks`."""
        Z = np.array([s.specie.Z for s in self.structure], dtype=int)
        return [
            (Z[self.block_index == b], self.cart_coords[self.block_index == b]) for b in range(self.n_blocks)
        ]


def _components(n: int, edges, keep) -> np.ndarray:
    """Connected components (labels, -1 outside ``keep``) over the edges with both ends kept."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for i, j, _ in edges:
        if keep[i] and keep[j] and i != j:
            adj[i].append(j)
            adj[j].append(i)
    lab = np.full(n, -1, dtype=int)
    c = 0
    for s in range(n):
        if keep[s] and lab[s] < 0:
            lab[s] = c
            q = deque([s])
            while q:
                u = q.popleft()
                for v in adj[u]:
                    if lab[v] < 0:
                        lab[v] = c
                        q.append(v)
            c += 1
    return lab


def unwrap_blocks(structure: Structure, block_index: np.ndarray, graph=None, tol: float = 1e-3) -> np.ndarray:
    """Unwrapped Cartesian coordinates: each block made contiguous along its own bonds (see module docstring).

    ``graph``: a ``StructureGraph`` of ``structure`` (built with ``JmolNN`` when None). Atoms of a block not bonded
    to the rest of it are placed at the periodic image nearest to the block's bonded part. Raises ``ValueError``
    when a block is periodic (its bonds reach an atom at two different images).
    """
    validate_structure(structure)
    block_index = np.asarray(block_index, dtype=int)
    n = len(structure)
    if block_index.shape != (n,):
        raise ValueError(f"block_index must have shape ({n},), got {block_index.shape}")
    sg = graph if graph is not None else bond_graph(structure)
    edges = _edges(sg)
    frac = np.asarray(structure.frac_coords, dtype=float)
    L = structure.lattice.matrix
    adj: list[list[tuple[int, np.ndarray]]] = [[] for _ in range(n)]
    for i, j, img in edges:
        if block_index[i] == block_index[j]:
            adj[i].append((j, img))  # frac_j + img bonded to frac_i
            adj[j].append((i, -img))
    pos = np.full((n, 3), np.nan)  # unwrapped fractional coordinates
    for b in np.unique(block_index):
        members = np.flatnonzero(block_index == b)
        for s in members:
            if not np.isnan(pos[s, 0]):
                continue
            if np.isnan(pos[members, 0]).all():
                pos[s] = frac[s]
            else:  # a new bonded piece of the block: put it at the image nearest to what is placed
                placed = members[~np.isnan(pos[members, 0])]
                c = pos[placed].mean(0)
                pos[s] = frac[s] - np.round(frac[s] - c)
            q = deque([s])
            while q:
                u = q.popleft()
                for v, img in adj[u]:
                    # the image of v bonded to u: u sits at frac_u + k_u, so v at frac_v + img + k_u
                    want = frac[v] + img + (pos[u] - frac[u])
                    if np.isnan(pos[v, 0]):
                        pos[v] = want
                        q.append(v)
                    elif np.abs(pos[v] - want).max() > tol:
                        raise PeriodicBlockError(
                            f"block {int(b)} is periodic: site {v} ({structure[v].specie}) is bonded into it at two "
                            f"different periodic images; a rigid building block must be finite (check the bonds, "
                            "e.g. an infinite rod metal node, or give another block_index)",
                            int(b),
                            int(v),
                        )
    return pos @ L


def decompose_mof(structure: Structure | str | os.PathLike, strategy=None) -> BlockDecomposition:
    """Metal nodes and organic linkers of a MOF (pymatgen ``Structure`` or CIF path), unwrapped.

    ``strategy``: a pymatgen ``NearNeighbors`` (default ``JmolNN``) for the bond graph. Blocks are numbered
    metal nodes first, then linkers, each group in order of its first site.
    """
    structure = validate_structure(_read(structure))
    sg = bond_graph(structure, strategy)
    edges = _edges(sg)
    n = len(structure)
    metal = np.array([bool(s.specie.is_metal) for s in structure])
    if not metal.any():
        raise ValueError("structure has no metal atoms: not a metal-organic framework (no metal node)")
    nbrs: list[list[int]] = [[] for _ in range(n)]
    for i, j, _ in edges:
        nbrs[i].append(j)
        nbrs[j].append(i)
    is_h = np.array([s.specie.Z == 1 for s in structure])
    node = metal.copy()
    for i in range(n):  # μ-oxo / μ-hydroxo: heavy non-metal atoms bonded only to metals (and H)
        if metal[i] or is_h[i]:
            continue
        heavy = [j for j in nbrs[i] if not is_h[j]]
        if heavy and all(metal[j] for j in heavy):
            node[i] = True
    for i in range(n):  # H on a node atom joins the node
        if is_h[i] and nbrs[i] and all(node[j] for j in nbrs[i]):
            node[i] = True
    lab_node = _components(n, edges, node)
    lab_link = _components(n, edges, ~node)
    n_node = int(lab_node.max()) + 1
    block_index = np.where(node, lab_node, lab_link + n_node)
    kinds = ["metal_node"] * n_node + ["organic_linker"] * (int(lab_link.max()) + 1 if (~node).any() else 0)
    try:
        X = unwrap_blocks(structure, block_index, sg)
    except PeriodicBlockError as e:
        kind = kinds[e.block]
        what = "an infinite rod / sheet metal node" if kind == "metal_node" else "an infinite organic chain"
        raise PeriodicBlockError(
            f"{e} [{kind} {e.block}: {what}; MOFFlow's blocks are finite rigid bodies]", e.block, e.site, kind
        ) from None
    max_bond = 0.0
    for i, j, _ in edges:
        if block_index[i] == block_index[j]:
            max_bond = max(max_bond, float(np.linalg.norm(X[i] - X[j])))
    return BlockDecomposition(structure, block_index, kinds, X, sg, max_bond)


def mof_from_cif(
    source: str | os.PathLike | Structure,
    block_index: np.ndarray | None = None,
    strategy=None,
    niggli: bool = True,
) -> MOF:
    """A :class:`~.building_blocks.MOF` from a CIF file (or ``Structure``): validated, decomposed into metal
    nodes and organic linkers (:func:`decompose_mof`) unless ``block_index`` is given, blocks unwrapped."""
    structure = validate_structure(_read(source))
    if block_index is None:
        dec = decompose_mof(structure, strategy)
        blocks, kinds, bi = dec.blocks(), dec.kinds, dec.block_index
    else:
        bi = np.asarray(block_index, dtype=int)
        X = unwrap_blocks(structure, bi, bond_graph(structure, strategy))
        Z = np.array([s.specie.Z for s in structure], dtype=int)
        ids = np.unique(bi)
        blocks = [(Z[bi == b], X[bi == b]) for b in ids]
        kinds = ["user"] * len(ids)
    meta = {"source": str(source) if not isinstance(source, Structure) else "structure", "kinds": kinds}
    meta["block_index"] = bi.tolist()
    return mof_from_blocks(structure.lattice, blocks, niggli=niggli, meta=meta)
