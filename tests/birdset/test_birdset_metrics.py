"""Metrics against scikit-learn / torchmetrics reference computations and the benchmark's exclusions."""

import math

import numpy as np
import pytest
import torch
from sklearn.metrics import average_precision_score, roc_auc_score

from iclr25.birdset.metrics import (
    apply_class_mask,
    auroc,
    average_precision_per_class,
    class_mask,
    cmap,
    cmap5,
    evaluate_scores,
    micro_map,
    pcmap,
    topk_accuracy,
)

Y = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 0], [1, 1, 0]])
S = np.array([[0.9, 0.1, 0.2], [0.8, 0.3, 0.1], [0.7, 0.2, 0.1], [0.2, 0.6, 0.1]])


def test_worked_example_cmap_t1_cmap5():
    ap = average_precision_per_class(S, Y)
    assert ap[0] == pytest.approx(0.75) and ap[1] == pytest.approx(1.0) and math.isnan(ap[2])
    assert cmap(S, Y) == pytest.approx(0.875)  # the class without positives is excluded, not counted as 0
    assert topk_accuracy(S, Y, 1) == pytest.approx(2 / 3)  # the no-call row is dropped
    assert topk_accuracy(S, Y, 1, include_nocalls=True) == pytest.approx(2 / 4)
    assert math.isnan(cmap5(S, Y))


def test_auroc_is_torchmetrics_macro():
    from torchmetrics.classification import MultilabelAUROC

    ref = MultilabelAUROC(3, average="macro")(torch.tensor(S, dtype=torch.float32), torch.tensor(Y))
    assert auroc(S, Y) == pytest.approx(float(ref), abs=1e-6)
    # exclude_empty: mean of sklearn's AUROC over classes having both positives and negatives
    ref2 = np.mean([roc_auc_score(Y[:, c], S[:, c]) for c in (0, 1)])
    assert auroc(S, Y, exclude_empty=True) == pytest.approx(ref2, abs=1e-6)


def test_random_data_against_sklearn():
    rng = np.random.default_rng(0)
    y = (rng.random((200, 12)) < 0.15).astype(int)
    y[:, 3] = 0  # a class without positives
    y[:3, 7] = 1
    y[3:, 7] = 0  # a class with 3 positives (excluded from cmAP5)
    s = rng.random((200, 12)) + 0.3 * y
    keep = [c for c in range(12) if y[:, c].sum() > 0]
    ref = np.mean([average_precision_score(y[:, c], s[:, c]) for c in keep])
    assert cmap(s, y) == pytest.approx(ref, abs=1e-6)
    keep5 = [c for c in range(12) if y[:, c].sum() >= 5]
    assert cmap5(s, y) == pytest.approx(
        np.mean([average_precision_score(y[:, c], s[:, c]) for c in keep5]), abs=1e-6
    )
    assert micro_map(s, y) == pytest.approx(average_precision_score(y.ravel(), s.ravel()), abs=1e-6)
    yp = np.vstack([y, np.ones((5, 12), int)])
    sp = np.vstack([s, np.ones((5, 12))])
    ref_p = np.mean([average_precision_score(yp[:, c], sp[:, c]) for c in range(12)])
    assert pcmap(s, y) == pytest.approx(ref_p, abs=1e-6)
    # top-k: naive loop
    for k in (1, 3):
        rows = [i for i in range(200) if y[i].sum() > 0]
        naive = np.mean([y[i, np.argsort(-s[i])[:k]].sum() > 0 for i in rows])
        assert topk_accuracy(s, y, k) == pytest.approx(naive)


def test_bad_inputs_raise():
    bad = S.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="scores must be finite"):
        cmap(bad, Y)
    with pytest.raises(ValueError, match="targets must have the shape"):
        cmap(S, Y[:, :2])
    with pytest.raises(ValueError, match="multi-hot"):
        cmap(S, Y * 2)
    with pytest.raises(ValueError, match="k must be"):
        topk_accuracy(S, Y, 4)


def test_class_mask_maps_codes_through_a_permuted_label_list():
    model_labels = ["c", "x", "a", "y", "b", "z"]
    m = class_mask(model_labels, ["a", "b", "c"])
    assert m.tolist() == [2, 4, 0]
    with pytest.raises(ValueError, match="not in model_labels"):
        class_mask(model_labels, ["a", "q"])


def test_masked_metrics_equal_sliced_logits():
    rng = np.random.default_rng(1)
    logits = torch.randn(80, 30, generator=torch.Generator().manual_seed(0))
    y = torch.tensor((rng.random((80, 10)) < 0.2).astype(int))
    mask = torch.tensor(rng.choice(30, 10, replace=False))
    via_mask = evaluate_scores(logits, y, mask)
    sliced = evaluate_scores(logits[:, mask].clone(), y)
    assert via_mask == sliced
    # targets given in the model's label space are sliced the same way
    y_full = torch.zeros(80, 30, dtype=torch.long)
    y_full[:, mask] = y
    assert evaluate_scores(logits, y_full, mask) == sliced
    with pytest.raises(ValueError, match="targets has"):
        apply_class_mask(logits, y[:, :4], mask)
