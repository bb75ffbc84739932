"""Input scaling, action rescaling, generic gymnasium (vector) envs with info["cost"], bit-exact resume, and the
paper's REF bootstrap / trajectory weight (issue 32)."""

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

from iclr25.fosp import (
    FOSPAgent,
    FOSPConfig,
    OfflineDataset,
    SequenceStore,
    VectorCostEnv,
    WorldModel,
    collect_dataset,
    evaluate,
    finetune_online,
    hazards_for,
    ref_targets,
    train_offline,
)
from iclr25.fosp.env import raster

TINY = FOSPConfig(hidden=16, deter=16, latent=8, batch=4, seq_len=4, horizon=3, penalty_init=1e-3)


@pytest.fixture(scope="module")
def data():
    return collect_dataset(3, seed=0, max_steps=40)


def _windows(d: OfflineDataset, T: int = 4, B: int = 8) -> dict[str, np.ndarray]:
    return SequenceStore(T, d).sample(B, np.random.default_rng(0))


# ------------------------------------------------------------------------------------------ image scaling
def test_image_loss_terms_comparable_to_state_at_init(data):
    """Images enter the encoder and the decoder target as o/255 − 0.5: at init the reconstruction term is of the
    order of the reward/cost/continue terms (raw 0–255 pixels made it ~10³ times larger)."""
    pos, goal = data.observations[:, :2], data.observations[:, :2] + data.observations[:, 4:6]
    npos, ngoal = (
        data.next_observations[:, :2],
        data.next_observations[:, :2] + data.next_observations[:, 4:6],
    )
    hz = hazards_for("base")
    vis = dataclasses.replace(
        data,
        observations=raster(pos.astype(float), goal.astype(float), hz),
        next_observations=raster(npos.astype(float), ngoal.astype(float), hz),
    )
    torch.manual_seed(0)
    state_wm = WorldModel((22,), 2, 16, 8, 16, "mlp")
    state_wm.set_obs_stats(torch.as_tensor(data.observations))
    img_wm = WorldModel((16, 16, 3), 2, 16, 8, 16, "cnn")
    b_state = {k: torch.as_tensor(v) for k, v in _windows(data).items()}
    b_img = {k: torch.as_tensor(v) for k, v in _windows(vis).items()}
    _, ls, _ = state_wm.loss(b_state)
    _, li, _ = img_wm.loss(b_img)
    others = li["wm_rew"] + li["wm_cost"] + li["wm_cont"]
    assert 1e-3 < li["wm_rec"] < others  # pixels in [−0.5, 0.5]: MSE < 1 at init
    assert li["wm_loss"] < 5 * ls["wm_loss"]  # vision and state losses on the same scale
    # the model-space image is o/255 − 0.5 (DreamerV3), also for the decoder target
    x = img_wm._norm(torch.full((1, 16, 16, 3), 255, dtype=torch.uint8))
    assert torch.allclose(x, torch.full_like(x, 0.5))


# ------------------------------------------------------------------------------------- action rescaling
class _CostInfo(gym.Wrapper):
    """A gymnasium env that reports a cost in info (Safety-Gymnasium convention) and records its actions."""

    actions: list = []

    def step(self, action):
        _CostInfo.actions.append(np.asarray(action).copy())
        obs, r, term, trunc, info = self.env.step(action)
        return obs, r, term, trunc, {**info, "cost": float(abs(obs[2]) > 2.0)}  # cost: fast spinning


def _pendulum(n: int, steps: int = 10):
    return gym.vector.SyncVectorEnv([lambda: _CostInfo(gym.make("Pendulum-v1", max_episode_steps=steps))] * n)


