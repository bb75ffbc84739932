"""Public functions refuse bad input with a ValueError naming the parameter."""

import numpy as np
import pytest
import torch

from iclr25.fosp.env import lidar
from iclr25.fosp.values import ref_targets


def test_ref_targets_refuses_a_non_indicator_h_and_a_bad_bootstrap():
    h = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0])
    assert torch.allclose(ref_targets(h, 0.99), torch.tensor([0.9801, 0.99, 1.0, 0.0, 0.0]))
    with pytest.raises(ValueError, match=r"violation must hold the indicator h in \{0, 1\}"):
        ref_targets(torch.tensor([0.0, 0.3, 1.0]), 0.99)
    with pytest.raises(ValueError, match="bootstrap"):
        ref_targets(h, 0.99, bootstrap=1.5)
    with pytest.raises(ValueError, match="bootstrap"):
        ref_targets(h, 0.99, bootstrap=float("nan"))
    with pytest.raises(ValueError, match="mu"):
        ref_targets(h, 1.2)
    with pytest.raises(ValueError, match="H >= 1"):
        ref_targets(torch.zeros(0), 0.99)


@pytest.mark.parametrize("kw, name", [({"bins": 0}, "bins"), ({"bins": 2.5}, "bins"), ({"max_dist": 0.0}, "max_dist"),
                                      ({"max_dist": float("nan")}, "max_dist")])  # fmt: skip
def test_lidar_refuses_bad_bins_and_range(kw, name):
    with pytest.raises(ValueError, match=name):
        lidar(np.zeros((1, 2)), np.ones((3, 2)), **kw)


def test_lidar_refuses_bad_positions_and_reads_the_nearest_hazard():
    with pytest.raises(ValueError, match="pos and hazards"):
        lidar(np.zeros((1, 3)), np.ones((3, 2)))
    v = lidar(np.zeros((1, 2)), np.array([[1.0, 0.0]]), bins=4, max_dist=2.0)
    assert v.shape == (1, 4) and v[0, 0] == pytest.approx(0.5) and v[0, 1:].sum() == 0


# --- issue #34: every public function ---------------------------------------------------------------
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

from iclr25.fosp import (  # noqa: E402
    Actor,
    AugmentedLagrangian,
    FOSPAgent,
    FOSPConfig,
    GymnasiumToSafety,
    OfflineDataset,
    PercentileEMA,
    SafeNav2D,
    SafeNav2DVec,
    SequenceStore,
    awr_weights,
    collect_dataset,
    evaluate,
    expectile_loss,
    finetune_online,
    greedy_policy,
    hazards_for,
    lambda_return,
    pex_probs,
    pex_select,
    random_policy,
    reachability_dp,
    safe_policy,
    train_offline,
    train_world_model,
)
from iclr25.fosp.env import raster  # noqa: E402

_TMP = Path(tempfile.mkdtemp())
_CASES = []


def case(label, param, fn):
    _CASES.append((label, param if isinstance(param, str) else "|".join(param), fn))


