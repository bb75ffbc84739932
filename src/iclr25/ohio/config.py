"""The OHIO reproduction's settings (README, "Reproduction"): :class:`Config` (reacher-LQR-lite on the numpy arm
and network-lite), :class:`RealConfig` (MuJoCo Reacher-v5, ``real.py``) and their :data:`PRESETS`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from iclr25.common.fields import bounded
from iclr25.common.results import ExperimentConfig

from .arm import ArmParams
from .learners import IQLConfig
from .network import NetworkParams

# IQLConfig fields the IQL arm shares with the BC learners: iql.<field> must equal the Config field
_IQL_SHARED = {"hidden": "bc_hidden", "batch_size": "batch_size", "lr": "bc_lr"}


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # the 2-link arm, every ArmParams field, set with dotted overrides (``--set arm.m1=1.2``)
    arm: ArmParams = ArmParams()
    # data (README, "Reproduction")
    horizon: int = bounded(200, lo=1)
    n_expert: int = bounded(150, lo=1)
    n_noisy: int = bounded(50, lo=0)
    k: int = bounded(5, lo=1)
    lqr_R: float = bounded(0.1, lo=0, lo_open=True)
    # HR dataset (hierarchical behaviour policy: sub-goal every k steps, LQR tracks it)
    hr_noise: float = bounded(0.1, lo=0)  # N(0, σ²) on the behaviour sub-goals
    hr_velocity_gain: float = bounded(3.0)  # z = (q*, g (q* − q)) of the behaviour high level
    # inverse
    # official drop threshold on the re-simulation residual
    threshold: float = bounded(0.2, lo=0, lo_open=True)
    # numerical inverse: "adam" = the official loop (default), "lm" = Levenberg–Marquardt
    solver: str = bounded("adam", choices=("adam", "lm"))
    # λ of the optional ridge prior λ‖z − x_k‖² (0 = the paper's objective; not in the paper)
    prior: float = bounded(0.0, lo=0)
    # official: Adam lr 0.01, ≤ 1000 iterations from x_k, official stopping rule
    adam_iters: int = bounded(1000, lo=1)
    adam_lr: float = bounded(0.01, lo=0, lo_open=True)
    lm_iters: int = bounded(60, lo=1)
    # learners: the BC arms (reacher; network-lite uses bc_lr and batch_size with its own steps and width)
    bc_steps: int = bounded(3000, lo=1)
    bc_hidden: int = bounded(256, lo=1)
    bc_lr: float = bounded(1e-3, lo=0, lo_open=True)
    batch_size: int = bounded(256, lo=1)
    # the IQL arm (report only), every IQLConfig field, set with dotted overrides (``--set iql.expectile=0.9``);
    # iql.steps = 0 skips it. It trains the BC learners' network and optimiser: iql.hidden, iql.batch_size and
    # iql.lr must equal bc_hidden, batch_size and bc_lr (checked below; set both)
    iql: IQLConfig = IQLConfig(expectile=0.7, beta=3.0, steps=5000, hidden=256, batch_size=256, lr=1e-3)
    eval_episodes: int = bounded(20, lo=1)
    # model error and low-level change
    model_error_mass: float = bounded(1.3, lo=0, lo_open=True)
    model_epochs: int = bounded(20, lo=1)
    changed_R: float = bounded(1.0, lo=0, lo_open=True)
    lowlevel_change: bool = True  # the report-only R = 1.0 re-inversion arm
    inverse_ablation: bool = False  # report-only table: numerical arms under every variant of ABLATION
    # network-lite
    net_episodes: int = bounded(100, lo=1)
    net_bc_steps: int = bounded(1500, lo=1)
    net_hidden: int = bounded(128, lo=1)
    net_eval_episodes: int = bounded(20, lo=1)
    # the 6-node city of network-lite, every NetworkParams field (``--set network.cheap=0.5``)
    network: NetworkParams = NetworkParams()

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above; below: the nested configs and rules across fields
        for name, cls in (("arm", ArmParams), ("iql", IQLConfig), ("network", NetworkParams)):
            if not isinstance(getattr(self, name), cls):
                raise ValueError(f"{name} must be a {cls.__name__}, got {type(getattr(self, name)).__name__}")
        if self.horizon % self.k:
            raise ValueError(f"horizon must be a multiple of k={self.k}, got {self.horizon!r}")
        for field, shared in _IQL_SHARED.items():
            if getattr(self.iql, field) != getattr(self, shared):
                raise ValueError(
                    f"iql.{field} must equal {shared} = {getattr(self, shared)!r} (the IQL arm trains the BC "
                    f"learners' network and optimiser; set both), got {getattr(self.iql, field)!r}"
                )


PRESETS = {
    "smoke": Config(
        seeds=1,
        horizon=50,
        n_expert=12,
        n_noisy=4,
        bc_steps=150,
        bc_hidden=64,
        iql=dataclasses.replace(Config.iql, steps=50, hidden=64),
        eval_episodes=4,
        model_epochs=2,
        lm_iters=15,
        adam_iters=60,
        net_episodes=6,
        net_bc_steps=60,
        net_hidden=32,
        net_eval_episodes=2,
    ),
    "quick": Config(
        bc_steps=2000,
        iql=dataclasses.replace(Config.iql, steps=0),
        lowlevel_change=False,
        net_episodes=60,
        net_bc_steps=1000,
        net_eval_episodes=10,
    ),
    "full": Config(
        bc_steps=20000,
        iql=dataclasses.replace(Config.iql, steps=50000),
        eval_episodes=50,
        net_episodes=300,
        net_bc_steps=5000,
        net_eval_episodes=50,
        device="auto",  # the BC / IQL networks train on a GPU when there is one (small MLPs: CPU works too)
    ),
}


# fields of the numpy arm, its ablations and network-lite: the real preset has no use for them
_SIM_ONLY = (
    "arm",
    "network",
    "net_episodes",
    "net_bc_steps",
    "net_hidden",
    "net_eval_episodes",
    "changed_R",
    "inverse_ablation",
    "solver",
    "prior",
    "lm_iters",
)


@dataclass(frozen=True)
class RealConfig(Config):
    """The ``real`` preset's config: gymnasium's MuJoCo ``Reacher-v5`` (``real.py``, ``reacher.py``). A subclass, so
    the simulated presets keep their fields and config hash; the fields of the numpy arm and network-lite
    (``_SIM_ONLY``) are not used and must keep their defaults. Data sizes, the LQR, the inverse, the learners, the
    evaluation and the model error (``model_error_mass`` scales every inertial parameter of the arm) are the quick
    preset's fields."""

    env_id: str = bounded("Reacher-v5", choices=("Reacher-v5",))
    horizon: int = bounded(50, lo=50, hi=50)  # Reacher-v5's own episode length (its TimeLimit)
    expert_omega: float = bounded(10.0, lo=0, lo_open=True)  # rad/s: the PD expert's natural frequency
    expert_noise: float = bounded(0.1, lo=0)  # N(0, σ²) on every flat expert torque
    random_frac: float = bounded(0.3, lo=0, hi=1)  # n_noisy episodes: chance of a random torque / sub-goal
    hr_random_reach: float = bounded(1.0, lo=0)  # random HR sub-goals: q + U(−r, r), velocities U(−r, r)
    lowlevel_change: bool = False  # the R = 1.0 re-inversion arm exists only for the numpy arm

    def __post_init__(self) -> None:
        super().__post_init__()
        base = Config()
        for name in _SIM_ONLY:
            if getattr(self, name) != getattr(base, name):
                raise ValueError(
                    f"{name} is a field of the numpy arm or network-lite, not used by the real preset; leave it "
                    f"at {getattr(base, name)!r}, got {getattr(self, name)!r}"
                )
        if self.lowlevel_change or self.iql.steps:
            raise ValueError(
                "the real preset has no low-level-change or IQL arm: lowlevel_change must be False and iql.steps 0, "
                f"got {self.lowlevel_change!r} and {self.iql.steps!r}"
            )


PRESETS["real"] = RealConfig(
    seeds=3,
    n_expert=150,
    n_noisy=50,
    bc_steps=2000,
    iql=dataclasses.replace(Config.iql, steps=0),
)
