"""Smoke run of the reproduction: claim ids, finite numbers, resume and determinism."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from iclr25.common.claims import validate_claims_document
from iclr25.common.io import read_json
from iclr25.common.seeding import derive_seed
from iclr25.errors import UsageError
from iclr25.harness.configs import effective_config, experiment_module
from iclr25.harness.runs import run_experiment
from iclr25.quantum_peft import experiment as exp
from iclr25.quantum_peft import transfer
from iclr25.quantum_peft.model import QuantumPEFTConfig

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
    a = transfer.one_width(cfg, 0, 64, torch.device("cpu"))
    b = transfer.one_width(cfg, 0, 64, torch.device("cpu"))
    a.pop("time_s"), b.pop("time_s")
    assert a == b


def test_config_validation() -> None:
    with pytest.raises(ValueError, match="widths"):
        exp.Config(widths=(30,))
    with pytest.raises(ValueError, match="source_frac"):
        exp.Config(source_frac=0.7, target_train_frac=0.4)
    with pytest.raises(ValueError, match="param_widths"):
        exp.Config(param_widths=(64,))
    assert set(exp.PRESETS) == {"smoke", "quick", "real", "full"}


class _Reached(Exception):
    pass


def test_dotted_overrides_reach_the_adapters_one_seed_builds(monkeypatch) -> None:
    """``--set qpeft.rank=3 ...`` (issue #39: the adapter is the nested QuantumPEFTConfig) reaches the config
    one_seed hands to ``get_qpeft_model``; ``qpeft.target_modules`` is the LoRA arm's target_modules too."""
    cfg, applied = effective_config(
        experiment_module("quantum_peft"),
        "smoke",
        overrides=["qpeft.rank=3", "qpeft.layers=2", "qpeft.alpha=0.5", "qpeft.target_modules=['q_proj']"],
    )
    assert applied == {
        "qpeft.rank": 3, "qpeft.layers": 2, "qpeft.alpha": 0.5, "qpeft.target_modules": ["q_proj"]
    }  # fmt: skip
    assert cfg.qpeft == QuantumPEFTConfig(
        target_modules=["q_proj"], rank=3, layers=2, alpha=0.5, init_std=0.5
    )
    seen: dict = {}
    import peft

    real_peft = peft.get_peft_model

    def fake_peft(model, lc):
        seen["lora"] = lc
        return real_peft(model, lc)

    def fake_qpeft(model, qc):
        seen["qpeft"] = qc
        raise _Reached

    monkeypatch.setattr(transfer, "train", lambda *a, **k: [0.0])  # no training: only the adapters are built
    monkeypatch.setattr(peft, "get_peft_model", fake_peft)
    monkeypatch.setattr(transfer, "get_qpeft_model", fake_qpeft)
    with pytest.raises(_Reached):
        exp.one_seed(cfg, 0)
    qc = seen["qpeft"]
    assert (qc.rank, qc.layers, qc.alpha, qc.init_std, qc.target_modules) == (3, 2, 0.5, 0.5, ["q_proj"])
    # the per-seed/arm parts make_adapted sets
    assert qc.modules_to_save == ["classifier"] and qc.init_seed == derive_seed(0, "qpeft", 64)
    assert qc == dataclasses.replace(cfg.qpeft, modules_to_save=["classifier"], init_seed=qc.init_seed)
    assert set(seen["lora"].target_modules) == {"q_proj"}  # one source of truth for both adapters' targets


def test_a_bad_nested_value_names_the_nested_field() -> None:
    e = experiment_module("quantum_peft")
    with pytest.raises(UsageError, match=r"^qpeft: rank must be a positive int, got 0$"):
        effective_config(e, "smoke", overrides=["qpeft.rank=0"])
    with pytest.raises(UsageError, match=r"^qpeft: alpha must be a number \(finite\), got nan$"):
        effective_config(e, "smoke", overrides=["qpeft.alpha=nan"])
    # the experiment's stricter rule on the scale s (the library allows any finite alpha)
    with pytest.raises(UsageError, match=r"qpeft.alpha must be a number > 0 \(the scale s\), got 0.0"):
        effective_config(e, "smoke", overrides=["qpeft.alpha=0"])
    for item, name in (
        ("qpeft.init_seed=3", "init_seed"),
        ("qpeft.modules_to_save=['x']", "modules_to_save"),
    ):
        with pytest.raises(UsageError, match=rf"qpeft.{name} is set in make_adapted"):
            effective_config(e, "smoke", overrides=[item])
    for flat in ("rank", "target_modules"):  # the flat names are gone
        with pytest.raises(
            UsageError, match=rf"unknown config field '{flat}' \(did you mean qpeft.{flat}\?\)"
        ):
            effective_config(e, "smoke", overrides=[f"{flat}=2"])


def test_lr_sweep_same_grid_for_every_method() -> None:
    """Fair-baseline protocol: each method's single LR (adapter and head alike) comes from the same grid."""
    cfg = dataclasses.replace(exp.PRESETS["smoke"], pretrain_epochs=1, finetune_epochs=1)
    assert (
        transfer.with_lr(cfg, "qpeft", 0.5).lr_angles == transfer.with_lr(cfg, "qpeft", 0.5).lr_lambda == 0.5
    )
    assert transfer.with_lr(cfg, "head_only", 0.5).lr_head_only == 0.5
    r = transfer.sweep_learning_rates(cfg, seeds=(10,), grid=(1e-2, 1e-1), width=64)
    assert set(r["best"]) == set(transfer.METHODS) and all(v in (1e-2, 1e-1) for v in r["best"].values())
    for m in transfer.METHODS:
        accs = r["acc"][m]
        assert set(accs) == {"0.01", "0.1"} and all(len(v) == 1 and 0 <= v[0] <= 1 for v in accs.values())
        assert r["best"][m] == max((1e-2, 1e-1), key=lambda lr: accs[str(lr)][0])
