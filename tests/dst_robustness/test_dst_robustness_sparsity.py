"""Invariants of the DST engine (the unified sparse-training framework of paper Sec. 3.2: densities, drop/regrow, masks, schedules)."""

import math
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from iclr25.dst_robustness import (
    ClassifierTrainConfig,
    DSTConfig,
    DynamicSparseTraining,
    drop_count,
    erk_densities,
    granet_density,
    train_classifier,
)


def test_erk_reference_values():
    shapes = [(16, 3, 3, 3), (32, 16, 3, 3), (10, 512)]
    dens, eps = erk_densities(shapes, 0.5)
    assert np.allclose(dens, [0.4892, 0.0991, 0.8618], atol=1e-3)
    assert eps == pytest.approx(8.4526, abs=1e-3)
    n = [math.prod(s) for s in shapes]
    assert sum(d * k for d, k in zip(dens, n)) / sum(n) == pytest.approx(0.5, abs=1e-3)
    # exact-count version used by the engine: within 1 weight per layer
    counts = [round(d * k) for d, k in zip(dens, n)]
    assert abs(sum(counts) - 0.5 * sum(n)) <= len(n)


def test_erk_caps_layers_at_one_and_keeps_budget():
    shapes = [(4, 3, 3, 3), (64, 64, 3, 3), (10, 64)]  # the first and last would exceed 1 at density 0.9
    dens, _ = erk_densities(shapes, 0.9)
    assert max(dens) <= 1.0 and dens[0] == 1.0
    n = [math.prod(s) for s in shapes]
    assert sum(d * k for d, k in zip(dens, n)) / sum(n) == pytest.approx(0.9, abs=1e-9)


def test_drop_count_matches_rigl_formula():
    assert drop_count(1000, 250, 0.3, 1000) == int(1000 * 0.15 * (1 + math.cos(math.pi / 4))) == 256
    assert drop_count(1000, 1001, 0.3, 1000) == 0


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 5))


def _loop(engine, model, opt, steps, check):
    g = torch.Generator().manual_seed(1)
    for _ in range(steps):
        x = torch.randn(16, 3, 6, 6, generator=g)
        y = torch.randint(0, 5, (16,), generator=g)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        engine.step()
        check(engine, opt)


def _inactive_zero(engine, opt):
    for p, m in zip(engine.params, engine.masks):
        assert torch.all(p[~m] == 0)
        buf = opt.state[p].get("momentum_buffer")
        if buf is not None:
            assert torch.all(buf[~m] == 0)


@pytest.mark.parametrize("method", ["set", "rigl"])
def test_nnz_preserved_and_inactive_zero(method):
    model = _net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    eng = DynamicSparseTraining(
        model, opt, DSTConfig(method, sparsity=0.5, delta_t=3, p0=0.5), total_steps=40, seed=0
    )
    counts = eng.nnz()
    assert counts == eng.target_counts

    def check(e, o):
        assert e.nnz() == counts  # exact per-layer density after every step / update
        _inactive_zero(e, o)

    _loop(eng, model, opt, 40, check)
    updates = [h for h in eng.history if h["kind"] == method]
    assert len(updates) == 30 // 3  # t = 3, 6, ..., 30 = T_end
    assert all(h["dropped"] == h["grown"] for h in updates)
    assert any(sum(h["dropped"]) > 0 for h in updates)


