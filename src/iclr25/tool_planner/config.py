"""The Tool-Planner reproduction's settings (README, "Reproduction"): :class:`Config` (the simulated world and BFCL
tasks), :class:`RealConfig` (NESTFUL, ``real.py``) and their :data:`PRESETS` (read by ``experiment.py``, ``real.py`` and
``report.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from ..common.fields import bounded
from ..common.results import ExperimentConfig
from .evaluation import K_ALL  # in k grids: k = N (one API per toolkit)

PARTS = ("executable", "glaive", "sgd")  # the NESTFUL parts of the real preset (real.py)


@dataclass(frozen=True)
class Config(ExperimentConfig):
    seeds: int = 5
    n_tasks: int = bounded(200, lo=1)  # test tasks per seed
    n_capabilities: int = 30
    variants: tuple[int, int] = (2, 6)
    n_distractors: int = bounded(40, lo=0)
    failure_mix: tuple[float, float, float, float] = (
        0.65,
        0.12,
        0.12,
        0.11,
    )  # ok, flaky, dead, schema mismatch
    p_flaky: float = 0.5
    p_distractor_error: float = 0.7
    # goals worded from a paraphrase bank separate from the API descriptions ("api": same)
    goal_bank: str = bounded("user", choices=("user", "api"))
    min_steps: int = bounded(2, lo=1)
    max_steps: int = bounded(4, lo=1)
    max_api_calls: int = bounded(15, lo=1)
    max_replans: int = bounded(3, lo=0)
    # the grids: non-empty tuples of ints >= 0; k_grid: 0 = N, k > N is clipped to N
    k_grid: tuple[int, ...] = bounded((1, 5, 30, 100, 300, K_ALL), lo=0, each=True)
    # APIs tried per step (paper-style ReAct: 2 = one retry)
    react_grid: tuple[int, ...] = bounded((1, 2, 3, 4, 5), lo=0, each=True)
    # children per node (ToolLLM's DFSDT: 3)
    dfsdt_grid: tuple[int, ...] = bounded((1, 2, 3, 4, 5), lo=0, each=True)
    # Tool-Planner's effort knob (replans per task), tuned at k*
    replan_grid: tuple[int, ...] = bounded((0, 1, 2, 3, 5), lo=0, each=True)
    n_val_worlds: int = bounded(2, lo=1)
    n_val_tasks: int = bounded(100, lo=1)
    n_bfcl_tasks: int = bounded(60, lo=0)
    n_bfcl_val_tasks: int = bounded(40, lo=0)
    # or "openai" (then llm_base_url / llm_model; the key is read from OPENAI_API_KEY, never from the config,
    # so it is not written to config.json, the provenance or the config hash)
    policy: str = bounded("heuristic", choices=("heuristic", "openai"))
    llm_base_url: str = "http://127.0.0.1:8000/v1"
    llm_model: str = "Qwen/Qwen2.5-7B-Instruct"
    # seconds per request; then the openai SDK retries llm_max_retries times with backoff; a request still
    # failing fails its task (error in the trace)
    llm_timeout: float = bounded(60.0, lo=0, lo_open=True)
    llm_max_retries: int = bounded(2, lo=0)
    write_traces: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above (grids element-wise); below: rules across fields
        if 1 not in self.k_grid or K_ALL not in self.k_grid:
            raise ValueError(f"k_grid must contain 1 and 0 (= N) for the k-curve claim, got {self.k_grid!r}")
        if self.min_steps > self.max_steps:
            raise ValueError(f"min_steps must be <= max_steps, got {self.min_steps} > {self.max_steps}")


PRESETS = {
    "smoke": Config(
        seeds=2,
        n_tasks=30,
        n_val_worlds=1,
        n_val_tasks=20,
        n_bfcl_tasks=10,
        n_bfcl_val_tasks=8,
        k_grid=(1, 30, K_ALL),
        react_grid=(1, 2, 3),
        dfsdt_grid=(1, 2, 3),
        replan_grid=(1, 3),
        write_traces=False,
    ),
    "quick": Config(),
    "full": Config(policy="openai", n_val_worlds=1, n_val_tasks=50, n_bfcl_tasks=100, n_bfcl_val_tasks=50),
}


# fields of the simulated world and the BFCL tasks: the real preset has no use for them
_SIM_ONLY = (
    "n_tasks",
    "n_capabilities",
    "variants",
    "n_distractors",
    "failure_mix",
    "p_flaky",
    "p_distractor_error",
    "goal_bank",
    "min_steps",
    "max_steps",
    "n_val_worlds",
    "n_val_tasks",
    "n_bfcl_tasks",
    "n_bfcl_val_tasks",
)


@dataclass(frozen=True)
class RealConfig(Config):
    """The ``real`` preset's config: NESTFUL's specs and examples (``real.py``). A subclass, so that the simulated
    presets keep their fields and config hash; the fields of the simulated world (``n_tasks`` …
    ``n_bfcl_val_tasks``) are not used and must keep their defaults. The budget, the grids, the policy and the
    traces are the quick preset's fields."""

    # NESTFUL parts whose specs form the one tool library and whose examples are the tasks
    parts: tuple[str, ...] = bounded(PARTS, choices=PARTS, each=True)
    # of each part's kept examples, the 1st, (1 + val_every)-th, … are validation tasks, the rest test tasks
    val_every: int = bounded(3, lo=2)
    # > 0: only each part's first max_examples kept examples (smoke runs); 0: all
    max_examples: int = bounded(0, lo=0)
    # the diagnosis re-runs every method at this multiple of max_api_calls
    budget_mult: int = bounded(3, lo=1)

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(set(self.parts)) != len(self.parts):
            raise ValueError(f"parts must not repeat a part, got {self.parts!r}")
        base = Config()
        for name in _SIM_ONLY:
            if getattr(self, name) != getattr(base, name):
                raise ValueError(
                    f"{name} is a field of the simulated world, not used by the real preset; leave it at "
                    f"{getattr(base, name)!r}, got {getattr(self, name)!r}"
                )


PRESETS["real"] = RealConfig()
