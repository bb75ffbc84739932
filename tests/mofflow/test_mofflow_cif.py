"""A user's MOF from a CIF file: validation, metal-node / linker decomposition, unwrapping across cell faces."""

import warnings

import numpy as np
import pytest
from pymatgen.analysis.structure_matcher import StructureMatcher
from pymatgen.core import DummySpecies, Lattice, Structure

from iclr25.mofflow import (
    decompose_mof,
    mof_from_blocks,
    mof_from_cif,
    mof_from_structure,
    unwrap_blocks,
    validate_structure,
)

A = 8.0  # cubic cell: Zn–O 2.0, O–C 1.3, C–C 1.4, C–O 1.3, O–Zn 2.0 along each axis (a pcu net)
CHAIN = [("O", 2.0), ("C", 3.3), ("C", 4.7), ("O", 6.0)]
SHIFT = np.array([5.0, 5.5, 6.0])  # moves every linker across a cell face before wrapping


def framework_cif(path):
    species, cart = ["Zn"], [np.zeros(3)]
    for axis in range(3):
        for el, x in CHAIN:
            p = np.zeros(3)
            p[axis] = x
            species.append(el)
            cart.append(p)
    cart = np.array(cart) + SHIFT
    s = Structure(Lattice.cubic(A), species, cart, coords_are_cartesian=True)  # pymatgen wraps into [0, 1)
    s.to(filename=str(path))
    return s


@pytest.fixture
def cif(tmp_path):
    path = tmp_path / "pcu_zn.cif"
    framework_cif(path)
    return path


def test_cif_is_wrapped_and_the_decomposition_finds_node_and_linkers(cif):
    s = Structure.from_file(str(cif))
    assert len(s) == 13
    # as read, at least one linker is split: some of its atoms are ~A − 1.4 Å apart
    dec = decompose_mof(cif)
    kinds = dec.kinds
    assert kinds.count("metal_node") == 1 and kinds.count("organic_linker") == 3
    zs = [sorted(z.tolist()) for z, _ in dec.blocks()]
    assert zs[0] == [30] and all(z == [6, 6, 8, 8] for z in zs[1:])
    # unwrapped: every linker is a straight O-C-C-O chain with the input bond lengths
    for _z, x in dec.blocks()[1:]:
        d = np.linalg.norm(x[:, None] - x[None], axis=-1)
        assert d.max() == pytest.approx(4.0, abs=1e-6)  # O…O end to end, not ~7 Å across the cell
        pairs = np.sort(d[np.triu_indices(len(x), 1)])
        assert np.allclose(pairs[:3], [1.3, 1.3, 1.4], atol=1e-6)  # the three bonds
    assert dec.max_bond == pytest.approx(1.4, abs=1e-6)
    wrapped_span = max(
        np.linalg.norm(
            s.cart_coords[dec.block_index == b][:, None] - s.cart_coords[dec.block_index == b][None], axis=-1
        ).max()
        for b in range(1, 4)
    )
    assert wrapped_span > 6.0  # what the old path took as a block


def test_mof_from_cif_round_trips_the_structure(cif):
    mof = mof_from_cif(cif)
    assert mof.n_blocks == 4 and mof.n_atoms == 13
    assert mof.meta["kinds"] == ["metal_node"] + ["organic_linker"] * 3
    assert np.allclose(mof.translations.sum(0), 0, atol=1e-9)
    # linker centroids are the bond midpoints (|t_i − t_zn| = 4 Å = half a cell), not cell-spanning averages
    t = mof.translations
    assert np.allclose(sorted(np.linalg.norm(t[1:] - t[0], axis=1)), [4.0, 4.0, 4.0], atol=1e-6)
    assert StructureMatcher().fit(mof.to_structure(), Structure.from_file(str(cif)))


def test_unwrap_with_user_block_index_and_the_split_block_warning(cif):
    s = Structure.from_file(str(cif))
    dec = decompose_mof(s)
    with pytest.warns(UserWarning, match="periodic boundary"):
        mof_from_structure(s, dec.block_index)  # the wrapped coordinates as given: warned
    X = unwrap_blocks(s, dec.block_index)
    s_unwrapped = Structure(s.lattice, s.species, X, coords_are_cartesian=True, to_unit_cell=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = mof_from_structure(s_unwrapped, dec.block_index)
    assert m.n_blocks == 4
    # a block that is periodic (Zn + all linkers bonded through the cell) is refused
    with pytest.raises(ValueError, match="periodic"):
        unwrap_blocks(s, np.zeros(len(s), dtype=int))


def test_bad_structures_are_refused(tmp_path):
    lat = Lattice.cubic(A)
    with pytest.raises(ValueError, match="Z = 0"):
        validate_structure(Structure(lat, ["Zn", DummySpecies("X")], [[0, 0, 0], [0.5, 0.5, 0.5]]))
    with pytest.raises(ValueError, match="Z = 101"):
        validate_structure(Structure(lat, ["Zn", "Md"], [[0, 0, 0], [0.5, 0.5, 0.5]]))
    s = Structure(lat, ["Zn", "O"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    s.replace(1, "O", [np.nan, 0.5, 0.5])
    with pytest.raises(ValueError, match="non-finite"):
        validate_structure(s)
    blk = [(np.array([30]), np.zeros((1, 3)))]
    for bad, msg in [
        ([8.0, 8.0, 8.0, 90.0, 90.0, 200.0], "angles"),
        ([8.0, 8.0, 8.0, 10.0, 10.0, 90.0], "3-D cell"),
        ([8.0, -1.0, 8.0, 90.0, 90.0, 90.0], "lengths"),
        ([8.0, np.nan, 8.0, 90.0, 90.0, 90.0], "finite"),
        ([[1.0, 0, 0], [2.0, 0, 0], [0, 0, 1.0]], "degenerate"),
        ([[1.0, 0, 0], [0, 0, 1.0], [0, 1.0, 0]], "left-handed"),
    ]:
        with pytest.raises(ValueError, match=msg):
            mof_from_blocks(np.array(bad), blk)
    with pytest.raises(ValueError, match="atomic numbers"):
        mof_from_blocks(np.eye(3) * 8, [(np.array([0]), np.zeros((1, 3)))])
    with pytest.raises(ValueError, match="finite"):
        mof_from_blocks(np.eye(3) * 8, [(np.array([6]), np.full((1, 3), np.nan))])
    with pytest.raises(ValueError, match="no metal"):
        decompose_mof(Structure(lat, ["C", "O"], [[0, 0, 0], [0.15, 0, 0]]))
    with pytest.raises(ValueError, match="does not exist"):
        mof_from_cif(tmp_path / "missing.cif")
