"""The reproduction: config validation, presets, and a smoke run through the run contract."""

import json

import pytest

from iclr25.improver.experiment import PRESETS, Config, run


def test_config_validation_and_presets():
    with pytest.raises(ValueError, match="n_theorems"):
        Config(n_theorems=0)
    with pytest.raises(ValueError, match="backend"):
        Config(backend="coq")
    with pytest.raises(ValueError, match="temperature"):
        Config(temperature=float("nan"))
    q = PRESETS["quick"]
    assert (q.n, q.m, q.prev_k, q.n_theorems, q.seeds) == (3, 5, 1, 120, 3)
    assert q.agent_config("improver").generations == 15 and q.agent_config("baseline").generations == 1
    assert not q.agent_config("improver_no_cos").chain_of_states and PRESETS["full"].backend == "lean"


def test_full_preset_fails_clearly_without_a_lean_project(tmp_path):
    cfg = Config(backend="lean", lean_project="", lean_file="")
    with pytest.raises(ValueError, match="lean_project"):
        run(cfg, tmp_path)


def test_smoke_run_writes_consistent_results(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    assert [c.id for c in res.claims] == ["improved_accuracy", "length_gain", "cos_helps"]
    s = res.per_seed[0]
    assert s["tinylm"]["improver"]["accuracy"] == 100.0  # keep-best from correct seed proofs
    assert s["train"]["loss_last"] < s["train"]["loss_first"]
    assert s["scripted"]["improver"]["improvement"] >= s["scripted"]["baseline"]["improvement"]
    assert "ImProver on generated propositional theorems" in res.report_md
    saved = json.loads((tmp_path / "seeds" / "seed_0.json").read_text())
    assert saved["result"]["tinylm"]["baseline"]["accuracy"] == s["tinylm"]["baseline"]["accuracy"]
