"""Reading the BirdSet data layout without its loading script.

The Hugging Face dataset ``DBD-research-group/BirdSet`` is a loading-script dataset (``BirdSet.py``) that works
only with ``datasets <= 3.6``. Its payload is plain files, one folder per dataset code::

    <root>/HSN/HSN_metadata_train.parquet     HSN_train_shard_0001.tar.gz, ...   (focal Xeno-canto, "train")
    <root>/HSN/HSN_metadata_test.parquet      HSN_test_shard_0001.tar.gz, ...    (soundscapes + strong labels)
    <root>/HSN/HSN_metadata_test_5s.parquet   HSN_test5s_shard_0001.tar.gz       (5-s segments, multi-hot)
    <root>/XCL/XCL_metadata.parquet           XCL_shard_0001.tar.gz, ...         (XCM/XCL, validation = POW test_5s)

Metadata rows are matched to audio members by file *basename* (as the loading script does). :func:`load_birdset`
reads the parquet with pandas, extracts the shards it needs once (resumable, basenames only — archive paths are
never trusted) and returns a :class:`BirdSetSplit` with absolute ``filepath`` s. Configs follow the hub names:
``HSN`` (train/test/test_5s), ``HSN_xc`` (train), ``HSN_scape`` (test/test_5s), ``XCM`` / ``XCL`` (train/valid).
:func:`write_birdset_layout` writes our synthetic data in the same layout, so one loader serves both.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

__all__ = ["BirdSetSplit", "load_birdset", "class_list", "write_birdset_layout", "SPLITS"]

DATASETS = ("PER", "NES", "UHH", "HSN", "NBP", "POW", "SSW", "SNE", "XCM", "XCL")
SPLITS = ("train", "test", "test_5s", "valid")
AUDIO_EXT = (".ogg", ".wav", ".flac", ".mp3")


@dataclass
class BirdSetSplit:
    """One split: metadata (``filepath`` absolute), its class list and where its audio lives."""

    config: str
    split: str
    meta: pd.DataFrame
    classes: list[str]

    def __len__(self) -> int:
        return len(self.meta)

    def codes(self, row: int) -> list[str]:
        return self.code_lists()[row]

    def code_lists(self) -> list[list[str]]:
        """Label codes per row: ``ebird_code_multilabel`` (empty = no-call in test_5s) else ``ebird_code``."""
        n = len(self.meta)
        multi = (
            self.meta["ebird_code_multilabel"].tolist()
            if "ebird_code_multilabel" in self.meta
            else [None] * n
        )
        single = self.meta["ebird_code"].tolist() if "ebird_code" in self.meta else [None] * n
        return [_codes(m, c, self.split) for m, c in zip(multi, single)]

    def multi_hot(self, classes: Sequence[str] | None = None) -> np.ndarray:
        """(rows, classes) uint8 targets from ``ebird_code_multilabel`` (or ``ebird_code`` when absent)."""
        classes = list(self.classes if classes is None else classes)
        index = {c: i for i, c in enumerate(classes)}
        lists = self.code_lists()
        unknown = sorted({c for codes in lists for c in codes if c not in index})
        if unknown:
            raise ValueError(
                f"labels {unknown[:5]} of split {self.split!r} are not in the class list "
                f"({len(classes)} classes); pass the model's label list or a class mask"
            )
        y = np.zeros((len(lists), len(classes)), np.uint8)
        rows = np.repeat(np.arange(len(lists)), [len(c) for c in lists])
        y[rows, [index[c] for codes in lists for c in codes]] = 1
        return y

    def to_hf_dataset(self):
        """The split as a ``datasets.Dataset`` with an ``audio`` column (``Audio(decode=False)``)."""
        import datasets

        df = self.meta.copy()
        for col in df.columns:  # nested arrays → lists for arrow
            if df[col].dtype == object:
                df[col] = df[col].map(lambda v: v.tolist() if isinstance(v, np.ndarray) else v)
        ds = datasets.Dataset.from_pandas(df, preserve_index=False)
        ds = ds.add_column("audio", [{"path": p, "bytes": None} for p in df["filepath"]])
        return ds.cast_column("audio", datasets.Audio(decode=False))


def _listify(v) -> list:
    if v is None or (isinstance(v, float) and np.isnan(v)):
        return []
    if isinstance(v, np.ndarray):
        return [x.tolist() if isinstance(x, np.ndarray) else x for x in v]
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and np.isnan(v))


def _codes(multi, single, split: str) -> list[str]:
    if not _is_missing(multi) and not (isinstance(multi, str) and not multi):
        codes = _listify(multi)
        if codes or split in ("test_5s", "valid"):
            return [str(c) for c in codes]
    if split in ("test_5s", "valid") and not _is_missing(multi):
        return []
    return [] if _is_missing(single) else [str(single)]


def _files(config: str, split: str) -> tuple[str, str, str]:
    """(dataset folder, metadata file name, shard prefix) of a config's split."""
    ds = config.removesuffix("_xc").removesuffix("_scape")
    if ds not in DATASETS:
        raise ValueError(f"config must be one of {DATASETS} (optionally with _xc / _scape), got {config!r}")
    allowed = {"_xc": ("train",), "_scape": ("test", "test_5s")}
    for suf, ok in allowed.items():
        if config.endswith(suf) and split not in ok:
            raise ValueError(f"config {config!r} has splits {ok}, got split={split!r}")
    if ds in ("XCM", "XCL"):
        if split == "train":
            return ds, f"{ds}_metadata.parquet", f"{ds}_shard_"
        if split == "valid":
            return "POW", "POW_metadata_test_5s.parquet", "POW_test5s_shard_"
        raise ValueError(f"config {config!r} has splits ('train', 'valid'), got split={split!r}")
    if split == "valid":
        raise ValueError(
            f"config {config!r} has no 'valid' split (DT uses 20 % of train as focal validation)"
        )
    shard = {"train": "train", "test": "test", "test_5s": "test5s"}[split]
    return ds, f"{ds}_metadata_{split}.parquet", f"{ds}_{shard}_shard_"


