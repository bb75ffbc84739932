"""Public functions refuse bad input with a ValueError naming the parameter."""

import pytest
import torch

from iclr25.birdset.features import power_to_db


@pytest.mark.parametrize("top_db", [-1.0, float("nan"), float("inf"), "80", True])
def test_power_to_db_refuses_a_bad_top_db(top_db):
    with pytest.raises(ValueError, match="top_db"):
        power_to_db(torch.rand(2, 4, 4), top_db=top_db)


def test_power_to_db_refuses_bad_amin_and_scope_and_keeps_its_values():
    x = torch.rand(2, 4, 4) + 1e-3
    for amin in (0.0, -1e-10, float("nan")):
        with pytest.raises(ValueError, match="amin"):
            power_to_db(x, amin=amin)
    with pytest.raises(ValueError, match="scope"):
        power_to_db(x, scope="channel")
    db = power_to_db(x, top_db=None)
    assert torch.allclose(db, 10 * torch.log10(x))
    clipped = power_to_db(x, top_db=3.0)
    assert float(clipped.min()) >= float(db.max()) - 3.0 - 1e-5


# --- issue #34: every public function ---------------------------------------------------------------
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from iclr25.birdset import (  # noqa: E402
    AudioCache,
    AugmentConfig,
    BirdTrainConfig,
    MelConfig,
    MelFrontend,
    SmallCNN,
    apply_class_mask,
    auroc,
    background_bank,
    class_mask,
    cmap5,
    decode_window,
    detect_events,
    evaluate_scores,
    event_mapping,
    event_window,
    event_windows,
    load_audio,
    make_focal_recordings,
    make_soundscapes,
    make_species,
    mel_filterbank,
    resample,
    smart_sampling,
    soundscape_windows,
    spec_augment,
    topk_accuracy,
    window_frames,
)
from iclr25.birdset.audio import pad_or_truncate  # noqa: E402
from iclr25.birdset.augment import (  # noqa: E402
    add_background,
    add_colored_noise,
    augment_batch,
    mix_batch,
    no_call_mix,
    random_gain,
    scale_to_snr,
)
from iclr25.birdset.synthetic import band_energy_db, colored_noise  # noqa: E402

_CASES = []


def case(label, param, fn):
    _CASES.append((label, param if isinstance(param, str) else "|".join(param), fn))


