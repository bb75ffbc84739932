"""Match rate and RMSE with pymatgen's ``StructureMatcher(stol=0.5, ltol=0.3, angle_tol=10)`` (paper §5).

For each ground-truth cell and its k samples, ``get_rms_dist`` returns ``None`` (no match) or
``(rms, max_dist)`` with rms normalised by ``(V/N)^{1/3}``; a cell counts as matched when any sample matches and
its RMSE is the smallest rms over the matching samples. Match rate = % matched cells; RMSE = mean over matched.
"""

from __future__ import annotations

import numpy as np
from pymatgen.analysis.structure_matcher import StructureMatcher
from pymatgen.core import Lattice, Structure

MATCHER_KWARGS = {"stol": 0.5, "ltol": 0.3, "angle_tol": 10}


def default_matcher(**kw) -> StructureMatcher:
    return StructureMatcher(**{**MATCHER_KWARGS, **kw})


def match_structures(
    gts: list[Structure], preds: list[list[Structure]], matcher: StructureMatcher | None = None
) -> dict:
    """``{"match_rate": %, "rmse": mean rms over matched (nan if none), "matched": [bool], "rms": [float|nan]}``."""
    if len(gts) != len(preds):
        raise ValueError(f"preds must hold one list of samples per ground truth: {len(preds)} != {len(gts)}")
    sm = matcher or default_matcher()
    matched, rms = [], []
    for gt, ks in zip(gts, preds):
        best = np.nan
        for p in ks:
            try:
                r = sm.get_rms_dist(gt, p)
            except (ValueError, np.linalg.LinAlgError):  # degenerate predicted lattices
                r = None
            if r is not None and not (best <= r[0]):
                best = float(r[0])
        matched.append(bool(np.isfinite(best)))
        rms.append(best)
    m = np.array(matched)
    return {
        "match_rate": 100.0 * float(m.mean()) if len(m) else float("nan"),
        "rmse": float(np.nanmean(rms)) if m.any() else float("nan"),
        "matched": matched,
        "rms": rms,
    }


def safe_structure(lattice: np.ndarray, species: list[int], cart: np.ndarray) -> Structure | None:
    """A pymatgen Structure from predicted parameters, or ``None`` when the lattice is degenerate."""
    lat = np.asarray(lattice, dtype=float)
    if (
        not np.all(np.isfinite(lat))
        or np.any(lat[:3] <= 0.5)
        or np.any(lat[3:] <= 1)
        or np.any(lat[3:] >= 179)
    ):
        return None
    try:
        L = Lattice.from_parameters(*lat)
        if not np.isfinite(L.volume) or L.volume < 1.0:
            return None
        return Structure(L, species, cart, coords_are_cartesian=True)
    except ValueError:
        return None
