"""Flow matching: loss normalisation, sampler consistency, network and training properties (incl. the LR schedule)."""

import json

import numpy as np
import pytest
import torch

from iclr25.mofflow import (
    FlowTrainConfig,
    LatticePrior,
    MOFFlowConfig,
    MOFFlowNet,
    collate,
    euler_sample,
    flow_matching_loss,
    interpolate,
    load_checkpoint,
    loss_scale,
    match_structures,
    model_predictor,
    sample_prior,
    save_checkpoint,
    toymof_dataset,
    train_mofflow,
)
from iclr25.mofflow.flow import MIN_T, angle_between
from iclr25.mofflow.so3 import uniform_so3


def _batch(n=4, seed=0):
    mofs = toymof_dataset(n, seed)
    lp = LatticePrior.fit(np.stack([m.lattice for m in toymof_dataset(20, 99)]))
    return mofs, collate(mofs), lp


def test_loss_scale_and_clamp():
    t = torch.tensor([0.0, 0.5, 0.9, 0.95, 1.0])
    assert torch.allclose(loss_scale(t), torch.tensor([1.0, 0.5, 0.1, 0.1, 0.1]))
    _, b, lp = _batch()
    t = torch.full((b.size,), 0.95)
    pred = {"trans": b.trans + 1000.0, "rots": b.rots, "lattice": b.lattice}
    out = flow_matching_loss(pred, b, t, b.rots)
    assert float(out["trans"]) <= 5.0 + 1e-6 and float(out["rot"]) < 1e-8 and float(out["lattice"]) < 1e-8
    # exact value for a small error: 2 · (0.1 · 1 / 0.1)^2 = 2 for a 1 Å error on every coordinate
    pred["trans"] = b.trans + 1.0 * b.block_mask[..., None]
    assert abs(float(flow_matching_loss(pred, b, t, b.rots)["trans"]) - 2.0) < 1e-5


def test_interpolant_endpoints():
    _, b, lp = _batch()
    prior = sample_prior(b, lp, torch.Generator().manual_seed(0))
    tr, R, lat = interpolate(b, torch.zeros(b.size), prior)
    assert torch.allclose(tr, prior[0]) and torch.allclose(R, prior[1], atol=1e-5)
    tr, R, lat = interpolate(b, torch.ones(b.size), prior)
    assert torch.allclose(tr, b.trans, atol=1e-5) and torch.allclose(lat, b.lattice)
    assert torch.allclose(R[b.block_mask], b.rots[b.block_mask], atol=1e-4)


def test_euler_sampler_with_oracle():
    mofs, b, lp = _batch(3, 1)
    b.rots = b.rots.double()
    prior = sample_prior(b, lp, torch.Generator().manual_seed(2))
    prior = (prior[0].double(), prior[1].double(), prior[2].double())
    gt = {"trans": b.trans.double(), "rots": b.rots, "lattice": b.lattice.double()}
    n = 50
    res = euler_sample(lambda *a: gt, b, lp, n_steps=n, prior=prior, trajectory=True)
    ts = torch.linspace(MIN_T, 1.0, n, dtype=torch.float64)
    fm = b.block_mask[..., None].double()
    dt = float(ts[1] - ts[0])
    for i, (tr, R, lat) in enumerate(res["trajectory"][1:], start=1):
        # the Euler iterate at grid time t_i lies on the line through x_0 (re-anchored at t=MIN_T) and x_1
        x_start = res["trajectory"][0][0]
        s = (ts[i] - ts[0]) / (1 - ts[0])
        line = ((1 - s) * x_start + s * gt["trans"]) * fm
        assert torch.allclose(tr, line, atol=1e-5)
        lat_line = (1 - s) * res["trajectory"][0][2] + s * gt["lattice"]
        assert torch.allclose(lat, lat_line, atol=1e-5)
        # exp schedule: angle to R_1 shrinks by (1 − 10Δt) each step
        prev = angle_between(res["trajectory"][i - 1][1], b.rots)[b.block_mask]
        cur = angle_between(R, b.rots)[b.block_mask]
        keep = prev > 1e-3
        assert torch.allclose(cur[keep], (1 - 10 * dt) * prev[keep], atol=1e-6)
    assert torch.allclose(res["trans"], gt["trans"] * fm, atol=1e-9)
    preds = [[m.to_structure(res["rots"][i, : m.n_blocks].numpy(), res["trans"][i, : m.n_blocks].numpy())]
             for i, m in enumerate(mofs)]  # fmt: skip
    r = match_structures([m.to_structure() for m in mofs], preds)
    assert r["match_rate"] == 100.0 and r["rmse"] < 1e-4


