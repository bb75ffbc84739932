"""The FOSP reproduction's settings (README, "Reproduction"): the offline and online arms, the claims' return floor,
:class:`Config` (with each arm's agent config, :meth:`Config.agent_config`) and its :data:`PRESETS`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from iclr25.common.fields import bounded, check_nested
from iclr25.common.results import ExperimentConfig

from .agent import FOSPConfig
from .velocity import VELOCITY_TASKS

OFFLINE_ARMS = ("fosp", "safedreamer", "dreamerv3", "fosp_noref")
ONLINE_ARMS = ("pex", "direct", "scratch")
# claims that need an unseen safety layout: SafeNav2D-only (a velocity task has no layout to shift), with the reason
SAFENAV_ONLY_CLAIMS = {
    "ref_helps_shift": "compares FOSP with and without REF on an unseen hazard layout without fine-tuning; a "
    "velocity task has one fixed constraint (x-velocity ≤ threshold) and no layout to shift",
}
FLOOR = 0.5  # return floor of a cost comparison: the lower-cost arm keeps ≥ FLOOR × the other arm's return (if > 0)


MAX_WIDTH = 65_536  # upper bound on the world model's and heads' widths
# the agent fields every arm shares (sizes, rates, constraint handling, replay mix); the algorithm switches are
# each arm's own (FOSPConfig.safedreamer / .dreamerv3 / .official_code)
SHARED_AGENT_FIELDS = (
    "hidden",
    "deter",
    "latent",
    "batch",
    "seq_len",
    "horizon",
    "gamma",
    "wm_lr",
    "critic_lr",
    "actor_lr",
    "multiplier_init",
    "penalty_init",
    "penalty_growth",
    "pessimistic",
    "online_frac",
)


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # data
    episodes_per_policy: int = bounded(60, lo=1)
    max_steps: int = bounded(200, lo=1)
    # the FOSP arm's agent (world model, critics, actor, constraint handling): every FOSPConfig field, set with
    # dotted overrides (``--set agent.hidden=128``). The baselines (SafeDreamer-, DreamerV3-offline, the official
    # arm) take its SHARED_AGENT_FIELDS — sizes, rates, constraint settings, replay mix — with their own algorithm
    # switches; FOSP without REF is this agent with u ≡ 1 and its own (tuned) β and gate tolerance.
    # Experiment defaults (paper: deter/hidden 512, batch 16×64, H 15, γ 0.997, lr 1e-4 / 3e-5): laptop scale.
    agent: FOSPConfig = FOSPConfig(
        hidden=64,
        deter=64,
        latent=32,
        batch=8,
        seq_len=8,
        horizon=10,
        gamma=0.99,
        wm_lr=1e-3,
        critic_lr=1e-3,
        actor_lr=1e-3,
        multiplier_init=0.0,
        penalty_init=1e-3,
        penalty_growth=1e-5,
        pessimistic=False,
        online_frac=0.5,
        adv_temperature=1.0,
        qc_tolerance=0.05,
    )
    # advantage temperature β (w uses exp(β·Â)) and cost-gate tolerance (1[Q_c ≤ d + tol]) of FOSP without REF (the
    # FOSP arm's are agent.adv_temperature / agent.qc_tolerance), chosen on held-out seeds from one grid
    # (``tuning.py``; the backprop arms have no such knob)
    noref_adv_temperature: float = bounded(1.0, kind=float, lo=0)
    noref_qc_tolerance: float = bounded(0.05, kind=float, lo=0)
    # how the two knobs above were chosen (grid, held-out seeds, choice), shown in the report
    tuning_record: str = bounded("", kind=str)
    # environment: "SafeNav2D" (numpy, this package) or a Safety-Gymnasium id (needs the optional extra)
    env_id: str = "SafeNav2D"
    # budgets
    wm_updates: int = bounded(1000, lo=1)
    offline_updates: int = bounded(1000, lo=1)
    online_env_steps: int = bounded(2000, lo=1)
    online_envs: int = bounded(8, lo=1)
    updates_per_step: int = bounded(1, lo=1)
    eval_episodes: int = bounded(10, lo=1)
    official_arm: bool = bounded(False)  # report-only arm with the official code's four behaviours

    def __post_init__(self) -> None:
        super().__post_init__()  # every bounded field
        check_nested(
            self, "agent", FOSPConfig, ("device",), "the run's device (the config's device / --device)"
        )
        min_steps = self.online_envs * self.agent.seq_len
        if not isinstance(self.online_env_steps, int) or self.online_env_steps < min_steps:
            raise ValueError(
                f"online_env_steps must be an int >= online_envs·agent.seq_len = {min_steps}, "
                f"got {self.online_env_steps!r}"
            )
        for n in ("hidden", "deter", "latent"):
            v = getattr(self.agent, n)
            if isinstance(v, int) and v > MAX_WIDTH:  # a typo such as 1e11 would only die in the allocator
                raise ValueError(f"agent.{n} must be <= {MAX_WIDTH} (a network width), got {v!r}")
        if not isinstance(self.env_id, str) or not (
            self.env_id == "SafeNav2D" or self.env_id.startswith("Safety")
        ):
            raise ValueError(
                f"env_id must be 'SafeNav2D' or a Safety-Gymnasium id such as 'SafetyPointGoal1-v0', got "
                f"{self.env_id!r}"
            )
        for kind in ("fosp", "fosp_noref"):
            self.agent_config(kind)  # validates the shared agent fields and both arms' knobs

    @property
    def velocity(self) -> bool:
        """A Safety-Gymnasium velocity task rebuilt on gymnasium MuJoCo (``velocity.py``), not SafeNav2D."""
        return self.env_id in VELOCITY_TASKS

    @property
    def settings(self) -> tuple[str, ...]:
        """Where the offline arms are evaluated: SafeNav2D's base and shifted layouts; a velocity task itself."""
        return ("task",) if self.velocity else ("base", "shifted")

    @property
    def online_setting(self) -> str:
        """Where online fine-tuning runs: SafeNav2D's shifted layout; a velocity task itself (offline-to-online, no
        shift)."""
        return "task" if self.velocity else "shifted"

    def agent_config(self, kind: str = "fosp") -> FOSPConfig:
        """The FOSPConfig of one arm: ``agent`` for FOSP; FOSP without REF = ``agent`` with u ≡ 1 and its own β and
        gate; the baselines = their factory with the agent's SHARED_AGENT_FIELDS."""
        device = "cpu" if self.device == "auto" else self.device
        if kind == "fosp":
            return dataclasses.replace(self.agent, device=device)
        if kind == "fosp_noref":
            return dataclasses.replace(
                self.agent,
                device=device,
                ref=False,
                adv_temperature=self.noref_adv_temperature,
                qc_tolerance=self.noref_qc_tolerance,
            )
        shared = {n: getattr(self.agent, n) for n in SHARED_AGENT_FIELDS}
        if kind == "safedreamer":
            return FOSPConfig.safedreamer(**shared, device=device)
        if kind == "dreamerv3":
            return FOSPConfig.dreamerv3(**shared, device=device)
        if kind == "official":
            return FOSPConfig.official_code(**shared, device=device)
        raise ValueError(
            f"kind must be one of fosp, fosp_noref, safedreamer, dreamerv3, official; got {kind!r}"
        )


