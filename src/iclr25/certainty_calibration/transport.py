"""Post-hoc calibration as optimal transport between phrases (§3.3).

1. Usage weights a_k = c_k / N of the source phrases on a calibration set; targets are the same phrase set, b = a.
2. Cost of moving one unit of mass from u_k to v_l, linearised from the calibration error:
       C_kl = (gECE_kl − gECE_0) / a_k,
   where gECE_kl is the error after replacing EVERY use of u_k by v_l (so C_kk = 0; C_kl < 0 helps).
3. Plan T ≥ 0 with exact source marginal and relaxed target marginal:
       min_T ⟨C, T⟩ + ε·KL(T ‖ a bᵀ) + τ·KL(Tᵀ1 ‖ b)  s.t.  T1 = a
   solved with POT's ``ot.sinkhorn_unbalanced(a, b, C, reg=ε, reg_m=(inf, τ), method='sinkhorn_stabilized',
   reg_type='kl')``; ε = τ = 1e-3 (the paper's defaults). ``solver='emd'`` gives balanced exact OT (``ot.emd``).
4. Transform: an output with phrase u_k gets a new phrase drawn from row k of T normalised to sum 1.
"""

from __future__ import annotations

import warnings

import numpy as np

from .metrics import MODES, _check_bins, _check_outcomes, bin_integrals, reliability_from_counts
from .phrases import PhraseSet

SOLVERS = ("sinkhorn_unbalanced", "emd")
UNUSED = ("identity", "uniform")


