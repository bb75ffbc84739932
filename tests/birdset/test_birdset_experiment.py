"""Smoke run of the reproduction: claims schema, fixed claim ids, resume, config validation, nested overrides."""

import dataclasses
import json
import math

import pytest
import torch

from iclr25.birdset import experiment
from iclr25.birdset.experiment import PRESETS, Config, run
from iclr25.birdset.models import make_model
from iclr25.common.claims import validate_claims_document
from iclr25.errors import UsageError
from iclr25.harness.artefacts import write_run
from iclr25.harness.configs import effective_config, experiment_module

CLAIM_IDS = {"covariate_shift_gap", "event_windows_help", "noise_aug_helps"}


@pytest.mark.slow
def test_smoke_run_writes_claims_and_resumes(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.slug, res.preset = "birdset", "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    validate_claims_document(doc)
    assert {c["id"] for c in doc["claims"]} == CLAIM_IDS
    for c in doc["claims"]:
        assert all(math.isfinite(v) for v in c["method"]["values"] + c["baseline"]["values"])
    d = res.per_seed[0]
    for arm in ("A", "B", "C"):
        assert d[arm]["examples"] == cfg.train.steps * cfg.train.batch_size  # equal budget for every arm
        assert 0.0 <= d[arm]["scape"]["cmAP"] <= 1.0
    assert d["data"]["train_rows_B"] == d["data"]["train_files"]
    assert (tmp_path / "figures" / "birdset_cmap.png").exists()
    assert run(cfg, tmp_path).per_seed == res.per_seed  # resumed from disk


def test_config_validation():
    with pytest.raises(ValueError, match="n_species"):
        Config(n_species=1)
    with pytest.raises(ValueError, match="arms"):
        Config(arms=("A", "B"))
    with pytest.raises(ValueError, match="model"):
        Config(model="resnet")
    with pytest.raises(ValueError, match="focal_duration"):
        Config(focal_duration=(3.0, 10.0))
    assert set(PRESETS) == {"smoke", "quick", "full"}


def test_full_preset_model_builds_at_toy_size():
    full = dataclasses.replace(PRESETS["full"], model_size="toy")
    model = make_model(full, 50)
    x = torch.randn(2, 1, full.mel.n_mels, full.mel.n_frames(5.0))  # 128 mels × 501 frames at 32 kHz
    assert x.shape[-1] == 501 and model(x).shape == (2, 50)


class _Reached(Exception):
    pass


def test_dotted_overrides_reach_the_front_end_and_the_training_config(monkeypatch):
    """``--set mel.n_mels=48 --set train.steps=5`` (issue #39: the front end and the training budget are the nested
    MelConfig / BirdTrainConfig) reach the MelFrontend and BirdTrainConfig one_seed hands to ``train``."""
    cfg, applied = effective_config(
        experiment_module("birdset"),
        "smoke",
        overrides=["mel.n_mels=48", "train.steps=5", "train.augment.p_mix=0.25"],
    )
    assert applied == {"mel.n_mels": 48, "train.steps": 5, "train.augment.p_mix": 0.25}
    smoke = PRESETS["smoke"]
    assert cfg.mel == dataclasses.replace(smoke.mel, n_mels=48)
    assert cfg.train == dataclasses.replace(
        smoke.train, steps=5, augment=dataclasses.replace(smoke.train.augment, p_mix=0.25)
    )
    seen = {}

    def fake_train(model, frontend, rows, targets, audio, tcfg, bank, device):
        seen.update(frontend=frontend, tcfg=tcfg, audio_rate=audio.sample_rate)
        raise _Reached

    monkeypatch.setattr(experiment, "train", fake_train)
    with pytest.raises(_Reached):
        experiment.one_seed(cfg, 0)
    assert seen["frontend"].cfg.n_mels == 48 and seen["frontend"].mel.shape[1] == 48
    assert seen["frontend"].cfg == cfg.mel and seen["audio_rate"] == cfg.mel.sample_rate == 16_000
    t = seen["tcfg"]
    assert (t.steps, t.batch_size, t.lr, t.extension_time) == (5, 16, 1e-3, 8.0)
    assert t.decoding == "event" and t.augment.sample_rate == cfg.mel.sample_rate  # arm A's per-arm parts
    assert (
        t.augment.p_mix == 0.25 and t.augment.p_background == 0.5
    )  # train.augment is the arms' augmentation


def test_a_bad_nested_value_names_the_nested_field():
    exp = experiment_module("birdset")
    with pytest.raises(UsageError, match=r"mel: n_mels must be a positive int, got 0"):
        effective_config(exp, "smoke", overrides=["mel.n_mels=0"])
    with pytest.raises(UsageError, match=r"train: lr must be a positive number .*got -0.1"):
        effective_config(exp, "smoke", overrides=["train.lr=-0.1"])
    with pytest.raises(UsageError, match=r"train.decoding is set per arm and seed in one_seed"):
        effective_config(exp, "smoke", overrides=["train.decoding=first"])
    with pytest.raises(
        UsageError, match=r"train.augment.sample_rate must equal mel.sample_rate .*got 16000 and 32000"
    ):
        effective_config(exp, "smoke", overrides=["mel.sample_rate=32000"])
    assert effective_config(
        exp, "smoke", overrides=["mel.sample_rate=32000", "train.augment.sample_rate=32000"]
    )
    with pytest.raises(UsageError, match=r"'sample_rate' \(did you mean .*mel.sample_rate"):
        effective_config(exp, "smoke", overrides=["sample_rate=32000"])
