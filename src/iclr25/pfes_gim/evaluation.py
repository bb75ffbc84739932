"""Spotting evaluation: TP/FP at IoU ≥ 0.5, F1 = 2TP / (TP + FP + GT), and leave-one-subject-out splits.

The paper's protocol (ICLR 2025; arXiv 2511.16952): F1 at IoU ≥ 0.5 for macro-expressions, micro-expressions and
overall, under leave-one-subject-out on SAMM-LV and CAS(ME)²; the counting is the released code's
(``eval/eval_detection.py::compute_average_precision_detection``, which despite its name counts TP/FP).
Paper location: the abstracts name the datasets (SAMM-LV, CAS(ME)², and CAS(ME)³ in arXiv 2511.16952); the
section giving the metric and protocol is not confirmed.

Per class, predictions are taken in decreasing score; a prediction is a true positive when the
highest-IoU *unmatched* ground-truth interval of the same class in the same video has IoU ≥ 0.5, otherwise a
false positive. Counts are summed over videos (and subjects); ``F1 = 2TP/(TP+FP+GT)`` per class and overall
(sums over both classes).

Two IoU conventions (both intervals given as inclusive frame indices):
* ``"frames"`` (default, MEGC): IoU of the frame sets, lengths ``end − start + 1``;
* ``"official"``: the released evaluation, which compares the GT's inclusive end with the prediction's
  *exclusive* end (``end + 1``) as continuous intervals with lengths ``end − start``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from .data import CLASS_NAMES, Video, check_segments


def _iou(pred: np.ndarray, gt: np.ndarray, convention: str) -> np.ndarray:
    p = np.asarray(pred, dtype=np.float64).reshape(-1, 2)
    g = np.asarray(gt, dtype=np.float64).reshape(-1, 2)
    if convention == "frames":
        off = 1.0
    elif convention == "official":
        p = p + np.array([0.0, 1.0])  # exclusive prediction end
        off = 0.0
    else:
        raise ValueError(f"convention must be 'frames' or 'official', got {convention!r}")
    inter = np.clip(
        np.minimum(p[:, None, 1], g[None, :, 1]) - np.maximum(p[:, None, 0], g[None, :, 0]) + off, 0, None
    )
    union = (p[:, 1] - p[:, 0] + off)[:, None] + (g[:, 1] - g[:, 0] + off)[None, :] - inter
    return np.where(union > 0, inter / np.where(union > 0, union, 1), 0.0)


@dataclass
class SpottingCounts:
    """TP, FP and number of GT instances per class (0 = MaE, 1 = ME); add them to pool videos or subjects."""

    tp: np.ndarray = field(default_factory=lambda: np.zeros(2, dtype=np.int64))
    fp: np.ndarray = field(default_factory=lambda: np.zeros(2, dtype=np.int64))
    n_gt: np.ndarray = field(default_factory=lambda: np.zeros(2, dtype=np.int64))

    def __add__(self, other: SpottingCounts) -> SpottingCounts:
        return SpottingCounts(self.tp + other.tp, self.fp + other.fp, self.n_gt + other.n_gt)

    @staticmethod
    def _f1(tp, fp, n_gt) -> float:
        den = tp + fp + n_gt
        return float(2 * tp / den) if den > 0 else float("nan")

    def f1(self, cls: int | None = None) -> float:
        """``2TP / (TP + FP + GT)`` for one class, or overall (sums over classes) when ``cls`` is None."""
        if cls is None:
            return self._f1(self.tp.sum(), self.fp.sum(), self.n_gt.sum())
        return self._f1(self.tp[cls], self.fp[cls], self.n_gt[cls])

    def summary(self) -> dict[str, float]:
        d = {"f1": self.f1()}
        for c, nm in enumerate(CLASS_NAMES):
            d[f"f1_{nm}"] = self.f1(c)
            d[f"tp_{nm}"] = int(self.tp[c])
            d[f"fp_{nm}"] = int(self.fp[c])
            d[f"gt_{nm}"] = int(self.n_gt[c])
        return d


def video_counts(
    detections: np.ndarray,
    gt_segments: np.ndarray,
    gt_classes: np.ndarray,
    iou_threshold: float = 0.5,
    convention: str = "frames",
) -> SpottingCounts:
    """Counts for one video. ``detections`` ``(n, 4)`` ``[start, end, class, score]``; GT ``(m, 2)`` + ``(m,)``."""
    if not 0 < iou_threshold <= 1:
        raise ValueError(f"iou_threshold must be in (0, 1], got {iou_threshold}")
    det = np.asarray(detections, dtype=np.float64).reshape(-1, 4)
    if not np.isfinite(det).all():
        raise ValueError("detections contain NaN or inf values")
    check_segments(det[:, :2], name="detections")
    gts = check_segments(gt_segments, name="gt_segments")
    gcl = np.asarray(gt_classes, dtype=np.int64).reshape(-1)
    if gcl.shape[0] != gts.shape[0]:
        raise ValueError(f"gt_classes needs one entry per GT segment ({gts.shape[0]}), got {gcl.shape[0]}")
    out = SpottingCounts()
    for c in (0, 1):
        p = det[det[:, 2] == c]
        p = p[np.argsort(-p[:, 3], kind="stable")]
        g = gts[gcl == c]
        out.n_gt[c] = len(g)
        if len(p) == 0:
            continue
        if len(g) == 0:
            out.fp[c] = len(p)
            continue
        iou = _iou(p[:, :2], g, convention)  # (n_pred, n_gt)
        free = np.ones(len(g), dtype=bool)
        for i in range(len(p)):  # greedy by score: a few predictions per video
            cand = np.where(free, iou[i], -1.0)
            j = int(np.argmax(cand))
            if cand[j] >= iou_threshold:
                free[j] = False
                out.tp[c] += 1
            else:
                out.fp[c] += 1
    return out


def spotting_f1(
    detections: Sequence[np.ndarray],
    gt_segments: Sequence[np.ndarray],
    gt_classes: Sequence[np.ndarray],
    iou_threshold: float = 0.5,
    convention: str = "frames",
) -> dict[str, float]:
    """F1 at IoU ≥ ``iou_threshold`` pooled over videos: ``{'f1', 'f1_MaE', 'f1_ME', 'tp_MaE', ...}``."""
    if not (len(detections) == len(gt_segments) == len(gt_classes)):
        raise ValueError(
            f"detections, gt_segments and gt_classes need one entry per video, got {len(detections)}, "
            f"{len(gt_segments)}, {len(gt_classes)}"
        )
    total = SpottingCounts()
    for d, s, c in zip(detections, gt_segments, gt_classes, strict=True):
        total = total + video_counts(d, s, c, iou_threshold, convention)
    return total.summary()


def loso_splits(subjects: Sequence[str]) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """Leave-one-subject-out: ``[(subject, train_idx, test_idx)]`` over the distinct subjects in order."""
    s = np.asarray([str(x) for x in subjects])
    if len(s) == 0:
        raise ValueError("subjects must not be empty")
    uniq = list(dict.fromkeys(s.tolist()))
    if len(uniq) < 2:
        raise ValueError(f"leave-one-subject-out needs >= 2 subjects, got {uniq}")
    return [(u, np.nonzero(s != u)[0], np.nonzero(s == u)[0]) for u in uniq]


def _pearson(x: np.ndarray, y: np.ndarray) -> float:
    if x.std() == 0 or y.std() == 0:
        return 0.0
    return float(np.corrcoef(x, y)[0, 1])


def pseudo_label_scores(video: Video, pl, margin: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Per instance: Pearson r of the pseudo-label with the true intensity on [s − margin, e + margin], and IoU
    of the labelled window with the true interval. Instances in ``pl`` order."""
    soft = pl.soft.numpy()
    T = video.n_frames
    rs, ious = [], []
    for row, idx in enumerate(pl.order):
        s, e = video.segments[idx]
        c = int(video.classes[idx])
        lo, hi = max(0, s - margin), min(T, e + margin + 1)
        rs.append(_pearson(soft[lo:hi, c], video.intensity[lo:hi]))
        ws, we = pl.windows[row]
        inter = max(0, min(we, e) - max(ws, s) + 1)
        ious.append(inter / ((we - ws + 1) + (e - s + 1) - inter))
    return np.asarray(rs), np.asarray(ious)
