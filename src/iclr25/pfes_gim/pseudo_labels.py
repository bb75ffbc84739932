"""Pseudo-labels from point annotations: the hard stage, the fixed-window "medium" stage, and GIM.

Paper (Deng, Hayashi, Nagahara, ICLR 2025; extended version arXiv 2511.16952): the **GIM module** of the
two-branch framework, which supervises the class-agnostic intensity branch — "detect the pseudo-apex frame
around each point label, estimate the duration, and construct a Gaussian distribution for each expression
instance", then assign the Gaussian's values as soft pseudo-labels to the pseudo-expression frames — in place of
the hard pseudo-labelling it is compared with. The steps below cite the paper by these step names.

Paper location: the three GIM steps are named in the abstract of arXiv 2511.16952 (read at
https://arxiv.org/html/2511.16952) and of the ICLR 2025 paper (proceedings abstract page); the section and
equation numbers of the method text could not be read (issue #39: only the abstract of the arXiv HTML is in
the stored pages), so none is cited — see the method card's "Paper locations cited in the code". The constants
and the epoch schedule are the released code's (KinopioIsAllIn/GIM at 92f5e28, ``model.py::CO2.criterion``
calling ``soft_pseudo_label_attention_individual_init3`` / ``_medium`` / ``_adaptive``).

GIM (Gaussian-based instance-adaptive intensity modelling) turns one labelled frame p of an expression
instance into a soft per-frame intensity target, per instance and per epoch (``itr`` = epoch index):

1. pseudo-apex detection (paper): ``â = argmax_t a_t`` over ``t ∈ [p − k/4, p + k/4]`` (a = predicted
   class-agnostic intensity);
2. reliability threshold ``τ = 0.8 − (itr − 5)/80`` for itr < 29, then 0.5 (the released code's schedule);
3. duration estimation (paper): ``d = min(cap, max(k/2, round(1.2 · #{t ∈ [â − k/2, â + k/2] : a_t > τ})))``,
   half-width ``w = d // 2``;
4. instance-level Gaussian (paper) in the attention-feature space centred on the pseudo-apex, whose values are the
   soft pseudo-labels:
   ``y_t = exp(−‖g_t − g_â‖² / (2σ² + 1e-6))`` for ``t ∈ [â − w, â + w]`` with
   ``σ² = mean_{t∈[â−w, â+w]} ‖g_t − g_â‖²`` (0 elsewhere);
5. apex-branch positives ``[â − 2, â + 2]`` (MaE) / ``[â − 1, â + 1]`` (ME): the paper's class-aware apex
   classification branch learns the classes from the pseudo-apex frames only.

k = 32 / 16 and cap = 36 / 16 for MaE / ME. Epoch 0 uses hard windows ``[p−5, p+5)`` / ``[p−3, p+3)``; epochs
1–4 a Gaussian on small fixed windows centred on p. Window ends are clipped like the released code: the
upper bound is exclusive at ``T − 1`` (the last frame of a video is never labelled). Everything here is
computed without gradients (pseudo-labels are targets).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ..common.fields import bounded, check_fields
from .data import MAE, ME, check_points

REFERENCE_FPS = 30.0
"""Frame rate the frame-count constants are given at: the released code's k / cap / windows and the dataset
profiles' length limits are frame counts of CAS(ME)² (recorded at 30 fps). :meth:`GIMConfig.at_frame_rate` and
:meth:`~iclr25.pfes_gim.proposals.DatasetProfile.at_frame_rate` rescale them for videos at other rates."""


def frame_scale(fps, reference_fps=REFERENCE_FPS) -> float:
    """``fps / reference_fps`` after checking both are finite rates > 0 (frames per second)."""
    from ..common.checks import need_real

    need_real("fps", fps, 0.0, lo_open=True)
    need_real("reference_fps", reference_fps, 0.0, lo_open=True)
    return float(fps) / float(reference_fps)


def scale_frames(n: int, scale: float, lo: int = 0) -> int:
    """A frame count ``n`` at another frame rate: ``max(lo, round(n · scale))``."""
    return max(int(lo), int(round(n * scale)))


@dataclass(frozen=True)
class GIMConfig:
    """Per-class constants (index 0 = MaE, 1 = ME) and the epoch schedule of the pseudo-label stages."""

    # k_c: expected instance length (search radius k/4, count radius k/2)
    k: tuple[int, int] = bounded((32, 16), lo=4, each=True, length=2)
    cap: tuple[int, int] = bounded((36, 16), lo=0, each=True, length=2)  # upper bound of the duration d
    tau_start: float = bounded(0.8, lo=0, hi=1)
    tau_end: float = bounded(0.5, lo=0, hi=1)  # <= tau_start
    # τ = tau_start − (itr − gim_start)/tau_decay until it reaches tau_end
    tau_decay: float = bounded(80.0, lo=0, lo_open=True)
    duration_factor: float = bounded(1.2, lo=0, lo_open=True)
    apex_half: tuple[int, int] = bounded((2, 1), lo=0, each=True, length=2)  # apex positives â ± apex_half
    hard_half: tuple[int, int] = bounded((5, 3), lo=0, each=True, length=2)  # hard window [p − h, p + h)
    # first epoch that uses GIM (epochs 1..gim_start−1 use the medium stage)
    gim_start: int = bounded(5, lo=1)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above (pairs element-wise); below: rules across fields
        if any(c < k // 2 for c, k in zip(self.cap, self.k, strict=True)):
            raise ValueError(f"cap must be >= k/2 per class, got cap={self.cap!r}, k={self.k!r}")
        if not self.tau_end <= self.tau_start:
            raise ValueError(f"need 0 <= tau_end <= tau_start <= 1, got {self.tau_end}, {self.tau_start}")

    def at_frame_rate(self, fps: float, reference_fps: float = REFERENCE_FPS) -> GIMConfig:
        """This config for videos at ``fps`` frames per second, its frame constants being at ``reference_fps``.

        The windows are durations in frames, so they scale with ``s = fps / reference_fps``: k, cap, the apex
        and hard half-widths become ``round(x · s)`` (k at least 4, cap at least k/2, the hard half-width at
        least 1 so the hard window is never empty). The epoch schedule (τ, gim_start) is unchanged.
        ``at_frame_rate(reference_fps)`` returns an equal config."""
        from dataclasses import replace

        sc = frame_scale(fps, reference_fps)
        k = tuple(scale_frames(x, sc, 4) for x in self.k)
        cap = tuple(max(scale_frames(c, sc), kk // 2) for c, kk in zip(self.cap, k, strict=True))
        return replace(
            self,
            k=k,
            cap=cap,
            apex_half=tuple(scale_frames(x, sc) for x in self.apex_half),
            hard_half=tuple(scale_frames(x, sc, 1) for x in self.hard_half),
        )


@dataclass
class PseudoLabels:
    """``soft``: ``(T, 2)`` intensity targets (MaE, ME); ``apex``: ``(T, 2)`` apex-branch positives (0/1);
    ``windows``: ``(n, 2)`` inclusive labelled window per instance; ``centres``: ``(n,)`` pseudo-apex (GIM) or p;
    ``classes``: ``(n,)``; ``stage``: 'hard' | 'medium' | 'gim'; ``order``: ``(n,)`` index of each row in the
    input points (instances are processed MaE first, then ME, each in frame order, like the released code)."""

    soft: torch.Tensor
    apex: torch.Tensor
    windows: np.ndarray
    centres: np.ndarray
    classes: np.ndarray
    stage: str
    order: np.ndarray


def reliability_threshold(itr: int, cfg: GIMConfig = GIMConfig()) -> float:
    """τ(itr) = 0.8 − (itr − 5)/80, floored at 0.5 (reached at itr = 29): the threshold of the paper's GIM
    duration estimation (values: the released code's ``_adaptive``).

    Paper location: GIM "estimating the duration" (arXiv 2511.16952, abstract); § / Eq. not confirmed. The
    schedule's values are not in the abstract; they are read from the released code only."""
    if not isinstance(itr, (int, np.integer)) or isinstance(itr, bool):
        raise ValueError(f"itr must be an int epoch index, got {itr!r}")
    if itr < cfg.gim_start:
        raise ValueError(f"itr must be >= gim_start={cfg.gim_start} for the GIM threshold, got {itr}")
    return max(cfg.tau_end, cfg.tau_start - (itr - cfg.gim_start) / cfg.tau_decay)


def gim_duration(n_reliable: int, cls: int, cfg: GIMConfig = GIMConfig()) -> int:
    """GIM duration estimation (paper): ``d = min(cap, max(k/2, round(1.2 n)))`` (Python's round, as in the
    released code); ``n_reliable`` is a frame count (int >= 0), ``cls`` 0 (MaE) or 1 (ME).

    Paper location: GIM duration estimation (arXiv 2511.16952, abstract); § / Eq. not confirmed. The factor
    1.2, k and cap are the released code's (``soft_pseudo_label_attention_individual_adaptive``)."""
    if not isinstance(n_reliable, (int, np.integer)) or isinstance(n_reliable, bool) or n_reliable < 0:
        raise ValueError(f"n_reliable must be a frame count (int >= 0), got {n_reliable!r}")
    if isinstance(cls, bool) or cls not in (MAE, ME):
        raise ValueError(f"cls must be {MAE} (MaE) or {ME} (ME), got {cls!r}")
    k, cap = cfg.k[cls], cfg.cap[cls]
    return int(min(cap, max(k // 2, round(n_reliable * cfg.duration_factor))))


def _prepare(points, classes, n_frames: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    p = check_points(np.asarray(points).reshape(-1), n_frames)
    c = np.asarray(classes, dtype=np.int64).reshape(-1)
    if c.shape != p.shape:
        raise ValueError(f"classes must have one entry per point ({p.shape[0]}), got {c.shape[0]}")
    if not np.isin(c, (MAE, ME)).all():
        raise ValueError(f"classes must be 0 (MaE) or 1 (ME), got {c.tolist()}")
    order = np.lexsort((p, c))  # the released code labels all MaE (in frame order), then all ME
    return p[order], c[order], order


def _span(lo: int, hi_incl: int, n_frames: int) -> tuple[int, int]:
    """[max(0, lo), min(T − 1, hi + 1)) as in the code; never empty (a point on the last frame keeps itself)."""
    s = max(0, lo)
    e = min(n_frames - 1, hi_incl + 1)
    return s, max(e, s + 1)


def _gaussian(feat: torch.Tensor, centre: int, s: int, e: int) -> torch.Tensor:
    d2 = ((feat[s:e] - feat[centre]) ** 2).sum(-1)  # ‖g_t − μ‖²
    var = d2.mean()
    return torch.exp(-d2 / (2 * var + 1e-6))


@torch.no_grad()
def hard_pseudo_labels(
    points, classes, n_frames: int, cfg: GIMConfig = GIMConfig(), apex: bool = True
) -> PseudoLabels:
    """Hard windows ``[p − 5, p + 5)`` (MaE) / ``[p − 3, p + 3)`` (ME) set to 1: the hard pseudo-labelling the paper
    replaces by GIM; used at epoch 0 of the released training (``_init3``) and, at every epoch, as the hard-label
    baseline.

    With ``apex=True`` the apex-branch positives are ``p ± apex_half`` (the hard-label baseline's stand-in for
    the pseudo-apex; the released code has no apex targets in this stage).

    Paper location: "hard pseudo-labeling", the baseline GIM replaces, is named in the abstracts of the ICLR 2025
    paper and arXiv 2511.16952; § / Eq. not confirmed. Window sizes: released code (``..._init3``).
    """
    p, c, order = _prepare(points, classes, n_frames)
    soft = torch.zeros(n_frames, 2)
    ap = torch.zeros(n_frames, 2)
    wins = np.zeros((len(p), 2), dtype=np.int64)
    for i, (pi, ci) in enumerate(zip(p.tolist(), c.tolist(), strict=True)):
        h = cfg.hard_half[ci]
        s, e = _span(pi - h, pi + h - 1, n_frames)
        soft[s:e, ci] = 1.0
        wins[i] = (s, e - 1)
        if apex:
            a = cfg.apex_half[ci]
            ap[max(pi - a, 0) : min(pi + a + 1, n_frames), ci] = 1.0
    return PseudoLabels(soft, ap, wins, p.copy(), c, "hard", order)


@torch.no_grad()
def medium_pseudo_labels(features, points, classes, itr: int) -> PseudoLabels:
    """Epochs 1–4: Gaussian of attention features around p on ``[p − 2h, p + 2h]`` (MaE) / ``[p − h, p + h]`` (ME),
    h = 1 for itr < 3 else 2 (the released code's warm-up stage ``_medium``, before GIM starts).

    Paper location: none found — this warm-up stage is known from the released code only (the abstracts do not
    mention it; the method text could not be read)."""
    g = torch.as_tensor(features, dtype=torch.float32).detach()
    T = g.shape[0]
    p, c, order = _prepare(points, classes, T)
    h = 1 if itr < 3 else 2
    soft = torch.zeros(T, 2)
    wins = np.zeros((len(p), 2), dtype=np.int64)
    for i, (pi, ci) in enumerate(zip(p.tolist(), c.tolist(), strict=True)):
        r = 2 * h if ci == MAE else h
        s, e = _span(pi - r, pi + r, T)
        soft[s:e, ci] = _gaussian(g, pi, s, e)
        wins[i] = (s, e - 1)
    return PseudoLabels(soft, torch.zeros(T, 2), wins, p.copy(), c, "medium", order)


@torch.no_grad()
def gim_pseudo_labels(
    intensity, features, points, classes, itr: int = 5, cfg: GIMConfig = GIMConfig()
) -> PseudoLabels:
    """GIM soft pseudo-labels for one video (paper: the GIM module — pseudo-apex detection, duration estimation,
    instance-level Gaussian; released code: ``_adaptive``).

    Paper location: GIM module — "detecting the pseudo-apex frame around each point label, estimating the
    duration, and constructing an instance-level Gaussian distribution" that assigns soft pseudo-labels
    (arXiv 2511.16952, abstract; the ICLR 2025 abstract names the same three steps); the section and the
    equations of the Gaussian and of the pseudo-apex search are not confirmed. Step 5 (apex-branch positives)
    follows the abstract's "class-aware apex classification branch ... based on their pseudo-apex frames"; its
    ±2 / ±1 windows are the released code's.

    ``intensity``: ``(T,)`` predicted class-agnostic intensity a_t in [0, 1]; ``features``: ``(T, C)`` attention
    features g_t; ``points``/``classes``: ``(n,)`` labelled frames and their classes; ``itr``: epoch (≥ gim_start).
    """
    a = torch.as_tensor(intensity, dtype=torch.float32).detach().reshape(-1)
    g = torch.as_tensor(features, dtype=torch.float32).detach()
    T = a.shape[0]
    if g.ndim != 2 or g.shape[0] != T:
        raise ValueError(f"features must have shape (T={T}, C), got {tuple(g.shape)}")
    if not torch.isfinite(a).all() or not torch.isfinite(g).all():
        raise ValueError("intensity and features must be finite (got NaN or inf)")
    p, c, order = _prepare(points, classes, T)
    tau = reliability_threshold(itr, cfg)
    soft = torch.zeros(T, 2)
    ap = torch.zeros(T, 2)
    wins = np.zeros((len(p), 2), dtype=np.int64)
    centres = np.zeros(len(p), dtype=np.int64)
    for i, (pi, ci) in enumerate(zip(p.tolist(), c.tolist(), strict=True)):
        k = cfg.k[ci]
        s, e = _span(pi - k // 4, pi + k // 4, T)
        apex = s + int(torch.argmax(a[s:e]))  # 1. pseudo-apex
        s, e = _span(apex - k // 2, apex + k // 2, T)
        n_rel = int((a[s:e] > tau).sum())  # 2.–3. reliable frames → duration
        w = gim_duration(n_rel, ci, cfg) // 2
        s, e = _span(apex - w, apex + w, T)
        soft[s:e, ci] = _gaussian(g, apex, s, e)  # 4. Gaussian centred on the pseudo-apex
        r = cfg.apex_half[ci]
        ap[max(apex - r, 0) : min(apex + r + 1, T), ci] = 1.0  # 5. apex positives
        wins[i] = (s, e - 1)
        centres[i] = apex
    return PseudoLabels(soft, ap, wins, centres, c, "gim", order)


def pseudo_labels_for_epoch(
    itr: int, intensity, features, points, classes, mode: str = "gim", cfg: GIMConfig = GIMConfig()
) -> PseudoLabels:
    """The training schedule. ``mode='gim'``: hard (itr 0) → medium (1..4) → GIM (≥ 5), as in the released
    training (``model.py::CO2.criterion``); ``mode='hard'``: hard windows at every epoch (the hard-label
    baseline).

    Paper location: not confirmed — the abstracts do not state the epoch schedule; it is the released code's."""
    T = int(torch.as_tensor(intensity).reshape(-1).shape[0])
    if mode == "hard" or itr < 1:
        return hard_pseudo_labels(points, classes, T, cfg)
    if mode != "gim":
        raise ValueError(f"mode must be 'gim' or 'hard', got {mode!r}")
    if itr < cfg.gim_start:
        return medium_pseudo_labels(features, points, classes, itr)
    return gim_pseudo_labels(intensity, features, points, classes, itr, cfg)