def cost_matrix(
    counts: np.ndarray,
    label_sums: np.ndarray,
    w: np.ndarray,
    e: np.ndarray,
    edges: np.ndarray,
    n_bootstrap: int = 0,
    seed: int = 0,
    phrase_of_item: np.ndarray | None = None,
    outcomes: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """All K×K replacement errors at once; returns (C, gECE_0).

    Replacing u_k by u_l moves c_k items (and their label sum s_k) from row k to row l, so the new per-bin
    sums are n − c_k w_k + c_k w_l (and likewise for labels and moments): a (K, K, M) tensor, no loop over pairs.
    With ``n_bootstrap > 0`` every error is the median over that many resamples (the paper's code: 100,
    seed 0), computed with the same resamples for every pair so medians are comparable.
    """
    K = counts.size
    N = counts.sum()

    def errors(c: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # c, s: (..., K) -> E0 (...,), Ekl (..., K, K)
        eye = np.eye(K)
        # counts after moving row k to l: c - c_k e_k + c_k e_l, shape (..., K, K, K)
        c_kl = (
            c[..., None, None, :]
            - (c[..., :, None, None] * eye[:, None, :])
            + c[..., :, None, None] * eye[None, :, :]
        )
        s_kl = (
            s[..., None, None, :]
            - (s[..., :, None, None] * eye[:, None, :])
            + s[..., :, None, None] * eye[None, :, :]
        )
        E0 = reliability_from_counts(c, s, w, e, edges).ece
        Ekl = reliability_from_counts(c_kl, s_kl, w, e, edges).ece
        return E0, Ekl

    if n_bootstrap > 0:
        if phrase_of_item is None or outcomes is None:
            raise ValueError("bootstrap needs phrase_of_item and outcomes")
        rng = np.random.default_rng(seed)
        n = phrase_of_item.size
        res = rng.integers(0, n, size=(n_bootstrap, n))  # (B, N) resampled item indices
        ph = phrase_of_item[res]
        cb = np.stack([np.bincount(r, minlength=K) for r in ph]).astype(float)
        sb = np.stack([np.bincount(r, weights=outcomes[i], minlength=K) for r, i in zip(ph, res)])
        E0b, Eklb = errors(cb, sb)
        E0, Ekl = float(np.median(E0b)), np.median(Eklb, axis=0)
    else:
        E0, Ekl = errors(counts, label_sums)
        E0 = float(E0)
    a = counts / N
    C = (Ekl - E0) / np.maximum(a, 1.0 / N)[:, None]  # unused phrases: divide by 1/N (their row is all zero)
    np.fill_diagonal(C, 0.0)
    return C, E0


class OTCalibrator:
    """Phrase → phrase recalibration map fitted by optimal transport (scikit-learn fit/transform shape).

    Parameters follow the paper: ``bins=100``, ``eps=tau=1e-3``, unbalanced Sinkhorn with KL. ``mode`` is the bin
    integration ('exact' closed form; 'midpoint' as the paper's code default). ``n_bootstrap=100`` reproduces the
    code's bootstrap-median cost; 0 (default) uses the full-data estimate, which is deterministic and 100× cheaper.
    ``unused_rows``: what a phrase unseen in calibration maps to — 'identity' (default) or 'uniform' (the code).

    Fitted attributes: ``plan_`` (K, K), ``cost_`` (K, K), ``a_`` (K,), ``ece_`` (calibration gECE before),
    ``mapping_`` (most likely target per source phrase, as names).
    """

    def __init__(
        self,
        phrase_set: PhraseSet,
        bins: int = 100,
        eps: float = 1e-3,
        tau: float = 1e-3,
        solver: str = "sinkhorn_unbalanced",
        mode: str = "exact",
        n_bootstrap: int = 0,
        unused_rows: str = "identity",
        seed: int = 0,
        max_iter: int = 10000,
    ):
        if not isinstance(phrase_set, PhraseSet):
            raise ValueError(f"phrase_set must be a PhraseSet, got {type(phrase_set).__name__}")
        _check_bins(bins)
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps!r}")
        if not tau > 0:
            raise ValueError(f"tau must be > 0, got {tau!r}")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if not isinstance(n_bootstrap, int) or n_bootstrap < 0:
            raise ValueError(f"n_bootstrap must be an int >= 0, got {n_bootstrap!r}")
        if unused_rows not in UNUSED:
            raise ValueError(f"unused_rows must be one of {UNUSED}, got {unused_rows!r}")
        self.phrase_set, self.bins, self.eps, self.tau = phrase_set, int(bins), float(eps), float(tau)
        self.solver, self.mode, self.n_bootstrap, self.unused_rows = solver, mode, n_bootstrap, unused_rows
        self.seed, self.max_iter = int(seed), int(max_iter)

    def fit(self, phrases_used, outcomes) -> OTCalibrator:
        import ot

        ps = self.phrase_set
        idx = ps.index(phrases_used)
        if idx.size == 0:
            raise ValueError("phrases_used must not be empty")
        y = _check_outcomes(outcomes, idx.size)
        K = len(ps)
        w, e = bin_integrals(ps.alpha, ps.beta, self.bins, self.mode)
        edges = _check_bins(self.bins)
        c = np.bincount(idx, minlength=K).astype(float)
        s = np.bincount(idx, weights=y, minlength=K)
        C, E0 = cost_matrix(c, s, w, e, edges, self.n_bootstrap, self.seed, idx, y)
        a = c / c.sum()
        used = a > 0
        T = np.zeros((K, K))
        au = a[used]
        Cu = C[np.ix_(used, used)]
        with warnings.catch_warnings():
            warnings.simplefilter(
                "ignore"
            )  # POT warns about non-convergence at eps = tau = 1e-3, as in the paper
            if self.solver == "emd":
                Tu = ot.emd(au, au, Cu, numItermax=100 * self.max_iter)
            else:
                Tu = ot.sinkhorn_unbalanced(
                    au,
                    au,
                    Cu,
                    reg=self.eps,
                    reg_m=(float("inf"), self.tau),
                    method="sinkhorn_stabilized",
                    reg_type="kl",
                    numItermax=self.max_iter,
                )
        Tu = np.nan_to_num(np.asarray(Tu, float), nan=0.0, posinf=0.0, neginf=0.0)
        Tu = np.clip(Tu, 0.0, None)
        T[np.ix_(used, used)] = Tu
        self.plan_, self.cost_, self.a_, self.ece_ = T, C, a, E0
        self.mapping_ = {ps.names[k]: ps.names[int(T[k].argmax())] for k in range(K) if used[k]}
        return self

    def row_probabilities(self) -> np.ndarray:
        """Row-normalised plan: P(new phrase = l | old phrase = k), shape (K, K)."""
        self._check_fitted()
        T = self.plan_
        rs = T.sum(1, keepdims=True)
        K = T.shape[0]
        fill = np.eye(K) if self.unused_rows == "identity" else np.full((K, K), 1.0 / K)
        return np.where(rs > 0, T / np.where(rs > 0, rs, 1.0), fill)

    def transform(self, phrases_used, seed: int | None = None) -> np.ndarray:
        """New phrase indices: each u_k is replaced by a draw from row k of the plan (seeded)."""
        idx = self.phrase_set.index(phrases_used)
        P = self.row_probabilities()
        rng = np.random.default_rng(self.seed if seed is None else seed)
        cdf = np.cumsum(P, axis=1)
        cdf[:, -1] = 1.0
        u = rng.random(idx.size)
        return (u[:, None] > cdf[idx]).sum(1).astype(np.int64)  # inverse-CDF sampling, vectorised

    def fit_transform(self, phrases_used, outcomes, seed: int | None = None) -> np.ndarray:
        return self.fit(phrases_used, outcomes).transform(phrases_used, seed)

    def _check_fitted(self) -> None:
        if not hasattr(self, "plan_"):
            raise RuntimeError("OTCalibrator is not fitted yet: call fit(phrases_used, outcomes) first")
