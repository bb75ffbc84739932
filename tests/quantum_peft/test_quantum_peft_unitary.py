"""Unitary nodes: orthogonality, exact parameter counts, circuit structure (Pauli parameterisation and QSD nodes of the paper)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.linalg
import torch

from iclr25.quantum_peft import (
    count_parameters,
    cz_signs,
    lora_parameters,
    node_apply,
    node_columns,
    node_param_count,
    pauli_param_count,
    pauli_unitary,
    ry_matrix,
)
from iclr25.quantum_peft.unitary import columns_param_count, even_pairs, odd_pairs

F64 = torch.float64


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def naive_circuit(theta: torch.Tensor, n: int, layers: int) -> torch.Tensor:
    """Reference: the circuit as a product of full 2^n × 2^n gate matrices (one gate at a time)."""
    eye2 = torch.eye(2, dtype=F64)

    def gate(q: int, t: torch.Tensor) -> torch.Tensor:
        mats = [ry_matrix(t) if i == q else eye2 for i in range(n)]
        out = mats[0]
        for m in mats[1:]:
            out = torch.kron(out, m)
        return out

    def cz(a: int, b: int) -> torch.Tensor:
        idx = torch.arange(1 << n)
        both = ((idx >> (n - 1 - a)) & 1) & ((idx >> (n - 1 - b)) & 1)
        return torch.diag((1 - 2 * both).to(F64))

    q_mat, t = torch.eye(1 << n, dtype=F64), 0
    for q in range(n):
        q_mat = gate(q, theta[t]) @ q_mat
        t += 1
    for _ in range(layers):
        for pairs in (even_pairs(n), odd_pairs(n)):
            for a, b in pairs:
                q_mat = cz(a, b) @ q_mat
            for a, b in pairs:
                q_mat = gate(a, theta[t]) @ q_mat
                q_mat = gate(b, theta[t + 1]) @ q_mat
                t += 2
    assert t == theta.numel()
    return q_mat


@pytest.mark.parametrize("n", range(1, 9))
@pytest.mark.parametrize("layers", [0, 1, 2])
def test_pauli_orthogonal_and_count(n: int, layers: int) -> None:
    p = pauli_param_count(n, layers)
    assert p == (2 * layers + 1) * n - 2 * layers
    theta = torch.randn(p, generator=_gen(n * 10 + layers), dtype=F64) * 2
    q = pauli_unitary(theta, n, layers)
    assert q.shape == (2**n, 2**n)
    assert (q.T @ q - torch.eye(2**n, dtype=F64)).abs().max() < 1e-12
    assert (q @ q.T - torch.eye(2**n, dtype=F64)).abs().max() < 1e-12


@pytest.mark.parametrize("n,layers", [(1, 1), (2, 1), (3, 2), (4, 1), (5, 3)])
def test_pauli_matches_naive_gate_product(n: int, layers: int) -> None:
    theta = torch.randn(pauli_param_count(n, layers), generator=_gen(7), dtype=F64)
    assert (pauli_unitary(theta, n, layers) - naive_circuit(theta, n, layers)).abs().max() < 1e-13


def test_l0_is_kronecker_of_ry() -> None:
    for n in (1, 3, 5):
        theta = torch.randn(n, generator=_gen(n), dtype=F64)
        ref = ry_matrix(theta[0])
        for i in range(1, n):
            ref = torch.kron(ref, ry_matrix(theta[i]))
        assert (pauli_unitary(theta, n, 0) - ref).abs().max() < 1e-12


def test_zero_angles_give_cz_sign_matrix() -> None:
    for n, layers in ((3, 1), (4, 2), (5, 1)):
        q = pauli_unitary(torch.zeros(pauli_param_count(n, layers), dtype=F64), n, layers)
        signs = torch.ones(2**n, dtype=F64)
        for _ in range(layers):
            signs = signs * cz_signs(n, even_pairs(n)) * cz_signs(n, odd_pairs(n))
        assert torch.equal(q, torch.diag(signs))
        assert set(signs.tolist()) <= {-1.0, 1.0}
        assert bool((signs < 0).any()) == (layers % 2 == 1)  # CZ² = I: an even number of layers cancels


def test_batched_equals_unbatched() -> None:
    theta = torch.randn(4, 3, pauli_param_count(4, 2), generator=_gen(0), dtype=F64)
    qb = pauli_unitary(theta, 4, 2)
    assert qb.shape == (4, 3, 16, 16)
    assert (qb[2, 1] - pauli_unitary(theta[2, 1], 4, 2)).abs().max() == 0
    x = torch.randn(16, 5, generator=_gen(1), dtype=F64)
    cols = node_apply(theta, 16, 2, x)
    assert (cols - qb @ x).abs().max() < 1e-12


@pytest.mark.parametrize("dim", [3, 5, 6, 12, 96, 768])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_qsd_columns_orthonormal(dim: int, k: int) -> None:
    p = columns_param_count(dim, k, 1)
    u = node_columns(torch.randn(p, generator=_gen(dim + k), dtype=F64), dim, k, 1)
    assert u.shape == (dim, k)
    assert (u.T @ u - torch.eye(k, dtype=F64)).abs().max() < 1e-10


@pytest.mark.parametrize("dim", [3, 6, 12, 96])
def test_qsd_full_matrix_orthogonal_with_cs_structure(dim: int) -> None:
    p = node_param_count(dim, 2)
    theta = torch.randn(p, generator=_gen(dim), dtype=F64)
    q = node_apply(theta, dim, 2, torch.eye(dim, dtype=F64))
    assert (q.T @ q - torch.eye(dim, dtype=F64)).abs().max() < 1e-10
    # Q = (A ⊕ B) · CS(φ) · (C ⊕ I): scipy's cosine–sine decomposition with p = q = N1 must find exactly
    # min(N1, N2) = N2 principal angles, all equal to the shared mixer angle φ (up to sign and π).
    n1 = 1 << (dim.bit_length() - 1)
    n2 = dim - n1
    phi = float(theta[node_param_count(n1, 2) + node_param_count(n2, 2)])
    (_, _), theta_cs, (_, _) = scipy.linalg.cossin(q.numpy(), p=n1, q=n1, separate=True)
    assert theta_cs.shape == (n2,)
    assert np.allclose(np.abs(np.cos(theta_cs)), abs(np.cos(phi)), atol=1e-8)


def test_qsd_param_counts() -> None:
    # C(N) = 2·p(⌊log2 N⌋) + 1 + C(N2), L = 1: p(n) = 3n − 2
    assert {d: node_param_count(d, 1) for d in (3, 5, 6, 12, 96, 768, 1000, 3072, 4095)} == {
        3: 3, 5: 9, 6: 10, 12: 19, 96: 46, 768: 73, 1000: 202, 3072: 91, 4095: 363,
    }  # fmt: skip
    assert node_param_count(1024, 1) == 28
    assert columns_param_count(12, 9, 1) == node_param_count(12, 1)  # K > N1 = 8 needs no extra angles


def _popcount(n: int) -> int:
    return bin(n).count("1")


@pytest.mark.parametrize("layers", [0, 1, 2, 3])
def test_qsd_count_polylogarithmic_for_every_n(layers: int) -> None:
    """Every N = 3…20,000: C(N) ≤ 2(L+1)·log2²N, ≤ popcount·(2p+1), and below LoRA r=1's N from N = 2^(L+6)."""
    for n in range(3, 20_001):
        c = node_param_count(n, layers)
        lg = math.log2(n)
        p = pauli_param_count(n.bit_length() - 1, layers)
        assert c <= 2 * (layers + 1) * lg * lg, (n, c)
        assert c <= _popcount(n) * (2 * p + 1), (n, c)
        if n >= 1 << (layers + 6):
            assert c < n, (n, c)


