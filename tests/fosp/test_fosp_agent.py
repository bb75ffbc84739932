"""FOSPAgent: PEX keeps π_off bit-identical, in-sample term sees dataset actions only, switches, checkpoints,
bad input and a learning signal."""

import dataclasses

import numpy as np
import pytest
import torch

from iclr25.fosp import (
    FOSPAgent,
    FOSPConfig,
    SafeNav2DVec,
    SequenceStore,
    collect_dataset,
    finetune_online,
    train_offline,
    train_world_model,
)

TINY = FOSPConfig(hidden=16, deter=16, latent=8, batch=4, seq_len=4, horizon=3, penalty_init=1e-3)


@pytest.fixture(scope="module")
def data():
    return collect_dataset(3, seed=0, max_steps=40)


@pytest.mark.slow
def test_pex_keeps_offline_policy_bit_identical(data):
    ag = FOSPAgent((22,), 2, TINY, seed=0)
    train_offline(ag, data, 5)
    ag.start_online(pex=True)
    before = {k: v.clone() for k, v in ag.actor_off.state_dict().items()}
    on_before = {k: v.clone() for k, v in ag.actor.state_dict().items()}
    store = SequenceStore(TINY.seq_len, data)
    rng = np.random.default_rng(0)
    for _ in range(100):
        ag.train_behavior(store.sample(TINY.batch, rng))
    assert all(torch.equal(before[k], v) for k, v in ag.actor_off.state_dict().items())
    assert any(not torch.equal(on_before[k], v) for k, v in ag.actor.state_dict().items())  # π_on did learn
    # the official code's shared-parameter behaviour (option) does not keep π_off frozen
    sh = FOSPAgent((22,), 2, dataclasses.replace(TINY, pex_shared_actor=True), seed=0)
    sh.start_online(pex=True)
    assert sh.actor_off is sh.actor


def test_in_sample_term_uses_dataset_actions(data):
    ag = FOSPAgent((22,), 2, TINY, seed=1)
    batch = SequenceStore(TINY.seq_len, data).sample(TINY.batch, np.random.default_rng(1))
    ag.train_behavior(batch)
    assert torch.equal(ag._last_in_sample_actions, torch.as_tensor(batch["actions"]))
    ag.online = True  # online phase: the in-sample term is off
    ag._last_in_sample_actions = None
    ag.train_behavior(batch)
    assert ag._last_in_sample_actions is None


def test_official_self_referential_ref_stays_zero(data):
    """Official code: h_t = 1[Φ(s, a) > 0] with a zero-initialised head → targets and Φ stay exactly 0."""
    ag = FOSPAgent((22,), 2, dataclasses.replace(TINY, ref_target="self"), seed=2)
    train_offline(ag, data, 10)
    s = torch.randn(5, ag.wm.feat_dim)
    assert torch.all(ag.phi(s, torch.zeros(5, 2)) == 0)
    paper = FOSPAgent((22,), 2, TINY, seed=2)
    train_offline(paper, data, 10)
    assert float(paper.phi(s, torch.zeros(5, 2)).abs().max()) > 0  # RESPO targets from costs move Φ


def test_bad_input_errors(data):
    with pytest.raises(ValueError, match="cost_limit"):
        FOSPConfig(cost_limit=-1.0)
    with pytest.raises(ValueError, match="actor_update"):
        FOSPConfig(actor_update="ppo")
    with pytest.raises(ValueError, match="tau_r"):
        FOSPConfig(tau_r=1.5)
    ag = FOSPAgent((10,), 2, TINY)
    with pytest.raises(ValueError, match="dataset observations have shape"):
        train_offline(ag, data, 1)
    ag = FOSPAgent((22,), 2, TINY)
    with pytest.raises(ValueError, match="obs must have shape"):
        ag.act(np.zeros((3, 21), np.float32))
    with pytest.raises(ValueError, match="finite"):
        ag.act(np.full((3, 22), np.nan, np.float32))


def test_checkpoint_roundtrip_and_resume(tmp_path, data):
    a = FOSPAgent((22,), 2, TINY, seed=3)
    train_offline(a, data, 6)
    a.start_online(pex=True)
    p = a.save(tmp_path / "agent.safetensors")
    b = FOSPAgent.load(p)
    assert b.updates == 6 and b.actor_off is not None
    for (k, v), (_, w) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(v, w), k
    obs = np.random.default_rng(0).normal(size=(4, 22)).astype(np.float32)
    assert np.allclose(a.act(obs, deterministic=True)[0], b.act(obs, deterministic=True)[0])
    # resumable: an interrupted run (checkpoint at 4) continues to 8 with the same batches
    ck = tmp_path / "run.safetensors"
    c = FOSPAgent((22,), 2, TINY, seed=4)
    train_offline(c, data, 4, checkpoint=ck, checkpoint_every=2)
    d = FOSPAgent((22,), 2, TINY, seed=4)
    train_offline(d, data, 8, checkpoint=ck)
    assert d.updates == 8


@pytest.mark.slow
def test_world_model_learns_and_cost_head_separates(data):
    torch.manual_seed(0)
    cfg = dataclasses.replace(TINY, hidden=32, deter=32, latent=16, batch=16, seq_len=8)
    ag = FOSPAgent((22,), 2, cfg, seed=5)
    big = collect_dataset(10, seed=1, max_steps=100)
    losses = train_world_model(ag, big, 250)
    assert np.mean(losses[-20:]) < 0.5 * np.mean(losses[:5])
    with torch.no_grad():
        o = torch.as_tensor(big.next_observations)
        feat = ag.wm.obs_step(None, None, o)
        p = ag.wm.heads(feat)[1].numpy()
    inside = big.costs > 0
    assert p[inside].mean() > p[~inside].mean() + 0.3  # the cost model tells hazards apart


def test_online_loop_and_cnn_encoder(data):
    ag = FOSPAgent((22,), 2, TINY, seed=6)
    r = finetune_online(ag, SafeNav2DVec(2, "shifted", max_steps=20), 40, offline=data, pex=True, seed=0)
    assert r["cum_cost"] >= 0 and 0 <= r["pex_off_frac"] <= 1 and len(r["episodes"]) == 2
    img = FOSPAgent((16, 16, 3), 2, dataclasses.replace(TINY, encoder="cnn"), seed=0)
    b = {
        "observations": np.random.default_rng(0).integers(0, 255, (2, 4, 16, 16, 3)).astype(np.uint8),
        "next_observations": np.random.default_rng(1).integers(0, 255, (2, 4, 16, 16, 3)).astype(np.uint8),
        "actions": np.zeros((2, 4, 2), np.float32),
        "rewards": np.zeros((2, 4), np.float32),
        "costs": np.zeros((2, 4), np.float32),
        "terminations": np.zeros((2, 4), bool),
        "truncations": np.zeros((2, 4), bool),
    }
    assert np.isfinite(img.train_behavior(b)["critic_loss"])