def _extract(shards: list[Path], dest: Path, wanted: set[str]) -> None:
    """Extract audio members whose basename is wanted; skip files already complete (resumable)."""
    dest.mkdir(parents=True, exist_ok=True)
    for shard in shards:
        with tarfile.open(shard, "r:*") as tf:
            for m in tf:
                name = os.path.basename(m.name)
                if not m.isfile() or name not in wanted or not name.lower().endswith(AUDIO_EXT):
                    continue
                target = dest / name
                if target.exists() and target.stat().st_size == m.size:
                    continue
                src = tf.extractfile(m)
                if src is None:
                    continue
                tmp = target.with_name(target.name + ".part")
                with open(tmp, "wb") as fh:
                    fh.write(src.read())
                os.replace(tmp, target)


def load_birdset(
    root: str | os.PathLike,
    config: str,
    split: str,
    classes: Sequence[str] | None = None,
    extract_dir: str | os.PathLike | None = None,
) -> BirdSetSplit:
    """Read one split of a local copy of the BirdSet hub files (see module docstring for the layout).

    Audio is looked up by basename in, in order: an ``<split>`` folder beside the metadata, the folder itself,
    then ``extract_dir`` (default ``<root>/<DS>/extracted/<split>``), extracting the split's tar shards there
    when files are missing. ``classes``: label list (default: sorted codes seen in the split).
    """
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    folder, meta_name, shard_prefix = _files(config, split)
    base = Path(root).expanduser() / folder
    meta_path = base / meta_name
    if not meta_path.exists():
        raise ValueError(f"root has no {folder}/{meta_name} (looked for {meta_path}); is it a BirdSet copy?")
    meta = pd.read_parquet(meta_path)
    if meta.index.name == "filepath" and "filepath" not in meta.columns:
        meta = meta.reset_index()
    if "filepath" not in meta.columns:
        raise ValueError(f"{meta_path} has no 'filepath' column or index, got columns {list(meta.columns)}")
    meta = meta.reset_index(drop=True)
    names = meta["filepath"].astype(str).map(os.path.basename)
    sub = "test5s" if split in ("test_5s", "valid") else split
    extract = Path(extract_dir) if extract_dir is not None else base / "extracted" / sub
    candidates = [base / sub, base, extract]

    def find(n: str) -> Path | None:
        for c in candidates:
            p = c / n
            if p.exists():
                return p
        return None

    missing = {n for n in set(names) if find(n) is None}
    if missing:
        shards = sorted(base.glob(f"{shard_prefix}*.tar*"))
        if not shards:
            raise ValueError(
                f"{len(missing)} audio file(s) of {config}/{split} are neither extracted nor in shards "
                f"{shard_prefix}*.tar.gz under {base} (e.g. {sorted(missing)[:3]})"
            )
        _extract(shards, extract, missing)
        still = {n for n in missing if find(n) is None}
        if still:
            raise ValueError(f"{len(still)} audio file(s) not found in the shards, e.g. {sorted(still)[:3]}")
    meta["filepath"] = [str(find(n)) for n in names]
    if split == "train" and "duration" not in meta.columns:
        meta["duration"] = _durations(meta)
    if classes is None:
        classes = sorted({c for codes in BirdSetSplit(config, split, meta, []).code_lists() for c in codes})
    return BirdSetSplit(config, split, meta, [str(c) for c in classes])


def _durations(meta: pd.DataFrame) -> np.ndarray:
    """Seconds of audio per training row — the column the training pipeline decodes against (``duration``). The
    hub's train metadata calls it ``length``; a copy without it gets each file's length from its audio header."""
    if "length" in meta.columns:
        d = pd.to_numeric(meta["length"], errors="coerce").to_numpy(float)
        if np.isfinite(d).all() and (d > 0).all():
            return d
        bad = np.flatnonzero(~(np.isfinite(d) & (d > 0)))[:3].tolist()
        raise ValueError(
            f"length must be a positive number of seconds in every train row (the recording's duration), got "
            f"{meta['length'].iloc[bad].tolist()} at rows {bad}"
        )
    import soundfile as sf

    return np.array([sf.info(fp).duration for fp in meta["filepath"]], float)


