"""Smoke run of the experiment: claims.json has the fixed claim ids with finite numbers; resume reads seeds back."""

import json
import math

import pytest

from iclr25.harness.artefacts import write_run
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


def test_dotted_overrides_reach_both_networks(monkeypatch):
    """``--set net.c_s=… atom.layers=…`` reach the MOFFlow network and the atom-level baseline the run builds;
    bad values name the nested field."""
    from iclr25.harness.configs import effective_config, experiment_module
    from iclr25.harness.runs import UsageError
    from iclr25.mofflow import experiment as ex

    mod = experiment_module("mofflow")
    cfg = effective_config(
        mod, "smoke", overrides=["net.c_s=32", "net.n_trunk=1", "atom.layers=2", "atom.width=32"]
    )[0]
    built = {}

    class Stop(Exception):
        pass

    def fake_atom(a, n):
        built["atom"], built["block_encoder"] = a, n
        raise Stop

    monkeypatch.setattr(ex, "MOFFlowNet", lambda c: built.setdefault("net", c) and None)
    monkeypatch.setattr(ex, "train_mofflow", lambda *a, **k: {})
    monkeypatch.setattr(ex, "AtomFlowNet", fake_atom)
    with pytest.raises(Stop):
        ex.one_seed(cfg, 0)
    assert (built["net"].c_s, built["net"].n_trunk, built["net"].c_z) == (32, 1, 32)
    assert built["block_encoder"] is built["net"]
    assert (built["atom"].layers, built["atom"].width, built["atom"].heads) == (2, 32, 4)
    with pytest.raises(UsageError, match="atom: width must be divisible by heads=4, got 30"):
        effective_config(mod, "quick", overrides=["atom.width=30"])
    with pytest.raises(UsageError, match="net: c_s must be a positive int, got 0"):
        effective_config(mod, "quick", overrides=["net.c_s=0"])
    with pytest.raises(UsageError, match=r"did you mean net\.c_s\?"):
        effective_config(mod, "quick", overrides=["c_s=32"])
