"""Smoke run of the experiment: claims schema, resume, report; config validation."""

import json
import math

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.common.results import write_run
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
        Config(epochs=0)
    with pytest.raises(ValueError, match="a_itr"):
        Config(a_itr=3)
    with pytest.raises(ValueError, match="dataset"):
        Config(dataset="CASME3")
    with pytest.raises(ValueError, match="loso_subjects"):
        Config(loso_subjects=1)
    with pytest.raises(ValueError, match="lr"):
        Config(lr=0.0)
