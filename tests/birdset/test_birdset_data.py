"""Loader for the BirdSet hub layout (parquet metadata + tar.gz audio shards), on tiny fabricated copies."""

import tarfile

import numpy as np
import pandas as pd
import pytest
import soundfile as sf

from iclr25.birdset.data import class_list, load_birdset, write_birdset_layout
from iclr25.birdset.events import map_events, smart_sampling
from iclr25.birdset.synthetic import make_focal_recordings, make_soundscapes, make_species


@pytest.fixture(scope="module")
def hub(tmp_path_factory):
    root = tmp_path_factory.mktemp("birdset")
    sp = make_species(3, seed=0)
    focal = make_focal_recordings(sp, 2, duration_s=(6.0, 7.0), seed=1)
    scapes = make_soundscapes(sp, 1, duration_s=20.0, seed=2)
    write_birdset_layout(root, "HSN", focal, scapes, audio_format="ogg", shards=True)
    return root, focal, scapes


def test_layout_matches_the_hub(hub):
    root, _, _ = hub
    names = sorted(p.name for p in (root / "HSN").iterdir())
    assert names == [
        "HSN_metadata_test.parquet",
        "HSN_metadata_test_5s.parquet",
        "HSN_metadata_train.parquet",
        "HSN_test5s_shard_0001.tar.gz",
        "HSN_test_shard_0001.tar.gz",
        "HSN_train_shard_0001.tar.gz",
    ]
    with tarfile.open(root / "HSN" / "HSN_train_shard_0001.tar.gz") as tf:
        assert all(m.name.startswith("train/") and m.name.endswith(".ogg") for m in tf)


def test_train_split_roundtrip(hub):
    root, focal, _ = hub
    tr = load_birdset(root, "HSN", "train")
    assert len(tr) == len(focal) and tr.classes == sorted({c for r in focal for c in r.labels})
    x, sr = sf.read(tr.meta["filepath"][0])
    assert sr == focal[0].sample_rate and abs(len(x) - len(focal[0].wave)) < 2
    y = tr.multi_hot()
    assert y.sum(1).tolist() == [len(r.labels) for r in focal]
    rows = smart_sampling(map_events(tr.meta), class_limit=500, event_limit=5)
    assert len(rows) >= len(focal) and rows["event_end"].gt(rows["event_start"]).all()
    mtime = (root / "HSN" / "extracted" / "train").stat().st_mtime_ns
    load_birdset(root, "HSN_xc", "train")  # resumable: nothing re-extracted
    assert (root / "HSN" / "extracted" / "train").stat().st_mtime_ns == mtime
    ds = tr.to_hf_dataset()
    assert {"audio", "filepath", "detected_events", "ebird_code_multilabel"} <= set(ds.column_names)


def test_test_splits(hub):
    root, _, scapes = hub
    t5 = load_birdset(root, "HSN_scape", "test_5s", classes=["sp000", "sp001", "sp002"])
    assert len(t5) == 4 and (t5.meta["end_time"] - t5.meta["start_time"]).eq(5.0).all()
    y = t5.multi_hot()
    assert y.shape == (4, 3)
    test = load_birdset(root, "HSN", "test", classes=t5.classes)
    assert len(test) == len(scapes[0].annotations)
    with pytest.raises(ValueError, match="not in the class list"):
        t5.multi_hot(["sp000"]) if y[:, 1:].sum() else test.multi_hot(["nothing"])


