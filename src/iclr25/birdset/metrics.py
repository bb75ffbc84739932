"""BirdSet evaluation metrics on 5-s soundscape windows (paper §4 "Evaluation", Appendix metrics).

* **cmAP** — class-wise mean average precision: per-class AP (torchmetrics ``MultilabelAveragePrecision``,
  exact, ``thresholds=None``; its arithmetic vectorised over classes, equal bit for bit) averaged over the classes that have at least one positive window. Classes without
  a positive have an undefined AP and are excluded, as in the benchmark (torchmetrics 1.2, the version the
  paper used, returned NaN for them; current torchmetrics returns 0 and would include it — we do not).
* **cmAP5** — the same mean over classes with at least 5 positive windows (NaN when there is none). The
  released ``cmAP5`` masks the macro AP (a scalar) instead of the per-class APs and so equals cmAP;
  ``cmap5(..., mask_after_macro=True)`` gives that value.
* **pcmAP** — padded cmAP of BirdCLEF 2023: 5 all-positive rows appended to scores and labels, macro AP.
* **AUROC** — torchmetrics ``MultilabelAUROC(average="macro")`` as called by the benchmark code; a class without
  positives contributes 0 there (official behaviour). ``exclude_empty=True`` drops those classes instead.
* **T1-Acc / T3-Acc** — a window is correct when one of its top-k classes is labelled; windows without any
  label (no-call windows) are removed from numerator and denominator (``include_nocalls=False``). With
  ``include_nocalls=True`` a no-call window is correct when all its top-k scores are below 0.5 (released rule).
* **mAP** — micro-averaged AP over all (window, class) pairs.

MT / LT evaluation restricts logits and labels to the test set's classes (:func:`apply_class_mask`) before
every metric.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import torch

__all__ = [
    "average_precision_per_class",
    "cmap",
    "cmap5",
    "pcmap",
    "auroc",
    "topk_accuracy",
    "micro_map",
    "class_mask",
    "apply_class_mask",
    "evaluate_scores",
]


def _as_tensors(scores, targets, name_s: str = "scores", name_t: str = "targets"):
    s = torch.as_tensor(np.asarray(scores) if not torch.is_tensor(scores) else scores).float().cpu()
    t = torch.as_tensor(np.asarray(targets) if not torch.is_tensor(targets) else targets).cpu()
    if s.ndim != 2:
        raise ValueError(f"{name_s} must be 2-D (windows, classes), got shape {tuple(s.shape)}")
    if t.shape != s.shape:
        raise ValueError(
            f"{name_t} must have the shape of {name_s} {tuple(s.shape)} (one multi-hot row per window, one "
            f"column per class of the model), got {tuple(t.shape)}"
        )
    if s.shape[0] == 0:
        raise ValueError(f"{name_s} must hold at least one window, got shape {tuple(s.shape)}")
    if not torch.isfinite(s).all():
        raise ValueError(f"{name_s} must be finite, got {int((~torch.isfinite(s)).sum())} NaN/inf entries")
    tf = t.float()
    if not ((tf == 0) | (tf == 1)).all():
        raise ValueError(
            f"{name_t} must be multi-hot (0/1 entries), got values {torch.unique(tf)[:6].tolist()}"
        )
    return s, t.long()


def _normalize_like_torchmetrics(s: torch.Tensor) -> tuple[torch.Tensor, float]:
    """torchmetrics' multilabel input rule: scores outside [0, 1] are taken as logits and passed through sigmoid.

    Returns the scores torchmetrics ranks and the value an appended all-ones padding row takes after the same rule
    (1, or sigmoid(1) when the scores were logits)."""
    if bool(((s >= 0) & (s <= 1)).all()):
        return s, 1.0
    return s.sigmoid(), float(torch.tensor(1.0).sigmoid())


def _sort_classes(s: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each class's scores high → low and its labels in that order, as ``(classes, windows)`` rows."""
    vals, order = torch.sort(s.T.contiguous(), dim=1, descending=True)
    return vals, t.T.contiguous().gather(1, order)


