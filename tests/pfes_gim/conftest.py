"""Fixtures: a tiny fabricated copy of the authors' released feature/annotation layout."""

import numpy as np
import pytest


def _obj(items):
    arr = np.empty(len(items), dtype=object)
    for i, x in enumerate(items):
        arr[i] = x
    return arr


def _fabricate(root, dataset="CASME2", bad_row=False):
    ann = root / f"{dataset}-Annotations"
    ann.mkdir(parents=True)
    rng = np.random.default_rng(0)
    feats = _obj(
        [
            rng.normal(size=(60, 17, 10, 2)).astype(np.float32),
            rng.normal(size=(45, 17, 10, 2)).astype(np.float32),
        ]
    )
    seg1 = [[30, 12, 20]] if bad_row else [[5, 20, 12], [30, 40, 35]]
    np.save(root / f"{dataset}-SLopticalflow.npy", feats, allow_pickle=True)
    np.save(
        ann / "segments.npy",
        _obj([np.array(seg1[: 2 if not bad_row else 1]), np.array([[10, 16, 13]])]),
        allow_pickle=True,
    )
    np.save(
        ann / "labels.npy", _obj([["Macro", "Micro"][: 1 if bad_row else 2], ["Micro"]]), allow_pickle=True
    )
    np.save(ann / "labels_gau_frame.npy", _obj([[12, 35][: 1 if bad_row else 2], [13]]), allow_pickle=True)
    np.save(ann / "videoname.npy", np.array(["casme_015_0401", "casme_016_0102"]))
    return root


@pytest.fixture
def fabricate_released():
    """``fabricate(root, dataset='CASME2', bad_row=False)``: 2 videos of 2 subjects in the released layout."""
    return _fabricate
