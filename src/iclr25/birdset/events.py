"""Event-centred training windows and soundscape test windows (paper §3 "Training", Appendix "Data processing").

Focal Xeno-canto recordings carry weak labels and ``detected_events`` ([start, end] seconds) with an
``event_cluster`` id per event (from an unsupervised detector + clusterer; cluster −1 = noise).

1. :func:`event_mapping` — ``XCEventMapping(biggest_cluster=True)``: one training row per event of the most
   frequent non-noise cluster (assumed to be the primary species); a recording without usable events gives one
   row with window [0, 5] s.
2. :func:`smart_sampling` — ``_smart_sampling(class_limit, event_limit)``: per class, lowers the per-file event
   counts of the most represented files step by step (official semantics, with a termination guard).
3. :func:`event_window` — ``EventDecoding``: extend the event symmetrically to ``extension_time`` seconds (clipped
   to the file), then draw a random ``extracted_interval``-second window inside (or, for a shorter span, one
   covering it: a 3-s file gives [0, 5]).
4. :func:`soundscape_windows` — consecutive 5-s test windows with multi-hot labels from strong annotations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..common.checks import need_range as _check_range_pair
from ..common.checks import need_real as _check_num

__all__ = [
    "event_mapping",
    "map_events",
    "smart_sampling",
    "event_window",
    "event_windows",
    "soundscape_windows",
]


def event_mapping(
    detected_events: Sequence[Sequence[float]] | np.ndarray | None,
    event_cluster: Sequence[int] | np.ndarray | None,
    biggest_cluster: bool = True,
    no_event_window: tuple[float, float] = (0.0, 5.0),
) -> list[list[float]]:
    """Event windows kept for one recording (``XCEventMapping``).

    Noise events (cluster −1) are dropped unless the recording has exactly one event and it is noise; with
    ``biggest_cluster`` only events of the most frequent remaining cluster are kept (ties → the smallest cluster
    id, as ``np.unique(...)[argmax]``); no event left → ``[no_event_window]``.
    """
    nw = no_event_window
    if not isinstance(nw, (tuple, list)) or len(nw) != 2:
        raise ValueError(f"no_event_window must be a (start, end) pair, got {nw!r}")
    _check_range_pair("no_event_window", nw, 0.0)
    if detected_events is not None:
        for e in detected_events:
            if len(e) != 2:
                raise ValueError(f"detected_events must be [start, end] pairs, got an entry {list(e)!r}")
    ev_list = (
        [] if detected_events is None else [[float(t) for t in e] for e in detected_events]
    )  # parquet: arrays
    ev = np.asarray(ev_list, dtype=float).reshape(-1, 2)
    cl = np.asarray([] if event_cluster is None else event_cluster, dtype=int).reshape(-1)
    if len(cl) != len(ev):
        raise ValueError(f"event_cluster must have one id per detected event ({len(ev)}), got {len(cl)} ids")
    if not np.isfinite(ev).all():
        raise ValueError("detected_events must be finite [start, end] pairs, got NaN/inf")
    if (ev[:, 1] < ev[:, 0]).any():
        raise ValueError(
            f"detected_events must have end >= start, got {ev[ev[:, 1] < ev[:, 0]][:3].tolist()}"
        )
    if not (len(cl) == 1 and cl[0] == -1):  # the lone noise event is kept, any other noise event dropped
        keep = cl != -1
        ev, cl = ev[keep], cl[keep]
    if len(ev) == 0:
        return [list(map(float, no_event_window))]
    if biggest_cluster:
        values, count = np.unique(cl, return_counts=True)
        ev = ev[cl == values[count.argmax()]]
    return ev.tolist()


def map_events(meta: pd.DataFrame, biggest_cluster: bool = True) -> pd.DataFrame:
    """Explode a BirdSet training table into one row per kept event (column ``detected_events`` → [start, end]).

    ``meta`` needs ``filepath``, ``detected_events`` and ``event_cluster``; other columns are copied per row and a
    ``file_id`` column (the original row number) is added.
    """
    for col in ("filepath", "detected_events", "event_cluster"):
        if col not in meta.columns:
            raise ValueError(
                f"meta must have a {col!r} column (BirdSet train schema), got {list(meta.columns)}"
            )
    windows = [
        event_mapping(e, c, biggest_cluster)
        for e, c in zip(meta["detected_events"].tolist(), meta["event_cluster"].tolist())
    ]
    counts = np.array([len(w) for w in windows])
    out = meta.iloc[np.repeat(np.arange(len(meta)), counts)].copy()
    out["file_id"] = np.repeat(np.arange(len(meta)), counts)
    flat = [w for ws in windows for w in ws]
    out["detected_events"] = flat
    out["event_start"] = [w[0] for w in flat]
    out["event_end"] = [w[1] for w in flat]
    return out.reset_index(drop=True)


def _target_counts(counts: np.ndarray, class_limit: int, event_limit: int) -> np.ndarray:
    """Per-file event counts after the smart-sampling loop for one class (official semantics + guard).

    While the class has more than ``class_limit`` events in total (or the largest per-file count differs from
    ``event_limit``), every file holding the current maximum is lowered to the next lower count level; the loop
    stops before a step that would leave fewer than ``class_limit`` events, and when the maximum equals
    ``event_limit`` or reaches 1. Guard: when all files share the maximum there is no lower level and the
    official loop never ends (step of size 0); we lower by one event instead, so the maximum decreases
    strictly and the loop always terminates.
    """
    c = counts.astype(int).copy()
    while len(c):
        m = int(c.max())
        if m <= 1 or m == event_limit:
            break
        lower = c[c < m]
        nxt = int(lower.max()) if lower.size else m - 1
        new = np.where(c == m, nxt, c)
        if new.sum() < class_limit:
            break
        c = new
    return c


def smart_sampling(
    rows: pd.DataFrame,
    class_limit: int = 500,
    event_limit: int = 5,
    label_column: str = "ebird_code",
    file_column: str = "filepath",
    seed: int = 0,
) -> pd.DataFrame:
    """Limit events per class and per file (``BaseDataModuleHF._smart_sampling``), keeping a random subset.

    ``rows``: one row per event (after :func:`map_events`). Per class (``label_column``, the primary label),
    :func:`_target_counts` decides how many events each file keeps; that many of the file's events are drawn
    uniformly without replacement. Classes with ≤ ``class_limit`` events keep all of them; the result may exceed
    ``class_limit`` (official behaviour). Returns the kept rows in their original order.
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    if not isinstance(class_limit, int) or class_limit < 1:
        raise ValueError(f"class_limit must be an int >= 1, got {class_limit!r}")
    if not isinstance(event_limit, int) or event_limit < 1:
        raise ValueError(f"event_limit must be an int >= 1, got {event_limit!r}")
    for col in (label_column, file_column):
        if col not in rows.columns:
            raise ValueError(f"rows must have a {col!r} column, got {list(rows.columns)}")
    if len(rows) == 0:
        return rows.copy()
    key = rows[file_column].astype(str) + "\x00" + rows[label_column].astype(str)
    sizes = key.map(key.value_counts())
    allowed = pd.Series(0, index=rows.index)
    per_file = rows.assign(_key=key, _n=sizes).drop_duplicates("_key")
    for _, grp in per_file.groupby(label_column, sort=False):
        tgt = _target_counts(grp["_n"].to_numpy(), class_limit, event_limit)
        allowed.loc[grp.index] = tgt  # one representative row per file; broadcast below
    cap = key.map(pd.Series(allowed.loc[per_file.index].to_numpy(), index=per_file["_key"].to_numpy()))
    rng = np.random.default_rng(seed)
    rank = pd.Series(rng.random(len(rows)), index=rows.index).groupby(key).rank(method="first") - 1
    return rows[rank.to_numpy() < cap.to_numpy()].copy()


