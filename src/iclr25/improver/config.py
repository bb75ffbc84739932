"""The ImProver reproduction's settings (README, "Reproduction"): the arms, :class:`Config` and its :data:`PRESETS`
(read by ``experiment.py`` and ``report.py``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

from iclr25.common.fields import bounded, check_nested
from iclr25.common.results import ExperimentConfig

from .agent import ImProverConfig

ARMS = ("baseline", "improver", "improver_no_cos", "improver_no_history")
BACKENDS = ("toy", "lean")


@dataclass(frozen=True)
class Config(ExperimentConfig):
    # "toy": generated theorems + TinyLM; "lean": a Lean project + an LLM server
    backend: str = bounded("toy", choices=BACKENDS)
    n_theorems: int = bounded(120, lo=1)
    p_have: float = bounded(0.5, lo=0, hi=1)  # verbosity of the seed proofs
    # the ImProver agent (benchmark/tools.py::improver: refinement(best_of_n(3), m=5, prev_k=1, keep_best)), every
    # ImProverConfig field set with dotted overrides (``--set agent.m=3``); the ablation arms switch off
    # chain_of_states / error_history themselves and the baseline arm is ImProverConfig.baseline(), so those two
    # stay at their defaults here
    agent: ImProverConfig = ImProverConfig()
    # the tiny LM trained in the run
    train_theorems: int = bounded(600, lo=1)
    train_variants: int = bounded(3, lo=1)
    lm_steps: int = bounded(300, lo=1)
    lm_batch: int = bounded(16, lo=1)
    lm_lr: float = bounded(3e-3, lo=0, lo_open=True)
    lm_hidden: int = bounded(128, lo=1)
    lm_layers: int = bounded(2, lo=1)
    temperature: float = bounded(0.8, lo=0, lo_open=True)
    max_new_tokens: int = bounded(64, lo=1)
    # below this the run is invalid (the model did not learn the language)
    min_single_shot_correct: float = bounded(0.2, lo=0, hi=1)
    ablate_history: bool = True
    scripted_grid: bool = True
    # full preset (Lean)
    lean_project: str = bounded("")
    lean_file: str = bounded("")  # relative to lean_project unless absolute
    llm_model: str = bounded("")
    lean_timeout_s: float = bounded(300.0, lo=0, lo_open=True)  # per REPL answer

    def __post_init__(self) -> None:
        super().__post_init__()  # the bounds declared above; below: the nested agent
        check_nested(
            self, "agent", ImProverConfig, ("chain_of_states", "error_history"),
            "switched off per arm (improver_no_cos / improver_no_history)",
        )  # fmt: skip

    @property
    def result_key(self) -> str:
        """The per-seed key the arms' scores are stored under: ``"lean"`` or ``"tinylm"``."""
        return "lean" if self.backend == "lean" else "tinylm"

    def agent_config(self, arm: str) -> ImProverConfig:
        if arm == "baseline":
            return ImProverConfig.baseline()
        if arm == "improver":
            return self.agent
        if arm == "improver_no_cos":
            return replace(self.agent, chain_of_states=False)
        if arm == "improver_no_history":
            return replace(self.agent, error_history=False)
        raise ValueError(f"arm must be one of {ARMS}, got {arm!r}")


PRESETS = {
    "smoke": Config(
        seeds=1,
        n_theorems=8,
        train_theorems=60,
        train_variants=2,
        lm_steps=15,
        lm_batch=8,
        lm_hidden=32,
        agent=replace(Config.agent, m=2),
        max_new_tokens=32,
        ablate_history=False,
        min_single_shot_correct=0.0,
    ),
    "quick": Config(),
    "full": Config(
        backend="lean",
        lean_project=os.environ.get("IMPROVER_LEAN_PROJECT", ""),
        lean_file=os.environ.get("IMPROVER_LEAN_FILE", ""),
        llm_model=os.environ.get("OPENAI_MODEL", "gpt-4o"),
    ),
}

LEAN_ARMS = ("baseline", "improver", "improver_no_cos")
