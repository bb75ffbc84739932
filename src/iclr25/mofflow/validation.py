"""Input checks shared by the building-block representation and the CIF decomposition: a lattice MOFFlow can
use (finite, right-handed, non-degenerate) and a structure it can represent (ordered sites, 1 <= Z <= 100, finite
coordinates). Each raises ``ValueError`` naming what is wrong."""

from __future__ import annotations

import numpy as np
from pymatgen.core import DummySpecies, Lattice, Structure

MAX_Z = 100


def validate_lattice(lattice: Lattice | np.ndarray, name: str = "lattice") -> Lattice:
    """A finite, right-handed lattice with non-zero volume; ``lattice`` as pymatgen Lattice, (3,3) matrix or
    the six parameters (a, b, c, α, β, γ). Raises ``ValueError`` naming what is wrong."""
    if isinstance(lattice, Lattice):
        mat = np.asarray(lattice.matrix, dtype=float)
    else:
        arr = np.asarray(lattice, dtype=float)
        if arr.shape == (6,):
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"{name} parameters must be finite, got {arr.tolist()}")
            a, b, c, al, be, ga = arr
            if min(a, b, c) <= 0:
                raise ValueError(f"{name} lengths a, b, c must be > 0 Å, got {arr[:3].tolist()}")
            if not all(0 < x < 180 for x in (al, be, ga)):
                raise ValueError(f"{name} angles must lie in (0, 180) degrees, got {arr[3:].tolist()}")
            ca, cb, cg = np.cos(np.deg2rad([al, be, ga]))
            vol2 = 1 - ca**2 - cb**2 - cg**2 + 2 * ca * cb * cg
            if vol2 <= 1e-8:
                raise ValueError(
                    f"{name} angles {arr[3:].tolist()} do not form a 3-D cell (each angle must be below the sum "
                    "of the other two and the three must sum below 360)"
                )
            mat = Lattice.from_parameters(*arr).matrix
        elif arr.shape == (3, 3):
            mat = arr
        else:
            raise ValueError(
                f"{name} must be a Lattice, a (3, 3) matrix or 6 parameters, got shape {arr.shape}"
            )
    if not np.all(np.isfinite(mat)):
        raise ValueError(f"{name} matrix must be finite, got {mat.tolist()}")
    vol = float(np.linalg.det(mat))
    lengths = np.linalg.norm(mat, axis=1)
    if min(lengths) <= 1e-6 or abs(vol) <= 1e-6 * max(1.0, float(np.prod(lengths))):
        raise ValueError(
            f"{name} is degenerate (volume {vol:.3g} Å³, vector lengths {lengths.round(4).tolist()})"
        )
    if vol < 0:
        raise ValueError(
            f"{name} is left-handed (det = {vol:.3g} < 0); give the vectors in right-handed order"
        )
    return lattice if isinstance(lattice, Lattice) else Lattice(mat)


def validate_structure(structure: Structure) -> Structure:
    """Refuse what MOFFlow cannot represent: dummy / vacancy species (Z = 0), Z > 100, partial occupancy,
    NaN/inf coordinates, malformed lattices. Returns the structure unchanged."""
    if not isinstance(structure, Structure):
        raise ValueError(f"structure must be a pymatgen Structure, got {type(structure).__name__}")
    if len(structure) == 0:
        raise ValueError("structure has no sites")
    validate_lattice(structure.lattice, "structure.lattice")
    for i, site in enumerate(structure):
        if not site.is_ordered:
            raise ValueError(
                f"site {i} has partial occupancy {site.species}; MOFFlow needs an ordered structure"
            )
        sp = site.specie
        z = 0 if isinstance(sp, DummySpecies) else int(getattr(sp, "Z", 0) or 0)
        if not 1 <= z <= MAX_Z:
            raise ValueError(f"site {i} has species {site.specie} with Z = {z}; expected 1 <= Z <= {MAX_Z}")
    cart = np.asarray(structure.cart_coords, dtype=float)
    bad = ~np.all(np.isfinite(cart), axis=1)
    if bad.any():
        raise ValueError(
            f"structure has non-finite (NaN/inf) coordinates at sites {np.flatnonzero(bad)[:10].tolist()}"
        )
    return structure
