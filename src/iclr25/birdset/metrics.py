"""BirdSet evaluation metrics on 5-s soundscape windows (paper §4 "Evaluation", Appendix metrics).

* **cmAP** — class-wise mean average precision: per-class AP (torchmetrics ``MultilabelAveragePrecision``,
  exact, ``thresholds=None``) averaged over the classes that have at least one positive window. Classes without
  a positive have an undefined AP and are excluded, as in the benchmark (torchmetrics 1.2, the version the
  paper used, returned NaN for them; current torchmetrics returns 0 and would include it — we do not).
* **cmAP5** — the same mean over classes with at least 5 positive windows (NaN when there is none).
* **pcmAP** — padded cmAP of BirdCLEF 2023: 5 all-positive rows appended to scores and labels, macro AP.
* **AUROC** — torchmetrics ``MultilabelAUROC(average="macro")`` as called by the benchmark code; a class without
  positives contributes 0 there (official behaviour). ``exclude_empty=True`` drops those classes instead.
* **T1-Acc / T3-Acc** — a window is correct when one of its top-k classes is labelled; windows without any
  label (no-call windows) are removed from numerator and denominator (``include_nocalls=False``).
* **mAP** — micro-averaged AP over all (window, class) pairs.

MT / LT evaluation restricts logits and labels to the test set's classes (:func:`apply_class_mask`) before
every metric.
"""

from __future__ import annotations

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


def average_precision_per_class(scores, targets) -> torch.Tensor:
    """Exact per-class AP, NaN for classes with no positive window. Shape ``(classes,)``."""
    from torchmetrics.functional.classification import multilabel_average_precision

    s, t = _as_tensors(scores, targets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ap = multilabel_average_precision(s, t, num_labels=s.shape[1], average=None, thresholds=None)
    ap = ap.double().clone()
    ap[t.sum(0) == 0] = float("nan")
    return ap


def _nanmean(x: torch.Tensor) -> float:
    x = x[~torch.isnan(x)]
    return float(x.mean()) if x.numel() else float("nan")


def cmap(scores, targets) -> float:
    """Class-wise mean AP over classes with ≥ 1 positive window (the benchmark's main metric)."""
    return _nanmean(average_precision_per_class(scores, targets))


def cmap5(scores, targets) -> float:
    """cmAP over classes with ≥ 5 positive windows; NaN when no class has 5."""
    ap = average_precision_per_class(scores, targets)
    _, t = _as_tensors(scores, targets)
    ap[t.sum(0) < 5] = float("nan")
    return _nanmean(ap)


def pcmap(scores, targets, padding: int = 5) -> float:
    """Padded cmAP (BirdCLEF 2023): ``padding`` all-ones rows appended to scores and labels, macro AP."""
    if not isinstance(padding, int) or padding < 0:
        raise ValueError(f"padding must be an int >= 0, got {padding!r}")
    s, t = _as_tensors(scores, targets)
    s = torch.cat([s, torch.ones(padding, s.shape[1])])
    t = torch.cat([t, torch.ones(padding, t.shape[1], dtype=t.dtype)])
    return cmap(s, t)


def auroc(scores, targets, exclude_empty: bool = False) -> float:
    """Macro AUROC by torchmetrics ``MultilabelAUROC(average="macro")`` (the benchmark's call).

    A class without positive windows enters torchmetrics' mean as 0 (official behaviour);
    ``exclude_empty=True`` averages over classes with both positives and negatives instead.
    """
    from torchmetrics.functional.classification import multilabel_auroc

    s, t = _as_tensors(scores, targets)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not exclude_empty:
            return float(multilabel_auroc(s, t, num_labels=s.shape[1], average="macro", thresholds=None))
        per = multilabel_auroc(s, t, num_labels=s.shape[1], average=None, thresholds=None).double()
    pos = t.sum(0)
    keep = (pos > 0) & (pos < t.shape[0])
    return float(per[keep].mean()) if keep.any() else float("nan")


def topk_accuracy(scores, targets, k: int = 1, include_nocalls: bool = False) -> float:
    """Top-k accuracy: a window counts as correct when any of its k highest-scoring classes is labelled.

    With ``include_nocalls=False`` (benchmark default) windows without labels are dropped; NaN if none is left.
    """
    s, t = _as_tensors(scores, targets)
    if not isinstance(k, int) or not 1 <= k <= s.shape[1]:
        raise ValueError(f"k must be an int in [1, {s.shape[1]}], got {k!r}")
    if not include_nocalls:
        keep = t.sum(1) > 0
        s, t = s[keep], t[keep]
    if s.shape[0] == 0:
        return float("nan")
    top = s.topk(k, dim=1).indices  # (windows, k)
    return float((t.gather(1, top).sum(1) > 0).float().mean())


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
    model_labels = [str(x) for x in model_labels]
    test_labels = [str(x) for x in test_labels]
    if len(set(model_labels)) != len(model_labels):
        raise ValueError("model_labels must be unique, got duplicated codes")
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
    mask = torch.as_tensor(mask, dtype=torch.long)
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
    """All benchmark metrics for one test set. ``mask``: class mask for MT/LT models (applied first)."""
    logits = torch.as_tensor(logits).float()
    targets = torch.as_tensor(targets)
    if mask is not None:
        logits, targets = apply_class_mask(logits, targets, mask)
    s = torch.sigmoid(logits) if sigmoid else logits
    return {
        "cmAP": cmap(s, targets),
        "cmAP5": cmap5(s, targets),
        "pcmAP": pcmap(s, targets),
        "mAP": micro_map(s, targets),
        "AUROC": auroc(s, targets),
        "T1-Acc": topk_accuracy(s, targets, 1),
        "T3-Acc": topk_accuracy(s, targets, min(3, s.shape[1])),
    }
