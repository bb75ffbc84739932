"""Smoke run of the reproduction: the fixed claim ids with finite numbers, resume, ``one_seed(cfg, seed)`` on its
own, config validation."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from iclr25.common.claims import validate_claims_document
from iclr25.harness.artefacts import write_run
from iclr25.scope_faithfulness.experiment import PRESETS, Config, one_seed, run

CLAIM_IDS = {"halluc_halved", "recall_kept", "negatives_unfaithful", "alpha_trend"}


@pytest.mark.slow
def test_smoke_run_claims_and_resume(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    validate_claims_document(doc)
    assert {c["id"] for c in doc["claims"]} == CLAIM_IDS
    for c in doc["claims"]:
        assert all(v is not None and math.isfinite(v) for v in c["method"]["values"])
    seed = res.per_seed[0]
    assert {"sft", "cont_sft", "cad", "scope@0.1", "scope@0.5"} <= set(seed)
    assert seed["n_d1"] == 200 and seed["n_d2"] == 200
    assert seed["scope@0.5"]["rejected_differs"] >= 0.5
    assert (tmp_path / "figures" / "scope_faithfulness.png").exists()
    again = run(cfg, tmp_path)  # finished seeds and p_LM are read back from disk
    assert again.per_seed == res.per_seed
    # the contract's call: one_seed(cfg, seed) builds the shared context (p_LM pre-trained in a temporary folder)
    # itself and gives the run's numbers
    alone = {k: v for k, v in one_seed(cfg, 0).items() if k != "runtime_s"}
    ran = {k: v for k, v in res.per_seed[0].items() if k != "runtime_s"}
    assert json.dumps(alone, sort_keys=True) == json.dumps(ran, sort_keys=True)


@pytest.mark.parametrize(
    "field, value",
    [
        ("alpha", 1.5),
        ("alphas", (0.5, 0.9)),
        ("arch", "bert"),
        ("beta", 0.0),
        ("tune_lr", float("nan")),
        ("heads", 5),
    ],
)
def test_config_validation(field, value):
    with pytest.raises(ValueError, match=field if field != "heads" else "divisible"):
        dataclasses.replace(PRESETS["smoke"], **{field: value})


def test_presets_are_configs():
    assert set(PRESETS) == {"smoke", "quick", "full"} and all(isinstance(c, Config) for c in PRESETS.values())
    q = PRESETS["quick"]
    assert (
        q.seeds == 5 and q.alpha == 0.5 and q.beta == 0.1 and q.n_test == 300 and q.alphas == (0.1, 0.5, 0.9)
    )
    assert q.temperature == 0.6 and q.top_p == 0.9 and q.n_untouched == 2


@pytest.mark.slow
def test_runs_from_a_local_base_model(tmp_path):
    """The `full` route: p_LM starts from a local HF model folder (here a tiny Llama + its tokenizer)."""
    from iclr25.common.lm import tiny_causal_lm
    from iclr25.scope_faithfulness import World, word_tokenizer

    tok = word_tokenizer(World())
    model_dir = tmp_path / "base"
    tiny_causal_lm("llama", seed=0, vocab_size=len(tok), hidden=32, layers=1, heads=4).save_pretrained(
        model_dir
    )
    tok.save_pretrained(model_dir)
    cfg = dataclasses.replace(
        PRESETS["smoke"], base_model_path=str(model_dir), n_pretrain=100, n_data=40, n_test=8,
        pretrain=dataclasses.replace(PRESETS["smoke"].pretrain, steps=3),
        sft=dataclasses.replace(PRESETS["smoke"].sft, steps=3), tune_batch=8, alphas=(0.1, 0.5),
    )  # fmt: skip
    res = run(cfg, tmp_path / "run")
    assert {c.id for c in res.claims} == CLAIM_IDS
    assert 0 <= res.per_seed[0]["scope@0.5"]["halluc"] <= 1 and res.per_seed[0]["n_d2"] == 20
    with pytest.raises(ValueError, match="base_model_path"):
        dataclasses.replace(cfg, base_model_path=str(tmp_path / "nowhere"))


class _Reached(Exception):
    pass


def test_dotted_overrides_reach_the_training_stages(monkeypatch):
    """p_LM pre-training and SFT are the nested LMTrainConfigs (``--set sft.steps=5 --set pretrain.lr=0.01``):
    fit_lm receives them with the stage's warm-up, no periodic evaluation and the stage's seed."""
    from iclr25.common.seeding import derive_seed
    from iclr25.common.train import LMTrainConfig
    from iclr25.harness.configs import effective_config, experiment_module
    from iclr25.scope_faithfulness import experiment

    cfg, applied = effective_config(
        experiment_module("scope_faithfulness"),
        "smoke",
        overrides=["sft.steps=5", "sft.weight_decay=0.0", "pretrain.lr=0.01", "pretrain.steps=2"],
    )
    assert applied == {"sft.steps": 5, "sft.weight_decay": 0.0, "pretrain.lr": 0.01, "pretrain.steps": 2}
    seen = []

    def fake_fit(model, ids, lab, tc, device, desc):
        seen.append((desc, tc))
        if desc == "SFT D1":
            raise _Reached

    monkeypatch.setattr(experiment, "fit_lm", fake_fit)
    with pytest.raises(_Reached):
        experiment.one_seed(cfg, 3)
    (d0, pre), (d1, sft) = seen
    assert d0 == "pretrain p_LM" and pre == LMTrainConfig(
        steps=2, batch_size=64, lr=0.01, warmup_steps=0, eval_every=0, seed=cfg.seed
    )
    assert d1 == "SFT D1" and sft == LMTrainConfig(
        steps=5,
        batch_size=64,
        lr=1e-3,
        weight_decay=0.0,
        warmup_steps=0,
        eval_every=0,
        seed=derive_seed(3, "sft"),
    )


def test_a_bad_nested_value_names_the_dotted_field():
    from iclr25.errors import UsageError
    from iclr25.harness.configs import effective_config, experiment_module

    exp = experiment_module("scope_faithfulness")
    with pytest.raises(UsageError, match=r"sft: lr must be"):
        effective_config(exp, "smoke", overrides=["sft.lr=-1"])
    with pytest.raises(UsageError, match=r"pretrain: steps must be"):
        effective_config(exp, "smoke", overrides=["pretrain.steps=0"])
    with pytest.raises(UsageError, match=r"sft.seed is set per stage"):
        effective_config(exp, "smoke", overrides=["sft.seed=4"])
    with pytest.raises(UsageError, match=r"pretrain.warmup_steps is set per stage to min\(50, steps // 10\)"):
        effective_config(exp, "smoke", overrides=["pretrain.warmup_steps=3"])
    with pytest.raises(
        UsageError, match=r"sft\.steps"
    ):  # the old flat name is refused, naming the dotted one
        effective_config(exp, "smoke", overrides=["sft_steps=5"])
