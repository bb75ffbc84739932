"""The real preset's data path on real CoRE MOF 2019 CIFs: decomposition round trip, rod nodes, filter counts on
a slice of the archive, the structure split, bad inputs."""

import functools

import numpy as np
import pytest

from iclr25.mofflow import PeriodicBlockError, decompose_mof, mof_from_cif
from iclr25.mofflow.evaluation import default_matcher
from iclr25.mofflow.experiment import RealConfig
from iclr25.mofflow.real import REASONS, cif_site_count, load_real_data, reassemble, refcode_family, split

ROUND_TRIP = ("ADAXEK_clean", "AZAFIS_clean", "RUGJAG_clean", "OCACUR_clean")
ROD = "KOSJIN_clean"  # a Co-oxo chain: the metal node is bonded into itself across the cell


@functools.lru_cache(maxsize=1)
def _entries():
    from iclr25.assets import load_core_mof

    return {e.name: e.structure for e in load_core_mof(names=ROUND_TRIP + (ROD,))}


@pytest.fixture
def entries(need_asset):
    need_asset("core-mof-2019")
    got = _entries()  # read once per module (one pass over the archive)
    assert sorted(got) == sorted(ROUND_TRIP + (ROD,))
    return got


@pytest.mark.parametrize("name", ROUND_TRIP)
def test_real_cif_decomposes_and_reassembles_to_a_match(entries, name):
    s = entries[name]
    dec = decompose_mof(s)
    assert "metal_node" in dec.kinds and "organic_linker" in dec.kinds
    assert dec.max_bond < 3.2  # unwrapped: no bond across the cell inside a block
    mof = mof_from_cif(s)
    assert mof.n_atoms == len(s) and mof.n_blocks == dec.n_blocks
    assert np.abs(mof.translations.sum(0)).max() < 1e-8  # Σ t_i = 0
    rms = default_matcher().get_rms_dist(s, mof.to_structure())
    assert rms is not None and rms[0] < 1e-6
    # the same composition, block by block
    assert sorted(np.concatenate(mof.atom_types).tolist()) == sorted(site.specie.Z for site in s)
    r = reassemble(name, s)
    assert r.reason == "" and r.rms < 1e-6 and r.mof is not None


def test_rod_node_is_refused_with_its_kind(entries):
    s = entries[ROD]
    with pytest.raises(PeriodicBlockError, match="periodic.*infinite rod / sheet metal node") as e:
        decompose_mof(s)
    assert e.value.kind == "metal_node" and s[e.value.site].specie.is_metal is not None
    assert isinstance(e.value, ValueError)  # callers catching ValueError still catch it
    r = reassemble(ROD, s)
    assert r.mof is None and r.reason == REASONS[0]


def test_filter_counts_on_a_slice_agree_with_parsing(need_asset):
    need_asset("core-mof-2019")
    from iclr25.assets.chem import iter_cifs, structure_from_cif

    scan, max_atoms = 120, 60
    texts = []
    for name, text in iter_cifs("2019-ASR"):
        texts.append((name, text))
        if len(texts) >= scan:
            break
    counts = {n: cif_site_count(t) for n, t in texts}
    p1 = [n for n, c in counts.items() if c is not None]
    assert len(p1) >= scan - 2
    for n in p1[:10]:  # the cheap P1 count is the parsed cell's atom count
        assert counts[n] == len(structure_from_cif(dict(texts)[n])), n
    small = sorted(n for n in p1 if counts[n] <= max_atoms)
    d = load_real_data(max_atoms, 6, 16, 0, scan)
    (_, a0, b0), (_, ap, bp), (_, a1, b1), (_, a2, b2), (_, a3, b3), (_, a4, b4), (_, a5, b5) = d.filters
    assert (a0, b0) == (scan, scan) and (ap, bp) == (scan, len(p1))
    assert (a1, b1) == (len(p1), len(small)) and (a2, b2) == (len(small), 6)
    assert a3 == 6 and a4 == b3 and a5 == b4 and b5 == len(d.mofs) <= b4 <= b3 <= 6
    assert all(r.name in small for r in d.records) and len(d.records) == 6
    assert all(m.n_blocks <= 16 and m.n_atoms <= max_atoms for m in d.mofs)
    ra = d.reassembly
    assert ra["n_pool"] == 6 and ra["n_finite"] == b3 and ra["n_ok"] == b4
    assert sum(len(v) for v in ra["failures"].values()) == 6 - b4


def test_split_keeps_refcode_families_apart():
    names = [
        "CDLGLU_clean",
        "CDLGLU01_clean",
        "ABAVIJ_clean",
        "acs.123_clean",
        "QUJFUX_clean",
        "QUJFUX02_charged",
    ]
    names += [f"ZZZ{c}{c}{c}_clean" for c in "ABCDEFGHIJ"]
    assert refcode_family("CDLGLU01_clean") == refcode_family("CDLGLU_clean") == "CDLGLU"
    for seed in range(5):
        tr, te = split(names, seed, 0.25)
        assert sorted(tr + te) == list(range(len(names))) and te
        assert not {refcode_family(names[i]) for i in tr} & {refcode_family(names[i]) for i in te}
    assert split(names, 0, 0.25) == split(names, 0, 0.25)
    assert split(names, 0, 0.25) != split(names, 1, 0.25)


def test_bad_inputs():
    with pytest.raises(ValueError, match="text must be the CIF text"):
        cif_site_count(None)
    assert cif_site_count("data_x\n_symmetry_space_group_name_H-M 'P 21/c'\n") is None
    with pytest.raises(ValueError, match="max_atoms must be an int >= 1"):
        load_real_data(0, 10, 16)
    with pytest.raises(ValueError, match="n_train is a field of the ToyMOF presets"):
        RealConfig(n_train=10)
    with pytest.raises(ValueError, match="test_frac"):
        RealConfig(test_frac=1.0)
    from pymatgen.core import Lattice, Structure

    organic = Structure(Lattice.cubic(10.0), ["C", "O"], [[0, 0, 0], [0.12, 0, 0]])
    r = reassemble("co", organic)
    assert r.mof is None and r.reason == REASONS[2] and "no metal" in r.detail