def class_list(*splits: BirdSetSplit) -> list[str]:
    """Sorted union of the label codes of several splits (e.g. train + test of a DT dataset)."""
    return sorted({c for s in splits for codes in s.code_lists() for c in codes})


def write_birdset_layout(
    root: str | os.PathLike,
    name: str,
    focal: Sequence | None = None,
    soundscapes: Sequence | None = None,
    audio_format: str = "wav",
    shards: bool = False,
    window: float = 5.0,
) -> Path:
    """Write synthetic focal recordings / soundscapes as a BirdSet dataset folder ``<root>/<name>``.

    ``focal``: :class:`~iclr25.birdset.synthetic.FocalRecording` s → ``<name>_metadata_train.parquet``;
    ``soundscapes``: :class:`~iclr25.birdset.synthetic.Soundscape` s → ``_metadata_test.parquet`` (one row per
    call) and ``_metadata_test_5s.parquet`` (consecutive windows of the full files, multi-hot labels). With
    ``shards`` the audio goes into ``*_shard_0001.tar.gz`` archives as on the hub, else into split folders.
    """
    import soundfile as sf

    from .events import soundscape_windows

    if name not in DATASETS:
        raise ValueError(f"name must be a BirdSet dataset code {DATASETS}, got {name!r}")
    if audio_format not in ("wav", "flac", "ogg"):
        raise ValueError(f"audio_format must be 'wav', 'flac' or 'ogg', got {audio_format!r}")
    base = Path(root).expanduser() / name
    base.mkdir(parents=True, exist_ok=True)

    def write_audio(items: list[tuple[str, np.ndarray, int]], split: str) -> None:
        folder = base / ("_staging_" + split if shards else split)
        folder.mkdir(parents=True, exist_ok=True)
        for fname, wave, sr in items:
            sf.write(folder / fname, wave, sr, format=audio_format.upper())
        if shards:
            with tarfile.open(base / f"{name}_{split}_shard_0001.tar.gz", "w:gz") as tf:
                for fname, _, _ in items:
                    tf.add(folder / fname, arcname=f"{split}/{fname}")
            for fname, _, _ in items:
                (folder / fname).unlink()
            folder.rmdir()

    def rename(fp: str) -> str:
        return str(Path(fp).with_suffix("." + audio_format))

    if focal:
        rows = []
        for r in focal:
            rows.append(
                {
                    "filepath": rename(r.filepath),
                    "start_time": None,
                    "end_time": None,
                    "ebird_code": r.primary,
                    "ebird_code_multilabel": list(r.labels),
                    "ebird_code_secondary": [c for c in r.labels if c != r.primary],
                    "detected_events": [list(map(float, e)) for e in r.detected_events],
                    "event_cluster": [int(c) for c in r.event_cluster],
                    "length": float(r.duration),
                }
            )
        pd.DataFrame(rows).to_parquet(base / f"{name}_metadata_train.parquet", index=False)
        write_audio([(rename(r.filepath), r.wave, r.sample_rate) for r in focal], "train")
    if soundscapes:
        test_rows, w_rows = [], []
        classes = sorted({c for s in soundscapes for c in s.annotations["ebird_code"]})
        for s in soundscapes:
            fp = rename(s.filepath)
            for _, a in s.annotations.iterrows():
                test_rows.append(
                    {
                        "filepath": fp,
                        "start_time": float(a.start_time),
                        "end_time": float(a.end_time),
                        "ebird_code": a.ebird_code,
                        "low_freq": float(a.low_freq),
                        "high_freq": float(a.high_freq),
                    }
                )
            starts, lab = soundscape_windows(len(s.wave) / s.sample_rate, s.annotations, classes, window)
            for st, y in zip(starts, lab):
                w_rows.append(
                    {
                        "filepath": fp,
                        "start_time": float(st),
                        "end_time": float(st + window),
                        "ebird_code_multilabel": [classes[j] for j in np.nonzero(y)[0]],
                    }
                )
        pd.DataFrame(
            test_rows, columns=["filepath", "start_time", "end_time", "ebird_code", "low_freq", "high_freq"]
        ).to_parquet(base / f"{name}_metadata_test.parquet", index=False)
        pd.DataFrame(w_rows).to_parquet(base / f"{name}_metadata_test_5s.parquet", index=False)
        items = [(rename(s.filepath), s.wave, s.sample_rate) for s in soundscapes]
        write_audio(items, "test")
        if shards:  # the hub ships test_5s audio in its own shards
            write_audio(items, "test5s")
        else:
            (base / "test5s").mkdir(exist_ok=True)
            for fname, _, _ in items:
                link = base / "test5s" / fname
                if not link.exists():
                    os.link(base / "test" / fname, link)
    return base