def test_drop_and_gradient_regrow_match_naive_reference():
    lin = nn.Linear(20, 10, bias=False)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    eng = DynamicSparseTraining(
        lin, opt, DSTConfig("rigl", sparsity=0.6, delta_t=1, p0=0.3, t_end_frac=1.0), total_steps=1000
    )
    w = lin.weight.detach().view(-1).clone()
    mask0 = eng.masks[0].view(-1).clone()
    grad = torch.randn(200, generator=torch.Generator().manual_seed(3)).view(10, 20)
    k = drop_count(int(mask0.sum()), 250, 0.3, 1000)
    # naive reference: sort the active weights by |w|, drop the k smallest; grow the top-k |g| among the rest
    active = [i for i in range(200) if mask0[i]]
    dropped_ref = set(sorted(active, key=lambda i: abs(float(w[i])))[:k])
    after_drop = set(active) - dropped_ref
    inactive = [i for i in range(200) if i not in after_drop]
    grown_ref = set(sorted(inactive, key=lambda i: -abs(float(grad.view(-1)[i])))[:k])
    rec = eng.topology_update(250, [grad])
    assert rec["dropped"] == [k] == rec["grown"] and k > 0
    mask1 = eng.masks[0].view(-1)
    assert set(torch.nonzero(mask1).view(-1).tolist()) == after_drop | grown_ref
    assert torch.all(lin.weight.view(-1)[list(grown_ref)] == 0)  # regrown weights start at 0


def test_regrown_momentum_is_reset():
    lin = nn.Linear(30, 10, bias=False)
    opt = torch.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    eng = DynamicSparseTraining(
        lin, opt, DSTConfig("set", sparsity=0.5, delta_t=1000), total_steps=1000, seed=0
    )
    lin(torch.randn(4, 30)).sum().backward()
    eng.step()  # creates the momentum buffer
    opt.state[lin.weight]["momentum_buffer"].fill_(1.0)
    eng.apply_masks()
    before = eng.masks[0].clone()
    eng.topology_update(10)
    grown = eng.masks[0] & ~before
    buf = opt.state[lin.weight]["momentum_buffer"]
    assert grown.any() and torch.all(buf[grown] == 0) and torch.all(lin.weight[grown] == 0)
    assert torch.all(buf[~eng.masks[0]] == 0)


def test_granet_follows_cubic_schedule():
    model = _net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    cfg = DSTConfig("granet", sparsity=0.7, delta_t=2, p0=0.3, init_density=0.8, granet_tf_frac=0.5)
    eng = DynamicSparseTraining(model, opt, cfg, total_steps=40, seed=0)
    total = sum(eng.sizes)
    assert abs(sum(eng.nnz()) - 0.8 * total) <= len(eng.sizes)
    _loop(eng, model, opt, 40, _inactive_zero)
    recs = [h for h in eng.history if "granet_density" in h]
    assert len(recs) == 10  # t = 2..20
    for h in recs:
        target = granet_density(h["t"], 0.8, 0.3, 0, 20)
        assert abs(sum(h["nnz"]) - target * total) <= 1
    assert abs(eng.density() - 0.3) <= 1 / total


def test_granet_ends_at_target_density_when_no_update_lands_on_tf():
    # T = 40, t_f = ⌊0.5875·40⌋ = 23, ΔT = 8: updates at 8, 16, 24 — none on t_f = 23, so the last scheduled
    # prune (t = 16, d_t ≈ 0.314) leaves the net above d = 0.3; the engine must still end at exactly round(d·ΣN)
    model = _net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    cfg = DSTConfig("granet", sparsity=0.7, delta_t=8, p0=0.3, init_density=0.8, granet_tf_frac=0.5875)
    eng = DynamicSparseTraining(model, opt, cfg, total_steps=40, seed=0)
    total = sum(eng.sizes)
    assert eng.granet_tf == 23 and eng.granet_tf % cfg.delta_t != 0
    nnz_at = {}

    def check(e, o):
        _inactive_zero(e, o)
        nnz_at[e.t] = sum(e.nnz())

    _loop(eng, model, opt, 40, check)
    last = [h for h in eng.history if "granet_density" in h][-1]
    assert last["t"] == 16 and sum(last["nnz"]) > round(0.3 * total) + 10  # the schedule alone stops above d
    assert nnz_at[22] == sum(last["nnz"])
    assert all(nnz_at[t] == round(0.3 * total) for t in range(23, 41))  # pruned at t_f; drop/regrow keeps it
    final = [h for h in eng.history if h["kind"] == "granet_final"]
    assert len(final) == 1 and final[0]["t"] == 23 and final[0]["granet_pruned"] > 0
    # the flag survives a checkpoint: a restored engine does not prune again
    model2 = _net()
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.05, momentum=0.9)
    eng2 = DynamicSparseTraining(model2, opt2, cfg, total_steps=40, seed=0)
    state = eng.state_dict()
    assert state["granet_final_done"] is True
    with warnings.catch_warnings():  # fresh model: its weights are not the trained ones (irrelevant here)
        warnings.simplefilter("ignore", RuntimeWarning)
        eng2.load_state_dict(state)
    assert eng2._granet_final_done


