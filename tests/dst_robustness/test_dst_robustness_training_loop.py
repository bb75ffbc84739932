"""The DST engine inside real PyTorch training loops: AMP GradScaler, gradient clipping, checkpoints, DDP."""

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

from iclr25.dst_robustness import DSTConfig, DynamicSparseTraining


def _net(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 6 * 6, 5))


def _batch(g):
    return torch.randn(16, 3, 6, 6, generator=g), torch.randint(0, 5, (16,), generator=g)


def _setup(method="rigl", delta_t=2, total=20, seed=0, net_seed=0):
    model = _net(net_seed)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    eng = DynamicSparseTraining(
        model, opt, DSTConfig(method, sparsity=0.6, delta_t=delta_t), total, seed=seed
    )
    return model, opt, eng


def _snapshot(model, eng):
    return [p.detach().clone() for p in model.parameters()], [m.clone() for m in eng.masks]


# ---------------------------------------------------------------------------------------------- AMP
def test_amp_overflow_step_changes_nothing_and_later_steps_train():
    model, opt, eng = _setup(delta_t=1)  # every step is a topology update
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    g = torch.Generator().manual_seed(0)
    x, y = _batch(g)
    params0, masks0 = _snapshot(model, eng)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = nn.functional.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    with (
        torch.no_grad()
    ):  # an fp16 overflow in one inactive and one active entry (what a too-large scale does)
        model[0].weight.grad.view(-1)[:2] = torch.tensor([float("inf"), float("nan")])
    assert any(not torch.isfinite(p.grad).all() for p in model.parameters())
    changed = eng.step(scaler)
    scaler.update()
    assert changed is False and eng.t == 0 and eng.history == []
    params1, masks1 = _snapshot(model, eng)
    assert all(torch.equal(a, b) for a, b in zip(params0, params1))  # no update, no NaN/inf
    assert all(torch.equal(a, b) for a, b in zip(masks0, masks1))
    assert scaler.get_scale() < 2.0**16  # the scaler saw the overflow
    # finite steps afterwards train and update the topology
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    for _ in range(3):
        x, y = _batch(g)
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = nn.functional.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        assert eng.step(scaler) is True
        scaler.update()
    assert eng.t == 3 and len(eng.history) == 3
    for p, m in zip(eng.params, eng.masks):
        assert torch.isfinite(p).all() and torch.all(p[~m] == 0)


def test_amp_scaler_step_equals_plain_step_when_finite():
    """With a finite power-of-two scale, the scaled-and-unscaled path gives the plain fp32 step exactly."""
    runs = []
    for use_scaler in (False, True):
        model, opt, eng = _setup(delta_t=2)
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10) if use_scaler else None
        g = torch.Generator().manual_seed(1)
        for _ in range(6):
            x, y = _batch(g)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            (scaler.scale(loss) if scaler else loss).backward()
            eng.step(scaler)
            if scaler:
                scaler.update()
        runs.append(_snapshot(model, eng))
    (pa, ma), (pb, mb) = runs
    assert all(torch.equal(a, b) for a, b in zip(ma, mb))
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(pa, pb))


def test_step_rejects_a_non_scaler():
    _, _, eng = _setup()
    with pytest.raises(ValueError, match="scaler"):
        eng.step(scaler="amp")


# -------------------------------------------------------------------------------------- clipping
def test_mask_gradients_before_clipping_gives_the_sparse_norm_and_keeps_rigl_regrow():
    runs = []
    for explicit in (False, True):
        model, opt, eng = _setup(delta_t=2)
        g = torch.Generator().manual_seed(2)
        norms = []
        for _ in range(6):
            x, y = _batch(g)
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            if explicit:
                masked = torch.cat(
                    [
                        (p.grad * m).view(-1) if any(p is q for q in eng.params) else p.grad.view(-1)
                        for p, m in zip(model.parameters(), _masks_or_ones(model, eng))
                    ]
                )
                dense = torch.cat([p.grad.view(-1) for p in model.parameters()])
                eng.mask_gradients()
                norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1e9)
                assert float(norm) == pytest.approx(float(masked.norm()), rel=1e-6)
                assert float(norm) < float(dense.norm())  # the unmasked norm is larger
                norms.append(float(norm))
            eng.step()
        runs.append(_snapshot(model, eng))
    (pa, ma), (pb, mb) = runs
    # calling mask_gradients early does not change training: RigL still regrows by the dense gradient
    assert all(torch.equal(a, b) for a, b in zip(ma, mb))
    assert all(torch.equal(a, b) for a, b in zip(pa, pb))


