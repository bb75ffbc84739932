"""Synthetic videos (true intensities), Video validation, the released-layout loader on fabricated files."""

import pickle

import numpy as np
import pytest

from iclr25.pfes_gim import (
    SyntheticSpec,
    Video,
    default_subject,
    load_released,
    make_synthetic_dataset,
    make_synthetic_video,
    safe_load_npy,
)


def test_synthetic_video_invariants():
    for v in make_synthetic_dataset(6, seed=3):
        T = v.n_frames
        assert v.features.shape == (T, 12) and v.intensity.shape == (T,)
        inside = np.zeros(T, dtype=bool)
        for (s, e), p, apex in zip(v.segments, v.points, v.meta["apexes"], strict=True):
            inside[s : e + 1] = True
            assert s <= p <= e  # the point label lies inside its instance
            assert v.intensity[apex] == pytest.approx(1.0) and (v.intensity[s : e + 1] > 0).all()
        assert (v.intensity[~inside] == 0).all()
        assert (np.diff(v.segments[:, 0]) > 0).all() and (v.segments[1:, 0] > v.segments[:-1, 1] + 24).all()
        lens = v.segments[:, 1] - v.segments[:, 0] + 1
        assert ((lens >= 6) & (lens <= 15))[v.gt_classes == 1].all()
        assert ((lens >= 15) & (lens <= 120))[v.gt_classes == 0].all()


def test_synthetic_is_deterministic_and_hard_variant_differs():
    a, b = make_synthetic_dataset(2, seed=7), make_synthetic_dataset(2, seed=7)
    assert np.array_equal(a[1].features, b[1].features) and np.array_equal(a[1].points, b[1].points)
    rng = np.random.default_rng(0)
    hard = [make_synthetic_video(rng, SyntheticSpec.hard()) for _ in range(10)]
    me_amp = [
        v.features[v.segments[i, 0] : v.segments[i, 1] + 1, 4:8].max()
        for v in hard
        for i in np.nonzero(v.classes == 1)[0]
    ]
    assert np.median(me_amp) < 1.4  # ME amplitude 0.3-0.5 on top of noise 0.25
    with pytest.raises(ValueError, match="point_mode"):
        SyntheticSpec(point_mode="middle")


def test_video_validation():
    f = np.zeros((50, 4))
    with pytest.raises(ValueError, match="inside the video"):
        Video("v", f, points=[50], classes=[0])
    with pytest.raises(ValueError, match="non-empty"):
        Video("v", np.zeros((0, 4)), points=[], classes=[])
    with pytest.raises(ValueError, match="onset must be <= offset"):
        Video("v", f, points=[5], classes=[0], segments=[[10, 3]], gt_classes=[0])
    with pytest.raises(ValueError, match="NaN"):
        Video("v", np.full((5, 2), np.nan), points=[1], classes=[0])
    with pytest.raises(ValueError, match="classes"):
        Video("v", f, points=[5], classes=[3])
    v = Video("v", np.zeros((20, 17, 10, 2)), points=[3], classes=[1])
    assert v.flat_features().shape == (20, 340)


def test_load_released_layout(tmp_path, fabricate_released):
    vids = load_released(fabricate_released(tmp_path), "CASME2")
    assert [v.name for v in vids] == ["casme_015_0401", "casme_016_0102"]
    assert [v.subject for v in vids] == ["casme_015", "casme_016"]
    assert vids[0].features.shape == (60, 17, 10, 2) and vids[0].flat_features().shape == (60, 340)
    assert vids[0].segments.tolist() == [[5, 20], [30, 40]] and vids[0].classes.tolist() == [0, 1]
    assert vids[1].points.tolist() == [13] and vids[1].gt_classes.tolist() == [1]


def test_load_released_rejects_onset_after_offset(tmp_path, fabricate_released):
    with pytest.raises(ValueError, match="onset"):
        load_released(fabricate_released(tmp_path, bad_row=True), "CASME2")
    with pytest.raises(ValueError, match="does not exist"):
        load_released(tmp_path, "SAMM")


def test_safe_load_refuses_arbitrary_pickles(tmp_path):
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    path = tmp_path / "evil.npy"
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, {"descr": "|O", "fortran_order": False, "shape": (1,)})
        arr = np.empty(1, dtype=object)
        arr[0] = Evil()
        f.write(pickle.dumps(arr, protocol=3))
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        safe_load_npy(path)
    np.save(tmp_path / "plain.npy", np.arange(4))
    assert safe_load_npy(tmp_path / "plain.npy").tolist() == [0, 1, 2, 3]


def test_default_subject():
    assert default_subject("samm_007_7") == "samm_007" and default_subject("s15") == "s15"
