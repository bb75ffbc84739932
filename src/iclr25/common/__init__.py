"""What two or more systems share: seeding, devices, atomic I/O, claims and run folders, the report,
progress bars, tiny LMs, the offline corpus and the LM training loop."""

from .claims import Claim, Stat, all_of, make_claim
from .device import get_device
from .io import atomic_savefig, atomic_write_json, atomic_write_text, read_json
from .results import ExperimentConfig, RunDir, RunResult, aggregate, values, write_run
from .seeding import derive_seed, numpy_rng, seed_everything, torch_generator

__all__ = [
    "Claim",
    "Stat",
    "all_of",
    "make_claim",
    "get_device",
    "atomic_savefig",
    "atomic_write_json",
    "atomic_write_text",
    "read_json",
    "ExperimentConfig",
    "RunDir",
    "RunResult",
    "aggregate",
    "values",
    "write_run",
    "derive_seed",
    "numpy_rng",
    "seed_everything",
    "torch_generator",
]
