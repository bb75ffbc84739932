"""OHIO — Offline Hierarchical Reinforcement Learning via Inverse Optimization (ICLR 2025).

Schmidt, Gammelli, Harrison, Pavone, Rodrigues; arXiv 2410.07933 (https://arxiv.org/abs/2410.07933).

Offline data holds only low-level actions a_t; a hierarchical policy needs the high-level actions u_t that
were never logged. When the low-level policy π_l(a | s, u) has a known structure (an LQR tracking a reference
state, a min-cost LP), each k-step window of the data can be *inverted*: û_t = argmax_u log P̃(s_{t+1:t+k} |
s_t, π_l(·, u)) + log p(u). The relabelled dataset (s_t, û_t, Σ r, s_{t+k}) then trains the high level with any
off-the-shelf offline RL method (BC, IQL, ...), and at deployment the learned high level drives the known low
level, which can be re-designed (new gains, new costs) without retraining from scratch.

Public API::

    from iclr25.ohio import LQRLowLevel, ArmModel, collect_flat_dataset, relabel, train_bc
    hd = relabel(ds, LQRLowLevel(ArmModel()), method="numerical")   # flat data → high-level data
    env = gymnasium.make("iclr25/TwoLinkArm-v0")                     # registered on import

Any gymnasium env: ``collect_offline_dataset(env, policy, n)`` and ``evaluate_hierarchical_env(env, high, low, n)``
with ``LQRLowLevel(your_model, state_map=callable)`` (README: ``Pendulum-v1``).
"""

from .arm import ENV_ID, ArmBatch, ArmParams, TwoLinkArmEnv, arm_step, flat_expert_action
from .dynamics import ArmModel, LearnedLinearModel, LinearModel, linearize
from .envs import PendulumModel, collect_offline_dataset, evaluate_hierarchical_env, pendulum_state
from .learners import (
    IQL,
    DirichletPolicy,
    GaussianPolicy,
    IQLConfig,
    awr_weights,
    expectile_loss,
    train_bc,
    train_iql,
)
from .lqr import LQRLowLevel, finite_horizon_lqr
from .network import (
    LPLowLevel,
    NetworkParams,
    RebalancingEnv,
    collect_network_dataset,
    evaluate_network,
    flows_to_distribution,
    largest_remainder_counts,
    nearest_surplus_flows,
    solve_rebalancing_lp,
)
from .relabel import OfflineDataset, relabel, to_d3rlpy, windows
from .rollouts import (
    collect_flat_dataset,
    collect_hierarchical_dataset,
    evaluate_flat,
    evaluate_hierarchical,
    hierarchical_expert_goal,
)

__all__ = [
    "ENV_ID",
    "PendulumModel",
    "collect_offline_dataset",
    "evaluate_hierarchical_env",
    "pendulum_state",
    "ArmBatch",
    "ArmModel",
    "ArmParams",
    "DirichletPolicy",
    "GaussianPolicy",
    "IQL",
    "IQLConfig",
    "LPLowLevel",
    "LQRLowLevel",
    "LearnedLinearModel",
    "LinearModel",
    "NetworkParams",
    "OfflineDataset",
    "RebalancingEnv",
    "TwoLinkArmEnv",
    "arm_step",
    "awr_weights",
    "collect_flat_dataset",
    "collect_hierarchical_dataset",
    "collect_network_dataset",
    "evaluate_flat",
    "evaluate_hierarchical",
    "evaluate_network",
    "expectile_loss",
    "finite_horizon_lqr",
    "flat_expert_action",
    "hierarchical_expert_goal",
    "flows_to_distribution",
    "largest_remainder_counts",
    "linearize",
    "nearest_surplus_flows",
    "relabel",
    "solve_rebalancing_lp",
    "to_d3rlpy",
    "train_bc",
    "train_iql",
    "windows",
]