def _insert_padding(vals: torch.Tensor, ts: torch.Tensor, value: float, padding: int):
    """The sorted rows with ``padding`` positive windows of score ``value`` merged in (no re-sort): they go after
    the scores above ``value`` (and join the tie group of scores equal to it, as a sort would)."""
    c, n = vals.shape
    above = (vals > value).sum(1, keepdim=True)  # (c, 1)
    j = torch.arange(n + padding).unsqueeze(0)  # (1, n + padding)
    idx = torch.where(j < above, j, torch.where(j < above + padding, n + j - above, j - padding))
    vals = torch.cat([vals, vals.new_full((c, padding), value)], 1).gather(1, idx)
    ts = torch.cat([ts, ts.new_ones(c, padding)], 1).gather(1, idx)
    return vals, ts


def _ap_sorted(vals: torch.Tensor, ts: torch.Tensor) -> torch.Tensor:
    """Per-class exact AP (``thresholds=None``) from :func:`_sort_classes` rows. Shape ``(classes,)``, float64.

    The arithmetic is torchmetrics' ``binary_average_precision`` (float32 tie-grouped TP/FP counts at the distinct
    thresholds, precision ``tp / (tp + fp)``, recall ``tp / tp[-1]``, ``AP = Σ (R_n − R_{n−1}) P_n`` summed per
    class in torchmetrics' order), vectorised over classes instead of its per-class Python loop, so the values are
    torchmetrics' own (bit for bit in the tests). Classes without a positive come back NaN.
    """
    c, n = vals.shape
    tp = ts.float().cumsum(1)  # (c, n) true positives at each rank (exact integers)
    fp = 1 + torch.arange(n).unsqueeze(0) - tp
    end = torch.ones(c, n, dtype=torch.bool)  # last rank of each tie group = one threshold
    end[:, :-1] = vals[:, 1:] != vals[:, :-1]
    tp_e, fp_e = tp[end], fp[end]  # flat, class by class, high → low threshold
    counts = end.sum(1)
    pos = tp[:, -1]  # (c,) positives per class
    prec = tp_e / (tp_e + fp_e)
    rec = tp_e / pos.repeat_interleave(counts)
    rec_prev = torch.cat([rec.new_zeros(1), rec[:-1]])
    rec_prev[torch.cumsum(counts, 0) - counts] = 0.0  # R_0 = 0 at every class's highest threshold
    terms = (rec_prev - rec) * prec  # ≤ 0; summed low → high threshold, as torchmetrics does
    ap = torch.stack([-torch.sum(seg.flip(0)) for seg in torch.split(terms, counts.tolist())]).double()
    ap[pos == 0] = float("nan")
    return ap


def _ap_and_padded_ap(s: torch.Tensor, t: torch.Tensor, padding: int | None):
    """Per-class AP, and (``padding`` given) the per-class AP of the padded scores, from one sort."""
    s, pad_value = _normalize_like_torchmetrics(s)
    vals, ts = _sort_classes(s, t)
    ap = _ap_sorted(vals, ts)
    return ap, (None if padding is None else _ap_sorted(*_insert_padding(vals, ts, pad_value, padding)))


def average_precision_per_class(scores, targets) -> torch.Tensor:
    """Exact per-class AP (torchmetrics' ``MultilabelAveragePrecision(average=None, thresholds=None)``), NaN for
    classes with no positive window. Shape ``(classes,)``."""
    s, t = _as_tensors(scores, targets)
    return _ap_and_padded_ap(s, t, None)[0]


def _nanmean(x: torch.Tensor) -> float:
    x = x[~torch.isnan(x)]
    return float(x.mean()) if x.numel() else float("nan")


def _cmap5_from_ap(
    ap: torch.Tensor, positives: torch.Tensor, min_positives: int, mask_after_macro: bool
) -> float:
    enough = positives >= min_positives
    if mask_after_macro:  # the released value: the macro AP (a scalar) kept if any class has enough positives
        return _nanmean(ap) if bool(enough.any()) else float("nan")
    return _nanmean(torch.where(enough, ap, torch.full_like(ap, float("nan"))))


def _check_min_positives(min_positives) -> None:
    if isinstance(min_positives, bool) or not isinstance(min_positives, int) or min_positives < 1:
        raise ValueError(f"min_positives must be an int >= 1, got {min_positives!r}")


def _check_padding(padding) -> None:
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise ValueError(f"padding must be an int >= 0, got {padding!r}")


def cmap(scores, targets) -> float:
    """Class-wise mean AP over classes with ≥ 1 positive window (the benchmark's main metric)."""
    return _nanmean(average_precision_per_class(scores, targets))