def _check_extension(extension_time, extracted_interval) -> None:
    if extension_time is not None:
        _check_num("extension_time", extension_time, 0.0)
    if extracted_interval is not None:
        _check_num("extracted_interval", extracted_interval, 0.0, lo_open=True)


def event_window(
    event_start: float,
    event_end: float,
    duration: float,
    extension_time: float | None = 6.0,
    extracted_interval: float | None = 5.0,
    rng: np.random.Generator | None = None,
) -> tuple[float, float]:
    """``EventDecoding``: the [start, end] seconds to read for one training event.

    The event is widened symmetrically to ``extension_time`` (if shorter); a window clipped at 0 becomes
    [0, min(extension, duration)], one clipped at the file end becomes [max(0, duration − extension), duration].
    Then an ``extracted_interval``-second window is drawn as the released ``_time_shifting`` does, with start
    ``uniform(span start, max(0, span end − extracted_interval))``: inside the span when it is longer, covering
    it (clipped at 0) when it is shorter — a file shorter than 5 s gives [0, 5], read to the file end and
    zero-padded to the model's clip length by the decoder.
    """
    if not (np.isfinite(event_start) and np.isfinite(event_end) and np.isfinite(duration)):
        raise ValueError(f"event and duration must be finite, got ({event_start}, {event_end}, {duration})")
    if duration <= 0:
        raise ValueError(f"duration must be > 0 seconds, got {duration}")
    start, end = float(event_start), float(event_end)
    _check_extension(extension_time, extracted_interval)
    if end < start:
        raise ValueError(f"event_end must be >= event_start, got [{start}, {end}]")
    if extension_time:
        if end - start < extension_time:
            side = (extension_time - (end - start)) / 2
            start, end = start - side, end + side
            if start < 0:
                start, end = 0.0, min(extension_time, duration)
            elif end > duration:
                start, end = max(0.0, duration - extension_time), duration
    if extracted_interval:
        lo = max(0.0, end - extracted_interval)
        if end - start > extracted_interval:
            rng = rng if rng is not None else np.random.default_rng()
            start = float(rng.uniform(start, lo))
        elif end - start < extracted_interval:  # released: uniform(start, lo) with lo < start
            rng = rng if rng is not None else np.random.default_rng()
            start = float(start + rng.random() * (lo - start))
        end = start + extracted_interval
    return start, end