nan, inf = float("nan"), float("inf")
case("resample wave 2-D", "wave", lambda: resample(np.zeros((2, 100)), 16000, 8000))
case("resample wave nan", "wave", lambda: resample(np.full(100, nan), 16000, 8000))
case("resample sr bool", "orig_sr", lambda: resample(np.zeros(100), True, 8000))
case("resample empty", "wave", lambda: resample(np.zeros(0), 16000, 8000))
case("load sample_rate 0", "sample_rate", lambda: load_audio(b"RIFF", sample_rate=0))
case("pad length float", "length", lambda: pad_or_truncate(np.zeros(10), 5.5))
case("pad wave 2-D", "wave", lambda: pad_or_truncate(np.zeros((2, 10)), 5))
case("window sr 0", "sample_rate", lambda: window_frames(0.0, 1.0, 0))
case("window sr float", "sample_rate", lambda: window_frames(0.0, 1.0, 16000.5))
case("window start str", ("start", "window"), lambda: window_frames("0", 1.0, 16000))
case(
    "decode sample_rate 0", "sample_rate", lambda: decode_window("/nonexistent.wav", 0.0, 1.0, sample_rate=0)
)
case("AudioCache sample_rate 0", "sample_rate", lambda: AudioCache(0))
case("AudioCache max_bytes neg", "max_bytes", lambda: AudioCache(16000, max_bytes=-1))
case(
    "scale_to_snr shapes",
    ("signal", "noise"),
    lambda: scale_to_snr(torch.rand(2, 10), torch.rand(3, 10), torch.zeros(2)),
)
case(
    "scale_to_snr nan snr",
    "snr_db",
    lambda: scale_to_snr(torch.rand(2, 10), torch.rand(2, 10), torch.full((2,), nan)),
)
w, t = torch.rand(4, 100), torch.zeros(4, 3)
case("mix p 2", "p", lambda: mix_batch(w, t, p=2.0))
case("mix snr reversed", "snr", lambda: mix_batch(w, t, snr=(30.0, 3.0)))
case("mix snr nan", "snr", lambda: mix_batch(w, t, snr=(nan, 3.0)))
case("mix target rows", "target", lambda: mix_batch(w, torch.zeros(3, 3)))
case("background p nan", "p", lambda: add_background(w, torch.rand(2, 50), p=nan))
case("background bank 1-D", "bank", lambda: add_background(w, torch.rand(50)))
case("colored f_decay rev", "f_decay", lambda: add_colored_noise(w, f_decay=(2.0, -2.0)))
case("colored wave 1-D", "wave", lambda: add_colored_noise(torch.rand(100)))
case("gain p -1", "p", lambda: random_gain(w, p=-1.0))
case("gain gain_db nan", "gain_db", lambda: random_gain(w, gain_db=(nan, 0.0)))
case("no_call p 2", "p", lambda: no_call_mix(w, t, torch.rand(2, 50), p=2.0))
case("AugmentConfig p bool", "p_mix", lambda: AugmentConfig(p_mix=True))
case("AugmentConfig p nan", "p_mix", lambda: AugmentConfig(p_mix=nan))
case("AugmentConfig snr nan", "snr_db", lambda: AugmentConfig(snr_db=(nan, 3.0)))
case("AugmentConfig snr len3", "snr_db", lambda: AugmentConfig(snr_db=(1.0, 2.0, 3.0)))
case("augment cfg none", "cfg", lambda: augment_batch(w, t, None))
case(
    "augment wave nan",
    "wave",
    lambda: augment_batch(torch.full((4, 100), nan), t, AugmentConfig(p_background=0, p_no_call=0)),
)
case("mel n_freqs float", "n_freqs", lambda: mel_filterbank(2.5, 16000, 8))
case("mel sr 0", "sample_rate", lambda: mel_filterbank(257, 0, 8))
case("mel f_min nan", "f_min", lambda: mel_filterbank(257, 16000, 8, f_min=nan))
case("power_to_db negative power", "x", lambda: power_to_db(torch.full((1, 4, 4), -1.0)))
case("power_to_db nan", "x", lambda: power_to_db(torch.full((1, 4, 4), nan)))
case("spec_augment 2-D", "spec", lambda: spec_augment(torch.rand(4, 4), 2, 2, 0.5, 0.5))
case("spec_augment p 2", "p_freq", lambda: spec_augment(torch.rand(1, 4, 4), 2, 2, 2.0, 0.5))
case("spec_augment freq_mask float", "freq_mask", lambda: spec_augment(torch.rand(1, 4, 4), 2.5, 2, 0.5, 0.5))
case("spec_augment p_time nan", "p_time", lambda: spec_augment(torch.rand(1, 4, 4), 2, 2, 0.5, nan))
case("MelConfig mean nan", "mean", lambda: MelConfig(mean=nan))
case("MelConfig std nan", "std", lambda: MelConfig(std=nan))
case("MelConfig sr bool", "sample_rate", lambda: MelConfig(sample_rate=True))
case("MelConfig f_max > nyquist", "f_max", lambda: MelConfig(f_max=1e6))
case("MelConfig freq_mask neg", "freq_mask", lambda: MelConfig(freq_mask=-1))
case("MelConfig p_freq nan", "p_freq_mask", lambda: MelConfig(p_freq_mask=nan))
case("MelConfig n_frames neg", "seconds", lambda: MelConfig().n_frames(-1.0))
case("MelFrontend cfg bad", "cfg", lambda: MelFrontend("x"))
S = torch.rand(6, 3)
T = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
case("cmap5 min_pos bool", "min_positives", lambda: cmap5(S, T, min_positives=True))
case("auroc exclude_empty str", "exclude_empty", lambda: auroc(S, T, exclude_empty="no"))
case("topk include str", "include_nocalls", lambda: topk_accuracy(S, T, include_nocalls="yes"))
case("topk threshold bool", "threshold", lambda: topk_accuracy(S, T, threshold=True))
case("class_mask empty test", "test_labels", lambda: class_mask(["a", "b"], []))
case("class_mask dup test", "test_labels", lambda: class_mask(["a", "b"], ["a", "a"]))
case("class_mask str", ("model_labels", "test_labels"), lambda: class_mask("ab", "a"))
case("apply_mask targets 1-D", "targets", lambda: apply_class_mask(S, torch.zeros(6), torch.tensor([0])))
case("apply_mask rows", "targets", lambda: apply_class_mask(S, torch.zeros(5, 3), torch.tensor([0])))
case("apply_mask float mask", "mask", lambda: apply_class_mask(S, T, torch.tensor([0.5])))
case("evaluate_scores sigmoid str", "sigmoid", lambda: evaluate_scores(S, T, sigmoid="no"))
case("SmallCNN channels empty", "channels", lambda: SmallCNN(3, channels=()))
case("SmallCNN dropout 2", "dropout", lambda: SmallCNN(3, dropout=2.0))
case("SmallCNN n_classes bool", "n_classes", lambda: SmallCNN(True))
case("SmallCNN forward 3-D", "x", lambda: SmallCNN(3)(torch.rand(1, 16, 16)))
case("make_species k bool", "k", lambda: make_species(True))
case("make_species f_range rev", "f_range", lambda: make_species(2, f_range=(7000.0, 1500.0)))
case("make_species f_range neg", "f_range", lambda: make_species(2, f_range=(-1.0, 1500.0)))
sp = make_species(2)
case("colored_noise n 0", "n", lambda: colored_noise(0, 1.0, np.random.default_rng(0)))
case("colored_noise decay nan", "decay", lambda: colored_noise(100, nan, np.random.default_rng(0)))
case("band_energy band rev", "band", lambda: band_energy_db(np.random.rand(1000), 16000, (5000.0, 1000.0)))
case("band_energy sr 0", "sr", lambda: band_energy_db(np.random.rand(1000), 0, (1000.0, 5000.0)))
case("detect sr 0", "sr", lambda: detect_events(np.random.rand(16000), 0))
case("detect frame 0", "frame_s", lambda: detect_events(np.random.rand(16000), 16000, frame_s=0.0))
case("detect wave nan", "wave", lambda: detect_events(np.full(16000, nan), 16000))
case("detect band rev", "band", lambda: detect_events(np.random.rand(16000), 16000, band=(7000.0, 1000.0)))
case("focal per_species 0", "per_species", lambda: make_focal_recordings(sp, 0))
case(
    "focal coverage 2", "coverage", lambda: make_focal_recordings(sp, 1, duration_s=(2.0, 3.0), coverage=2.0)
)
case("focal duration rev", "duration_s", lambda: make_focal_recordings(sp, 1, duration_s=(3.0, 2.0)))
case("focal species empty", "species", lambda: make_focal_recordings([], 1))
case(
    "focal p_secondary nan",
    "p_secondary",
    lambda: make_focal_recordings(sp, 1, duration_s=(2.0, 3.0), p_secondary=nan),
)
case("scapes n 0", "n", lambda: make_soundscapes(sp, 0))
case("scapes duration 0", "duration_s", lambda: make_soundscapes(sp, 1, duration_s=0.0))
case(
    "scapes cpm neg",
    "calls_per_minute",
    lambda: make_soundscapes(sp, 1, duration_s=2.0, calls_per_minute=-1.0),
)
case("scapes snr rev", "snr_db", lambda: make_soundscapes(sp, 1, duration_s=2.0, snr_db=(10.0, -5.0)))
case("bank n 0", "n", lambda: background_bank(0, 1.0))
case("bank seconds neg", "seconds", lambda: background_bank(1, -1.0))
case("bank sr 0", "sample_rate", lambda: background_bank(1, 1.0, sample_rate=0))
case("BirdTrainConfig steps bool", "steps", lambda: BirdTrainConfig(steps=True))
case("BirdTrainConfig lr nan", "lr", lambda: BirdTrainConfig(lr=nan))
case("BirdTrainConfig wd nan", "weight_decay", lambda: BirdTrainConfig(weight_decay=nan))
case("BirdTrainConfig grad_clip neg", "grad_clip", lambda: BirdTrainConfig(grad_clip=-1.0))
case("BirdTrainConfig warmup nan", "warmup_frac", lambda: BirdTrainConfig(warmup_frac=nan))
case("BirdTrainConfig augment bad", "augment", lambda: BirdTrainConfig(augment=None))
case(
    "event_mapping nan window",
    "no_event_window",
    lambda: event_mapping(None, None, no_event_window=(nan, 5.0)),
)
case("event_mapping events shape", "detected_events", lambda: event_mapping([[1.0, 2.0, 3.0]], [0]))
case("event_window ext neg", "extension_time", lambda: event_window(1.0, 2.0, 10.0, extension_time=-1.0))
case(
    "event_window interval 0",
    "extracted_interval",
    lambda: event_window(1.0, 2.0, 10.0, extracted_interval=0.0),
)
case(
    "event_windows lens",
    ("starts", "ends", "durations"),
    lambda: event_windows(np.zeros(2), np.ones(3), np.ones(2)),
)
case(
    "soundscape min_overlap neg",
    "min_overlap",
    lambda: soundscape_windows(10.0, None, ["a"], min_overlap=-1.0),
)
case("soundscape classes empty", "classes", lambda: soundscape_windows(10.0, None, []))
case(
    "smart_sampling seed str",
    "seed",
    lambda: smart_sampling(pd.DataFrame({"ebird_code": ["a"], "filepath": ["f"]}), seed="x"),
)


@pytest.mark.parametrize("label, name, call", _CASES, ids=[c[0] for c in _CASES])
def test_public_function_refuses_bad_input_naming_the_parameter(label, name, call):
    with pytest.raises(ValueError, match=name):
        call()
