"""One synthetic BirdSet-style benchmark per seed (the reproduction's data; README, "Reproduction").

:func:`build_benchmark` renders the species, the focal ("Xeno-canto") recordings with detector events, the PAM-like
soundscapes cut into 5-s windows and the no-bird background bank (:mod:`~iclr25.birdset.synthetic`), puts the audio
in an :class:`~iclr25.birdset.audio.AudioCache` and returns BirdSet-schema tables with a stratified file-level
train / valid split; :func:`detector_recall` scores the energy detector against the true phrases and
:func:`multi_hot` turns label lists into targets. ``cfg`` is any config with the experiment ``Config``'s data
fields (``n_species``, ``focal_*``, ``n_soundscapes``, ``soundscape_s``, ``calls_per_minute``, ``scape_snr_db``,
``n_background``, ``background_s``, ``max_phrases``, ``valid_frac``, ``mel``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..common.seeding import derive_seed
from .audio import AudioCache
from .events import soundscape_windows
from .synthetic import background_bank, make_focal_recordings, make_soundscapes, make_species


def build_benchmark(cfg: Any, seed: int):
    """Render one synthetic benchmark; returns (audio, tables) with BirdSet-schema DataFrames."""
    species = make_species(cfg.n_species, derive_seed(seed, "species"))
    classes = [s.code for s in species]
    focal = make_focal_recordings(
        species,
        cfg.focal_per_species,
        cfg.mel.sample_rate,
        "xeno_canto" if cfg.focal_lengths == "xeno_canto" else cfg.focal_duration,
        seed=derive_seed(seed, "focal"),
        max_phrases=cfg.max_phrases,
        xc_log_sd=cfg.focal_log_sd,
        xc_bounds=cfg.focal_bounds,
    )
    scapes = make_soundscapes(
        species,
        cfg.n_soundscapes,
        cfg.mel.sample_rate,
        cfg.soundscape_s,
        cfg.calls_per_minute,
        cfg.scape_snr_db,
        seed=derive_seed(seed, "scape"),
    )
    bank = background_bank(cfg.n_background, cfg.background_s, cfg.mel.sample_rate, derive_seed(seed, "bank"))
    audio = AudioCache(cfg.mel.sample_rate)
    for r in focal:
        audio.put(r.filepath, r.wave)
    for s in scapes:
        audio.put(s.filepath, s.wave)
    meta = pd.DataFrame(
        {
            "filepath": [r.filepath for r in focal],
            "ebird_code": [r.primary for r in focal],
            "ebird_code_multilabel": [r.labels for r in focal],
            "detected_events": [r.detected_events for r in focal],
            "event_cluster": [r.event_cluster for r in focal],
            "duration": [r.duration for r in focal],
            "true_events": [r.true_events for r in focal],  # primary-species phrases (diagnostics only)
        }
    )
    rng = np.random.default_rng(derive_seed(seed, "split"))
    is_valid = np.zeros(len(meta), bool)
    for _, idx in meta.groupby("ebird_code").indices.items():  # stratified file-level split
        n_val = max(1, int(round(cfg.valid_frac * len(idx))))
        is_valid[rng.choice(idx, n_val, replace=False)] = True
    win_rows, win_y = [], []
    for s in scapes:
        starts, y = soundscape_windows(len(s.wave) / cfg.mel.sample_rate, s.annotations, classes)
        win_rows += [{"filepath": s.filepath, "start_time": a, "end_time": a + 5.0} for a in starts]
        win_y.append(y)
    recall = detector_recall(focal)
    return audio, bank, classes, meta, is_valid, pd.DataFrame(win_rows), np.concatenate(win_y), recall


def detector_recall(focal) -> float:
    """Fraction of the focal recordings' true primary-species phrases that a detected event overlaps with IoU ≥ 0.5."""
    hit = tot = 0
    for r in focal:
        ev = np.asarray(r.detected_events, float).reshape(-1, 2)
        for a0, a1 in r.true_events:
            tot += 1
            if len(ev):
                inter = np.clip(np.minimum(a1, ev[:, 1]) - np.maximum(a0, ev[:, 0]), 0, None)
                union = np.maximum(a1, ev[:, 1]) - np.minimum(a0, ev[:, 0])
                hit += bool((inter / union).max() >= 0.5)
    return hit / max(tot, 1)


def multi_hot(labels, classes) -> np.ndarray:
    """(len(labels), len(classes)) float32 targets: 1 where a row's label list names the class."""
    index = {c: i for i, c in enumerate(classes)}
    y = np.zeros((len(labels), len(classes)), np.float32)
    for i, ls in enumerate(labels):
        y[i, [index[c] for c in ls]] = 1.0
    return y