def event_windows(
    starts: np.ndarray,
    ends: np.ndarray,
    durations: np.ndarray,
    extension_time: float | None = 6.0,
    extracted_interval: float | None = 5.0,
    rng: np.random.Generator | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised :func:`event_window` for a batch of events (same semantics, one uniform draw per event)."""
    s = np.asarray(starts, dtype=float).copy()
    e = np.asarray(ends, dtype=float).copy()
    d = np.asarray(durations, dtype=float)
    if not (s.shape == e.shape == d.shape):
        raise ValueError(
            f"starts, ends and durations must have one shape, got {s.shape}, {e.shape}, {d.shape}"
        )
    _check_extension(extension_time, extracted_interval)
    if not (np.isfinite(s).all() and np.isfinite(e).all() and np.isfinite(d).all()) or (d <= 0).any():
        raise ValueError("starts/ends must be finite and durations finite and > 0")
    if extension_time:
        short = (e - s) < extension_time
        side = np.where(short, (extension_time - (e - s)) / 2, 0.0)
        s, e = s - side, e + side
        lo, hi = short & (s < 0), short & (s >= 0) & (e > d)
        s = np.where(lo, 0.0, np.where(hi, np.maximum(0.0, d - extension_time), s))
        e = np.where(lo, np.minimum(extension_time, d), np.where(hi, d, e))
    if extracted_interval:
        rng = rng if rng is not None else np.random.default_rng()
        span = e - s
        u = rng.random(s.shape)
        long_s = s + u * np.maximum(span - extracted_interval, 0.0)
        short_s = s + u * (np.maximum(0.0, e - extracted_interval) - s)  # a window covering the span
        s = np.where(span > extracted_interval, long_s, np.where(span < extracted_interval, short_s, s))
        e = s + extracted_interval
    return s, e


def soundscape_windows(
    duration: float,
    annotations: pd.DataFrame | None,
    classes: Sequence[str],
    window: float = 5.0,
    min_overlap: float = 0.0,
    drop_last: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """Consecutive ``window``-second segments of a soundscape and their multi-hot labels.

    ``annotations``: columns ``start_time``, ``end_time``, ``ebird_code`` (strong labels). A segment is labelled
    with a class when an annotation of that class overlaps it by more than ``min_overlap`` seconds (the rule used
    to build ``test_5s`` is not published; "any overlap" is assumed). ``drop_last`` drops an incomplete last
    segment. Returns ``starts (n,)`` and ``labels (n, len(classes))`` (uint8; all-zero rows are no-call windows).
    """
    if not np.isfinite(duration) or duration <= 0:
        raise ValueError(f"duration must be finite and > 0, got {duration}")
    if window <= 0:
        raise ValueError(f"window must be > 0 seconds, got {window}")
    _check_num("min_overlap", min_overlap, 0.0)
    if isinstance(classes, str) or not hasattr(classes, "__len__") or len(classes) == 0:
        raise ValueError(f"classes must be a non-empty list of label codes, got {classes!r:.60}")
    n = int(np.floor(duration / window + 1e-9)) if drop_last else int(np.ceil(duration / window - 1e-9))
    starts = np.arange(n) * window
    index = {str(c): i for i, c in enumerate(classes)}
    labels = np.zeros((n, len(index)), dtype=np.uint8)
    if annotations is not None and len(annotations) and n:
        a0 = annotations["start_time"].to_numpy(float)
        a1 = annotations["end_time"].to_numpy(float)
        codes = annotations["ebird_code"].astype(str).tolist()
        unknown = sorted({c for c in codes if c not in index})
        if unknown:
            raise ValueError(f"annotations hold code(s) not in classes: {unknown[:5]}")
        ci = np.array([index[c] for c in codes])
        ov = np.minimum(a1[None], starts[:, None] + window) - np.maximum(
            a0[None], starts[:, None]
        )  # (n, ann)
        hit = ov > min_overlap
        w, j = np.nonzero(hit)
        labels[w, ci[j]] = 1
    return starts, labels
