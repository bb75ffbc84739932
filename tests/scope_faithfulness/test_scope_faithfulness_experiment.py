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
        PRESETS["smoke"], base_model_path=str(model_dir), n_pretrain=100, n_data=40, n_test=8, pretrain_steps=3,
        sft_steps=3, tune_batch=8, alphas=(0.1, 0.5),
    )  # fmt: skip
    res = run(cfg, tmp_path / "run")
    assert {c.id for c in res.claims} == CLAIM_IDS
    assert 0 <= res.per_seed[0]["scope@0.5"]["halluc"] <= 1 and res.per_seed[0]["n_d2"] == 20
    with pytest.raises(ValueError, match="base_model_path"):
        dataclasses.replace(cfg, base_model_path=str(tmp_path / "nowhere"))
