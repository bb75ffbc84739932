"""IQL correctness (expectile value loss, advantage-weighted policy), BC learning signal, determinism."""

import numpy as np
import torch

from iclr25.ohio import IQL, IQLConfig, OfflineDataset, awr_weights, expectile_loss, train_bc, train_iql


def _two_state_dataset(n: int = 64) -> OfflineDataset:
    """State s0 = (0,) with actions 0/1 half each, always leading to s1 = (1,)."""
    obs = np.zeros((n, 1))
    act = (np.arange(n) % 2).astype(float)[:, None]
    return OfflineDataset(obs, act, act[:, 0].copy(), np.ones((n, 1)), np.ones(n, bool), np.zeros(n, bool))


class _KnownQ(torch.nn.Module):
    """Q(s, a) = a + 10·s (in raw units) — different at s and s'."""

    def __init__(self, agent: IQL):
        super().__init__()
        self.agent = agent

    def forward(self, o_norm, a_norm):
        a = a_norm * self.agent.act_norm.std + self.agent.act_norm.mean
        o = o_norm * self.agent.obs_norm.std + self.agent.obs_norm.mean
        return (a + 10 * o)[..., 0]


def test_value_target_uses_q_at_s_not_next_state():
    ds = _two_state_dataset()
    t = {
        k: torch.as_tensor(v, dtype=torch.float32)
        for k, v in dict(obs=ds.observations, act=ds.actions, next_obs=ds.next_observations).items()
    }
    std = IQL(ds, IQLConfig(expectile=0.7, hidden=16))
    std.q_targ = _KnownQ(std)
    torch.testing.assert_close(std.value_target(t["obs"], t["act"], t["next_obs"]), t["act"][:, 0])
    off = IQL(ds, IQLConfig(expectile=0.7, hidden=16, value_target="official"))
    off.q_targ = _KnownQ(off)
    torch.testing.assert_close(off.value_target(t["obs"], t["act"], t["next_obs"]), t["act"][:, 0] + 10)
    # V(s0) trained on the standard target converges to the τ-expectile of {0, 1} (equal weights) = τ
    opt = torch.optim.Adam(std.v.parameters(), lr=3e-2)
    q_hat = std.value_target(t["obs"], t["act"], t["next_obs"])
    for _ in range(300):
        loss = expectile_loss(q_hat - std.v(std.obs_norm(t["obs"]))[..., 0], 0.7)
        opt.zero_grad()
        loss.backward()
        opt.step()
    v0 = float(std.v(std.obs_norm(t["obs"][:1]))[0, 0])
    assert abs(v0 - 0.7) < 1e-2


def test_expectile_and_awr_weights():
    u = torch.tensor([1.0, -1.0])
    assert float(expectile_loss(u, 0.9)) == 0.5 * (0.9 + 0.1)
    w = awr_weights(torch.tensor([0.0, 10.0]), beta=3.0)
    assert float(w[0]) == 1.0 and float(w[1]) == 100.0  # clipped at 100


def test_bc_learns_a_linear_policy_and_is_deterministic():
    g = np.random.default_rng(0)
    obs = g.normal(size=(2000, 3))
    act = obs @ np.array([[1.0, -0.5], [0.3, 0.2], [-1.0, 0.8]])
    ds = OfflineDataset(obs, act, np.zeros(2000), obs, np.zeros(2000, bool), np.zeros(2000, bool))
    pi = train_bc(ds, steps=300, hidden=32, seed=1)
    pred = pi.act(obs[:500])
    r2 = 1 - ((pred - act[:500]) ** 2).sum() / ((act[:500] - act[:500].mean(0)) ** 2).sum()
    assert r2 > 0.95
    np.testing.assert_array_equal(pred, train_bc(ds, steps=300, hidden=32, seed=1).act(obs[:500]))


def test_iql_prefers_the_better_action():
    g = np.random.default_rng(1)
    n = 1000
    obs = g.normal(size=(n, 2))
    act = g.choice([-1.0, 1.0], size=(n, 1))
    rew = (act[:, 0] > 0).astype(float)  # action +1 is rewarded
    ds = OfflineDataset(obs, act, rew, obs, np.ones(n, bool), np.zeros(n, bool))
    pi, _ = train_iql(ds, IQLConfig(steps=200, hidden=32, batch_size=64, lr=1e-3, beta=3.0), seed=0)
    assert pi.act(obs[:200]).mean() > 0.3  # BC would give ≈ 0
