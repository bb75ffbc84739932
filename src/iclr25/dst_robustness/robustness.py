"""Corruption-robustness metrics (Hendrycks & Dietterich 2019; the paper's Sec. 4 and Fig. 3).

``acc`` arrays are ``(corruptions, severities)`` top-1 accuracies of one model on the -C benchmark.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


def robust_accuracy(acc: np.ndarray) -> float:
    """The paper's robustness accuracy: the mean over all corruption types and all severities."""
    a = np.asarray(acc, dtype=float)
    if a.ndim != 2 or a.size == 0:
        raise ValueError(f"acc must be a non-empty (corruptions, severities) array, got shape {a.shape}")
    return float(a.mean())


def relative_gain(acc_method: np.ndarray, acc_base: np.ndarray) -> np.ndarray:
    """Relative robustness gain ``(acc_DST − acc_dense) / acc_dense`` per corruption × severity (Fig. 3)."""
    m, b = np.asarray(acc_method, float), np.asarray(acc_base, float)
    if m.shape != b.shape:
        raise ValueError(f"acc_method and acc_base must have the same shape, got {m.shape} and {b.shape}")
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, (m - b) / b, np.nan)


def corruption_errors(acc_model: np.ndarray, acc_ref: np.ndarray) -> np.ndarray:
    """``CE_c = Σ_s E^f_{s,c} / Σ_s E^ref_{s,c}`` per corruption (errors E = 1 − acc; ref = AlexNet in ImageNet-C).

    Where the reference makes no error on a corruption the ratio is undefined: ``NaN`` (never floored, never inf).
    """
    e, r = 1.0 - np.asarray(acc_model, float), 1.0 - np.asarray(acc_ref, float)
    if e.shape != r.shape:
        raise ValueError(f"acc_model and acc_ref must have the same shape, got {e.shape} and {r.shape}")
    den = r.sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, e.sum(1) / den, np.nan)


def mce(acc_model: np.ndarray, acc_ref: np.ndarray) -> float:
    """Mean corruption error ``mCE = mean_c CE_c`` relative to the reference model (1.0 = as robust as ref).

    ``NaN`` when some CE_c is undefined (the reference makes no error on that corruption, see
    :func:`corruption_errors`; :func:`zero_error_corruptions` names them).
    """
    return float(np.mean(corruption_errors(acc_model, acc_ref)))


def zero_error_corruptions(acc_ref: np.ndarray, names: Sequence[str]) -> list[str]:
    """The corruptions (rows of ``acc_ref``, accuracies in [0, 1]) on which the reference makes no error at all."""
    r = np.asarray(acc_ref, float)
    if r.shape[0] != len(names):
        raise ValueError(f"names must name the {r.shape[0]} rows of acc_ref, got {len(names)}")
    return [n for n, row in zip(names, r, strict=True) if not (1.0 - row).sum() > 0]


def relative_mce(acc_model: np.ndarray, clean_model: float, acc_ref: np.ndarray, clean_ref: float) -> float:
    """Relative mCE: ``mean_c Σ_s (E^f_{s,c} − E^f_clean) / Σ_s (E^ref_{s,c} − E^ref_clean)``."""
    e = (1.0 - np.asarray(acc_model, float)) - (1.0 - clean_model)
    r = (1.0 - np.asarray(acc_ref, float)) - (1.0 - clean_ref)
    with np.errstate(divide="ignore", invalid="ignore"):
        return float(np.mean(e.sum(1) / r.sum(1)))


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1000) -> float:
    """Top-1 accuracy of ``model`` (eval mode) on ``x`` (N, C, H, W), ``y`` (N,)."""
    was = model.training
    model.eval()
    correct = 0
    for i in range(0, x.shape[0], batch_size):
        correct += int((model(x[i : i + batch_size]).argmax(1) == y[i : i + batch_size]).sum())
    model.train(was)
    return correct / max(1, x.shape[0])


@torch.no_grad()
def corruption_accuracy(
    model: nn.Module, corrupted: np.ndarray, y: torch.Tensor, mean: float, std: float, batch_size: int = 2000
) -> np.ndarray:
    """Accuracy on every cell of a corrupted set ``(C, S, N, H, W, 3)`` uint8 → ``(C, S)`` array."""
    from .data import to_tensor

    c, s, n = corrupted.shape[:3]
    flat = corrupted.reshape(c * s * n, *corrupted.shape[3:])
    dev = y.device
    was = model.training
    model.eval()
    preds = []
    for i in range(0, flat.shape[0], batch_size):
        preds.append(model(to_tensor(flat[i : i + batch_size], mean, std, dev)).argmax(1))
    model.train(was)
    pred = torch.cat(preds).view(c, s, n)
    return (pred == y.view(1, 1, n)).float().mean(-1).cpu().numpy()


def group_accuracy(
    acc: np.ndarray,
    names: Sequence[str],
    group: Sequence[str],
    severities: Sequence[int],
    levels: Sequence[int],
) -> float:
    """Mean accuracy over the corruptions in ``group`` at severity ``levels`` (e.g. noise at 4–5)."""
    ci = [list(names).index(g) for g in group if g in names]
    si = [list(severities).index(s) for s in levels if s in severities]
    if not ci or not si:
        raise ValueError(f"group {tuple(group)} at levels {tuple(levels)} selects no cell of the benchmark")
    return float(np.asarray(acc)[np.ix_(ci, si)].mean())