def test_network_shapes_padding_and_rotations():
    mofs, b, lp = _batch(4, 2)
    torch.manual_seed(0)
    net = MOFFlowNet(MOFFlowConfig(c_s=32, c_z=16, ipa_hidden=8, egnn_hidden=16, n_rbf=8))
    prior = sample_prior(b, lp, torch.Generator().manual_seed(0))
    t = torch.rand(b.size)
    tr, R, lat = interpolate(b, t, prior)
    out = net(b, t, tr, R, lat)
    assert out["trans"].shape == b.trans.shape and out["lattice"].shape == (4, 6)
    RtR = out["rots"] @ out["rots"].transpose(-1, -2)
    assert torch.allclose(RtR, torch.eye(3).expand_as(RtR), atol=1e-5)
    fm = b.block_mask[..., None]
    assert torch.allclose((out["trans"] * fm).sum(1), torch.zeros(4, 3), atol=1e-4)  # mean removed
    assert torch.all(out["trans"][~b.block_mask] == 0)
    # padded blocks do not influence real ones: drop the padding of the smallest MOF and compare
    i = int(b.block_mask.sum(1).argmin())
    one = collate([mofs[i]])
    o1 = net(
        one, t[i : i + 1], tr[i : i + 1, : mofs[i].n_blocks], R[i : i + 1, : mofs[i].n_blocks], lat[i : i + 1]
    )
    assert torch.allclose(o1["trans"][0], out["trans"][i, : mofs[i].n_blocks], atol=1e-4)
    # block embeddings are invariant to the block's pose: computed from local coordinates only
    b2 = collate(mofs)
    b2.rots = uniform_so3(b2.rots.shape[:2], torch.Generator().manual_seed(5))
    assert torch.allclose(net.embed_blocks(b2), net.embed_blocks(b))


def test_training_reduces_loss_and_checkpoint_roundtrip(tmp_path):
    mofs = toymof_dataset(40, 3, sizes=(4,))
    lp = LatticePrior.fit(np.stack([m.lattice for m in mofs]))
    torch.manual_seed(0)
    net = MOFFlowNet(MOFFlowConfig(c_s=32, c_z=16, ipa_hidden=8, egnn_hidden=16, n_rbf=8))
    b = collate(mofs[:16])

    def eval_loss():  # fixed t, fixed prior draw
        g = torch.Generator().manual_seed(7)
        t = 0.1 + 0.8 * torch.rand(b.size, generator=g)
        tr, R, lat = interpolate(b, t, sample_prior(b, lp, g))
        with torch.no_grad():
            return float(flow_matching_loss(net(b, t, tr, R, lat), b, t, R)["loss"])

    before = eval_loss()
    hist = train_mofflow(net, mofs, lp, FlowTrainConfig(steps=40, batch_size=8, lr=2e-3, warmup=5), seed=0)
    after = eval_loss()
    assert after < 0.97 * before, (before, after)
    p = save_checkpoint(net, tmp_path / "ck.pt", lp)
    net2, lp2 = load_checkpoint(p)
    assert lp2 == lp
    b = collate(mofs[:2])
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    r1 = euler_sample(model_predictor(net, b), b, lp, 5, generator=g1)
    r2 = euler_sample(model_predictor(net2, b), b, lp2, 5, generator=g2)
    assert torch.allclose(r1["trans"], r2["trans"]) and torch.allclose(r1["lattice"], r2["lattice"])
    json.dumps(hist[-1])


@pytest.mark.slow
def test_overfits_one_cell_to_a_structure_matcher_match():
    """Learning signal: MOFFlow-tiny trained on one M=4 cell samples a structure that StructureMatcher matches."""
    from iclr25.mofflow import predict

    mofs = toymof_dataset(1, 0, sizes=(4,))
    lp = LatticePrior.fit(np.stack([m.lattice for m in toymof_dataset(200, 1)]))
    torch.manual_seed(0)
    net = MOFFlowNet()
    prior_preds = predict(net, mofs, lp, 50, seed=1)
    train_mofflow(net, mofs, lp, FlowTrainConfig(steps=800, batch_size=8, lr=1e-3), seed=0)
    preds = predict(net, mofs, lp, 50, seed=1)
    gts = [m.to_structure() for m in mofs]
    assert match_structures(gts, [[p] for p in prior_preds if p is not None])["match_rate"] == 0.0
    r = match_structures(gts, [[p] for p in preds])
    assert r["match_rate"] == 100.0 and r["rmse"] < 0.3, r


def test_lr_schedule_matches_the_replaced_warmup_cosine(monkeypatch):
    """Training's LR sequence (transformers' cosine-with-min-lr and warm-up via iclr25.common.schedule) equals,
    step by step, the hand-written lr_at it replaced (linear warm-up lr·(s+1)/W, cosine to min_lr_ratio·lr)."""
    import math

    lrs: list[float] = []
    step = torch.optim.AdamW.step

    def recording_step(self, *a, **k):
        lrs.append(self.param_groups[0]["lr"])
        return step(self, *a, **k)

    monkeypatch.setattr(torch.optim.AdamW, "step", recording_step)
    cfg = FlowTrainConfig(steps=30, batch_size=4, lr=2e-3, warmup=6, min_lr_ratio=0.1)
    mofs = toymof_dataset(8, 3, sizes=(4,))
    lp = LatticePrior.fit(np.stack([m.lattice for m in mofs]))
    torch.manual_seed(0)
    net = MOFFlowNet(MOFFlowConfig(c_s=16, c_z=8, ipa_hidden=4, egnn_hidden=8, n_rbf=4))
    train_mofflow(net, mofs, lp, cfg, seed=0)

    def old(s: int) -> float:  # the replaced lr_at
        if s < cfg.warmup:
            return cfg.lr * (s + 1) / cfg.warmup
        p = (s - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return cfg.lr * (cfg.min_lr_ratio + (1 - cfg.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * p)))

    w = cfg.warmup
    assert len(lrs) == cfg.steps
    assert np.allclose(lrs, [old(s) for s in range(cfg.steps)], rtol=1e-12, atol=0)
    assert lrs[-1] > cfg.min_lr_ratio * cfg.lr and min(lrs[w:]) >= cfg.min_lr_ratio * cfg.lr * (1 - 1e-12)
