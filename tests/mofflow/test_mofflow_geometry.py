"""Geometry: frames, assembly, SO(3) paths, priors, evaluation convention."""

import numpy as np
import pytest
import torch
from pymatgen.core import Lattice, Structure
from scipy.spatial.transform import Rotation

from iclr25.mofflow import (
    LatticePrior,
    canonical_frame,
    collate,
    default_matcher,
    mof_from_blocks,
    toymof_dataset,
)
from iclr25.mofflow.building_blocks import lattice_matrices
from iclr25.mofflow.flow import centered_gaussian, sample_prior
from iclr25.mofflow.so3 import calc_rot_vf, exp_map, geodesic, log_map, rotation_angle, uniform_so3


def _generic_block(rng, n=9):
    X = rng.normal(size=(n, 3)) * np.array([3.0, 2.0, 1.0])
    Z = rng.integers(1, 30, size=n)
    return X, Z


def test_frame_equivariance_and_right_handed():
    rng = np.random.default_rng(0)
    X, Z = _generic_block(rng)
    F = canonical_frame(X, Z)
    assert np.isclose(np.linalg.det(F), 1.0)
    Xc = X - X.mean(0)
    for seed in range(5):
        Q = Rotation.random(random_state=seed).as_matrix()
        F2 = canonical_frame(X @ Q.T, Z)
        np.testing.assert_allclose(F2, Q @ F, atol=1e-8)
        loc2 = (X @ Q.T - (X @ Q.T).mean(0)) @ F2
        np.testing.assert_allclose(loc2, Xc @ F, atol=1e-8)


def test_frame_special_cases():
    assert np.array_equal(canonical_frame(np.zeros((1, 3)), np.array([30])), np.eye(3))
    # centrosymmetric block: v = 0, closest-atom fallback; still a proper frame reproducing the coordinates
    X = np.array([[1.0, 0, 0], [-1, 0, 0], [0, 2, 0], [0, -2, 0], [0.3, 0.4, 0.5], [-0.3, -0.4, -0.5]])
    Z = np.full(6, 6)
    F = canonical_frame(X, Z)
    assert np.isclose(np.linalg.det(F), 1.0)
    assert np.allclose((X @ F) @ F.T, X)
    # the fallback uses the closest atom (index 4, first in stable order): e1, e2 point toward it
    assert F[:, 0] @ X[4] > 0 and F[:, 1] @ X[4] > 0


def test_assembly_round_trip_and_centring():
    for m in toymof_dataset(6, 3):
        assert abs(m.translations.sum(0)).max() < 1e-9
        for R in m.rotations:
            assert np.isclose(np.linalg.det(R), 1.0)
        # intra-block distances are preserved exactly by rigid assembly under any poses
        R = Rotation.random(m.n_blocks, random_state=1).as_matrix()
        t = np.random.default_rng(1).normal(size=(m.n_blocks, 3))
        for a, b in zip(m.block_coords(), m.block_coords(R, t)):
            da = np.linalg.norm(a[:, None] - a[None], axis=-1)
            db = np.linalg.norm(b[:, None] - b[None], axis=-1)
            np.testing.assert_allclose(da, db, atol=1e-9)


def test_preprocessing_reproduces_input_coordinates():
    rng = np.random.default_rng(2)
    lat = Lattice.from_parameters(12.0, 13.0, 14.0, 92.0, 94.0, 93.0)
    blocks = [_generic_block(rng, 5) for _ in range(3)]
    blocks = [(Z, X + 4 * i) for i, (X, Z) in enumerate(blocks)]
    m = mof_from_blocks(lat, blocks)
    std = Lattice.from_parameters(*lat.get_niggli_reduced_lattice().parameters)
    Q = np.linalg.solve(lat.get_niggli_reduced_lattice().matrix, std.matrix)
    Xall = np.concatenate([X for _, X in blocks]) @ Q
    Xall = Xall - np.stack([X.mean(0) for _, X in blocks]).mean(0) @ Q
    np.testing.assert_allclose(np.concatenate(m.block_coords()), Xall, atol=1e-6)


