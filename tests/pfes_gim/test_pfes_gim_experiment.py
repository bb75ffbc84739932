"""Smoke run of the experiment: claims schema, resume, report; config validation."""

import json
import math
from dataclasses import replace

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.harness.artefacts import write_run
from iclr25.pfes_gim.experiment import PRESETS, Config, run

CLAIM_IDS = {"pseudo_label_quality", "spotting_non_inferior", "hard_variant_gain"}


@pytest.mark.slow
def test_smoke_run_writes_claims_and_resumes(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    validate_claims_document(doc)
    assert {c["id"] for c in doc["claims"]} == CLAIM_IDS
    for c in doc["claims"]:
        for part in c.get("parts", [c]):
            assert all(math.isfinite(v) for v in part["method"]["values"] + part["baseline"]["values"])
    d = res.per_seed[0]
    assert set(d) == {"A", "B", "hard_variant", "ablation", "loso"}
    assert 0 <= d["B"]["gim"]["f1"] <= 1 and d["B"]["gim"]["thr"] in cfg.thr_grid
    assert "best_epoch_on_test_OPTIMISTIC" in d["loso"]["gim"]
    assert (tmp_path / "figures" / "pfes_gim_f1.png").exists()
    report = (tmp_path / "report.md").read_text()
    assert "Deviations" in report and "OPTIMISTIC" in report
    again = run(cfg, tmp_path)  # resume: the seed is read back from disk
    assert again.per_seed == res.per_seed


def test_config_validation():
    with pytest.raises(ValueError, match="epochs"):
        Config(a_epochs=0)
    with pytest.raises(ValueError, match="a_itr"):
        Config(a_itr=3)
    with pytest.raises(ValueError, match="dataset"):
        Config(dataset="CASME3")
    with pytest.raises(ValueError, match="loso_subjects"):
        Config(loso_subjects=1)
    with pytest.raises(ValueError, match="train must be of type SpottingTrainConfig, got dict"):
        Config(train={"lr": 0.0})
    with pytest.raises(ValueError, match="train.pseudo_labels is set per arm"):
        Config(train=replace(Config.train, pseudo_labels="hard"))


def test_full_preset_loso_on_released_layout_at_toy_size(tmp_path, fabricate_released):
    """The full preset's real-data path: LOSO on the authors' file layout (fabricated, tiny), both protocols."""
    from iclr25.pfes_gim.experiment import experiment_loso

    root = fabricate_released(tmp_path / "feat")
    full = PRESETS["full"]
    assert full.train.epochs == 100 and full.loso_epochs == 100  # the paper's epoch budget
    cfg = replace(full, data_root=str(root), loso_epochs=2, channels=8)
    out = experiment_loso(cfg, seed=0)
    assert out["source"] == "released features (CASME2)"
    for arm in ("hard", "gim"):
        fixed, best = out[arm]["fixed_epoch"], out[arm]["best_epoch_on_test_OPTIMISTIC"]
        assert fixed["gt_MaE"] == 1 and fixed["gt_ME"] == 2 and best["gt_ME"] == 2


class _Stop(Exception):
    pass


def test_dotted_overrides_reach_the_training_config_fit_receives(monkeypatch):
    """``--set train.lr=… train.loss.lambda_iac=… train.gim.gim_start=…`` reach the SpottingTrainConfig each arm
    trains with; the arm sets only the pseudo-label mode and the run's device."""
    from iclr25.harness.configs import effective_config, experiment_module
    from iclr25.pfes_gim import experiment as ex

    cfg = effective_config(
        experiment_module("pfes_gim"),
        "smoke",
        overrides=[
            "train.lr=0.002",
            "train.loss.lambda_iac=0.25",
            "train.gim.gim_start=7",
            "train.gamma=0.8",
        ],
    )[0]
    seen = []

    def fake_fit(model, videos, tcfg, seed):
        seen.append(tcfg)
        raise _Stop

    monkeypatch.setattr(ex, "fit", fake_fit)
    for mode in ("hard", "gim"):
        with pytest.raises(_Stop):
            ex._train_and_test(cfg, 0, ex._data(cfg, 0), mode)
    assert [t.pseudo_labels for t in seen] == ["hard", "gim"]
    for t in seen:
        assert (t.lr, t.gamma, t.epochs, t.device) == (0.002, 0.8, 6, "cpu")
        assert t.loss.lambda_iac == 0.25 and t.gim.gim_start == 7
    with pytest.raises(_Stop):  # the IAC ablation varies λ_IAC only
        ex._train_and_test(cfg, 0, ex._data(cfg, 0), "gim", lambda_iac=0.0)
    assert seen[-1].loss.lambda_iac == 0.0 and seen[-1].lr == 0.002
