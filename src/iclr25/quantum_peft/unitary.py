"""Unitary nodes: orthogonal matrices from a handful of circuit angles (Quantum-PEFT §3).

**Pauli node** (N = 2^n). An n-qubit circuit of RY rotations and CZ entanglers in an alternating layout::

    Q(θ) = Π_{l=L..1} [ RY_odd(θ) · CZ_odd · RY_even(θ) · CZ_even ] · (RY(θ_0) ⊗ … ⊗ RY(θ_{n−1}))

with ``RY(θ) = [[cos θ/2, −sin θ/2], [sin θ/2, cos θ/2]]`` (real, = exp(−iθY/2)) and
``CZ = diag(1, 1, 1, −1)``. Layer l applies CZ on the even neighbour pairs (0,1),(2,3),… followed by one RY
on every qubit of those pairs, then CZ on the odd pairs (1,2),(3,4),… followed by one RY on each of their
qubits. Parameter count: n + L·2(n−1) = **(2L+1)·n − 2L**. Qubit 0 is the most significant bit
(Kronecker order RY_0 ⊗ … ⊗ RY_{n−1}). Q is real orthogonal (det ±1), so Q ∈ O(2^n).

The node is never built as an N×N matrix in the adapter: ``pauli_apply`` applies each RY as a 2×2
contraction on one qubit axis of a (…, 2, …, 2, K) tensor (O(N·K) per gate) and each CZ layer as a ±1
sign vector, so U = Q(θ)·I_{N×K} costs O(N·K·n·L).

**QSD node** (any N). With N = N1 + N2, N1 = 2^⌊log2 N⌋ ≥ N2, a one-sided quantum-Shannon-decomposition shape::

    Q_N = (P_{N1}(θ_a) ⊕ Q_{N2}(θ_b)) · CS_N(φ) · (P_{N1}(θ_c) ⊕ I_{N2})

where P are Pauli nodes, Q_{N2} is recursively a Pauli (power of two) or QSD node, and CS_N(φ) is the
cosine–sine mixer rotating coordinate i of block 1 with coordinate i of block 2 (i < N2) by one shared
angle φ. Every factor is orthogonal, hence Q_N is exactly orthogonal for every input (not only for the
first columns). The recursion descends only into the left block-2 factor (the right one is the identity), so
it has one level per set bit of N and the count is ``C(N) = 2·p(⌊log2 N⌋) + 1 + C(N2)``,
``C(2^n) = p(n) = (2L+1)·n − 2L``: at most popcount(N)·(2p + 1) ≤ 2(L+1)·log2²N angles for every N ≥ 2
(checked for N = 3…20,000 in the tests), e.g. L = 1: N = 768 → 73, 1000 → 202, 4095 → 363. (A two-sided
recursion, Q_{N2} on both sides, doubles the count at every level: 2^popcount growth, 4095 → 9,210 angles.)

**Fallback** ``node="pad_qr"`` (documented, not default): Pauli node of size 2^⌈log2 N⌉, keep the top N rows
of its first K columns and re-orthonormalise with a QR decomposition.
"""

from __future__ import annotations

from functools import lru_cache

import torch

NODES = ("qsd", "pad_qr")


