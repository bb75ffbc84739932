import dataclasses
import json

import numpy as np
import pytest
import torch

from iclr25.budgeted_cl import (
    METHODS,
    TinyResNet,
    a_auc,
    a_last,
    block_parameters,
    count_block_flops,
    frozen_step,
    gaussian_stream,
    load_digits16,
    model_bytes,
    run_online,
    step_flops,
)
from iclr25.budgeted_cl.experiment import PRESETS, Config, run
from iclr25.common.claims import validate_claims_document
from iclr25.harness.artefacts import write_run


@pytest.fixture(scope="module")
def data():
    return load_digits16(0)


def small_model(c: int) -> TinyResNet:
    return TinyResNet(n_classes=c, stem_channels=8, widths=(8, 16), strides=(1, 2))


def test_frozen_step_keeps_frozen_blocks_bit_identical():
    torch.manual_seed(0)
    m = TinyResNet()
    groups = block_parameters(m)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    x, y = torch.randn(8, 1, 16, 16), torch.randint(0, 10, (8,))
    before = [[p.detach().clone() for p in g] for g in groups]
    frozen_step(torch.nn.functional.cross_entropy(m(x), y), groups, 3, opt)
    for i, (g, b) in enumerate(zip(groups, before, strict=True)):
        same = all(torch.equal(p, q) for p, q in zip(g, b, strict=True))
        assert same == (i < 3), f"block {i}"
    with pytest.raises(ValueError, match="head is never frozen"):
        frozen_step(torch.nn.functional.cross_entropy(m(x), y), groups, len(groups), opt)


def test_metrics():
    assert a_auc([10.0, 20.0, 60.0]) == pytest.approx(30.0)
    assert a_last([10.0, 20.0, 60.0]) == 60.0
    with pytest.raises(ValueError):
        a_auc([])


def test_runner_budgets_determinism_and_flops(data):
    order = gaussian_stream(data.train_y.numpy(), 0.1, seed=0)[:70]
    total = model_bytes(small_model(10)) + 8_000
    bf = count_block_flops(small_model(10), data.sample_shape)
    kw = dict(seed=0, total_bytes=total, eval_period=20, model_fn=small_model)
    m = dataclasses.replace(METHODS["al_sar"], corr_warmup=10, fisher="batch_mean")
    r1 = run_online(m, data, order, **kw)
    r2 = run_online(m, data, order, **kw)
    assert r1.eval_acc == r2.eval_acc and r1.flops == r2.flops and r1.frozen_blocks == r2.frozen_blocks
    assert r1.eval_samples == [20, 40, 60, 70]
    assert r1.memory_bytes <= total  # bytes budget respected (model + exemplars + SAR/aL state)
    assert r1.capacity < (total - model_bytes(small_model(10))) // 256  # SAR state costs exemplars
    # total FLOPs (batch-mean Fisher): Σ_steps b·(F + B − Σ_frozen B_i) plus (small) overheads
    base = sum(step_flops(bf, min(16, s + 1), n) for s, n in enumerate(r1.frozen_blocks))
    assert base <= r1.flops <= 1.05 * base
    er = run_online(METHODS["er"], data, order, **kw)
    assert er.capacity == (total - model_bytes(small_model(10))) // 256
    assert er.iterations == 70


def test_smoke_experiment(tmp_path):
    cfg = PRESETS["smoke"]
    res = run(cfg, tmp_path)
    res.preset = "smoke"
    write_run(res, cfg, tmp_path)
    doc = json.loads((tmp_path / "claims.json").read_text())
    validate_claims_document(doc)
    ids = [c["id"] for c in doc["claims"]]
    assert ids == ["sampling_gain", "freezing_saves", "equal_budget_win"]
    for c in doc["claims"]:
        assert np.isfinite(c["method"]["mean"])
    ps = res.per_seed[0]["gaussian"]
    # ER was given aL-SAR's FLOPs
    assert ps["er_equal"]["gflops"] == pytest.approx(ps["al_sar"]["gflops"], rel=0.05)
    # resume: a second run reads the seed back from disk and gives identical numbers
    res2 = run(cfg, tmp_path)
    assert res2.per_seed == res.per_seed


def test_config_validation():
    with pytest.raises(ValueError, match="streams"):
        Config(streams=("cifar",))
    with pytest.raises(ValueError, match="fisher"):
        Config(fisher="exact")
    with pytest.raises(ValueError, match="er_equal"):
        Config(arms=("er_equal",))


def _weight_macs_per_sample(model, shape) -> float:
    """Σ over the blocks' conv/linear layers of fan_out·fan_in·positions: one per-sample weight gradient each."""
    macs, hooks = [], []
    for blk in model.blocks:
        for mod in blk.modules():
            if isinstance(mod, (torch.nn.Conv2d, torch.nn.Linear)):
                hooks.append(
                    mod.register_forward_hook(lambda m, i, o: macs.append(m.weight.numel() * o[0, 0].numel()))
                )
    with torch.no_grad():
        model.eval()
        model(torch.zeros(1, *shape))
    for h in hooks:
        h.remove()
    return float(sum(macs))


def test_per_sample_fisher_is_charged_what_it_computes(data):
    """The paper's per-sample Fisher computes every per-sample weight gradient outside the batched backward:
    b·(weight MACs) + 2·b·params per update on top of the step (the batch-mean estimator costs only 2·params)."""
    order = gaussian_stream(data.train_y.numpy(), 0.1, seed=0)[:70]
    total = model_bytes(small_model(10)) + 8_000
    bf = count_block_flops(small_model(10), data.sample_shape)
    kw = dict(seed=0, total_bytes=total, eval_period=20, model_fn=small_model)
    m = dataclasses.replace(METHODS["al"], fisher="per_sample")
    r = run_online(m, data, order, **kw)
    sizes = [min(16, s + 1) for s in range(len(r.frozen_blocks))]
    base = sum(step_flops(bf, b, n) for b, n in zip(sizes, r.frozen_blocks, strict=True))
    model = small_model(10)
    params = sum(p.numel() for blk in model.blocks for p in blk.parameters())
    macs = _weight_macs_per_sample(model, data.sample_shape)
    fisher = sum(b * (macs + 2.0 * params) for b, n in zip(sizes, r.frozen_blocks, strict=True) if n == 0)
    assert fisher > 0.2 * base  # not a rounding error: a large share of a step
    assert base + fisher <= r.flops <= 1.05 * base + fisher
