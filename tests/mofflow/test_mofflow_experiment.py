"""Smoke run of the experiment: claims.json has the fixed claim ids with finite numbers; resume reads seeds back."""

import json
import math

import pytest

from iclr25.common.results import write_run
from iclr25.mofflow.experiment import PRESETS, Config, run

IDS = {"match_rate", "beats_atom_level", "scales_with_size", "speed"}


@pytest.mark.slow
def test_smoke_run_and_resume(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    assert {c["id"] for c in doc["claims"]} == IDS
    for c in doc["claims"]:
        assert c["method"]["mean"] is not None and math.isfinite(c["method"]["mean"])
    assert (tmp_path / "figures" / "match_rate_vs_size.png").exists()
    m = res.per_seed[0]
    assert 0 <= m["mofflow"]["match_rate"] <= 100 and m["speed"]["mofflow_structures_per_s"] > 0
    # resume: the finished seed is read back from disk, identical numbers
    res2 = run(cfg, tmp_path)
    assert res2.per_seed[0]["mofflow"] == m["mofflow"]


def test_config_validation():
    with pytest.raises(ValueError, match="steps_per_size"):
        Config(steps_per_size=(0, 1, 1))
    with pytest.raises(ValueError, match="test_sizes"):
        Config(test_sizes=(4, 8))