# --------------------------------------------------------------------------------------------------
# sizes and parameter counts
# --------------------------------------------------------------------------------------------------
def _check_int(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return value


def is_power_of_two(n: int) -> bool:
    return n >= 1 and (n & (n - 1)) == 0


def pauli_param_count(n_qubits: int, layers: int) -> int:
    """Angles of an n-qubit Pauli node with L entangling layers: (2L+1)·n − 2L (0 for n = 0)."""
    _check_int("n_qubits", n_qubits, 0)
    _check_int("layers", layers, 0)
    if n_qubits == 0:
        return 0
    return (2 * layers + 1) * n_qubits - 2 * layers


def _split(dim: int) -> tuple[int, int]:
    """N = N1 + N2 with N1 = 2^⌊log2 N⌋."""
    n1 = 1 << (dim.bit_length() - 1)
    return n1, dim - n1


def node_param_count(dim: int, layers: int, node: str = "qsd") -> int:
    """Angles of the unitary node of size ``dim`` (Pauli if a power of two, else one-sided QSD or pad+QR).

    QSD: C(N) = 2·p(⌊log2 N⌋) + 1 + C(N − 2^⌊log2 N⌋), C(2^n) = p(n) — polylogarithmic, ≤ 2(L+1)·log2²N.
    """
    _check_int("dim", dim, 1)
    _check_int("layers", layers, 0)
    if node not in NODES:
        raise ValueError(f"node must be one of {NODES}, got {node!r}")
    if is_power_of_two(dim):
        return pauli_param_count(dim.bit_length() - 1, layers)
    if node == "pad_qr":
        return pauli_param_count(dim.bit_length(), layers)
    n1, n2 = _split(dim)
    return 2 * pauli_param_count(n1.bit_length() - 1, layers) + 1 + node_param_count(n2, layers, "qsd")


# --------------------------------------------------------------------------------------------------
# gates
# --------------------------------------------------------------------------------------------------
def ry_matrix(theta: torch.Tensor) -> torch.Tensor:
    """RY(θ) = [[cos θ/2, −sin θ/2], [sin θ/2, cos θ/2]], batched: (...,) → (..., 2, 2)."""
    c, s = torch.cos(theta / 2), torch.sin(theta / 2)
    return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def even_pairs(n: int) -> list[tuple[int, int]]:
    return [(q, q + 1) for q in range(0, n - 1, 2)]


def odd_pairs(n: int) -> list[tuple[int, int]]:
    return [(q, q + 1) for q in range(1, n - 1, 2)]


@lru_cache(maxsize=256)
def _cz_signs_cpu(n: int, pairs: tuple[tuple[int, int], ...]) -> torch.Tensor:
    idx = torch.arange(1 << n)
    bits = [(idx >> (n - 1 - q)) & 1 for q in range(n)]  # qubit 0 = most significant bit
    sign = torch.ones(1 << n, dtype=torch.float64)
    for a, b in pairs:
        sign = sign * (1 - 2 * (bits[a] & bits[b])).to(torch.float64)
    return sign


def cz_signs(n: int, pairs: list[tuple[int, int]], dtype=torch.float64, device=None) -> torch.Tensor:
    """Diagonal of Π CZ_(a,b) over disjoint pairs: −1 where both bits a and b are 1. Shape (2^n,)."""
    return _cz_signs_cpu(n, tuple(pairs)).to(dtype=dtype, device=device)


def _apply_ry(x: torch.Tensor, q: int, n: int, g: torch.Tensor) -> torch.Tensor:
    """Apply 2×2 gates ``g`` (B, 2, 2) on qubit ``q`` of ``x`` (B, 2^n, K): a batched 2×2 matmul on one axis.

    (Per-gate matmuls measured faster on CPU than one multi-operand einsum per sublayer or a Kronecker chain.)
    """
    b, dim, k = x.shape
    xv = x.reshape(b, 1 << q, 2, (dim >> (q + 1)) * k)  # axis 2 = qubit q (qubit 0 = most significant)
    return torch.matmul(g[:, None], xv).reshape(b, dim, k)


# --------------------------------------------------------------------------------------------------
# Pauli node
# --------------------------------------------------------------------------------------------------
def _batch(
    theta: torch.Tensor, x: torch.Tensor, dim: int
) -> tuple[torch.Tensor, torch.Tensor, tuple[int, ...]]:
    """Flatten theta (..., P) and x (..., dim, K) or (dim, K) to a common batch B."""
    if x.dim() < 2 or x.shape[-2] != dim:
        raise ValueError(f"x must have shape (..., {dim}, K), got {tuple(x.shape)}")
    bshape = torch.broadcast_shapes(theta.shape[:-1], x.shape[:-2])
    th = theta.expand(*bshape, theta.shape[-1]).reshape(-1, theta.shape[-1])
    xx = x.expand(*bshape, *x.shape[-2:]).reshape(-1, *x.shape[-2:])
    return th, xx, bshape


def pauli_apply(theta: torch.Tensor, n_qubits: int, layers: int, x: torch.Tensor) -> torch.Tensor:
    """Q(θ) @ x for the n-qubit RY/CZ circuit; θ (..., (2L+1)n−2L), x (..., 2^n, K) → (..., 2^n, K)."""
    _check_int("n_qubits", n_qubits, 0)
    _check_int("layers", layers, 0)
    p = pauli_param_count(n_qubits, layers)
    if theta.shape[-1:] != (p,):
        raise ValueError(
            f"theta must have last dim {p} for n_qubits={n_qubits}, layers={layers}, got {tuple(theta.shape)}"
        )
    dim = 1 << n_qubits
    if n_qubits == 0:  # 1×1 identity node, no angles
        if x.dim() < 2 or x.shape[-2] != 1:
            raise ValueError(f"x must have shape (..., 1, K), got {tuple(x.shape)}")
        return x.expand(*torch.broadcast_shapes(theta.shape[:-1], x.shape[:-2]), *x.shape[-2:])
    th, xx, bshape = _batch(theta, x, dim)
    g = ry_matrix(th)  # (B, P, 2, 2)
    t = 0
    for q in range(n_qubits):  # first RY sublayer: RY(θ_0) ⊗ … ⊗ RY(θ_{n−1})
        xx = _apply_ry(xx, q, n_qubits, g[:, t])
        t += 1
    for _ in range(layers):
        for pairs in (even_pairs(n_qubits), odd_pairs(n_qubits)):
            if not pairs:
                continue
            xx = xx * cz_signs(n_qubits, pairs, xx.dtype, xx.device)[:, None]  # CZ layer (diagonal ±1)
            for a, b in pairs:  # then one RY on each qubit of every pair
                xx = _apply_ry(xx, a, n_qubits, g[:, t])
                xx = _apply_ry(xx, b, n_qubits, g[:, t + 1])
                t += 2
    assert t == p
    return xx.reshape(*bshape, dim, x.shape[-1])


def pauli_unitary(theta: torch.Tensor, n_qubits: int, layers: int) -> torch.Tensor:
    """The 2^n × 2^n real orthogonal matrix of the RY/CZ circuit, batched over θ's leading dims."""
    _check_int("n_qubits", n_qubits, 0)
    eye = torch.eye(1 << n_qubits, dtype=theta.dtype, device=theta.device)
    return pauli_apply(theta, n_qubits, layers, eye)


# --------------------------------------------------------------------------------------------------
# QSD node (any size)
# --------------------------------------------------------------------------------------------------
def _cs_mix(x: torch.Tensor, n1: int, n2: int, phi: torch.Tensor) -> torch.Tensor:
    """Cosine–sine mixer: rotate row i of block 1 with row i of block 2 (i < N2) by φ; x (B, N, K)."""
    c, s = torch.cos(phi)[:, None, None], torch.sin(phi)[:, None, None]
    top, mid, bot = x[:, :n2], x[:, n2:n1], x[:, n1:]
    return torch.cat([c * top - s * bot, mid, s * top + c * bot], dim=1)


def _node_apply_flat(theta: torch.Tensor, dim: int, layers: int, x: torch.Tensor) -> torch.Tensor:
    """θ (B, P), x (B, dim, K)."""
    if is_power_of_two(dim):
        return pauli_apply(theta, dim.bit_length() - 1, layers, x)
    n1, n2 = _split(dim)
    q1 = n1.bit_length() - 1
    p1 = pauli_param_count(q1, layers)
    th_a, th_b, phi, th_c = torch.split(theta, [p1, node_param_count(n2, layers, "qsd"), 1, p1], dim=-1)
    # right factor (P_{N1}(θ_c) ⊕ I_{N2})
    y = torch.cat([pauli_apply(th_c, q1, layers, x[:, :n1]), x[:, n1:]], 1)
    y = _cs_mix(y, n1, n2, phi[:, 0])  # CS_N(φ)
    # left factor (P_{N1}(θ_a) ⊕ Q_{N2}(θ_b)), Q_{N2} recursive
    return torch.cat(
        [pauli_apply(th_a, q1, layers, y[:, :n1]), _node_apply_flat(th_b, n2, layers, y[:, n1:])], 1
    )


def node_apply(
    theta: torch.Tensor, dim: int, layers: int, x: torch.Tensor, node: str = "qsd"
) -> torch.Tensor:
    """Q_dim(θ) @ x for any ``dim`` (Pauli node for powers of two, one-sided QSD node otherwise).

    ``node='pad_qr'`` is not a linear map and is only available through :func:`node_columns`.
    """
    _check_int("dim", dim, 1)
    if node != "qsd":
        raise ValueError(f"node must be 'qsd' for node_apply (pad_qr only gives columns), got {node!r}")
    p = node_param_count(dim, layers, "qsd")
    if theta.shape[-1:] != (p,):
        raise ValueError(
            f"theta must have last dim {p} for dim={dim}, layers={layers}, got {tuple(theta.shape)}"
        )
    th, xx, bshape = _batch(theta, x, dim)
    return _node_apply_flat(th, dim, layers, xx).reshape(*bshape, dim, x.shape[-1])


def node_columns(theta: torch.Tensor, dim: int, k: int, layers: int, node: str = "qsd") -> torch.Tensor:
    """The first K columns of the node, U = Q(θ)·I_{N×K} ∈ St(N, K): orthonormal columns, (..., N, K)."""
    _check_int("dim", dim, 1)
    _check_int("k", k, 1)
    if k > dim:
        raise ValueError(f"k must be <= dim={dim}, got {k}")
    if node not in NODES:
        raise ValueError(f"node must be one of {NODES}, got {node!r}")
    eye = torch.eye(dim, k, dtype=theta.dtype, device=theta.device)
    if is_power_of_two(dim):
        return pauli_apply(theta, dim.bit_length() - 1, layers, eye)
    if node == "pad_qr":
        n = dim.bit_length()
        cols = pauli_apply(theta, n, layers, torch.eye(1 << n, k, dtype=theta.dtype, device=theta.device))
        q, r = torch.linalg.qr(cols[..., :dim, :])
        # fix the sign ambiguity of QR so the map is continuous: diag(R) > 0
        return q * torch.sign(torch.diagonal(r, dim1=-2, dim2=-1)).unsqueeze(-2)
    return node_apply(theta, dim, layers, eye, "qsd")


def columns_param_count(dim: int, k: int, layers: int, node: str = "qsd") -> int:
    """Angles used by :func:`node_columns` (the node's count; independent of K)."""
    _check_int("k", k, 1)
    return node_param_count(dim, layers, node)
