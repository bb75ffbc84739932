"""Event mapping, smart sampling, event decoding windows and soundscape windowing (official semantics)."""

import numpy as np
import pandas as pd
import pytest

from iclr25.birdset.audio import AudioCache
from iclr25.birdset.events import (
    _target_counts,
    event_mapping,
    event_window,
    event_windows,
    map_events,
    smart_sampling,
    soundscape_windows,
)


def test_event_mapping_cases():
    ev = [[1, 2], [3, 4], [6, 7]]
    assert event_mapping(ev, [0, -1, 0]) == [[1, 2], [6, 7]]
    assert event_mapping(ev, [1, 1, 2]) == [[1, 2], [3, 4]]
    assert event_mapping([[1, 2]], [-1]) == [[1, 2]]  # a lone noise event is kept
    assert event_mapping([[1, 2], [3, 4]], [-1, -1]) == [[0, 5]]
    assert event_mapping([], []) == [[0, 5]]
    assert event_mapping(ev, [2, 1, 3]) == [[3, 4]]  # tie of single-event clusters → smallest id
    assert event_mapping(ev, [0, 1, 0], biggest_cluster=False) == ev
    with pytest.raises(ValueError, match="event_cluster"):
        event_mapping(ev, [0, 1])


def test_map_events_explodes_rows():
    meta = pd.DataFrame(
        {
            "filepath": ["a", "b"],
            "ebird_code": ["x", "y"],
            "detected_events": [[[1, 2], [3, 4]], []],
            "event_cluster": [[0, 0], []],
        }
    )
    rows = map_events(meta)
    assert rows["filepath"].tolist() == ["a", "a", "b"]
    assert rows["event_start"].tolist() == [1, 3, 0] and rows["event_end"].tolist() == [2, 4, 5]
    with pytest.raises(ValueError, match="event_cluster"):
        map_events(meta.drop(columns="event_cluster"))


def test_event_window_checks():
    rng = np.random.default_rng(0)
    for _ in range(300):
        s, e = event_window(10.0, 10.5, 30.0, 8.0, 5.0, rng)
        assert 6.25 - 1e-9 <= s <= 9.25 + 1e-9 and e - s == pytest.approx(5.0)
        assert s <= 10.0 and e >= 10.5  # the event is inside every draw
        s, e = event_window(0.2, 0.6, 30.0, 8.0, 5.0, rng)
        assert 0.0 <= s <= 3.0 + 1e-9
    assert event_window(1.0, 2.0, 3.0, 8.0, 5.0, rng) == (0.0, 5.0)  # a 3-s file: [0, 5] (released)
    assert event_window(28.0, 29.5, 30.0, 8.0, 5.0, np.random.default_rng(1))[1] <= 30.0
    # vectorised version: same bounds, one draw per event
    s, e = event_windows(np.full(500, 10.0), np.full(500, 10.5), np.full(500, 30.0), 8.0, 5.0, rng)
    assert s.min() >= 6.25 - 1e-9 and s.max() <= 9.25 + 1e-9 and np.allclose(e - s, 5.0)
    assert s.std() > 0.5  # really random
    s, e = event_windows(np.array([1.0, 0.2]), np.array([2.0, 0.6]), np.array([3.0, 30.0]), 8.0, 5.0, rng)
    assert (s[0], e[0]) == (0.0, 5.0) and 0 <= s[1] <= 3.0
    with pytest.raises(ValueError, match="duration"):
        event_window(1.0, 2.0, 0.0)


def _released_time_shifting(start, end, total, extension_time, extracted_interval, u):
    """Transcription of the released ``EventDecoding._time_shifting``; ``random.uniform(a, b)`` is
    ``a + (b - a) * u`` for a uniform ``u`` in [0, 1) (also when ``b < a``)."""
    if end - start < extension_time:
        side = (extension_time - (end - start)) / 2
        new_start, new_end = max(0, start - side), min(total, end + side)
        if new_end - new_start < extension_time:
            if new_start == 0:
                new_end = min(extension_time, total)
            elif new_end == total:
                new_start = max(0, total - extension_time)
    else:
        new_start, new_end = start, end
    hi = max(0, new_end - extracted_interval)
    a = new_start + (hi - new_start) * u
    return a, a + extracted_interval


