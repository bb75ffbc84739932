"""Proposal generation: a clean bump becomes one interval; caps and NMS invariants; soft-NMS/NMS vs naive."""

import numpy as np
import pytest

from iclr25.pfes_gim import PROFILES, candidates, generate_proposals, interval_iou, nms, soft_nms


def test_clean_bump_gives_its_interval():
    T = 200
    a = np.zeros(T)
    a[60:80] = 0.9  # 20 frames
    a[70] = 0.95  # the apex frame is the intensity peak
    q = np.zeros((T, 2))
    q[70, 0] = 0.9
    det = generate_proposals(a, q, "CASME2")
    assert det.shape == (1, 4)
    assert det[0, :3].tolist() == [60, 79, 0]
    assert det[0, 3] == pytest.approx((19 * 0.9 + 0.95) / 20 - 0.0 + 0.2 * 0.9)


def test_apex_branch_decides_the_class():
    T = 100
    a = np.zeros(T)
    a[40:52] = 0.8  # 12 frames: fits the ME and (not) the MaE length filter
    q = np.zeros((T, 2))
    q[40:52, 1] = 0.8
    det = generate_proposals(a, q, "SAMM")
    assert det[:, 2].tolist() == [1.0]
    q[:, 1] = 0.2
    assert len(generate_proposals(a, q, "SAMM")) == 0  # no apex fires → no detection


def test_outer_inner_score():
    a = np.zeros(100)
    a[40:60] = 0.9
    a[36:40] = 0.1  # 0.2 * 20 = 4 outer frames each side
    q = np.full((100, 2), 0.6)
    c = candidates(a, q, PROFILES["CASME2"])
    row = c[(c[:, 0] == 40) & (c[:, 2] == 0)][0]
    assert row[3] == pytest.approx(0.9 - (4 * 0.1) / 8 + 0.2 * 0.6)


@pytest.mark.parametrize("seed", range(5))
def test_caps_and_no_overlapping_same_class_pairs(seed):
    rng = np.random.default_rng(seed)
    T = 800
    a = np.clip(np.convolve(rng.random(T), np.ones(9) / 9, mode="same") * 1.6 - 0.2, 0, 1)
    q = rng.random((T, 2)) * 0.5 + 0.5
    det = generate_proposals(a, q, "CASME2")
    assert (det[:, 2] == 0).sum() <= 8 and (det[:, 2] == 1).sum() <= 2
    for c in (0, 1):
        d = det[det[:, 2] == c]
        iou = interval_iou(d[:, :2], d[:, :2])
        np.fill_diagonal(iou, 0)
        assert (iou <= 0.5).all()
        lo, hi = PROFILES["CASME2"].mae_len if c == 0 else PROFILES["CASME2"].me_len
        length = d[:, 1] - d[:, 0] + 1
        assert ((length >= lo) & (length <= hi)).all() and (d[:, 3] >= 0.5).all()


def _naive_soft_nms(d, sigma):
    d = [list(r) for r in d]
    out = []
    while d:
        i = max(range(len(d)), key=lambda k: d[k][3])
        top = d.pop(i)
        out.append(top)
        for r in d:
            inter = max(0, min(top[1], r[1]) - max(top[0], r[0]) + 1)
            iou = inter / ((top[1] - top[0] + 1) + (r[1] - r[0] + 1) - inter)
            r[3] *= np.exp(-(iou**2) / sigma)
    return np.array(out)


def test_soft_nms_and_nms_match_naive():
    rng = np.random.default_rng(1)
    s = rng.integers(0, 100, 25)
    d = np.stack([s, s + rng.integers(3, 30, 25), np.zeros(25), rng.random(25)], 1).astype(float)
    np.testing.assert_allclose(soft_nms(d, 0.3), _naive_soft_nms(d, 0.3))
    kept = nms(d, 0.5, cap=None)
    order = np.argsort(-d[:, 3])
    ref = []
    for i in order:
        if all(interval_iou(d[i : i + 1, :2], d[j : j + 1, :2])[0, 0] <= 0.5 for j in ref):
            ref.append(i)
    np.testing.assert_allclose(kept, d[ref])
    assert len(nms(d, 0.5, cap=3)) == 3


def test_bad_input():
    with pytest.raises(ValueError, match="empty"):
        generate_proposals(np.zeros(0), np.zeros((0, 2)))
    with pytest.raises(ValueError, match="finite"):
        generate_proposals(np.array([0.1, np.nan]), np.zeros((2, 2)))
    with pytest.raises(ValueError, match="profile"):
        generate_proposals(np.zeros(5), np.zeros((5, 2)), "CASME3")