def test_so3_geodesic_and_log():
    g = torch.Generator().manual_seed(0)
    R0, R1 = uniform_so3((64,), g, torch.float64), uniform_so3((64,), g, torch.float64)
    assert torch.allclose(geodesic(R0, R1, torch.zeros(64, dtype=torch.float64)), R0, atol=1e-6)
    assert torch.allclose(geodesic(R0, R1, torch.ones(64, dtype=torch.float64)), R1, atol=1e-6)
    d01 = rotation_angle(R0.transpose(-1, -2) @ R1)
    for t in (0.25, 0.6):
        Rt = geodesic(R0, R1, torch.full((64,), t, dtype=torch.float64))
        keep = d01 < np.pi - 1e-3
        assert torch.allclose(rotation_angle(R0.transpose(-1, -2) @ Rt)[keep], t * d01[keep], atol=1e-6)
    assert torch.allclose(calc_rot_vf(R0, R0), torch.zeros(64, 3, dtype=torch.float64), atol=1e-7)
    # exp/log agree with scipy
    v = torch.from_numpy(Rotation.random(20, random_state=3).as_rotvec())
    np.testing.assert_allclose(exp_map(v).numpy(), Rotation.from_rotvec(v.numpy()).as_matrix(), atol=1e-10)
    np.testing.assert_allclose(log_map(exp_map(v)).numpy(), v.numpy(), atol=1e-7)
    # near π
    vpi = torch.tensor([[0.0, 0.0, np.pi - 1e-7]], dtype=torch.float64)
    assert abs(float(log_map(exp_map(vpi)).norm()) - np.pi) < 1e-5
    # gradient finite at the identity
    w = torch.zeros(1, 3, dtype=torch.float64, requires_grad=True)
    log_map(exp_map(w)).sum().backward()
    assert torch.isfinite(w.grad).all()


def test_priors():
    mask = torch.ones(2000, 5, dtype=torch.bool)
    mask[:, 4] = False
    t0 = centered_gaussian(mask, torch.Generator().manual_seed(0))
    assert t0.sum(1).abs().max() < 1e-3 and t0[:, 4].abs().max() == 0
    # per-coordinate std of centred noise is 10 Å · sqrt(1 − 1/n)
    assert abs(float(t0[:, :4].std()) - 10 * np.sqrt(3 / 4)) < 0.5
    lp = LatticePrior()
    lat = lp.sample(10000, torch.Generator().manual_seed(1))
    assert lat[:, 3:].min() >= 59.9 and lat[:, 3:].max() <= 120.1
    np.testing.assert_allclose(np.log(lat[:, :3].double().numpy()).mean(0), lp.mu, atol=0.02)
    R = uniform_so3((20000,), torch.Generator().manual_seed(2), torch.float64)
    # Haar measure: E[trace R] = 0, angle density ∝ (1 − cos θ) → E[θ] = π/2 + 2/π
    assert abs(float(R.diagonal(dim1=-2, dim2=-1).sum(-1).mean())) < 0.03
    assert abs(float(rotation_angle(R).mean()) - (np.pi / 2 + 2 / np.pi)) < 0.02
    b = collate(toymof_dataset(3, 0))
    tr, rots, lt = sample_prior(b, lp, torch.Generator().manual_seed(0))
    assert tr.shape == b.trans.shape and rots.shape == b.rots.shape and lt.shape == (3, 6)


def test_lattice_convention_matches_pymatgen():
    lat = torch.tensor([[11.0, 13.0, 17.0, 80.0, 95.0, 105.0]], dtype=torch.float64)
    ref = Lattice.from_parameters(*lat[0].tolist()).matrix
    np.testing.assert_allclose(lattice_matrices(lat)[0].numpy(), ref, atol=1e-9)
    assert np.allclose(ref[2], [0, 0, 17.0])  # c along z (pymatgen), not a along x (ASE)


def test_structure_matcher_convention():
    m = toymof_dataset(1, 5, sizes=(4,))[0]
    gt = m.to_structure()
    sm = default_matcher()
    # translated, permuted, lattice-reduced copy matches with rms ~ 0
    perm = np.random.default_rng(0).permutation(len(gt))
    cp = Structure(
        gt.lattice, [gt[i].specie for i in perm], gt.cart_coords[perm] + 1.7, coords_are_cartesian=True
    )
    cp = cp.get_reduced_structure()
    rms = sm.get_rms_dist(gt, cp)
    assert rms is not None and rms[0] < 1e-6
    # the same Cartesian coordinates in an ASE-convention cell (a along x) must not match (skewed cell)
    a, b, c, al, be, ga = 12.0, 14.0, 16.0, 75.0, 105.0, 118.0
    rng = np.random.default_rng(1)
    pm = Lattice.from_parameters(a, b, c, al, be, ga)
    s1 = Structure(pm, rng.choice(["C", "O", "Zn", "N"], 150).tolist(), rng.random((150, 3)))
    al, be, ga = np.deg2rad([al, be, ga])
    cx = np.cos(be)
    cy = (np.cos(al) - np.cos(be) * np.cos(ga)) / np.sin(ga)
    ase = np.array(
        [[a, 0, 0], [b * np.cos(ga), b * np.sin(ga), 0], [c * cx, c * cy, c * np.sqrt(1 - cx**2 - cy**2)]]
    )
    np.testing.assert_allclose(Lattice(ase).parameters, pm.parameters, atol=1e-8)
    wrong = Structure(Lattice(ase), s1.species, s1.cart_coords, coords_are_cartesian=True)
    assert sm.get_rms_dist(s1, wrong) is None


@pytest.mark.parametrize("bad", [dict(sizes=(5,)), dict(angle_low=80.0)])
def test_toymof_config_validation(bad):
    from iclr25.mofflow import ToyMOFConfig

    with pytest.raises(ValueError):
        ToyMOFConfig(**bad)