def test_event_windows_follow_the_released_time_shifting():
    rng = np.random.default_rng(3)
    n = 400
    total = rng.choice([1.5, 3.0, 4.9, 6.0, 12.0, 30.0], n)
    a = rng.random(n) * total
    b = np.minimum(total, a + rng.choice([0.05, 0.5, 2.0, 4.0, 7.0], n))
    for ext, interval in ((8.0, 5.0), (6.0, 5.0), (3.0, 5.0)):
        u = np.random.default_rng(11).random(n)
        s, e = event_windows(a, b, total, ext, interval, np.random.default_rng(11))
        ref = np.array([_released_time_shifting(*x, ext, interval, ui) for x, ui in zip(zip(a, b, total), u)])
        np.testing.assert_allclose(s, ref[:, 0], atol=1e-9)
        np.testing.assert_allclose(e, ref[:, 1], atol=1e-9)
        for i in range(0, n, 37):  # the scalar version draws the same way
            si, ei = event_window(a[i], b[i], total[i], ext, interval, np.random.default_rng(5))
            u5 = np.random.default_rng(5).random()
            ri = _released_time_shifting(a[i], b[i], total[i], ext, interval, u5)
            assert (si, ei) == pytest.approx(ri, abs=1e-9)
    # (last case: extension 3 s < interval 5 s) every window is 5 s long and covers an event shorter than 5 s
    assert np.allclose(e - s, 5.0) and (s >= 0).all()
    short = (b - a) < 5.0
    assert (s[short] <= a[short] + 1e-9).all() and (e[short] >= b[short] - 1e-9).all()


def test_short_file_is_padded_to_exactly_five_seconds():
    sr = 16_000
    cache = AudioCache(sr)
    cache.put("f", np.ones(3 * sr, np.float32))
    s, e = event_window(1.0, 2.0, 3.0, 8.0, 5.0)
    w = cache.window("f", s, e, 5.0)
    assert w.shape == (5 * sr,) and w[: 3 * sr].min() == 1.0 and w[3 * sr :].max() == 0.0


def _rows(counts, label="x"):
    return pd.DataFrame(
        {
            "filepath": np.repeat([f"f{i}" for i in range(len(counts))], counts),
            "ebird_code": label,
            "ev": np.arange(sum(counts)),
        }
    )


def test_smart_sampling_official_semantics():
    assert _target_counts(np.array([8, 4, 2, 1]), 6, 2).tolist() == [2, 2, 2, 1]
    assert _target_counts(np.array([8, 4, 2, 1]), 6, 5).tolist() == [2, 2, 2, 1]
    assert _target_counts(np.array([8, 4, 2, 1]), 600, 5).tolist() == [8, 4, 2, 1]
    assert _target_counts(np.array([5, 3, 1]), 6, 5).tolist() == [5, 3, 1]
    # the official loop never ends here (all files share the maximum); ours lowers one event at a time
    assert _target_counts(np.array([10, 10]), 6, 5).tolist() == [5, 5]
    assert _target_counts(np.array([10, 10]), 6, 1).tolist() == [3, 3]
    rows = pd.concat([_rows([8, 4, 2, 1]), _rows([3, 3], "y")], ignore_index=True)
    rows.loc[rows.ebird_code == "y", "filepath"] = ["g0"] * 3 + ["g1"] * 3
    kept = smart_sampling(rows, class_limit=6, event_limit=2, seed=0)
    per = kept[kept.ebird_code == "x"].groupby("filepath").size()
    assert per.to_dict() == {"f0": 2, "f1": 2, "f2": 2, "f3": 1}
    assert (kept[kept.ebird_code == "y"].groupby("filepath").size() == 3).all()  # total 6 <= limit: all kept
    assert set(kept["ev"]) <= set(rows["ev"])
    for f, g in kept.groupby("filepath"):  # kept events are the file's own events
        assert set(g["ev"]) <= set(rows[rows.filepath == f]["ev"])
    assert smart_sampling(rows, 6, 2, seed=0)["ev"].tolist() == kept["ev"].tolist()
    assert smart_sampling(rows, 6, 2, seed=1)["ev"].tolist() != kept["ev"].tolist()
    with pytest.raises(ValueError, match="class_limit"):
        smart_sampling(rows, 0, 2)


def test_soundscape_windows_overlap_rule():
    ann = pd.DataFrame(
        {"start_time": [1.0, 4.5, 12.0], "end_time": [2.0, 6.0, 13.0], "ebird_code": ["a", "b", "a"]}
    )
    starts, y = soundscape_windows(17.0, ann, ["a", "b"])
    assert starts.tolist() == [0.0, 5.0, 10.0]  # the incomplete last window is dropped
    assert y.tolist() == [[1, 1], [0, 1], [1, 0]]
    starts, y = soundscape_windows(17.0, ann, ["a", "b"], drop_last=False)
    assert len(starts) == 4 and y[3].sum() == 0  # a no-call window
    _, y = soundscape_windows(17.0, ann, ["a", "b"], min_overlap=0.6)
    assert y[0].tolist() == [1, 0]  # b overlaps the first window by only 0.5 s
    with pytest.raises(ValueError, match="not in classes"):
        soundscape_windows(17.0, ann, ["a"])
