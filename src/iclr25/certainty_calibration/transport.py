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
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .metrics import MODES, _check_bins, _check_outcomes, bin_integrals, reliability_from_counts
from .phrases import PhraseSet, _check_seed

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


def _phrase_input(X, phrase_set: PhraseSet, name: str = "X") -> tuple[np.ndarray, bool]:
    """Phrases as a 1-D array (names or indices) or a one-column 2-D array (scikit-learn shape) → (indices, was_2d).

    Float arrays are accepted only when every value is a whole number (phrase indices read as floats)."""
    if hasattr(X, "tocsr") or hasattr(X, "toarray"):
        raise TypeError(f"sparse input is not supported: {name} holds one phrase (name or index) per item")
    if isinstance(X, np.ndarray) or hasattr(X, "__array__") or hasattr(X, "iloc"):
        arr = np.asarray(X)
    else:
        arr = np.asarray(list(X))
    two_d = arr.ndim == 2
    if two_d:
        if arr.shape[1] != 1:
            raise ValueError(
                f"{name} must be a 1-D sequence of phrases or a 2-D array with exactly one column, got shape "
                f"{arr.shape}"
            )
        arr = arr[:, 0]
    elif arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (one phrase per item) or (n, 1), got shape {arr.shape}")
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} holds NaN or inf; expected phrase names or integer phrase indices")
        if not np.all(arr == np.round(arr)):
            raise ValueError(
                f"{name} holds non-integer numbers; expected phrase names or integer indices in [0, {len(phrase_set)})"
            )
        arr = arr.astype(np.int64)
    elif arr.dtype.kind == "O":
        arr = arr.astype(str) if all(isinstance(v, str) for v in arr.tolist()) else arr
    return phrase_set.index(arr), two_d


def _check_params(est) -> None:
    """Parameter validation (in ``fit``, as scikit-learn estimators do)."""
    if not isinstance(est.phrase_set, PhraseSet):
        raise ValueError(f"phrase_set must be a PhraseSet, got {type(est.phrase_set).__name__}")


def _check_solve(eps, tau, solver, n_bootstrap) -> None:
    """The OT solve's parameters: ε, τ positive finite numbers, a known solver, n_bootstrap an int ≥ 0."""
    for name, v in (("eps", eps), ("tau", tau)):
        if isinstance(v, bool) or not isinstance(v, (int, float, np.floating, np.integer)) or not v > 0:
            raise ValueError(f"{name} must be a number > 0, got {v!r}")
        if not np.isfinite(v):
            raise ValueError(f"{name} must be finite, got {v!r}")
    if solver not in SOLVERS:
        raise ValueError(f"solver must be one of {SOLVERS}, got {solver!r}")
    if not isinstance(n_bootstrap, (int, np.integer)) or n_bootstrap < 0:
        raise ValueError(f"n_bootstrap must be an int >= 0, got {n_bootstrap!r}")


@dataclass(frozen=True)
class OTConfig:
    """The OT solve of :class:`OTCalibrator` as one settings object (the paper's defaults, §3.3): entropic
    regularisation ``eps``, target-marginal relaxation ``tau``, ``solver`` and the bootstrap of the cost
    (``n_bootstrap=100`` = the code's bootstrap median; 0 = the full-data estimate). It checks itself, and
    :meth:`calibrator` builds the estimator for a phrase set, a bin count and a seed."""

    eps: float = 1e-3
    tau: float = 1e-3
    solver: str = "sinkhorn_unbalanced"
    n_bootstrap: int = 0

    def __post_init__(self) -> None:
        _check_solve(self.eps, self.tau, self.solver, self.n_bootstrap)

    def calibrator(self, phrase_set: PhraseSet, bins: int = 100, seed: int = 0) -> OTCalibrator:
        """An unfitted :class:`OTCalibrator` with these settings."""
        return OTCalibrator(
            phrase_set,
            bins=bins,
            eps=self.eps,
            tau=self.tau,
            solver=self.solver,
            n_bootstrap=self.n_bootstrap,
            seed=seed,
        )