def _masks_or_ones(model, eng):
    by_id = {id(p): m for p, m in zip(eng.params, eng.masks)}
    return [by_id.get(id(p), torch.ones_like(p, dtype=torch.bool)) for p in model.parameters()]


# ------------------------------------------------------------------------------------- checkpoint
def _train(model, opt, eng, g, steps):
    for _ in range(steps):
        x, y = _batch(g)
        opt.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        eng.step()


@pytest.mark.parametrize("method", ["set", "rigl", "mest", "granet"])
def test_checkpoint_round_trip_resumes_exactly(method, tmp_path):
    model, opt, eng = _setup(method, delta_t=2, total=20)
    g = torch.Generator().manual_seed(3)
    _train(model, opt, eng, g, 20)
    ref = _snapshot(model, eng)

    model, opt, eng = _setup(method, delta_t=2, total=20)
    g = torch.Generator().manual_seed(3)
    _train(model, opt, eng, g, 10)
    path = tmp_path / "ckpt.pt"
    torch.save(
        {"model": model.state_dict(), "opt": opt.state_dict(), "dst": eng.state_dict(), "g": g.get_state()},
        path,
    )
    ckpt = torch.load(path, weights_only=True)
    # a fresh process: other initial weights and another mask seed, then load everything
    model, opt, eng = _setup(method, delta_t=2, total=20, seed=99, net_seed=7)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    eng.load_state_dict(ckpt["dst"])
    assert eng.t == 10 and all(torch.equal(a, b) for a, b in zip(eng.masks, ckpt["dst"]["masks"]))
    g = torch.Generator()
    g.set_state(ckpt["g"])
    _train(model, opt, eng, g, 10)
    got = _snapshot(model, eng)
    assert all(torch.equal(a, b) for a, b in zip(ref[1], got[1]))
    assert all(torch.equal(a, b) for a, b in zip(ref[0], got[0]))


def test_load_state_dict_validates_and_warns_on_wrong_order(tmp_path):
    model, opt, eng = _setup("set", delta_t=2)
    _train(model, opt, eng, torch.Generator().manual_seed(4), 6)
    state = eng.state_dict()
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    # wrong order: model weights loaded, then a new engine built (its own masks zero them), then the engine state
    model2 = _net(5)
    model2.load_state_dict(trained)
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.1, momentum=0.9)
    eng2 = DynamicSparseTraining(model2, opt2, DSTConfig("set", sparsity=0.6, delta_t=2), 20, seed=42)
    with pytest.warns(RuntimeWarning, match="after building"):
        eng2.load_state_dict(state)
    # shape / method mismatches are refused
    other = nn.Sequential(nn.Linear(4, 3))
    eng3 = DynamicSparseTraining(other, torch.optim.SGD(other.parameters(), lr=0.1), DSTConfig("set"), 20)
    with pytest.raises(ValueError, match="shapes"):
        eng3.load_state_dict(state)
    _, _, eng4 = _setup("rigl", delta_t=2)
    with pytest.raises(ValueError, match="method"):
        eng4.load_state_dict(state)
    with pytest.raises(ValueError, match="masks"):
        eng4.load_state_dict({"t": 3})


# ------------------------------------------------------------------------------------------- DDP
def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ddp_worker(rank, world, port, out_dir):
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = nn.parallel.DistributedDataParallel(_net(0))
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        eng = DynamicSparseTraining(model, opt, DSTConfig("rigl", sparsity=0.6, delta_t=2), 12, seed=0)
        g = torch.Generator().manual_seed(100 + rank)  # each rank sees different data
        for _ in range(8):
            x, y = _batch(g)
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()  # DDP all-reduces the dense gradient
            eng.mask_gradients()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
            eng.step()
        torch.save(
            {
                "masks": [m.clone() for m in eng.masks],
                "params": [p.detach().clone() for p in eng.params],
                "history": len(eng.history),
            },
            os.path.join(out_dir, f"rank{rank}.pt"),
        )
    finally:
        dist.destroy_process_group()


@pytest.mark.distributed
def test_ddp_two_processes_keep_identical_masks_and_weights(tmp_path):
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    mp.spawn(_ddp_worker, args=(2, _free_port(), str(tmp_path)), nprocs=2, join=True)
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert r0["history"] == r1["history"] == 4  # t = 2, 4, 6, 8 ≤ T_end = 9
    assert all(torch.equal(a, b) for a, b in zip(r0["masks"], r1["masks"]))
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(r0["params"], r1["params"]))
    assert all(torch.all(p[~m] == 0) for p, m in zip(r0["params"], r0["masks"]))
