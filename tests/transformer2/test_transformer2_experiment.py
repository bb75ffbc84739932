"""Smoke run of the reproduction (claims present and finite, resume), config validation, the model_path route."""

import dataclasses
import json
import math

import pytest
import torch

from iclr25.common.lm import byte_tokenizer, tiny_causal_lm
from iclr25.common.results import write_run
from iclr25.transformer2 import skills as S
from iclr25.transformer2.experiment import PRESETS, Config, one_seed, run

CLAIM_IDS = {
    "expert_gain",
    "param_efficiency",
    "expert_specificity",
    "cem_adaptation",
    "dispatch",  # the issue's
    "expert_no_harm",
    "expert_specificity_controls",
    "cem_adaptation_every_task",  # stricter controls (method card)
}


def _finite(c):
    vals = list(c["method"]["values"]) + (list(c["baseline"]["values"]) if c["baseline"] else [])
    return all(v is not None and math.isfinite(v) for v in vals)


@pytest.mark.slow
def test_smoke_run_claims_and_resume(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    assert {c["id"] for c in doc["claims"]} == CLAIM_IDS
    for c in doc["claims"]:
        assert _finite(c) and all(_finite(p) for p in c.get("parts", []))
    ps = res.per_seed[0]
    assert ps["params"]["svf"] == 2 * (4 * 64 + 3 * 64)  # Σ min(n, m) over 7 matrices × 2 blocks
    assert ps["params"]["lora"] == 2 * 4 * (
        4 * (64 + 64) + 3 * (64 + 256)
    )  # PEFT LoRA r=4 on the same matrices
    assert (tmp_path / "experts" / "seed_0" / "expert_A.safetensors").exists()
    assert (tmp_path / "figures" / "experts_and_adaptation.png").stat().st_size > 0
    res2 = run(cfg, tmp_path)  # resume: the seed is read back from disk
    assert res2.per_seed == res.per_seed


def test_config_validation():
    with pytest.raises(ValueError, match="rl_steps"):
        Config(rl_steps=0)
    with pytest.raises(ValueError, match="svf_mode"):
        Config(svf_mode="lora")
    with pytest.raises(ValueError, match="shift_lo"):
        Config(shift_lo=8, shift_hi=2)
    with pytest.raises(ValueError, match="lora_tasks"):
        Config(lora_tasks=("Z",))


def test_skills_answers():
    d = torch.tensor([[5, 0, 9, 3, 7, 1], [2, 2, 2, 2, 2, 2]])
    assert S.answer("A", d).tolist() == [3, 0] and S.answer("B", d).tolist() == [9, 2]
    assert S.answer("C", d).tolist() == [0, 2] and S.answer("D", d).tolist() == [9, 2]
    x, y = S.pretrain_batch(4, torch.Generator().manual_seed(0))
    assert x.shape[1] == 9 and ((y != -100).sum(1) == 1).all() and torch.equal(y[:, -1], x[:, -1])


@pytest.mark.slow
def test_model_path_route_on_a_saved_tiny_llama(tmp_path):
    """The `full` pipeline on an HF model folder: the toy symbols are mapped to the tokenizer's tokens."""
    tok = byte_tokenizer()
    lm = tiny_causal_lm("llama", seed=0, vocab_size=len(tok), hidden=32, layers=1, heads=2, intermediate=64)
    lm.save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    cfg = dataclasses.replace(
        PRESETS["smoke"],
        model_path=str(tmp_path / "m"),
        targets=("gate_proj", "up_proj", "down_proj"),
        pretrain_steps=5,
        rl_steps=3,
        cls_steps=2,
        lora_steps=2,
        n_test=64,
        n_route=32,
        n_val=32,
        cem_iters=2,
    )
    r = one_seed(cfg, 0)
    assert r["params"]["svf"] == 3 * 32 and 0.0 <= r["dispatch"]["prompt_routing_acc"] <= 1.0
    assert all(0.0 <= v <= 1.0 for v in r["base"].values())