class OTCalibrator(TransformerMixin, BaseEstimator):
    """Phrase → phrase recalibration map fitted by optimal transport (a scikit-learn transformer).

    Parameters follow the paper: ``bins=100``, ``eps=tau=1e-3``, unbalanced Sinkhorn with KL. ``mode`` is the bin
    integration ('exact' closed form; 'midpoint' as the paper's code default). ``n_bootstrap=100`` reproduces the
    code's bootstrap-median cost; 0 (default) uses the full-data estimate, which is deterministic and 100× cheaper.
    ``unused_rows``: what a phrase unseen in calibration maps to — 'identity' (default) or 'uniform' (the code).
    ``max_iter``: Sinkhorn iterations (≥ 1); a run that stops before POT's tolerance emits a
    :class:`sklearn.exceptions.ConvergenceWarning` (POT's own warning text is kept in ``convergence_warnings_``).

    ``X`` is one phrase per item: names or indices into ``phrase_set``, 1-D or a one-column 2-D array (so the
    calibrator sits in a :class:`sklearn.pipeline.Pipeline`); ``y`` the outcomes (0/1 or P(Y=1)). ``transform``
    returns new phrase indices with the input's dimensionality.

    Fitted attributes: ``plan_`` (K, K), ``cost_`` (K, K), ``a_`` (K,), ``ece_`` (calibration gECE before),
    ``mapping_`` (most likely target per source phrase, as names), ``converged_``, ``marginal_error_`` (relative
    violation of the exact source marginal T1 = a), ``n_features_in_`` (= 1).
    """

    def __init__(
        self,
        phrase_set: PhraseSet | None = None,
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
        self.phrase_set, self.bins, self.eps, self.tau = phrase_set, bins, eps, tau
        self.solver, self.mode, self.n_bootstrap, self.unused_rows = solver, mode, n_bootstrap, unused_rows
        self.seed, self.max_iter = seed, max_iter

    def _validate_params(self) -> None:  # noqa: D401 - scikit-learn calls its own validator by this name
        _check_params(self)
        _check_bins(self.bins)
        _check_solve(self.eps, self.tau, self.solver, self.n_bootstrap)
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {self.mode!r}")
        if self.unused_rows not in UNUSED:
            raise ValueError(f"unused_rows must be one of {UNUSED}, got {self.unused_rows!r}")
        _check_seed(self.seed)
        if (
            isinstance(self.max_iter, bool)
            or not isinstance(self.max_iter, (int, np.integer))
            or self.max_iter < 1
        ):
            raise ValueError(f"max_iter must be an int >= 1 (Sinkhorn iterations), got {self.max_iter!r}")

    def fit(self, X, y=None) -> OTCalibrator:
        """Fit the plan on calibration items: ``X`` the phrases said, ``y`` the outcomes (required)."""
        import ot

        self._validate_params()
        if y is None:
            raise ValueError(
                "OTCalibrator requires y to be passed, but the target y is None (y: the outcomes, 0/1 or P(Y=1))"
            )
        ps = self.phrase_set
        idx, _ = _phrase_input(X, ps)
        if idx.size == 0:
            raise ValueError("X (phrases_used) must not be empty")
        y = _check_outcomes(np.ravel(np.asarray(y, float)) if np.ndim(y) == 2 else y, idx.size)
        K = len(ps)
        bins = int(self.bins)
        w, e = bin_integrals(ps.alpha, ps.beta, bins, self.mode)
        edges = _check_bins(bins)
        c = np.bincount(idx, minlength=K).astype(float)
        s = np.bincount(idx, weights=y, minlength=K)
        C, E0 = cost_matrix(c, s, w, e, edges, int(self.n_bootstrap), int(self.seed), idx, y)
        a = c / c.sum()
        used = a > 0
        T = np.zeros((K, K))
        au = a[used]
        Cu = C[np.ix_(used, used)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter(
                "always"
            )  # record POT's warnings, re-emit them as one ConvergenceWarning below
            if self.solver == "emd":
                Tu = ot.emd(au, au, Cu, numItermax=100 * int(self.max_iter))
            else:
                Tu = ot.sinkhorn_unbalanced(
                    au,
                    au,
                    Cu,
                    reg=float(self.eps),
                    reg_m=(float("inf"), float(self.tau)),
                    method="sinkhorn_stabilized",
                    reg_type="kl",
                    numItermax=int(self.max_iter),
                )
        self.convergence_warnings_ = [str(w.message) for w in caught]
        Tu = np.asarray(Tu, float)
        n_bad = int((~np.isfinite(Tu)).sum())
        Tu = np.nan_to_num(Tu, nan=0.0, posinf=0.0, neginf=0.0)
        Tu = np.clip(Tu, 0.0, None)
        T[np.ix_(used, used)] = Tu
        # the source marginal T1 = a is exact in the problem: its violation measures how far the solver got
        self.marginal_error_ = float(np.abs(Tu.sum(1) - au).max() / au.max())
        self.converged_ = not caught and n_bad == 0
        if not self.converged_:
            warnings.warn(
                f"OTCalibrator: the {self.solver} solver did not converge (max_iter={self.max_iter}, "
                f"eps={self.eps}, tau={self.tau}; source-marginal error max|T1 - a|/max a = "
                f"{self.marginal_error_:.3g}; {n_bad} non-finite plan entries set to 0; POT said: "
                f"{'; '.join(sorted(set(self.convergence_warnings_))) or 'nothing'}). At the paper's "
                "eps = tau = 1e-3 this is expected; the plan is still used as returned.",
                ConvergenceWarning,
                stacklevel=2,
            )
        self.plan_, self.cost_, self.a_, self.ece_ = T, C, a, E0
        self.mapping_ = {ps.names[k]: ps.names[int(T[k].argmax())] for k in range(K) if used[k]}
        self.n_features_in_ = 1
        return self

    def row_probabilities(self) -> np.ndarray:
        """Row-normalised plan: P(new phrase = l | old phrase = k), shape (K, K)."""
        check_is_fitted(self, "plan_")
        T = self.plan_
        rs = T.sum(1, keepdims=True)
        K = T.shape[0]
        fill = np.eye(K) if self.unused_rows == "identity" else np.full((K, K), 1.0 / K)
        return np.where(rs > 0, T / np.where(rs > 0, rs, 1.0), fill)

    def transform(self, X, seed: int | None = None) -> np.ndarray:
        """New phrase indices: each u_k is replaced by a draw from row k of the plan (seeded). Same dimensionality
        as ``X`` ((n,) or (n, 1))."""
        check_is_fitted(self, "plan_")
        idx, two_d = _phrase_input(X, self.phrase_set)
        P = self.row_probabilities()
        if seed is not None:
            _check_seed(seed)
        rng = np.random.default_rng(int(self.seed) if seed is None else seed)
        cdf = np.cumsum(P, axis=1)
        cdf[:, -1] = 1.0
        u = rng.random(idx.size)
        out = (u[:, None] > cdf[idx]).sum(1).astype(np.int64)  # inverse-CDF sampling, vectorised
        return out[:, None] if two_d else out

    def fit_transform(self, X, y=None, seed: int | None = None) -> np.ndarray:
        return self.fit(X, y).transform(X, seed)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.requires_fit = True
        tags.target_tags.required = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.non_deterministic = False
        return tags
