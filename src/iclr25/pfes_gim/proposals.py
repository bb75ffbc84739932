"""Proposal generation from the two branches: multi-threshold grouping, outer-inner scores, soft-NMS, caps.

Paper (ICLR 2025; arXiv 2511.16952), inference: the two branches work independently — the class-agnostic
intensity branch generates the expression proposals, the class-aware apex classification branch classifies them
as macro- or micro-expressions. The procedure and the dataset settings are the released code's
(``proposal_methods.py::multiple_threshold_hamnet`` and ``nms``; the scoring follows ``utils/wsad_utils.py``'s
``get_proposal_oic_2``, the closest surviving relative of the ``get_proposal_oic_3`` the release lacks).

Paper location: the independent use of the two branches at inference is stated in the abstract of arXiv
2511.16952 (https://arxiv.org/html/2511.16952); the inference section's number and any equation for the
proposal score are not confirmed. The thresholds θ, the outer-inner score, soft-NMS σ, caps and length limits
are the released code's only.

Detections are ``(n, 4)`` float arrays with columns ``[start, end, class, score]``; ``start``/``end`` are
inclusive frame indices, class 0 = MaE, 1 = ME.

For θ ∈ {0.2, …, 0.8}: consecutive frames with ``a_t > θ`` form a candidate. Score per class c (the
candidate is kept for c only if the apex branch fires at its intensity peak, ``q_c(apex) > 0.5``)::

    score = mean_inside(a) − mean_outside(a) + 0.2 · q_c(apex)

with the outside = 0.2·length margins on both sides. Per class: Gaussian soft-NMS (decay exp(−IoU²/0.3)),
length and score filters, then greedy NMS (IoU > 0.5 suppressed) keeping at most ``cap`` detections per
video. :data:`PROFILES` holds the dataset settings of the released code (CAS(ME)², SAMM-LV) and the one used
for the synthetic videos.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..common.fields import bounded, check_fields


@dataclass(frozen=True)
class DatasetProfile:
    """Post-processing settings. Lengths are frame counts (inclusive); the released code compares
    ``end − start + 1`` with an exclusive end, i.e. frame count + 1, so its "MaE 15–240" is 14–239 frames here."""

    name: str
    mae_len: tuple[int, int] = bounded(lo=1, each=True, length=2)  # (min, max)
    me_len: tuple[int, int] = bounded(lo=1, each=True, length=2)
    score_thr: tuple[float, float]  # (MaE, ME)
    cap: tuple[int, int] = bounded(lo=0, each=True, length=2)  # max detections per video (MaE, ME)
    thetas: tuple[float, ...] = bounded(
        (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8), lo=0, hi=1, hi_open=True, each=True
    )
    outer_ratio: float = 0.2
    apex_thr: float = 0.5
    apex_bonus: float = 0.2
    soft_nms_sigma: float = bounded(0.3, lo=0, lo_open=True)
    nms_iou: float = bounded(0.5, lo=0, hi=1, lo_open=True)

    def __post_init__(self) -> None:
        check_fields(self)  # the bounds declared above (tuples element-wise); below: min <= max
        for nm in ("mae_len", "me_len"):
            lo, hi = getattr(self, nm)
            if not lo <= hi:
                raise ValueError(f"{nm} must satisfy 1 <= min <= max, got {(lo, hi)}")

    def at_frame_rate(self, fps: float, reference_fps: float | None = None) -> DatasetProfile:
        """This profile for videos at ``fps`` frames per second; its length limits are frame counts at
        ``reference_fps`` (default: the CAS(ME)² rate the released limits are given at, 30 fps). Both limits
        of each class become ``round(x · fps / reference_fps)`` (at least 1 frame, max >= min)."""
        from dataclasses import replace

        from .pseudo_labels import REFERENCE_FPS, frame_scale, scale_frames

        sc = frame_scale(fps, REFERENCE_FPS if reference_fps is None else reference_fps)

        def lens(r: tuple[int, int]) -> tuple[int, int]:
            lo = scale_frames(r[0], sc, 1)
            return lo, max(lo, scale_frames(r[1], sc, 1))

        return replace(self, mae_len=lens(self.mae_len), me_len=lens(self.me_len))

    def with_thresholds(self, mae: float, me: float) -> DatasetProfile:
        from dataclasses import replace

        return replace(self, score_thr=(float(mae), float(me)))


PROFILES: dict[str, DatasetProfile] = {
    "CASME2": DatasetProfile("CASME2", mae_len=(14, 239), me_len=(8, 14), score_thr=(0.5, 0.5), cap=(8, 2)),
    "SAMM": DatasetProfile("SAMM", mae_len=(14, 239), me_len=(8, 14), score_thr=(0.4, 0.3), cap=(8, 8)),
    # synthetic videos: MaE 15–120 frames, ME 6–15 frames (lengths of the generator, with slack)
    "synthetic": DatasetProfile(
        "synthetic", mae_len=(10, 200), me_len=(4, 20), score_thr=(0.3, 0.3), cap=(8, 8)
    ),
}


def get_profile(profile: str | DatasetProfile, frame_rate: float | None = None) -> DatasetProfile:
    """A profile by name (or as given); with ``frame_rate`` its length limits rescaled to that rate
    (:meth:`DatasetProfile.at_frame_rate`, limits taken at 30 fps)."""
    if isinstance(profile, DatasetProfile):
        prof = profile
    elif not isinstance(profile, str) or profile not in PROFILES:
        raise ValueError(f"profile must be a DatasetProfile or one of {sorted(PROFILES)}, got {profile!r}")
    else:
        prof = PROFILES[profile]
    return prof if frame_rate is None else prof.at_frame_rate(frame_rate)


def _intervals(x, name: str) -> np.ndarray:
    """``x`` as ``(n, 2)`` finite inclusive intervals with start <= end (``ValueError`` naming ``name``)."""
    a = np.asarray(x, dtype=np.float64)
    if a.size % 2 or (a.ndim == 2 and a.shape[1] != 2) or a.ndim > 2:
        raise ValueError(f"{name} must have shape (n, 2) [start, end], got {a.shape}")
    a = a.reshape(-1, 2)
    if not np.isfinite(a).all():
        raise ValueError(f"{name} contain NaN or inf values")
    bad = a[:, 0] > a[:, 1]
    if bad.any():
        raise ValueError(f"{name}: start must be <= end (inclusive frames), got rows {a[bad].tolist()}")
    return a


def _detections(dets, name: str = "dets") -> np.ndarray:
    """``(n, 4)`` ``[start, end, class, score]``, finite, start <= end."""
    d = np.asarray(dets, dtype=np.float64)
    if d.size and (d.ndim != 2 or d.shape[1] != 4):
        raise ValueError(f"{name} must have shape (n, 4) [start, end, class, score], got {d.shape}")
    d = d.reshape(-1, 4)
    if not np.isfinite(d).all():
        raise ValueError(f"{name} contain NaN or inf values")
    _intervals(d[:, :2], name)
    return d


def interval_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pairwise IoU of inclusive frame intervals: ``a`` ``(n, 2)``, ``b`` ``(m, 2)`` → ``(n, m)``."""
    a = _intervals(a, "a")
    b = _intervals(b, "b")
    inter = np.minimum(a[:, None, 1], b[None, :, 1]) - np.maximum(a[:, None, 0], b[None, :, 0]) + 1
    inter = np.clip(inter, 0, None)
    union = (a[:, 1] - a[:, 0] + 1)[:, None] + (b[:, 1] - b[:, 0] + 1)[None, :] - inter
    return inter / union