nan, inf = float("nan"), float("inf")
T = torch.rand(4)
case("expectile tau nan", "tau", lambda: expectile_loss(T, T, nan))
case("expectile tau str", "tau", lambda: expectile_loss(T, T, "0.5"))
case("expectile shapes", ("q", "v"), lambda: expectile_loss(torch.rand(4), torch.rand(3), 0.5))
case(
    "lambda_return gamma 2",
    "gamma",
    lambda: lambda_return(torch.rand(3), torch.rand(4), torch.ones(3), 2.0, 0.9),
)
case(
    "lambda_return gamma nan",
    "gamma",
    lambda: lambda_return(torch.rand(3), torch.rand(4), torch.ones(3), nan, 0.9),
)
case(
    "lambda_return lam -1",
    "lam",
    lambda: lambda_return(torch.rand(3), torch.rand(4), torch.ones(3), 0.9, -1.0),
)
case(
    "lambda_return empty",
    "rewards",
    lambda: lambda_return(torch.rand(0), torch.rand(1), torch.ones(0), 0.9, 0.9),
)
case(
    "lambda_return values trailing",
    "values",
    lambda: lambda_return(torch.rand(3, 2), torch.rand(4, 5), torch.ones(3, 2), 0.9, 0.9),
)
case("ref_targets mu nan", "mu", lambda: ref_targets(torch.zeros(3), nan))
case("ref_targets mu str", "mu", lambda: ref_targets(torch.zeros(3), "0.9"))
case("reachability mu 2", "mu", lambda: reachability_dp(torch.zeros(2), torch.eye(2), 2.0))
case(
    "reachability nonstochastic", "transition", lambda: reachability_dp(torch.zeros(2), torch.ones(2, 2), 0.9)
)
case(
    "reachability shape", ("unsafe", "transition"), lambda: reachability_dp(torch.zeros(3), torch.eye(2), 0.9)
)
case("reachability iters 0", "iters", lambda: reachability_dp(torch.zeros(2), torch.eye(2), 0.9, iters=0))
case("reachability unsafe 0.5", "unsafe", lambda: reachability_dp(torch.full((2,), 0.5), torch.eye(2), 0.9))
case("PercentileEMA decay 2", "decay", lambda: PercentileEMA(decay=2.0))
case("PercentileEMA lo>hi", ("lo", "hi"), lambda: PercentileEMA(lo=0.9, hi=0.1))
case("PercentileEMA max_scale 0", "max_scale", lambda: PercentileEMA(max_scale=0.0))
case("PercentileEMA update empty", "x", lambda: PercentileEMA().update(torch.zeros(0)))
case("PercentileEMA update nan", "x", lambda: PercentileEMA().update(torch.full((4,), nan)))
case("AugLag multiplier bool", "multiplier_init", lambda: AugmentedLagrangian(multiplier_init=True))
case("AugLag psi shape", "g", lambda: AugmentedLagrangian().psi(1.0))
case("awr w_max nan", "w_max", lambda: awr_weights(T, T, T, T, w_max=nan))
case("awr w_max inf", "w_max", lambda: awr_weights(T, T, T, T, w_max=inf))
case("awr u > 1", "u", lambda: awr_weights(T, T, torch.full((4,), 2.0), T))
case("awr shapes", ("adv_r", "adv_c", "u", "q_c"), lambda: awr_weights(T, torch.rand(3), T, T))
case("awr cost_limit nan", "cost_limit", lambda: awr_weights(T, T, T, T, cost_limit=nan))
case("pex_probs beta neg", "beta", lambda: pex_probs(T, T, -1.0))
case("pex_probs beta nan", "beta", lambda: pex_probs(T, T, nan))
case("pex_probs shapes", ("q_off", "q_on"), lambda: pex_probs(torch.rand(4), torch.rand(3), 1.0))
case("pex_select beta nan", "beta", lambda: pex_select(T, T, nan))
case("pex_select shapes", ("q_off", "q_on"), lambda: pex_select(torch.rand(4), torch.rand(3), 1.0))
case("Actor feat 0", "feat", lambda: Actor(0, 2, 8))
case("Actor act 0", "act", lambda: Actor(4, 0, 8))
case("hazards layout", "layout", lambda: hazards_for("bogus"))
case("lidar pos nan", "pos", lambda: lidar(np.full((1, 2), nan), hazards_for("base")))
case("raster size 0", "size", lambda: raster(np.zeros((1, 2)), np.zeros((1, 2)), hazards_for("base"), size=0))
case("raster pos shape", "pos", lambda: raster(np.zeros(2), np.zeros((1, 2)), hazards_for("base")))
case("Vec num_envs bool", "num_envs", lambda: SafeNav2DVec(True))
case("Vec layout bad", "layout", lambda: SafeNav2DVec(1, layout="x"))
case(
    "Vec step action shape",
    "action",
    lambda: (lambda e: (e.reset(seed=0), e.step(np.zeros((2, 2)))))(SafeNav2DVec(1)),
)
case(
    "Vec step action nan",
    "action",
    lambda: (lambda e: (e.reset(seed=0), e.step(np.full((1, 2), nan))))(SafeNav2DVec(1)),
)
case("SafeNav2D obs_type", "obs_type", lambda: SafeNav2D(obs_type="pixels"))
case("SafeNav2D max_steps 0", "max_steps", lambda: SafeNav2D(max_steps=0))
case(
    "SafeNav2D step action shape",
    "action",
    lambda: (lambda e: (e.reset(seed=0), e.step(np.zeros(5))))(SafeNav2D()),
)
case("GymToSafety cost_key int", "cost_key", lambda: GymnasiumToSafety(SafeNav2D(), cost_key=3))
case(
    "greedy noise neg",
    "noise",
    lambda: greedy_policy(np.zeros((1, 22), np.float32), np.random.default_rng(0), noise=-1.0),
)
case("safe obs shape", "obs", lambda: safe_policy(np.zeros((1, 3), np.float32), np.random.default_rng(0)))
case(
    "random noise nan",
    "noise",
    lambda: random_policy(np.zeros((1, 22), np.float32), np.random.default_rng(0), noise=nan),
)
case("greedy rng None", "rng", lambda: greedy_policy(np.zeros((1, 22), np.float32), None))
case("collect policies empty", "policies", lambda: collect_dataset(1, policies=()))
case("collect noise neg", "noise", lambda: collect_dataset(1, noise=-1.0, max_steps=5))
case("collect max_steps 0", "max_steps", lambda: collect_dataset(1, max_steps=0))
case("collect episodes bool", "episodes_per_policy", lambda: collect_dataset(True, max_steps=5))
case("collect policies str", "policies", lambda: collect_dataset(1, policies="safe", max_steps=5))
d = collect_dataset(2, max_steps=10)
case("Dataset costs nan", "costs", lambda: OfflineDataset(**{**d.to_dict(), "costs": np.full(len(d), nan)}))
case(
    "Dataset obs 1-D",
    "observations",
    lambda: OfflineDataset(
        **{**d.to_dict(), "observations": np.zeros(len(d)), "next_observations": np.zeros(len(d))}
    ),
)
case(
    "Dataset terminations float",
    "terminations",
    lambda: OfflineDataset(**{**d.to_dict(), "terminations": np.full(len(d), 0.5)}),
)
case("from_dict not dict", "d", lambda: OfflineDataset.from_dict([1, 2]))
case("concat other not ds", "other", lambda: d.concat(None))
case("SequenceStore seq_len bool", "seq_len", lambda: SequenceStore(True))
case("SequenceStore online_frac nan", "online_frac", lambda: SequenceStore(4, d, nan))
case("SequenceStore sample batch 0", "batch", lambda: SequenceStore(4, d).sample(0, np.random.default_rng(0)))
case(
    "SequenceStore sample batch float",
    "batch",
    lambda: SequenceStore(4, d).sample(2.5, np.random.default_rng(0)),
)
case(
    "SequenceStore init_online 0",
    ("num_envs", "capacity"),
    lambda: SequenceStore(4).init_online(0, 10, (22,), 2),
)
case("FOSPConfig hidden bool", "hidden", lambda: FOSPConfig(hidden=True))
case("FOSPConfig gamma nan", "gamma", lambda: FOSPConfig(gamma=nan))
case("FOSPConfig gamma bool", "gamma", lambda: FOSPConfig(gamma=True))
case("FOSPConfig tau_r bool", "tau_r", lambda: FOSPConfig(tau_r=True))
case("Agent act_dim bool", "act_dim", lambda: FOSPAgent((22,), True))
case("Agent obs_shape bad", "obs_shape", lambda: FOSPAgent((0,), 2))
case("Agent cfg bad", "cfg", lambda: FOSPAgent((22,), 2, cfg="x"))
ag = FOSPAgent(d.obs_shape, d.act_dim, FOSPConfig(hidden=8, deter=8, latent=4, batch=2, horizon=2, seq_len=4))
case("train_world_model updates neg", "updates", lambda: train_world_model(ag, d, -1))
case("train_world_model updates float", "updates", lambda: train_world_model(ag, d, 1.5))
case("train_offline updates bool", "updates", lambda: train_offline(ag, d, True))
case(
    "train_offline checkpoint_every 0",
    "checkpoint_every",
    lambda: train_offline(ag, d, 1, checkpoint=str(_TMP / "ck.safetensors"), checkpoint_every=0),
)
case(
    "finetune updates_per_step 0",
    "updates_per_step",
    lambda: finetune_online(ag, SafeNav2DVec(1, max_steps=5), 2, updates_per_step=0),
)
case("finetune env bad", "env", lambda: finetune_online(ag, None, 2))
case("evaluate episodes 0", "episodes", lambda: evaluate(ag, episodes=0))
case("evaluate layout bad", "layout", lambda: evaluate(ag, layout="x", episodes=1, max_steps=2))
case("act obs shape", "obs", lambda: ag.act(np.zeros((1, 3), np.float32)))


@pytest.mark.parametrize("label, name, call", _CASES, ids=[c[0] for c in _CASES])
def test_public_function_refuses_bad_input_naming_the_parameter(label, name, call):
    with pytest.raises(ValueError, match=name):
        call()
