"""Smoke run of the reproduction: claims schema, fixed claim ids, resume, config validation."""

import dataclasses
import json
import math

import pytest
import torch

from iclr25.birdset.experiment import PRESETS, Config, make_model, run
from iclr25.common.claims import validate_claims_document
from iclr25.common.results import write_run

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
        assert d[arm]["examples"] == cfg.steps * cfg.batch_size  # equal budget for every arm
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
    x = torch.randn(2, 1, full.n_mels, full.mel.n_frames(5.0))  # 128 mels × 501 frames at 32 kHz
    assert x.shape[-1] == 501 and model(x).shape == (2, 50)
