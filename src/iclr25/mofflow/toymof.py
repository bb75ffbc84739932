"""ToyMOF: a seeded procedural generator of pcu-net MOFs built from rigid nodes and ditopic linkers.

Each cell is a ``pcu`` primitive cell (one 6-connected metal node at the origin, one linker along each lattice
vector) or a 2×1×1 / 2×2×1 supercell of it, i.e. M = 4, 8 or 16 blocks. Connection atoms of adjacent blocks sit
1.4 Å apart, which fixes the lattice lengths from the blocks' sizes; the three angles are drawn in
(``angle_low``, ``angle_high``) degrees. Nodes are asymmetric (different arm lengths per axis, O / N arm ends) and
linkers are rods of 1–2 six-membered rings (optionally with an alkyne spacer) carrying one N substituent, so every
block has a well-defined canonical frame. Each linker instance gets its own random twist about its axis
(± ``twist_deg``), so supercells are not exact repeats of the primitive cell.

Axes are labelled so the cell is already Niggli-reduced (a < b < c by ≥ ``min_gap``; all angles obtuse), which
makes the target poses a deterministic function of the blocks up to the twist.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pymatgen.core import Lattice

from ..common.fields import bounded, check_fields
from .building_blocks import MOF, mof_from_blocks

BOND = 1.4  # Å between connection atoms of adjacent blocks
SUPERCELLS = {4: (1, 1, 1), 8: (2, 1, 1), 16: (2, 2, 1)}

# node templates: (metal atomic numbers and offsets along the body diagonal, arm lengths along the 3 axes)
NODE_TEMPLATES = (
    ((30,), (0.0,), (1.95, 2.10, 2.25)),
    ((29,), (0.0,), (1.90, 2.15, 2.40)),
    ((30, 30), (-0.75, 0.75), (2.05, 2.20, 2.35)),
)
LINKER_TEMPLATES = ((1, False), (1, True), (2, False), (2, True))  # (rings, alkyne spacer)


def linker_template(n_rings: int, alkyne: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """Planar linker in its own (x along the axis, y in-plane) frame: ``(Z, xy (n,2), connection, span)``."""
    Z, P, C = [6, 8, 8], [(0.0, 0.0), (-0.4, 1.15), (-0.4, -1.15)], [True, False, False]
    x = 1.45
    for r in range(n_rings):
        cx = x + 1.39
        for k, th in enumerate(np.deg2rad([180, 120, 60, 0, -60, -120])):
            Z.append(6)
            P.append((cx + 1.39 * np.cos(th), 1.39 * np.sin(th)))
            C.append(False)
            if k in (1, 2, 4, 5):  # off-axis vertices carry H (one N substituent on the first ring)
                sub = r == 0 and k == 1
                rad = 2.8 if sub else 2.47
                Z.append(7 if sub else 1)
                P.append((cx + rad * np.cos(th), rad * np.sin(th)))
                C.append(False)
        x = cx + 1.39
        if r == 0 and alkyne:
            Z += [6, 6]
            P += [(x + 1.43, 0.0), (x + 2.63, 0.0)]
            C += [False, False]
            x += 2.63
        x += 1.48 if (r < n_rings - 1 or not (r == 0 and alkyne)) else 1.43
    Z += [6, 7, 7]
    P += [(x, 0.0), (x + 0.4, 1.15), (x + 0.4, -1.15)]
    C += [True, False, False]
    return np.array(Z), np.array(P, dtype=float), np.array(C), float(x)


@dataclass(frozen=True)
class ToyMOFConfig:
    """Generator settings; ``sizes`` are block counts M ∈ {4, 8, 16}, drawn with ``size_probs``."""

    sizes: tuple[int, ...] = bounded((4, 8, 16), choices=tuple(SUPERCELLS), each=True)
    size_probs: tuple[float, ...] = (0.5, 0.25, 0.25)
    angle_low: float = bounded(91.0, lo=90, hi=120, lo_open=True, hi_open=True)
    angle_high: float = bounded(96.0, lo=90, hi=120, lo_open=True, hi_open=True)
    twist_deg: float = 10.0
    min_gap: float = 0.04

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above (sizes element-wise); below: the rules across fields
        if len(self.size_probs) != len(self.sizes) or abs(sum(self.size_probs) - 1) > 1e-6:
            raise ValueError(f"size_probs must have len(sizes)={len(self.sizes)} entries summing to 1")
        if not self.angle_low < self.angle_high:
            raise ValueError(
                f"need 90 < angle_low < angle_high < 120, got {self.angle_low}, {self.angle_high}"
            )


def make_toymof(rng: np.random.Generator, n_blocks: int, cfg: ToyMOFConfig = ToyMOFConfig()) -> MOF:
    """One ToyMOF cell with ``n_blocks`` ∈ {4, 8, 16} blocks (preprocessed into a :class:`MOF`)."""
    if n_blocks not in SUPERCELLS:
        raise ValueError(f"n_blocks must be one of {tuple(SUPERCELLS)}, got {n_blocks!r}")
    mult0 = np.array(SUPERCELLS[n_blocks])
    while True:
        node_id = int(rng.integers(len(NODE_TEMPLATES)))
        metals, offs, arms = NODE_TEMPLATES[node_id]
        link_ids = rng.choice(len(LINKER_TEMPLATES), size=3, replace=False)
        links = [linker_template(*LINKER_TEMPLATES[i]) for i in link_ids]
        arms = np.array(arms)[rng.permutation(3)]
        mult = mult0[rng.permutation(3)]
        prim = np.array([2 * arms[k] + 2 * BOND + links[k][3] for k in range(3)])
        sup = mult * prim
        order = np.argsort(sup)
        s = sup[order]
        if np.all(np.diff(s) / s[:-1] >= cfg.min_gap):
            break
    arms, mult, prim = arms[order], mult[order], prim[order]
    links = [links[k] for k in order]
    link_ids = link_ids[order]
    angles = rng.uniform(cfg.angle_low, cfg.angle_high, size=3)
    lat = Lattice.from_parameters(*(mult * prim), *angles)
    pvec = lat.matrix / mult[:, None]  # primitive vectors (rows)
    u = pvec / np.linalg.norm(pvec, axis=1, keepdims=True)
    diag = u.sum(0) / np.linalg.norm(u.sum(0))
    blocks, conn = [], []
    grid = np.stack(np.meshgrid(*[np.arange(m) for m in mult], indexing="ij"), -1).reshape(-1, 3)
    for g in grid:
        origin = g @ pvec
        nz = list(metals)
        nx = [origin + o * diag for o in offs]
        nc = [False] * len(metals)
        for k in range(3):
            nz += [8, 7]
            nx += [origin + arms[k] * u[k], origin - arms[k] * u[k]]
            nc += [True, True]
        blocks.append((np.array(nz), np.array(nx)))
        conn.append(np.array(nc))
        for k in range(3):
            Z, P, C, span = links[k]
            xh = u[k]
            yh = u[(k + 1) % 3] - (u[(k + 1) % 3] @ xh) * xh
            yh /= np.linalg.norm(yh)
            zh = np.cross(xh, yh)
            tw = np.deg2rad(rng.uniform(-cfg.twist_deg, cfg.twist_deg))
            yh, zh = np.cos(tw) * yh + np.sin(tw) * zh, -np.sin(tw) * yh + np.cos(tw) * zh
            start = origin + (arms[k] + BOND) * xh
            X = start + P[:, :1] * xh + P[:, 1:] * yh
            blocks.append((Z, X))
            conn.append(C)
    meta = {"n_blocks": n_blocks, "node": node_id, "linkers": [int(i) for i in link_ids]}
    return mof_from_blocks(lat, blocks, connection=conn, meta=meta)


def toymof_dataset(
    n: int, seed: int, cfg: ToyMOFConfig = ToyMOFConfig(), sizes: tuple[int, ...] | None = None
) -> list[MOF]:
    """``n`` ToyMOF cells; sizes drawn from ``cfg.size_probs`` or cycled through ``sizes`` when given."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = np.random.default_rng(seed)
    if sizes is None:
        ms = rng.choice(cfg.sizes, size=n, p=cfg.size_probs)
    else:
        ms = np.resize(np.asarray(sizes), n)
    return [make_toymof(rng, int(m), cfg) for m in ms]
