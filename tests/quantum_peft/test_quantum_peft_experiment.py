"""Smoke run of the reproduction: claim ids, finite numbers, resume and determinism."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from iclr25.cli import run_experiment
from iclr25.common.claims import validate_claims_document
from iclr25.common.io import read_json
from iclr25.quantum_peft import experiment as exp

CLAIM_IDS = {"adapter_learns", "param_ratio", "competitive", "log_scaling"}


def _finite(stat: dict) -> bool:
    return all(v is not None and math.isfinite(v) for v in stat["values"])


@pytest.mark.slow
def test_smoke_run_claims_and_resume(tmp_path) -> None:
    doc = run_experiment(exp, "quantum_peft", "smoke", tmp_path)
    validate_claims_document(doc)
    assert {c["id"] for c in doc["claims"]} == CLAIM_IDS
    for c in doc["claims"]:
        for p in c.get("parts", [c]):
            assert _finite(p["method"]) and (p["baseline"] is None or _finite(p["baseline"]))
    by_id = {c["id"]: c for c in doc["claims"]}
    assert by_id["param_ratio"]["holds"] and by_id["log_scaling"]["holds"]  # exact counts, scale-free
    m = read_json(tmp_path / "quantum_peft" / "metrics.json")
    ps = m["per_seed"]["0"]["d64"]
    assert ps["qpeft"]["params"] == 136 and ps["lora_r1"]["params"] == 512
    assert ps["full_ft"]["acc"] > ps["head_only"]["acc"]  # learning signal even at smoke scale
    assert (tmp_path / "quantum_peft" / "figures" / "quantum_peft.png").is_file()
    # resume: the finished seed is read back, giving the same numbers
    doc2 = run_experiment(exp, "quantum_peft", "smoke", tmp_path)
    assert read_json(tmp_path / "quantum_peft" / "metrics.json")["per_seed"] == m["per_seed"]
    assert [c["measured"] for c in doc2["claims"]] == [c["measured"] for c in doc["claims"]]


def test_same_seed_same_numbers() -> None:
    cfg = dataclasses.replace(exp.PRESETS["smoke"], pretrain_epochs=1, finetune_epochs=1)
    a = exp.one_width(cfg, 0, 64, torch.device("cpu"))
    b = exp.one_width(cfg, 0, 64, torch.device("cpu"))
    a.pop("time_s"), b.pop("time_s")
    assert a == b


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="widths"):
        exp.Config(widths=(30,))
    with pytest.raises(ValueError, match="source_frac"):
        exp.Config(source_frac=0.7, target_train_frac=0.4)
    with pytest.raises(ValueError, match="param_widths"):
        exp.Config(param_widths=(64,))
    assert set(exp.PRESETS) == {"smoke", "quick", "full"}


def test_lr_sweep_same_grid_for_every_method() -> None:
    """Fair-baseline protocol: each method's single LR (adapter and head alike) comes from the same grid."""
    cfg = dataclasses.replace(exp.PRESETS["smoke"], pretrain_epochs=1, finetune_epochs=1)
    assert exp.with_lr(cfg, "qpeft", 0.5).lr_angles == exp.with_lr(cfg, "qpeft", 0.5).lr_lambda == 0.5
    assert exp.with_lr(cfg, "head_only", 0.5).lr_head_only == 0.5
    r = exp.sweep_learning_rates(cfg, seeds=(10,), grid=(1e-2, 1e-1), width=64)
    assert set(r["best"]) == set(exp.METHODS) and all(v in (1e-2, 1e-1) for v in r["best"].values())
    for m in exp.METHODS:
        accs = r["acc"][m]
        assert set(accs) == {"0.01", "0.1"} and all(len(v) == 1 and 0 <= v[0] <= 1 for v in accs.values())
        assert r["best"][m] == max((1e-2, 1e-1), key=lambda lr: accs[str(lr)][0])