def candidates(
    intensity: np.ndarray, apex: np.ndarray, profile: str | DatasetProfile = "CASME2"
) -> np.ndarray:
    """All multi-threshold candidates with their per-class scores (before NMS): ``(n, 4)`` detections."""
    prof = get_profile(profile)
    a = np.asarray(intensity, dtype=np.float64).reshape(-1)
    q = np.asarray(apex, dtype=np.float64).reshape(len(a), 2)
    if len(a) == 0:
        raise ValueError("intensity must hold at least one frame (empty video)")
    if not (np.isfinite(a).all() and np.isfinite(q).all()):
        raise ValueError("intensity and apex scores must be finite (got NaN or inf)")
    T = len(a)
    cs = np.concatenate([[0.0], np.cumsum(a)])
    out = []
    for theta in prof.thetas:
        m = np.concatenate([[0], (a > theta).astype(np.int8), [0]])
        d = np.diff(m)
        s = np.nonzero(d == 1)[0]
        e = np.nonzero(d == -1)[0] - 1  # inclusive end
        if len(s) == 0:
            continue
        L = e - s + 1
        inner = (cs[e + 1] - cs[s]) / L
        os_ = np.maximum(0, (s - prof.outer_ratio * L).astype(np.int64))
        oe = np.minimum(T - 1, (e + prof.outer_ratio * L).astype(np.int64))
        n_out = (s - os_) + (oe - e)
        outer_sum = (cs[s] - cs[os_]) + (cs[oe + 1] - cs[e + 1])
        outer = np.where(n_out > 0, outer_sum / np.maximum(n_out, 1), 0.0)
        # argmax of a inside each run (first maximum), vectorised with reduceat
        run_id = np.cumsum(d[:T] == 1) - 1  # run index of every frame (valid where a > θ)
        inside = m[1:-1].astype(bool)
        idx = np.nonzero(inside)[0]
        rmax = np.maximum.reduceat(a[idx], np.searchsorted(idx, s))
        is_max = a[idx] == rmax[run_id[idx]]
        first = np.full(len(s), T, dtype=np.int64)
        np.minimum.at(first, run_id[idx][is_max], idx[is_max])
        for c in (0, 1):
            qa = q[first, c]
            keep = qa > prof.apex_thr
            sc = inner - outer + prof.apex_bonus * qa
            if keep.any():
                out.append(np.stack([s[keep], e[keep], np.full(keep.sum(), c), sc[keep]], 1))
    return np.concatenate(out, 0) if out else np.zeros((0, 4))


