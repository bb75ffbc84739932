"""The task data of the ``real`` and ``full`` presets (``real.py``, ``full.py``): the analogy sections, one prompt
(:class:`Item`), one task's splits (:class:`TaskData`) and the seeded split helpers both presets cut their items
with."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iclr25.common.seeding import derive_seed

GRAM_SECTIONS = (
    "gram1-adjective-to-adverb",
    "gram2-opposite",
    "gram3-comparative",
    "gram4-superlative",
    "gram5-present-participle",
    "gram6-nationality-adjective",
    "gram7-past-tense",
    "gram8-plural",
    "gram9-plural-verbs",
)


@dataclass(frozen=True)
class Item:
    """One prompt: ``answer`` is the text to generate (analogy) or the label word; ``label`` its index among the
    task's label words (label tasks); ``key`` names the underlying datum (a word pair, a sentence, a document)."""

    prompt: str
    answer: str
    key: str
    label: int = -1


@dataclass
class TaskData:
    name: str
    kind: str  # "generate" | "label"
    labels: tuple[str, ...]
    train: list[Item]
    val: list[Item]
    test: list[Item]
    counts: dict[str, int] = field(default_factory=dict)


def _rng(seed: int, *tags: str) -> np.random.Generator:
    return np.random.default_rng(derive_seed(seed, "t2real", *tags))


def _cut(n: int, n_test: int, n_val: int) -> tuple[slice, slice, slice]:
    if n_test + n_val >= n:
        raise ValueError(f"n_test + n_val must be < {n} (the items available), got {n_test} + {n_val}")
    return slice(0, n_test), slice(n_test, n_test + n_val), slice(n_test + n_val, n)
