"""Procedural bird audio: requested SNRs are met in the call band, the event detector finds the calls."""

import numpy as np

from iclr25.birdset.synthetic import band_energy_db, make_focal_recordings, make_soundscapes, make_species


def test_soundscape_calls_meet_requested_snr():
    sp = make_species(5, seed=0)
    band = {s.code: s.band for s in sp}
    scapes = make_soundscapes(sp, 2, duration_s=30.0, calls_per_minute=12, seed=1)
    n = 0
    for s in scapes:
        sr = s.sample_rate
        for _, a in s.annotations.iterrows():
            i0, i1 = int(round(a.start_time * sr)), int(round(a.end_time * sr))
            mix = band_energy_db(s.wave[i0:i1], sr, band[a.ebird_code])
            bg = band_energy_db(s.background[i0:i1], sr, band[a.ebird_code])
            assert mix - bg >= a.snr_db - 3.0
            n += 1
    assert n >= 5


def test_detector_recovers_focal_calls():
    sp = make_species(4, seed=2)
    recs = make_focal_recordings(sp, 5, duration_s=(8.0, 12.0), seed=3)
    hit = tot = 0
    for r in recs:
        ev = np.asarray(r.detected_events, float).reshape(-1, 2)
        for a0, a1 in r.true_events:
            tot += 1
            if len(ev):
                inter = np.clip(np.minimum(a1, ev[:, 1]) - np.maximum(a0, ev[:, 0]), 0, None)
                union = np.maximum(a1, ev[:, 1]) - np.minimum(a0, ev[:, 0])
                hit += (inter / union).max() >= 0.5
        assert len(r.event_cluster) == len(r.detected_events)
        assert r.primary == r.labels[0] and 8.0 <= r.duration <= 12.0
    assert hit / tot >= 0.9, hit / tot
    # same seed → same audio
    again = make_focal_recordings(sp, 5, duration_s=(8.0, 12.0), seed=3)
    assert all(np.array_equal(a.wave, b.wave) for a, b in zip(recs, again))