def test_handwritten_xcl_layout_with_filepath_index(tmp_path):
    for ds, meta_name, shard in (
        ("XCL", "XCL_metadata.parquet", "XCL_shard_0001.tar.gz"),
        ("POW", "POW_metadata_test_5s.parquet", "POW_test5s_shard_0001.tar.gz"),
    ):
        d = tmp_path / ds
        d.mkdir()
        names = [f"{ds}_{i}.ogg" for i in range(2)]
        for n in names:
            sf.write(d / n, 0.1 * np.sin(np.arange(32_000) / 5.0), 32_000)
        with tarfile.open(d / shard, "w:gz") as tf:
            for n in names:
                tf.add(d / n, arcname=f"deep/../{n}")  # archive paths are never trusted: basename only
        for n in names:
            (d / n).unlink()
        meta = pd.DataFrame(
            {
                "filepath": [f"/orig/{n}" for n in names],
                "ebird_code": ["amerob", "norcar"],
                "ebird_code_multilabel": [["amerob"], []],
                "start_time": [0.0, 0.0],
                "end_time": [5.0, 5.0],
            }
        ).set_index("filepath")
        meta.to_parquet(d / meta_name)
    tr = load_birdset(tmp_path, "XCL", "train")
    assert tr.classes == ["amerob", "norcar"] and tr.meta["filepath"].map(lambda p: p.endswith(".ogg")).all()
    va = load_birdset(tmp_path, "XCL", "valid", classes=tr.classes)
    assert va.multi_hot().tolist() == [[1, 0], [0, 0]]  # empty multilabel in test_5s = no-call window
    assert class_list(tr, va) == ["amerob", "norcar"]
    assert not any(p.name == ".." for p in tmp_path.rglob("*"))


def test_bad_requests(tmp_path, hub):
    root, _, _ = hub
    with pytest.raises(ValueError, match="config must be one of"):
        load_birdset(root, "ABC", "train")
    with pytest.raises(ValueError, match="has splits"):
        load_birdset(root, "HSN_xc", "test")
    with pytest.raises(ValueError, match="no 'valid' split"):
        load_birdset(root, "HSN", "valid")
    with pytest.raises(ValueError, match="is it a BirdSet copy"):
        load_birdset(tmp_path, "HSN", "train")


def test_train_split_rows_feed_the_training_pipeline(hub, tmp_path):
    """The hub calls a recording's seconds ``length``; the loader adds the ``duration`` the training decodes
    against, so load → map_events → smart_sampling → decode_batch works on a hub copy as it does in the run."""
    from iclr25.birdset.audio import AudioCache
    from iclr25.birdset.train import _check_rows, decode_batch

    root, focal, _ = hub
    tr = load_birdset(root, "HSN", "train")
    assert np.allclose(tr.meta["duration"], [r.duration for r in focal])
    assert np.allclose(tr.meta["duration"], tr.meta["length"])
    rows = smart_sampling(map_events(tr.meta), class_limit=500, event_limit=5)
    targets = tr.multi_hot()[rows["file_id"].to_numpy()]
    _check_rows(rows, targets)  # every column the training needs is there
    audio = AudioCache(sample_rate=focal[0].sample_rate)
    x = decode_batch(rows.iloc[:2], audio, "event", 5.0, 0.5, np.random.default_rng(0))
    assert x.shape == (2, 5 * focal[0].sample_rate) and x.abs().sum() > 0


def test_train_duration_from_the_audio_header_or_a_clear_error(tmp_path):
    d = tmp_path / "XCL"
    d.mkdir()
    for i, n in enumerate(("XCL_0.wav", "XCL_1.wav")):
        sf.write(d / n, np.zeros(16_000 * (i + 1)), 16_000)
    meta = pd.DataFrame({"filepath": ["XCL_0.wav", "XCL_1.wav"], "ebird_code": ["a", "b"]})
    meta.to_parquet(d / "XCL_metadata.parquet")
    assert load_birdset(tmp_path, "XCL", "train").meta["duration"].tolist() == [
        1.0,
        2.0,
    ]  # no length: the header
    meta.assign(length=[1.0, float("nan")]).to_parquet(d / "XCL_metadata.parquet")
    with pytest.raises(ValueError, match=r"length must be a positive number of seconds .* at rows \[1\]"):
        load_birdset(tmp_path, "XCL", "train")
