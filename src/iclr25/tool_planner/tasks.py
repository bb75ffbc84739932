"""Tasks: a user query, its sub-goals with data dependencies, and a ground-truth answer.

An LLM decomposes a query itself; the offline :class:`~iclr25.tool_planner.llm.HeuristicPolicy` reads the
sub-goals the task carries (the same decomposition for every method compared). ``Ref(step, field)`` binds a
parameter to a field of an earlier sub-goal's result; unbound parameters are filled by name from earlier results
and the task's inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Ref:
    """The ``field`` of the result of sub-goal ``step`` (0-based)."""

    step: int
    field: str


@dataclass(frozen=True)
class Goal:
    """One sub-goal: its text, explicit argument bindings, and the true capability (analysis only)."""

    text: str
    bindings: dict = field(default_factory=dict)
    capability: str = ""
    output: str = ""  # name of the result field this sub-goal produces


@dataclass(frozen=True)
class Task:
    id: str
    query: str
    goals: tuple[Goal, ...]
    inputs: dict
    answer_field: str
    answer: Any  # ground truth

    def check(self, answer: Any) -> bool:
        """Exact match (numbers: relative tolerance 1e-6)."""
        if isinstance(self.answer, (int, float)) and not isinstance(self.answer, bool):
            try:
                return math.isclose(float(answer), float(self.answer), rel_tol=1e-6, abs_tol=1e-9)
            except (TypeError, ValueError):
                return False
        return answer == self.answer

    def to_json(self) -> dict:
        return {
            "id": self.id,
            "query": self.query,
            "goals": [
                {
                    "text": g.text,
                    "bindings": {
                        k: ({"ref": [v.step, v.field]} if isinstance(v, Ref) else v)
                        for k, v in g.bindings.items()
                    },
                    "capability": g.capability,
                    "output": g.output,
                }
                for g in self.goals
            ],
            "inputs": self.inputs,
            "answer_field": self.answer_field,
            "answer": self.answer,
        }
