"""Runner: a learning signal on procedural birds, the LT class-mask mechanics, model families, bad input."""

import numpy as np
import pandas as pd
import pytest
import torch

from iclr25.birdset import (
    AudioCache,
    AugmentConfig,
    BirdTrainConfig,
    MelConfig,
    MelFrontend,
    SmallCNN,
    class_mask,
    evaluate,
    evaluate_scores,
    hf_audio_model,
    make_focal_recordings,
    make_species,
    map_events,
    predict,
    train,
)

SR = 16_000
MEL = MelConfig(sample_rate=SR, n_fft=512, hop_length=512, n_mels=32, freq_mask=50, time_mask=31)


def _data(k, per, seed):
    sp = make_species(k, seed=seed)
    recs = make_focal_recordings(sp, per, SR, duration_s=(6.0, 8.0), p_secondary=0.0, seed=seed + 1)
    audio = AudioCache(SR)
    for r in recs:
        audio.put(r.filepath, r.wave)
    meta = pd.DataFrame(
        {
            "filepath": [r.filepath for r in recs],
            "ebird_code": [r.primary for r in recs],
            "detected_events": [r.detected_events for r in recs],
            "event_cluster": [r.event_cluster for r in recs],
            "duration": [r.duration for r in recs],
        }
    )
    rows = map_events(meta)
    classes = [s.code for s in sp]
    y = np.zeros((len(rows), k), np.float32)
    y[np.arange(len(rows)), [classes.index(c) for c in rows["ebird_code"]]] = 1
    return audio, rows, y, classes


NO_BG = AugmentConfig(p_background=0, p_no_call=0)


def _windows(rows):
    return rows.assign(start_time=np.maximum(rows.event_start - 1.0, 0.0)).assign(
        end_time=lambda d: d.start_time + 5
    )


@pytest.mark.slow
def test_training_learns():
    torch.manual_seed(0)
    audio, rows, y, _ = _data(3, 4, seed=4)
    model, fe = SmallCNN(3, (8, 16, 16, 32)), MelFrontend(MEL)
    cfg = BirdTrainConfig(steps=40, batch_size=16, lr=3e-3, augment=NO_BG)
    windows = _windows(rows)
    before = evaluate(model, fe, audio, windows, y)["cmAP"]
    hist = train(model, fe, rows, y, audio, cfg)
    after = evaluate(model, fe, audio, windows, y)["cmAP"]
    assert np.mean(hist["loss"][-5:]) < np.mean(hist["loss"][:5])
    assert after > before + 0.1 and after > 0.8, (before, after)


def test_lt_class_mask_is_exact():
    torch.manual_seed(0)
    audio, rows, y, classes = _data(30, 1, seed=5)  # an "LT" model trained on 30 species
    model, fe = SmallCNN(30, (4, 8, 8, 8)), MelFrontend(MEL)
    train(model, fe, rows, y, audio, BirdTrainConfig(steps=3, batch_size=8, augment=NO_BG))
    windows = _windows(rows)
    # LT mechanics: evaluate a 10-species test set through the class mask == metrics of the sliced logits
    test_codes = classes[::3]
    mask = class_mask(classes, test_codes)
    y_test = y[:, mask.numpy()]
    keep = y_test.sum(1) > 0
    w, yt = windows[keep].reset_index(drop=True), y_test[keep]
    via_mask = evaluate(model, fe, audio, w, yt, mask=mask)
    logits = predict(model, fe, audio, w["filepath"], w["start_time"], w["end_time"])
    sliced = evaluate_scores(logits[:, mask].clone(), torch.tensor(yt))
    assert via_mask.keys() == sliced.keys()
    for k in sliced:  # identical numbers (NaN where both are undefined, e.g. cmAP5 with < 5 positives)
        assert via_mask[k] == sliced[k] or (np.isnan(via_mask[k]) and np.isnan(sliced[k])), k


def test_label_width_mismatch_is_refused():
    audio, rows, y, _ = _data(3, 1, seed=0)
    model, fe = SmallCNN(5, (4, 4, 4, 4)), MelFrontend(MEL)
    with pytest.raises(ValueError, match="the label list has 3 classes but the model outputs 5"):
        train(model, fe, rows, y, audio, BirdTrainConfig(steps=1, batch_size=2, augment=NO_BG))
    w = rows.assign(start_time=0.0, end_time=5.0)
    with pytest.raises(ValueError, match="model outputs 5"):
        evaluate(model, fe, audio, w, y)
    with pytest.raises(ValueError, match="targets must be"):
        train(model, fe, rows, y[:1], audio, BirdTrainConfig(steps=1))
    with pytest.raises(ValueError, match="decoding"):
        BirdTrainConfig(decoding="middle")


@pytest.mark.parametrize("kind", ["efficientnet", "convnext", "ast"])
def test_transformers_families_train_one_step(kind):
    torch.manual_seed(0)
    audio, rows, y, _ = _data(3, 1, seed=1)
    model, fe = hf_audio_model(kind, 3, n_mels=32, frames=MEL.n_frames(5.0)), MelFrontend(MEL)
    before = [p.detach().clone() for p in model.parameters()]
    train(model, fe, rows, y, audio, BirdTrainConfig(steps=1, batch_size=2, augment=NO_BG))
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    with pytest.raises(ValueError, match="kind"):
        hf_audio_model("resnet", 3)