def test_actions_rescaled_to_env_bounds():
    box = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)  # Pendulum's torque bounds
    ag = FOSPAgent((3,), 1, TINY, seed=0, action_space=box)
    a = torch.linspace(-1, 1, 5)[:, None]
    assert torch.allclose(ag.to_env_action(a), 2 * a)
    assert torch.allclose(ag.from_env_action(ag.to_env_action(a)), a)
    obs = np.random.default_rng(0).normal(size=(64, 3)).astype(np.float32)
    act, st = ag.act(obs)
    assert np.allclose(act, 2 * st["a"].numpy()) and np.abs(act).max() <= 2.0
    assert np.abs(act).max() > 1.0  # the policy reaches beyond the old [−1, 1] clamp
    asym = FOSPAgent((3,), 1, TINY, seed=0, action_space=(np.array([0.0]), np.array([4.0])))
    assert torch.allclose(
        asym.to_env_action(torch.tensor([[-1.0], [0.0], [1.0]])), torch.tensor([[0.0], [2.0], [4.0]])
    )
    # an env whose bounds differ from the agent's is refused, naming both
    with pytest.raises(ValueError, match=r"env action bounds low=\[-2.0\], high=\[2.0\] differ"):
        finetune_online(FOSPAgent((3,), 1, TINY), _pendulum(2), 20)
    with pytest.raises(ValueError, match="action_space bounds must be finite"):
        FOSPAgent((3,), 1, TINY, action_space=gym.spaces.Box(-np.inf, np.inf, (1,)))
    with pytest.raises(ValueError, match="action_space bounds must have shape"):
        FOSPAgent((3,), 2, TINY, action_space=(np.zeros(3), np.ones(3)))


def test_dataset_actions_outside_bounds_refused(data):
    ag = FOSPAgent((22,), 2, TINY, action_space=(-0.5 * np.ones(2), 0.5 * np.ones(2)))
    with pytest.raises(ValueError, match="outside the agent's action bounds"):
        train_offline(ag, data, 1)


