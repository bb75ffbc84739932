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


def _score_sets():
    """Small (windows, classes) problems with heavy ties, logits outside [0, 1] and plain probabilities."""
    for trial in range(18):
        g = torch.Generator().manual_seed(trial)
        n, c = 1 + 37 * trial % 300, 2 + 7 * trial % 25
        y = (torch.rand(n, c, generator=g) < 0.2).long()
        s = [
            torch.randint(0, 5, (n, c), generator=g).float() / 4,  # ties, some at exactly 1.0
            torch.randn(n, c, generator=g) * 10 + 3 * y,  # logits: torchmetrics applies sigmoid (saturates)
            torch.rand(n, c, generator=g),
        ][trial % 3]
        yield s, y


def test_per_class_ap_is_torchmetrics_bit_for_bit():
    from torchmetrics.functional.classification import multilabel_average_precision

    for s, y in _score_sets():
        for pad in (0, 5):
            sp = torch.cat([s, torch.ones(pad, s.shape[1])])
            yp = torch.cat([y, torch.ones(pad, y.shape[1], dtype=y.dtype)])
            ref = multilabel_average_precision(sp, yp, num_labels=s.shape[1], average=None, thresholds=None)
            ours = average_precision_per_class(sp, yp)
            has = yp.sum(0) > 0
            assert torch.equal(ours[has], ref.double()[has]) and torch.isnan(ours[~has]).all()


def test_evaluate_scores_equals_the_separate_metric_calls():
    # one AP pass (pcmAP's padding merged into the sorted scores) gives exactly the per-metric calls' numbers
    for s, y in _score_sets():
        e = evaluate_scores(s, y, sigmoid=False)
        ref = {"cmAP": cmap(s, y), "cmAP5": cmap5(s, y), "pcmAP": pcmap(s, y), "mAP": micro_map(s, y)}
        ref |= {"AUROC": auroc(s, y), "T1-Acc": topk_accuracy(s, y, 1)}
        ref["T3-Acc"] = topk_accuracy(s, y, min(3, s.shape[1]))
        assert e.keys() == ref.keys()
        for key, v in ref.items():
            assert e[key] == v or (math.isnan(e[key]) and math.isnan(v)), key
    logits = torch.randn(500, 40, generator=torch.Generator().manual_seed(3))
    y = (torch.rand(500, 40, generator=torch.Generator().manual_seed(4)) < 0.05).long()
    p = torch.sigmoid(logits)
    e = evaluate_scores(logits, y)
    assert (e["cmAP"], e["cmAP5"], e["pcmAP"]) == (cmap(p, y), cmap5(p, y), pcmap(p, y))


def _released_topk(preds, targets, k, include_nocalls, threshold=0.5):
    """Transcription of the released ``TopKAccuracy`` (one update + compute)."""
    preds, targets = torch.as_tensor(preds, dtype=torch.float32), torch.as_tensor(targets)
    top_vals, top_idx = preds.topk(k, dim=1)
    nocall = targets.sum(1) == 0
    nocall_correct = (nocall & (top_vals < threshold).all(1)).sum() if include_nocalls else 0
    hit = targets.unsqueeze(1).expand(-1, k, -1).gather(2, top_idx.unsqueeze(-1)).any(1)  # (windows, 1)
    total = len(targets) if include_nocalls else len(targets) - int(nocall.sum())
    return float(hit.sum() + nocall_correct) / total


def test_topk_nocall_rule_follows_the_released_metric():
    # the no-call row [0.7, 0.2, 0.1] has a top-1 score above 0.5: wrong; with threshold 0.8 it is right
    assert topk_accuracy(S, Y, 1, include_nocalls=True, threshold=0.8) == pytest.approx(3 / 4)
    quiet = S.copy()
    quiet[2] = [0.3, 0.2, 0.1]  # every score below 0.5 → a correct no-call window
    assert topk_accuracy(quiet, Y, 1, include_nocalls=True) == pytest.approx(3 / 4)
    assert topk_accuracy(quiet, Y, 3, include_nocalls=True) == pytest.approx(4 / 4)
    rng = np.random.default_rng(5)
    y = (rng.random((300, 8)) < 0.12).astype(int)  # ~35 % no-call rows
    s = rng.random((300, 8)) ** 2 + 0.2 * y
    for k in (1, 3):
        for inc in (False, True):
            for thr in (0.5, 0.3):
                assert topk_accuracy(s, y, k, inc, thr) == pytest.approx(_released_topk(s, y, k, inc, thr))
    with pytest.raises(ValueError, match="threshold"):
        topk_accuracy(S, Y, 1, True, float("nan"))


def _released_cmap5(preds, targets, sample_threshold=5):
    """Transcription of the released ``cmAP5.compute``: its AP metric is built with ``average="macro"``, so the
    "class-wise" APs are one scalar (the macro AP over classes with positives, torchmetrics 1.2) broadcast by
    ``torch.where`` before the NaN-mean."""
    t = torch.as_tensor(targets)
    aps = [average_precision_score(t[:, c], preds[:, c]) for c in range(t.shape[1]) if t[:, c].sum() > 0]
    class_aps = torch.tensor(float(np.mean(aps)), dtype=torch.float64)
    if sample_threshold > 1:
        class_aps = torch.where(t.sum(0) >= sample_threshold, class_aps, torch.nan)
    return float(torch.nanmean(class_aps))


def test_cmap5_keeps_the_per_class_rule_and_offers_the_released_value():
    rng = np.random.default_rng(2)
    y = (rng.random((120, 6)) < 0.1).astype(int)
    y[:, 0], y[:4, 1], y[4:, 1] = 0, 1, 0  # class 0: no positive, class 1: 4 positives
    s = rng.random((120, 6)) + 0.4 * y
    keep5 = [c for c in range(6) if y[:, c].sum() >= 5]
    paper = np.mean([average_precision_score(y[:, c], s[:, c]) for c in keep5])
    assert cmap5(s, y) == pytest.approx(paper, abs=1e-6) and cmap5(s, y) != pytest.approx(
        cmap(s, y), abs=1e-4
    )
    released = cmap5(s, y, mask_after_macro=True)
    assert released == pytest.approx(_released_cmap5(s, y), abs=1e-6) and released == cmap(s, y)
    assert math.isnan(cmap5(S, Y, mask_after_macro=True)) and math.isnan(_released_cmap5(S, Y))
    assert cmap5(S, Y, min_positives=2) == pytest.approx(0.875) and math.isnan(cmap5(S, Y, min_positives=3))
    with pytest.raises(ValueError, match="min_positives"):
        cmap5(S, Y, min_positives=0)
