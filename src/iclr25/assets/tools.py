"""NESTFUL (nested API-call sequences): the API specs and the examples, as the benchmark's own JSON.

``executable`` — 85 examples over 39 real web APIs (RapidAPI hosts; they cannot be called from here, and the
examples record the gold call sequence, not the responses); ``glaive`` (169) and ``sgd`` (46) — non-executable
examples with their function specs. Each example is ``{"input": query, "output": [call, ...]}``; a call is
``{"name", "arguments", "label"}`` and an argument may reference an earlier call's response as
``$varN.field$`` (``$varN$`` for the whole response). ``iclr25.tool_planner.nestful`` turns specs into ``Tool``s.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .store import path

PARTS = {
    "executable": ("executable/executable-spec.json", "executable/executable-data.json"),
    "glaive": (
        "non-executable/non-executable-glaive-spec.json",
        "non-executable/non-executable-glaive-data.json",
    ),
    "sgd": ("non-executable/non-executable-sgd-spec.json", "non-executable/non-executable-sgd-data.json"),
}


@dataclass(frozen=True)
class NestfulData:
    part: str
    specs: list[dict[str, Any]]
    examples: list[dict[str, Any]]


def load_nestful(part: str = "executable") -> NestfulData:
    """The specs and examples of one NESTFUL part (``executable``, ``glaive`` or ``sgd``)."""
    if part not in PARTS:
        raise ValueError(f"part must be one of {sorted(PARTS)}, got {part!r}")
    root = path("nestful") / "data_v1"
    spec_file, data_file = PARTS[part]
    specs = json.loads((root / spec_file).read_text(encoding="utf-8"))
    examples = json.loads((root / data_file).read_text(encoding="utf-8"))
    if not isinstance(specs, list) or not isinstance(examples, list):
        raise ValueError(f"NESTFUL {part}: expected JSON lists of specs and examples")
    return NestfulData(part, specs, examples)