# ------------------------------------------------------------------------------ generic gymnasium envs
def test_gymnasium_vector_env_with_info_cost_online_and_eval():
    """Pendulum (not SafeNav2D) in a gymnasium SyncVectorEnv with info['cost']: online fine-tuning and evaluation
    run, the agent's actions reach the env's [−2, 2] range, and the cost accounting matches the env's."""
    env = _pendulum(2, steps=10)
    ag = FOSPAgent((3,), 1, TINY, seed=1, action_space=env.single_action_space)
    _CostInfo.actions.clear()
    r = finetune_online(ag, env, 40, pex=False, seed=0)
    acts = np.concatenate([np.ravel(a) for a in _CostInfo.actions])
    assert len(acts) == 40 and np.abs(acts).max() <= 2.0 and np.abs(acts).max() > 1.0
    assert len(r["episodes"]) == 4 and np.isclose(sum(c for _, c in r["episodes"]), r["cum_cost"])
    assert ag.updates > 0
    ev = evaluate(ag, env=_pendulum(3, steps=10), max_steps=50)
    assert np.isfinite(ev["return"]) and 0 <= ev["cost"] <= 10
    ev1 = evaluate(ag, env=_CostInfo(gym.make("Pendulum-v1", max_episode_steps=10)), max_steps=50)
    assert np.isfinite(ev1["return"])  # a single (non-vector) env is one environment
    with pytest.raises(ValueError, match="no cost signal"):
        evaluate(ag, env=gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1")]))
    with pytest.raises(ValueError, match="gymnasium Env or VectorEnv"):
        finetune_online(ag, object(), 20)


class _Ragged(gym.Env):
    """Toy env whose episodes end at different times per instance (length 3 + k) and cost 1 when x > 0."""

    def __init__(self, k: int):
        self.k = k
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x, self.t = 0.0, 0
        return np.array([self.x, self.t], np.float32), {}

    def step(self, a):
        self.x += 0.1 * float(np.asarray(a)[0])
        self.t += 1
        obs = np.array([self.x, self.t], np.float32)
        return obs, -abs(self.x), self.t >= 3 + self.k, False, {"cost": float(self.x > 0)}


def test_ragged_episode_ends_reset_every_env_and_cut_windows():
    env = VectorCostEnv(gym.vector.SyncVectorEnv([lambda k=k: _Ragged(k) for k in range(3)]))
    ag = FOSPAgent((2,), 1, dataclasses.replace(TINY, seq_len=2), seed=2)
    r = finetune_online(ag, env, 30, pex=False, seed=0)
    # the first env terminates after 3 steps: all three are reset then, so each episode is 3 steps long
    assert len(r["episodes"]) == 3 * (10 // 3)
    assert all(np.isfinite(x) for ep in r["episodes"] for x in ep)


# ------------------------------------------------------------------------------------ bit-exact resume
def test_resume_from_checkpoint_is_bit_exact(tmp_path, data):
    ref = FOSPAgent((22,), 2, TINY, seed=7)
    train_offline(ref, data, 6)
    ck = tmp_path / "run.safetensors"
    first = FOSPAgent((22,), 2, TINY, seed=7)
    train_offline(first, data, 3, checkpoint=ck, checkpoint_every=3)
    torch.manual_seed(12345)  # the global RNG differs after a restart: imagination must not depend on it
    resumed = FOSPAgent((22,), 2, TINY, seed=7)
    train_offline(resumed, data, 6, checkpoint=ck)
    assert resumed.updates == 6
    for (k, v), (k2, w) in zip(ref.state_dict().items(), resumed.state_dict().items()):
        assert k == k2 and torch.equal(v, w), k
    assert torch.equal(ref.gen.get_state(), resumed.gen.get_state())


# -------------------------------------------------------------------------- REF bootstrap, trajectory weight
def _official_ref_score(unsafe: np.ndarray, mu: float = 0.99) -> np.ndarray:
    """Transcription of the official RefVFunction.score: φ̂_H = h_H, φ̂_t = max(h_t, μ·φ̂_{t+1}), return t < H."""
    pret = [unsafe[-1]]
    for i in reversed(range(unsafe.shape[0] - 1)):
        pret.append(np.maximum(unsafe[i], mu * pret[-1]))
    return np.stack(list(reversed(pret))[:-1])


def test_ref_targets_bootstrap_with_indicator_matches_official_score():
    h = (np.random.default_rng(0).random((6, 5)) < 0.3).astype(np.float32)  # h_0..h_H, H = 5
    got = ref_targets(torch.as_tensor(h[:-1]), 0.99, torch.as_tensor(h[-1])).numpy()
    assert np.allclose(got, _official_ref_score(h), atol=1e-7)


def test_agent_ref_bootstrap_is_violation_indicator_and_weight_has_gamma(data):
    cfg = dataclasses.replace(TINY, gamma=0.9)
    ag = FOSPAgent((22,), 2, cfg, seed=3)
    with torch.no_grad():
        ag.wm.cost[-1].bias.fill_(-30.0)  # the cost model predicts no violation anywhere
        ag.wm.cont[-1].bias.fill_(30.0)  # and no termination
        ag.phi_slow.net[-1].bias.fill_(0.7)  # a slow REF critic that is far from 0
    ag.train_behavior(_windows(data, TINY.seq_len, TINY.batch), train_wm=False)
    assert torch.all(ag._last_ref_targets == 0)  # φ̂_H = h_H = 0: no critic bootstrap
    w = ag._last_traj_weight  # (H, N) = Π_{i<t} γ·cont_i
    expect = 0.9 ** torch.arange(cfg.horizon, dtype=w.dtype)[:, None]
    assert torch.allclose(w, expect.expand_as(w), atol=1e-6)
    with torch.no_grad():
        ag.wm.cost[-1].bias.fill_(30.0)  # violation everywhere → every target 1
    ag.train_behavior(_windows(data, TINY.seq_len, TINY.batch), train_wm=False)
    assert torch.all(ag._last_ref_targets == 1)