@pytest.mark.parametrize("dim", [3, 7, 255, 1000, 4095, 12_345, 19_999])
def test_qsd_orthonormal_for_sampled_sizes(dim: int) -> None:
    k = min(dim, 4)
    theta = torch.randn(node_param_count(dim, 1), generator=_gen(dim), dtype=F64)
    u = node_columns(theta, dim, k, 1)
    assert (u.T @ u - torch.eye(k, dtype=F64)).abs().max() < 1e-10
    if dim <= 1000:  # the whole node is orthogonal, not only its first columns
        q = node_apply(theta, dim, 1, torch.eye(dim, dtype=F64))
        assert (q.T @ q - torch.eye(dim, dtype=F64)).abs().max() < 1e-10


@pytest.mark.parametrize("dim", [3, 12, 96])
def test_pad_qr_fallback_orthonormal(dim: int) -> None:
    p = node_param_count(dim, 1, node="pad_qr")
    u = node_columns(torch.randn(p, generator=_gen(dim), dtype=F64), dim, 2, 1, node="pad_qr")
    assert (u.T @ u - torch.eye(2, dtype=F64)).abs().max() < 1e-12


def test_cropping_a_power_of_two_node_is_not_orthonormal() -> None:
    """Why the QSD node exists: the top rows of a 2^n node's columns are not orthonormal."""
    q = pauli_unitary(torch.randn(pauli_param_count(4, 1), generator=_gen(0), dtype=F64), 4, 1)
    crop = q[:12, :2]
    assert (crop.T @ crop - torch.eye(2, dtype=F64)).abs().max() > 1e-3


def test_count_parameters_formula_and_lora() -> None:
    # layer total = count(N) + count(M) + K (the paper's count)
    assert count_parameters(64, 64, 2, 1) == 16 + 16 + 2
    assert count_parameters(1024, 4096, 2, 1) == 28 + 34 + 2
    assert count_parameters(768, 3072, 1, 1) == 91 + 73 + 1  # QSD nodes: 3072 → 91, 768 → 73
    assert lora_parameters(1024, 1024, 1) == 2048
    ratios = [count_parameters(2**n, 2**n, 1, 1) / lora_parameters(2**n, 2**n, 1) for n in range(6, 15)]
    assert all(b < a for a, b in zip(ratios, ratios[1:]))
    assert ratios[10 - 6] < 1 / 30


def test_bad_inputs_raise() -> None:
    with pytest.raises(ValueError, match="layers"):
        pauli_param_count(3, -1)
    with pytest.raises(ValueError, match="theta"):
        pauli_unitary(torch.zeros(5, dtype=F64), 3, 1)
    with pytest.raises(ValueError, match="k must be <="):
        node_columns(torch.zeros(4, dtype=F64), 4, 5, 1)
    with pytest.raises(ValueError, match="node"):
        node_param_count(12, 1, node="kron")
    with pytest.raises(ValueError, match="rank"):
        count_parameters(8, 4, 5, 1)