PRESETS = {
    "smoke": Config(
        seeds=1,
        episodes_per_policy=6,
        max_steps=60,
        wm_updates=30,
        offline_updates=20,
        online_env_steps=96,
        online_envs=4,
        eval_episodes=3,
        agent=dataclasses.replace(Config.agent, hidden=32, deter=32, latent=16, horizon=5),
    ),
    # 2 idle cores, 8 minutes: the budget measured in CPU-seconds per update (README, "Budget"); the AWR arms'
    # temperature / gate chosen on held-out seeds 100 and 101 from tuning.GRID (results/quick/fosp/tuning.json)
    "quick": Config(
        wm_updates=1000,
        offline_updates=560,
        online_env_steps=2800,
        online_envs=16,
        agent=dataclasses.replace(Config.agent, adv_temperature=1.0, qc_tolerance=0.05),
        noref_adv_temperature=10.0,
        noref_qc_tolerance=0.5,
        tuning_record="grid (β, gate tol) = [(1.0, 0.05), (10.0, 0.05), (10.0, 0.5)] on held-out seeds [100, 101] at this preset's budget, score = base-layout return − cost; mean scores FOSP [29.9, 24.9, 25.7] → (1, 0.05), FOSP w/o REF [14.8, 21.6, 41.1] → (10, 0.5) (tuning.json)",
    ),
    # the paper's sizes and rates on the state-based SafetyHalfCheetahVelocity-v1, rebuilt on gymnasium's MuJoCo
    # HalfCheetah-v5 with Safety-Gymnasium's velocity cost (velocity.py; Safety-Gymnasium does not import on 3.11)
    # (1000-step episodes as Safety-Gymnasium's; D = 1000 episodes of each scripted behaviour, velocity.py)
    "full": Config(
        env_id="SafetyHalfCheetahVelocity-v1",
        episodes_per_policy=1000,
        max_steps=1000,
        agent=dataclasses.replace(
            Config.agent,
            hidden=512,
            deter=512,
            latent=64,
            batch=16,
            seq_len=64,
            horizon=15,
            gamma=1 - 1 / 333,
            wm_lr=1e-4,
            critic_lr=3e-5,
            actor_lr=3e-5,
            multiplier_init=1e-6,
            penalty_init=5e-9,
            pessimistic=True,
            online_frac=None,
        ),
        wm_updates=20000,
        offline_updates=20000,
        online_env_steps=200_000,
        online_envs=16,
        updates_per_step=8,
        eval_episodes=50,
        official_arm=True,
        device="auto",
    ),
}
