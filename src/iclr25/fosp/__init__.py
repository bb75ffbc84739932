"""FOSP — Fine-tuning Offline Safe Policy through World Models (ICLR 2025).

Cao, Xin, Wu, He, Yan, Tan, Wang; arXiv 2407.04942 (https://arxiv.org/abs/2407.04942).

FOSP pretrains a safe policy from a logged dataset of safe, unsafe and random behaviour with a world model
(SafeDreamer/DreamerV3 structure), learning critics *in-sample* (Q regressed at dataset actions, V an expectile of
Q), a reachability estimation function (REF, the probability of ever entering the violation set) that splits
states into feasible and infeasible, and a REF-weighted advantage policy: improve reward where the state is
feasible, reduce cost where it is not, plus an augmented-Lagrangian cost penalty. Online, in a possibly changed
safety layout, it fine-tunes with safe policy expansion (PEX): the frozen offline policy and a new online policy
both propose actions and a critic-based softmax picks the executed one, so the offline skills are not lost.

Public API::

    import gymnasium as gym
    from iclr25.fosp import FOSPAgent, FOSPConfig, collect_dataset, train_world_model, train_offline
    data = collect_dataset(60)                                  # or OfflineDataset.load("my_data.npz")
    agent = FOSPAgent(data.obs_shape, data.act_dim, FOSPConfig())
    train_world_model(agent, data, 1000); train_offline(agent, data, 1000, train_wm=False)
    env = gym.make("SafeNav2D-v0", layout="shifted")            # gymnasium view, info["cost"]
    d = collect_velocity_dataset("SafetyHalfCheetahVelocity-v1", 10)  # the full preset's task (gymnasium MuJoCo)
"""

from .agent import FOSPAgent, FOSPConfig, evaluate, finetune_online, train_offline, train_world_model
from .data import (
    BEHAVIOURS,
    OfflineDataset,
    SequenceStore,
    collect_dataset,
    greedy_policy,
    random_policy,
    safe_policy,
)
from .env import (
    GymnasiumToSafety,
    SafeNav2D,
    SafeNav2DVec,
    SafetyToGymnasium,
    VectorCostEnv,
    as_vector_env,
    hazards_for,
    lidar,
    make_safety_gymnasium,
    make_safety_gymnasium_vec,
    register_envs,
)
from .lagrangian import AugmentedLagrangian
from .policy import Actor, awr_weights, pex_probs, pex_select
from .values import (
    PercentileEMA,
    expectile_loss,
    lambda_return,
    reachability_dp,
    ref_targets,
)
from .velocity import (
    VELOCITY_BEHAVIOURS,
    VelocityCost,
    collect_velocity_dataset,
    make_velocity_env,
    make_velocity_vec,
)
from .world_model import WorldModel

__all__ = [
    "Actor",
    "AugmentedLagrangian",
    "BEHAVIOURS",
    "FOSPAgent",
    "FOSPConfig",
    "GymnasiumToSafety",
    "OfflineDataset",
    "PercentileEMA",
    "SafeNav2D",
    "SafeNav2DVec",
    "SafetyToGymnasium",
    "SequenceStore",
    "VELOCITY_BEHAVIOURS",
    "VectorCostEnv",
    "VelocityCost",
    "WorldModel",
    "as_vector_env",
    "awr_weights",
    "collect_dataset",
    "collect_velocity_dataset",
    "evaluate",
    "expectile_loss",
    "finetune_online",
    "greedy_policy",
    "hazards_for",
    "lambda_return",
    "lidar",
    "make_safety_gymnasium",
    "make_safety_gymnasium_vec",
    "make_velocity_env",
    "make_velocity_vec",
    "pex_probs",
    "pex_select",
    "random_policy",
    "reachability_dp",
    "ref_targets",
    "register_envs",
    "safe_policy",
    "train_offline",
    "train_world_model",
]
