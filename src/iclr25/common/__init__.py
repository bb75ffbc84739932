"""What two or more systems share: seeding, devices, atomic I/O, claims and run folders, formatting and
rendering of claims, provenance, progress bars, tiny LMs, the offline corpus and the LM training loop.

The names below are imported lazily so that ``import iclr25.common.<module>`` (e.g. by the CLI) does not pull
in torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Claim": "claims",
    "Stat": "claims",
    "all_of": "claims",
    "make_claim": "claims",
    "get_device": "device",
    "atomic_savefig": "io",
    "atomic_write_json": "io",
    "atomic_write_text": "io",
    "read_json": "io",
    "ExperimentConfig": "results",
    "RunDir": "results",
    "RunResult": "results",
    "aggregate": "results",
    "values": "results",
    "write_run": "results",
    "mean_std": "results",
    "derive_seed": "seeding",
    "numpy_rng": "seeding",
    "seed_everything": "seeding",
    "torch_generator": "seeding",
    "fmt_num": "fmt",
    "fmt_stat": "fmt",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