def soft_nms(dets: np.ndarray, sigma: float = 0.3) -> np.ndarray:
    """Gaussian soft-NMS (Bodla et al., 2017) on one class: score_j ← score_j · exp(−IoU(i, j)² / σ)."""
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite number > 0, got {sigma!r}")
    d = _detections(dets).copy()
    out = []
    while len(d):
        i = int(np.argmax(d[:, 3]))
        top = d[i]
        out.append(top)
        d = np.delete(d, i, axis=0)
        if len(d):
            iou = interval_iou(top[None, :2], d[:, :2])[0]
            d[:, 3] *= np.exp(-(iou**2) / sigma)
    return np.stack(out) if out else np.zeros((0, 4))


def nms(dets: np.ndarray, iou_thr: float = 0.5, cap: int | None = None) -> np.ndarray:
    """Greedy NMS on one class: drop any detection with IoU > ``iou_thr`` to a kept one; keep at most ``cap``."""
    if not (isinstance(iou_thr, (int, float)) and not isinstance(iou_thr, bool) and 0 <= iou_thr <= 1):
        raise ValueError(f"iou_thr must be a number in [0, 1], got {iou_thr!r}")
    if cap is not None and (not isinstance(cap, (int, np.integer)) or isinstance(cap, bool) or cap < 0):
        raise ValueError(f"cap must be None or an int >= 0, got {cap!r}")
    d = _detections(dets)
    d = d[np.argsort(-d[:, 3], kind="stable")]
    keep: list[int] = []
    for i in range(len(d)):
        if cap is not None and len(keep) >= cap:
            break
        if keep and (interval_iou(d[i : i + 1, :2], d[keep, :2])[0] > iou_thr).any():
            continue
        keep.append(i)
    return d[keep]


def generate_proposals(intensity, apex, profile: str | DatasetProfile = "CASME2") -> np.ndarray:
    """Final detections of one video: ``(n, 4)`` ``[start, end, class, score]`` sorted by score per class.

    Paper location: inference with the two branches used independently (arXiv 2511.16952, abstract); § not
    confirmed. Procedure: released code, ``proposal_methods.py::multiple_threshold_hamnet``."""
    prof = get_profile(profile)
    cand = candidates(intensity, apex, prof)
    out = []
    for c in (0, 1):
        d = soft_nms(cand[cand[:, 2] == c], prof.soft_nms_sigma)
        lo, hi = prof.mae_len if c == 0 else prof.me_len
        length = d[:, 1] - d[:, 0] + 1
        d = d[(length >= lo) & (length <= hi) & (d[:, 3] >= prof.score_thr[c])]
        out.append(nms(d, prof.nms_iou, prof.cap[c]))
    return np.concatenate(out, 0)
