"""F1 at IoU >= 0.5: the listed cases, a naive reference on random cases, conventions, LOSO splits."""

import itertools

import numpy as np
import pytest

from iclr25.pfes_gim import SpottingCounts, loso_splits, spotting_f1, video_counts

GT = np.array([[10, 29], [50, 59]])
GC = np.array([0, 1])


def test_exact_match_is_tp():
    c = video_counts(np.array([[10, 29, 0, 0.9]]), GT, GC)
    assert (c.tp.tolist(), c.fp.tolist(), c.n_gt.tolist()) == ([1, 0], [0, 0], [1, 1])


def test_iou_below_half_is_fp():
    # GT 10..29 (20 frames); prediction 10..50 → IoU 20/41 = 0.488 < 0.5
    c = video_counts(np.array([[10, 50, 0, 0.9]]), GT, GC)
    assert c.tp[0] == 0 and c.fp[0] == 1
    c = video_counts(np.array([[10, 48, 0, 0.9]]), GT, GC)  # 20/39 = 0.513
    assert c.tp[0] == 1


def test_second_prediction_on_same_gt_is_fp():
    d = np.array([[10, 29, 0, 0.9], [11, 29, 0, 0.8]])
    c = video_counts(d, GT, GC)
    assert c.tp[0] == 1 and c.fp[0] == 1


def test_class_mismatch_is_fp_and_missed_gt():
    c = video_counts(np.array([[50, 59, 0, 0.9]]), GT, GC)
    assert c.tp.sum() == 0 and c.fp[0] == 1 and c.n_gt[1] == 1
    assert c.f1() == pytest.approx(0.0) and c.f1(1) == pytest.approx(0.0)


def test_f1_formula():
    c = SpottingCounts(np.array([3, 1]), np.array([2, 0]), np.array([5, 4]))
    assert c.f1() == pytest.approx(2 * 4 / (4 + 2 + 9))
    assert c.f1(0) == pytest.approx(6 / 10) and c.f1(1) == pytest.approx(2 / 5)
    assert np.isnan(SpottingCounts().f1())


def test_official_convention_uses_exclusive_prediction_end():
    # prediction [10, 28] is exclusive end 29 in the released code → IoU with GT (10, 29) = 1
    c_off = video_counts(np.array([[10, 28, 0, 1.0]]), np.array([[10, 29]]), [0], convention="official")
    d_off = video_counts(np.array([[20, 29, 0, 1.0]]), np.array([[10, 29]]), [0], convention="official")
    assert c_off.tp[0] == 1
    # frames 20..29 vs 10..29: frames IoU = 10/20 = 0.5 (TP); official (20,30) vs (10,29): 9/20 = 0.45 (FP)
    assert d_off.tp[0] == 0
    assert video_counts(np.array([[20, 29, 0, 1.0]]), np.array([[10, 29]]), [0]).tp[0] == 1
    with pytest.raises(ValueError, match="convention"):
        video_counts(np.array([[20, 29, 0, 1.0]]), np.array([[10, 29]]), [0], convention="x")


def _naive(dets, gts, gcs, thr=0.5):
    """Reference: per class, predictions by score; TP iff some unmatched GT of the class has IoU >= thr
    (the one with the largest IoU is taken)."""
    tp = fp = n_gt = 0
    for d, g, gc in zip(dets, gts, gcs, strict=True):
        n_gt += len(g)
        for c in (0, 1):
            used = set()
            for row in sorted([r for r in d if r[2] == c], key=lambda r: -r[3]):
                best, bj = -1.0, None
                for j, (s, e) in enumerate(g):
                    if gc[j] != c or j in used:
                        continue
                    inter = max(0, min(row[1], e) - max(row[0], s) + 1)
                    iou = inter / ((row[1] - row[0] + 1) + (e - s + 1) - inter)
                    if iou > best:
                        best, bj = iou, j
                if bj is not None and best >= thr:
                    used.add(bj)
                    tp += 1
                else:
                    fp += 1
    return 2 * tp / (tp + fp + n_gt)


def test_f1_agrees_with_naive_reference_on_random_cases():
    rng = np.random.default_rng(0)
    for _ in range(30):
        dets, gts, gcs = [], [], []
        for _v in range(3):
            starts = np.sort(rng.choice(np.arange(0, 300, 40), size=rng.integers(1, 6), replace=False))
            g = np.stack([starts, starts + rng.integers(5, 35, len(starts))], 1)
            gc = rng.integers(0, 2, len(g))
            k = rng.integers(0, 8)
            ps = rng.integers(0, 300, k)
            d = np.stack([ps, ps + rng.integers(3, 40, k), rng.integers(0, 2, k), rng.random(k)], 1).astype(
                float
            )
            dets.append(d)
            gts.append(g)
            gcs.append(gc)
        assert spotting_f1(dets, gts, gcs)["f1"] == pytest.approx(_naive(dets, gts, gcs))


def test_f1_is_order_invariant_in_predictions():
    d = np.array([[10, 29, 0, 0.5], [12, 31, 0, 0.9], [50, 59, 1, 0.4]])
    for perm in itertools.permutations(range(3)):
        assert spotting_f1([d[list(perm)]], [GT], [GC]) == spotting_f1([d], [GT], [GC])


def test_bad_inputs():
    with pytest.raises(ValueError, match="onset"):
        video_counts(np.zeros((0, 4)), np.array([[30, 10]]), [0])
    with pytest.raises(ValueError, match="NaN"):
        video_counts(np.array([[1, np.nan, 0, 1.0]]), GT, GC)
    with pytest.raises(ValueError, match="one entry per video"):
        spotting_f1([np.zeros((0, 4))], [GT, GT], [GC])
    with pytest.raises(ValueError, match="iou_threshold"):
        video_counts(np.zeros((0, 4)), GT, GC, iou_threshold=0.0)


def test_loso_splits_partition():
    subj = ["a", "a", "b", "c", "b"]
    splits = loso_splits(subj)
    assert [s for s, _, _ in splits] == ["a", "b", "c"]
    for s, tr, te in splits:
        assert set(tr) | set(te) == set(range(5)) and not set(tr) & set(te)
        assert all(subj[i] == s for i in te) and all(subj[i] != s for i in tr)
    with pytest.raises(ValueError, match="2 subjects"):
        loso_splits(["a", "a"])