def cmap5(scores, targets, min_positives: int = 5, mask_after_macro: bool = False) -> float:
    """cmAP over classes with ≥ ``min_positives`` (5) positive windows; NaN when no class has that many.

    ``mask_after_macro=True`` gives the released code's value instead: it masks the *macro* AP (one scalar
    broadcast over the classes) rather than the per-class APs, so the result is cmAP whenever any class has
    ≥ ``min_positives`` positives and NaN otherwise (its ``cmAP5`` equals ``cmAP``).
    """
    _check_min_positives(min_positives)
    s, t = _as_tensors(scores, targets)
    ap = _ap_and_padded_ap(s, t, None)[0]
    return _cmap5_from_ap(ap, t.sum(0), min_positives, mask_after_macro)


def pcmap(scores, targets, padding: int = 5) -> float:
    """Padded cmAP (BirdCLEF 2023): ``padding`` all-ones rows appended to scores and labels, macro AP."""
    _check_padding(padding)
    s, t = _as_tensors(scores, targets)
    s = torch.cat([s, torch.ones(padding, s.shape[1])])
    t = torch.cat([t, torch.ones(padding, t.shape[1], dtype=t.dtype)])
    return _nanmean(_ap_and_padded_ap(s, t, None)[0])


def auroc(scores, targets, exclude_empty: bool = False) -> float:
    """Macro AUROC by torchmetrics ``MultilabelAUROC(average="macro")`` (the benchmark's call).

    A class without positive windows enters torchmetrics' mean as 0 (official behaviour);
    ``exclude_empty=True`` averages over classes with both positives and negatives instead.
    """
    from torchmetrics.functional.classification import multilabel_auroc

    if not isinstance(exclude_empty, bool):
        raise ValueError(f"exclude_empty must be a bool, got {exclude_empty!r}")
    s, t = _as_tensors(scores, targets)
    if s.shape[1] < 2:
        raise ValueError(
            f"auroc is the multi-label macro AUROC and needs scores/targets with >= 2 classes (columns), got "
            f"{s.shape[1]}; for a single class use a binary AUROC (e.g. sklearn.metrics.roc_auc_score)"
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not exclude_empty:
            return float(multilabel_auroc(s, t, num_labels=s.shape[1], average="macro", thresholds=None))
        per = multilabel_auroc(s, t, num_labels=s.shape[1], average=None, thresholds=None).double()
    pos = t.sum(0)
    keep = (pos > 0) & (pos < t.shape[0])
    return float(per[keep].mean()) if keep.any() else float("nan")


def topk_accuracy(
    scores, targets, k: int = 1, include_nocalls: bool = False, threshold: float = 0.5
) -> float:
    """Top-k accuracy: a window counts as correct when any of its k highest-scoring classes is labelled.

    With ``include_nocalls=False`` (benchmark default) windows without labels are dropped; NaN if none is left.
    With ``include_nocalls=True`` they stay in the denominator and, as in the released ``TopKAccuracy``, a no-call
    window counts as correct when all of its top-k scores are below ``threshold`` (0.5 on sigmoid scores).
    """
    s, t = _as_tensors(scores, targets)
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= s.shape[1]:
        raise ValueError(f"k must be an int in [1, {s.shape[1]}], got {k!r}")
    if not isinstance(include_nocalls, bool):
        raise ValueError(f"include_nocalls must be a bool, got {include_nocalls!r}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
        raise ValueError(f"threshold must be a finite number (a score), got {threshold!r}")
    nocall = t.sum(1) == 0
    if not include_nocalls:
        s, t, nocall = s[~nocall], t[~nocall], nocall[~nocall]
    if s.shape[0] == 0:
        return float("nan")
    top_vals, top = s.topk(k, dim=1)  # (windows, k)
    correct = t.gather(1, top).sum(1) > 0
    if include_nocalls:
        correct = correct | (nocall & (top_vals < threshold).all(1))
    return float(correct.float().mean())


def micro_map(scores, targets) -> float:
    """Micro-averaged AP over all (window, class) pairs."""
    from torchmetrics.functional.classification import binary_average_precision

    s, t = _as_tensors(scores, targets)
    if t.sum() == 0:
        return float("nan")
    return float(binary_average_precision(s.flatten(), t.flatten(), thresholds=None))


def class_mask(model_labels: Sequence[str], test_labels: Sequence[str]) -> torch.Tensor:
    """Positions of the test set's label codes (e.g. eBird codes) in the model's label list.

    ``logits[:, class_mask(...)]`` has one column per test class, in the test set's order. Raises a
    ``ValueError`` naming the codes the model does not know.
    """
    for name, xs in (("model_labels", model_labels), ("test_labels", test_labels)):
        if isinstance(xs, str) or not hasattr(xs, "__iter__"):
            raise ValueError(f"{name} must be a list of label codes, got {xs!r:.60}")
    model_labels = [str(x) for x in model_labels]
    test_labels = [str(x) for x in test_labels]
    if len(set(model_labels)) != len(model_labels):
        raise ValueError("model_labels must be unique, got duplicated codes")
    if not test_labels:
        raise ValueError("test_labels is empty; a class mask needs at least one test class")
    if len(set(test_labels)) != len(test_labels):
        raise ValueError("test_labels must be unique, got duplicated codes")
    index = {c: i for i, c in enumerate(model_labels)}
    missing = [c for c in test_labels if c not in index]
    if missing:
        raise ValueError(
            f"test_labels holds {len(missing)} code(s) not in model_labels (e.g. {missing[:5]}); a class mask "
            "needs every test class among the model's outputs"
        )
    return torch.tensor([index[c] for c in test_labels], dtype=torch.long)


def apply_class_mask(logits, targets, mask) -> tuple[torch.Tensor, torch.Tensor]:
    """Restrict ``logits`` (windows, K') to the test classes; ``targets`` may be (windows, K) or (windows, K')."""
    logits = torch.as_tensor(logits)
    targets = torch.as_tensor(targets)
    mask = torch.as_tensor(mask)
    if mask.dtype.is_floating_point or mask.dtype == torch.bool:
        raise ValueError(
            f"mask must hold integer class indices (class_mask's output), got dtype {mask.dtype}"
        )
    mask = mask.long()
    if targets.ndim != 2 or logits.ndim != 2 or targets.shape[0] != logits.shape[0]:
        raise ValueError(
            f"targets must be 2-D (windows, classes) with logits' {logits.shape[0] if logits.ndim else 0} windows, "
            f"got logits {tuple(logits.shape)} and targets {tuple(targets.shape)}"
        )
    if logits.ndim != 2 or mask.ndim != 1:
        raise ValueError(
            f"logits must be 2-D and mask 1-D, got {tuple(logits.shape)} and {tuple(mask.shape)}"
        )
    if mask.numel() and (mask.min() < 0 or mask.max() >= logits.shape[1]):
        raise ValueError(
            f"mask indices must lie in [0, {logits.shape[1]}), got range [{mask.min()}, {mask.max()}]"
        )
    if targets.shape[1] == logits.shape[1] and targets.shape[1] != mask.numel():
        targets = targets[:, mask]
    if targets.shape[1] != mask.numel():
        raise ValueError(
            f"targets has {targets.shape[1]} classes; expected the test set's {mask.numel()} classes or the "
            f"model's {logits.shape[1]}"
        )
    return logits[:, mask], targets


def evaluate_scores(logits, targets, mask=None, sigmoid: bool = True) -> dict[str, float]:
    """All benchmark metrics for one test set. ``mask``: class mask for MT/LT models (applied first).

    The per-class APs are computed once, from one sort per class: cmAP and cmAP5 share them, and pcmAP's padded
    curves merge the 5 padding rows into the same sorted scores (equal to :func:`cmap`, :func:`cmap5` and
    :func:`pcmap` called one by one, bit for bit).
    """
    if not isinstance(sigmoid, bool):
        raise ValueError(f"sigmoid must be a bool, got {sigmoid!r}")
    logits = torch.as_tensor(logits).float()
    targets = torch.as_tensor(targets)
    if mask is not None:
        logits, targets = apply_class_mask(logits, targets, mask)
    s, t = _as_tensors(torch.sigmoid(logits) if sigmoid else logits, targets)
    ap, ap_padded = _ap_and_padded_ap(s, t, 5)
    return {
        "cmAP": _nanmean(ap),
        "cmAP5": _cmap5_from_ap(ap, t.sum(0), 5, False),
        "pcmAP": _nanmean(ap_padded),
        "mAP": micro_map(s, t),
        "AUROC": auroc(s, t),
        "T1-Acc": topk_accuracy(s, t, 1),
        "T3-Acc": topk_accuracy(s, t, min(3, s.shape[1])),
    }
