"""Smoke run of the experiment (claims present, finite numbers, resume) and the pretrained (full-preset) path."""

import json
import math

import pytest
import torch

from iclr25.cascading_kv.experiment import PRESETS, Config, one_seed_pretrained, run
from iclr25.cascading_kv.recall import recall_batch, vocab
from iclr25.common.seeding import torch_generator
from iclr25.harness.artefacts import write_run

CLAIM_IDS = {"window_parity", "retrieval_beyond_window", "span_bound", "prefill_linear"}


def test_recall_batch_layout_and_determinism():
    cfg = PRESETS["quick"]
    tk = vocab(cfg)
    a, va = recall_batch(cfg, 6, 100, 40, torch_generator(3))
    b, vb = recall_batch(cfg, 6, 100, 40, torch_generator(3))
    assert torch.equal(a, b) and torch.equal(va, vb)
    assert (a[:, 0] == tk["bos"]).all() and (a[:, -1] == tk["query"]).all()
    assert (a[:, 100 - 1 - 40] == va).all() and (a[:, 100 - 2 - 40] == tk["key"]).all()
    assert ((a == tk["key"]).sum(1) == 1).all() and a.max() < tk["size"] and a.min() >= 1


def test_config_validation():
    with pytest.raises(ValueError, match="cache_size"):
        Config(cache_size=60, cascades=8)
    with pytest.raises(ValueError, match="distance_factors"):
        Config(distance_factors=(0.5, 1.5))
    with pytest.raises(ValueError, match="timing_length"):
        Config(timing_length=100)
    with pytest.raises(ValueError, match="model_name"):
        Config(mode="pretrained")


@pytest.mark.slow
def test_smoke_run_writes_claims_and_resumes(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    assert {c["id"] for c in doc["claims"]} == CLAIM_IDS
    for c in doc["claims"]:
        for p in c.get("parts", [c]):
            assert all(v is not None and math.isfinite(v) for v in p["method"]["values"])
    assert (tmp_path / "figures" / "accuracy_vs_distance.png").exists()
    # resume: the finished seed is read back, so accuracies are identical
    again = run(cfg, tmp_path)
    assert again.per_seed[0]["cascade"] == res.per_seed[0]["cascade"]


def test_pretrained_mode_runs_on_a_tiny_model():
    cfg = Config(
        mode="pretrained", model_name="tiny", seeds=1, sink_tokens=4, cache_size=16, cascades=2, stride=16,
        distance_factors=(0.5, 1.2, 2.0), stream_length=128, trials=1, timing_length=128, timing_repeats=1,
    )  # fmt: skip
    r = one_seed_pretrained(cfg, 0)
    assert set(r["cascade"]) == {"acc_d8", "acc_d19", "acc_d32", "ppl"}
    assert math.isfinite(r["cascade"]["ppl"]) and math.isfinite(r["timing"]["full_ratio"])


def test_benchmark_children_measure_prefill_and_decode(capsys):
    from benchmarks.bench_cascading_kv import METHODS, main

    small = ["--cache-size", "32", "--stride", "32", "--hidden", "32", "--repeats", "1", "--decode-tokens", "2",
             "--rounds", "1"]  # fmt: skip
    for method in METHODS:
        assert main(["--_one", method, "--_length", "96", *small]) == 0
        r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert r["method"] == method and r["prefill_s"] > 0 and r["cache_bytes"] > 0
    assert main(["--_decode", "96", "--_methods", "cascade,sliding,full,quantized", *small]) == 0
    r = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert all(r[f"{m}_tok_s"] > 0 for m in ("cascade", "sliding", "full", "quantized"))


def test_benchmark_goals_are_ratios_of_this_run():
    """Speeds are ratios ≥ target, memory a ratio ≤ target; a length that was not run is not measured (✗)."""
    from benchmarks.bench_cascading_kv import goals

    rows = [{"method": m, "length": 32768, "prefill_s": s, "peak_bytes": b}
            for m, s, b in (("cascade", 2.0, 30), ("sliding", 3.0, 20), ("full", 9.0, 300))]  # fmt: skip
    pairs = [{"length": 4096, "compiled_tok_s": 90.0, "cascade_tok_s": 70.0, "sliding_tok_s": 100.0}]
    g = {x["goal"]: x for x in goals(rows, pairs)}
    assert g["decode tok/s, cascade (compiled) / HF sliding window, 4K"]["ratio"] == 0.9
    assert g["decode tok/s, cascade (compiled) / HF sliding window, 4K"]["met"]
    assert not g["decode tok/s, cascade (eager) / HF sliding window, 4K"]["met"]
    assert g["prefill speed, HF chunked sliding window s / cascade s, 32K"]["ratio"] == 1.5
    assert g["prefill speed, SDPA full attention s / cascade s, 32K"]["ratio"] == 4.5
    mem = g["peak prefill memory, cascade / HF sliding window, 32K"]
    assert mem["ratio"] == 1.5 and mem["met"]  # ≤ 1.5
    dec32 = g["decode tok/s, cascade (compiled) / HF sliding window, 32K"]
    assert math.isnan(dec32["ratio"]) and not dec32["met"]


class _Stop(Exception):
    pass


def test_dotted_overrides_reach_the_training_config_train_lm_receives(monkeypatch):
    """``--set train.lr=… train.grad_clip=…`` reach the LMTrainConfig the recall model trains with; the seed is
    derived per run seed and the batches come from the recall generator at ``train.batch_size``."""
    from iclr25.cascading_kv import recall
    from iclr25.common.seeding import derive_seed
    from iclr25.harness.configs import effective_config, experiment_module

    cfg = effective_config(
        experiment_module("cascading_kv"),
        "smoke",
        overrides=["train.lr=0.001", "train.grad_clip=1.5", "train.steps=7", "train.batch_size=5"],
    )[0]
    seen = {}

    def fake_train_lm(model, cfg, batch_fn, device, desc):
        seen["cfg"], seen["batch"] = cfg, batch_fn(0, torch_generator(0))
        raise _Stop

    monkeypatch.setattr(recall, "train_lm", fake_train_lm)
    with pytest.raises(_Stop):
        recall.train_recall_model(cfg, 3, torch.device("cpu"))
    t = seen["cfg"]
    assert (t.lr, t.grad_clip, t.steps, t.batch_size) == (0.001, 1.5, 7, 5)
    assert (t.warmup_steps, t.min_lr_ratio, t.beta2, t.seq_len) == (0, 1.0, 0.999, 97)
    assert t.seed == derive_seed(3, "train")
    assert seen["batch"][0].shape[0] == 5


@pytest.mark.parametrize(
    "override,message",
    [
        ("train.lr=Infinity", r"train: lr must be a positive number \(finite\), got inf"),
        ("train.steps=0", "train: steps must be a positive int, got 0"),
        ("train.seq_len=64", r"train.seq_len must be the longest of train_lengths \+ 1 = 97"),
        ("train.seed=4", "train.seed is derived from each run seed"),
        ("grad_clip=1", r"did you mean train\.grad_clip\?"),
    ],
)
def test_a_bad_training_value_names_the_nested_field(override, message):
    from iclr25.harness.configs import effective_config, experiment_module
    from iclr25.harness.runs import UsageError

    with pytest.raises(UsageError, match=message):
        effective_config(experiment_module("cascading_kv"), "quick", overrides=[override])
