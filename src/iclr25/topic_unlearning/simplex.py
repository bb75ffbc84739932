"""Row-wise simplex-constrained least squares, vectorised over all words (RecoverL2, Arora et al. 2013).

For every word i:  C_i = argmin_{c ∈ Δ_r} ||Q̄_i − cᵀX||²,  X = Q̄_S (anchor rows, r × n).
The Hessian 2XXᵀ is the same r × r matrix for every word, so the objective in c is
    f_i(c) = cᵀ G c − 2 cᵀ b_i + const,   G = X Xᵀ,  b_i = X Q̄_iᵀ
and one accelerated projected-gradient iteration updates all n rows at once.
"""

from __future__ import annotations

import numpy as np


def project_simplex(V: np.ndarray) -> np.ndarray:
    """Euclidean projection of every row of ``V`` onto the probability simplex (sort-based, Held et al.)."""
    V = np.atleast_2d(V)
    n, r = V.shape
    U = -np.sort(-V, axis=1)
    css = np.cumsum(U, axis=1) - 1.0
    k = np.arange(1, r + 1)
    cond = U - css / k > 0
    rho = r - 1 - np.argmax(cond[:, ::-1], axis=1)  # last index where cond holds
    theta = css[np.arange(n), rho] / (rho + 1)
    return np.maximum(V - theta[:, None], 0.0)


def duality_gap(C: np.ndarray, G: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Frank–Wolfe gap per row: ∇f·c − min_k ∇f_k (≥ 0; 0 exactly at the optimum)."""
    grad = 2.0 * (C @ G - B)
    return np.einsum("ij,ij->i", grad, C) - grad.min(axis=1)


def face_newton(C: np.ndarray, G: np.ndarray, B: np.ndarray, support_tol: float = 1e-9):
    """One Newton step per row on its current face F_i = {k : C_ik > tol} under 1ᵀc = 1.

        H = 2 G_FF,  g = 2 (G c − b)_F,
        step = −H⁻¹g + H⁻¹1 · (1ᵀH⁻¹g)/(1ᵀH⁻¹1)

    Inactive coordinates get an identity block and zero gradient, so all rows are solved in one batched
    ``np.linalg.solve``. Because f_i is quadratic, the step lands exactly on the face's optimum.
    Returns (new C, boolean mask of rows that left the simplex and were projected back, or — only on a singular
    face — could not be stepped and were kept).
    """
    n, r = C.shape
    M = (C > support_tol).astype(float)  # (n, r) face masks
    grad = 2.0 * (C @ G - B) * M  # (n, r)
    H = 2.0 * G[None] * (M[:, :, None] * M[:, None, :]) + np.eye(r)[None] * (1.0 - M)[:, None, :]
    try:
        Hg = np.linalg.solve(H, grad[..., None])[..., 0]
        H1 = np.linalg.solve(H, M[..., None])[..., 0]
    except np.linalg.LinAlgError:  # a singular face (two anchor rows coincide): the minimum-norm step instead
        Hp = np.linalg.pinv(H)
        Hg, H1 = (Hp @ grad[..., None])[..., 0], (Hp @ M[..., None])[..., 0]
    with np.errstate(divide="ignore", invalid="ignore"):
        coef = np.einsum("ij,ij->i", M, Hg) / np.einsum("ij,ij->i", M, H1)
    Cn = C + (-Hg + H1 * coef[:, None]) * M
    stuck = ~np.isfinite(Cn).all(axis=1)  # only on a singular face: keep the row where it was
    Cn[stuck] = C[stuck]
    bad = (Cn < -1e-12).any(axis=1) | stuck
    if bad.any():
        Cn[bad] = project_simplex(Cn[bad])
    Cn[~bad] = np.clip(Cn[~bad], 0.0, None)
    return Cn, bad


def solve_simplex_ls(
    G: np.ndarray,
    B: np.ndarray,
    C0: np.ndarray | None = None,
    tol: float = 1e-12,
    max_iter: int = 20000,
    polish: bool = True,
) -> tuple[np.ndarray, dict]:
    """Minimise cᵀGc − 2cᵀb_i over the simplex for every row b_i of ``B`` (n × r).

    FISTA with adaptive restart until the largest duality gap is ≤ ``tol`` (or ``max_iter``), then — if
    ``polish`` — an exact Newton step on each row's face, kept for the rows where it is feasible and lowers the
    gap (it solves the face's equality-constrained QP exactly).
    """
    n, r = B.shape
    L = 2.0 * np.linalg.eigvalsh(G).max()  # Lipschitz constant of ∇f
    C = np.full((n, r), 1.0 / r) if C0 is None else project_simplex(C0)
    Y, t = C.copy(), 1.0
    it = 0
    for it in range(1, max_iter + 1):
        grad = 2.0 * (Y @ G - B)
        Cn = project_simplex(Y - grad / L)
        tn = 0.5 * (1 + np.sqrt(1 + 4 * t * t))
        restart = np.einsum("ij,ij->i", Y - Cn, Cn - C) > 0  # gradient-based adaptive restart, per row
        mom = np.where(restart, 0.0, (t - 1) / tn)[:, None]
        Y = Cn + mom * (Cn - C)
        C, t = Cn, tn
        if it % 25 == 0 and duality_gap(C, G, B).max() <= tol:
            break
    gap = duality_gap(C, G, B)
    if polish:
        Cp, bad = face_newton(C, G, B)
        gp = duality_gap(Cp, G, B)
        better = (~bad) & (gp <= gap)
        C = np.where(better[:, None], Cp, C)
        gap = np.where(better, gp, gap)
    return C, {"iterations": it, "max_gap": float(gap.max())}
