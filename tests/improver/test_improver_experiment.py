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
    assert (q.agent.n, q.agent.m, q.agent.prev_k, q.n_theorems, q.seeds) == (3, 5, 1, 120, 3)
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


def test_dotted_agent_overrides_reach_every_improver_arm_and_not_the_baseline():
    """``--set agent.m=2 --set agent.keep_best=false`` reach the ImProverConfig of every ImProver arm (each
    ablation still switches off only its part); the single-shot baseline stays the paper's."""
    from iclr25.harness.configs import effective_config, experiment_module
    from iclr25.harness.runs import UsageError
    from iclr25.improver.agent import ImProverConfig

    mod = experiment_module("improver")
    cfg = effective_config(
        mod, "quick", overrides=["agent.m=2", "agent.keep_best=false", "agent.examples=3"]
    )[0]
    for arm in ("improver", "improver_no_cos", "improver_no_history"):
        a = cfg.agent_config(arm)
        assert (a.m, a.keep_best, a.examples, a.n, a.prev_k) == (2, False, 3, 3, 1)
    assert not cfg.agent_config("improver_no_cos").chain_of_states
    assert cfg.agent_config("improver_no_cos").error_history
    assert not cfg.agent_config("improver_no_history").error_history
    assert cfg.agent_config("baseline") == ImProverConfig.baseline()
    with pytest.raises(UsageError, match="agent: n must be a positive int, got 0"):
        effective_config(mod, "quick", overrides=["agent.n=0"])
    with pytest.raises(UsageError, match="agent.chain_of_states is switched off per arm"):
        effective_config(mod, "quick", overrides=["agent.chain_of_states=false"])
    with pytest.raises(UsageError, match=r"did you mean agent\.prev_k\?"):
        effective_config(mod, "quick", overrides=["prev_k=2"])