def test_mest_soft_bound():
    model = _net()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    eng = DynamicSparseTraining(
        model, opt, DSTConfig("mest", sparsity=0.5, delta_t=4), total_steps=40, seed=0
    )
    assert eng.nnz() == eng.upper_counts and sum(eng.upper_counts) > sum(eng.target_counts)

    def check(e, o):
        _inactive_zero(e, o)
        if e.t < e.t_end:
            assert e.nnz() == e.upper_counts  # trains at d_up = 1.1·d between updates
        else:
            assert e.nnz() == e.target_counts  # final prune to exactly d at T_end

    _loop(eng, model, opt, 40, check)


def _tiny_data():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 255, size=(48, 8, 8, 3), dtype=np.uint8)
    y = rng.integers(0, 4, size=48)
    return x, y


def _small_cnn():
    return nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(256, 4)
    )


@pytest.mark.parametrize("method", ["set", "rigl", "mest", "granet"])
def test_sparsity_zero_equals_dense(method):
    x, y = _tiny_data()
    tc = ClassifierTrainConfig(epochs=2, batch_size=16)
    dense, _, _ = train_classifier(_small_cnn, x, y, tc, seed=5)
    sp, eng, _ = train_classifier(
        _small_cnn, x, y, tc, seed=5, dst=DSTConfig(method, sparsity=0.0, delta_t=1)
    )
    assert eng.history == []  # no drop / regrow at density 1
    for a, b in zip(dense.state_dict().values(), sp.state_dict().values()):
        assert torch.allclose(a.float(), b.float(), atol=1e-6)


def test_engine_uses_its_own_rng_and_is_deterministic():
    x, y = _tiny_data()
    tc = ClassifierTrainConfig(epochs=2, batch_size=16)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    m1, e1, _ = train_classifier(_small_cnn, x, y, tc, seed=1, dst=DSTConfig("set", sparsity=0.5, delta_t=2))
    m2, e2, _ = train_classifier(_small_cnn, x, y, tc, seed=1, dst=DSTConfig("set", sparsity=0.5, delta_t=2))
    for a, b in zip(e1.masks, e2.masks):
        assert torch.equal(a, b)
    for a, b in zip(m1.state_dict().values(), m2.state_dict().values()):
        assert torch.equal(a, b)
    # the engine never touches the global RNG: a plain draw after construction is unchanged
    lin = nn.Linear(10, 10)
    torch.set_rng_state(state)
    a = torch.rand(3)
    torch.set_rng_state(state)
    DynamicSparseTraining(lin, torch.optim.SGD(lin.parameters(), lr=0.1), DSTConfig("set"), 10, seed=0)
    assert torch.equal(a, torch.rand(3))


@pytest.mark.parametrize(
    "kw,name",
    [({"method": "snip"}, "method"), ({"sparsity": 1.0}, "sparsity"), ({"delta_t": 0}, "delta_t"),
     ({"regrow": "best"}, "regrow"), ({"distribution": "er"}, "distribution")],
)  # fmt: skip
def test_bad_config_raises(kw, name):
    with pytest.raises(ValueError, match=name):
        DSTConfig(**kw)
    with pytest.raises(ValueError, match="density"):
        erk_densities([(3, 3)], 0.0)
