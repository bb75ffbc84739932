"""The experiment contract every system shares: the config base class, its hash, and the per-seed numbers.

An experiment's ``config.py`` subclasses :class:`ExperimentConfig` (every hyper-parameter, defaults from the
paper); its ``claims`` read per-seed numbers with :func:`values` and its ``run`` aggregates them with
:func:`aggregate`. :func:`config_hash` names the fields that change a seed's results (it keys the cached seed
files); :func:`is_timing_key` / :func:`split_timings` say which numbers are timings, kept out of metrics.json.

The run engine — run folders that resume (``RunDir``), ``RunResult``, seed workers, locks, interrupts and the
run's documents — is the run path's, in :mod:`iclr25.harness`; nothing here imports it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .claims import Stat
from .fields import check_fields
from .io import as_float, to_jsonable

PRESET_NAMES = ("smoke", "quick", "real", "full")  # real: real models and data (iclr25.assets)
MAX_SEEDS = 1000  # a reproduction averages a handful of seeds; each seed is a separate run, kept in memory
SEED_LIMIT = 2**32  # seeds feed numpy/torch/CUDA generators that take 32-bit seeds: seed + seeds <= 2**32


@dataclass(frozen=True)
class ExperimentConfig:
    """Fields every experiment config has. Subclasses add their own (all with defaults)."""

    seeds: int = 3  # number of seeds; seed values are seed, seed+1, ...
    seed: int = 0  # first seed
    device: str = "cpu"
    threads: int | None = 1  # torch CPU threads (tiny models run fastest single-threaded); None = default

    def __post_init__(self) -> None:
        if (
            not isinstance(self.seeds, int)
            or isinstance(self.seeds, bool)
            or not 1 <= self.seeds <= MAX_SEEDS
        ):
            raise ValueError(
                f"seeds must be an int in [1, {MAX_SEEDS}], got {self.seeds!r} (each seed is a full run of the "
                f"experiment kept in memory; run larger sweeps in batches with --seed)"
            )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.seed + self.seeds > SEED_LIMIT:
            raise ValueError(
                f"seed + seeds must be <= 2**32 = {SEED_LIMIT}, got seed={self.seed!r}, seeds={self.seeds!r} "
                "(seeds are fed to numpy/torch/CUDA generators that take 32-bit seeds)"
            )
        if self.threads is not None and (
            not isinstance(self.threads, int)
            or isinstance(self.threads, bool)
            or not 1 <= self.threads <= 256
        ):
            raise ValueError(f"threads must be None or an int in [1, 256], got {self.threads!r}")
        if not isinstance(self.device, str) or (
            self.device not in ("cpu", "cuda", "auto") and not _is_cuda_n(self.device)
        ):
            raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {self.device!r}")
        check_fields(self)  # every field declared with common.fields.bounded

    @property
    def seed_list(self) -> list[int]:
        return [self.seed + i for i in range(self.seeds)]


def _is_cuda_n(d: str) -> bool:
    return d.startswith("cuda:") and d[5:].isdigit() and d[5:].isascii()


def config_hash(cfg: Any, ignore: Sequence[str] = ("seeds", "seed", "device", "threads")) -> str:
    """Hash of the config fields that change a seed's results (not which or how many seeds, nor where it runs)."""
    d = to_jsonable(dataclasses.asdict(cfg)) if dataclasses.is_dataclass(cfg) else to_jsonable(cfg)
    for k in ignore:
        d.pop(k, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def short_repr(v: Any) -> str:
    """``repr(v)``, cut to 60 characters (for one-line messages)."""
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def is_number(v: Any) -> bool:
    """Whether ``v`` is a number (NaN and ±inf and their JSON tags included; booleans and ``None`` are not)."""
    if isinstance(v, bool) or v is None:
        return False
    if isinstance(v, (int, float, np.integer, np.floating)):
        return True
    return isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity")


def _item(v: Any) -> Any:
    """The Python scalar of a 0-d array or tensor (``None`` for anything else)."""
    if getattr(v, "ndim", None) != 0 or isinstance(v, (str, bytes)):
        return None
    try:
        return v.item()
    except (AttributeError, TypeError, ValueError, RuntimeError):
        return None


def aggregate(per_seed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Mean/std/values for every numeric leaf shared by all seeds (nested dicts flattened with '/').

    NaN (or its JSON tag) counts as a number: a metric with a NaN seed aggregates to NaN, it is not dropped.
    The numbers are plain floats (NaN included); they are tagged only when written to JSON.
    """
    flat = [_flatten(d) for d in per_seed.values()]
    if not flat:
        return {}
    keys = [k for k in flat[0] if all(k in f for f in flat)]
    agg: dict[str, Any] = {}
    for k in keys:
        vals = [f[k] for f in flat]
        if all(is_number(v) for v in vals):
            st = Stat.of([as_float(v) for v in vals])
            agg[k] = {"mean": st.mean, "std": st.std, "values": list(st.values)}
    return agg


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(_flatten(v, key + "/"))
        else:
            out[key] = v
    return out


def values(per_seed: dict[int, dict[str, Any]], key: str) -> list[float]:
    """Per-seed values of a (possibly nested, '/'-separated) metric, in seed order, as floats.

    NaN and ±inf (also their JSON tags ``"NaN"``, ``"Infinity"``, ``"-Infinity"``) are numbers and come back as
    floats — a NaN seed is never dropped. A seed that lacks the key, or holds anything but a number there (a
    boolean, ``None``, another string, a list, a dict), raises ``ValueError`` naming the metric and the seed, so a
    claim is never built from missing or non-numeric values.
    """
    if not isinstance(key, str) or not key:
        raise ValueError(f"key must be a non-empty '/'-joined metric name, got {key!r}")
    res = []
    for s in sorted(per_seed):
        d: Any = per_seed[s]
        for part in key.split("/"):
            if not isinstance(d, dict) or part not in d:
                avail = ", ".join(sorted(map(str, d))) if isinstance(d, dict) else f"a {type(d).__name__}"
                raise ValueError(f"metric {key!r} has no {part!r} for seed {s} (available there: {avail})")
            d = d[part]
        if not is_number(d) and not is_number(_item(d)):
            raise ValueError(
                f"metric {key!r} for seed {s} must be a number, got {type(d).__name__} {short_repr(d)}"
            )
        res.append(as_float(d if is_number(d) else _item(d)))
    return res


TIMING_WORDS = frozenset({"s", "sec", "secs", "seconds", "time", "times", "timing", "timings", "runtime"})


def is_timing_key(key: str) -> bool:
    """Whether a (possibly '/'-joined) metric key is a timing: one of its path segments has a '_'-separated word
    in :data:`TIMING_WORDS` (``time_s``, ``train_cpu_s``, ``seconds``, ``timing/cascade_ratio``,
    ``unlearn_time_ratio``, ``atom_structures_per_s``). Timings change from run to run, so the run path
    keeps them out of metrics.json (in timings.json); name a time-derived number accordingly (e.g. put it under
    ``timing/``)."""
    return any(w in TIMING_WORDS for seg in str(key).split("/") for w in seg.lower().split("_"))


def split_timings(d: Any) -> tuple[Any, Any]:
    """``(rest, timings)`` of a nested dict: every entry whose key :func:`is_timing_key` goes, with its whole
    subtree, to ``timings`` (nesting kept); the rest stays, less the dicts that held nothing but timings.
    Non-dicts are returned as ``(d, {})``."""
    if not isinstance(d, dict):
        return d, {}
    rest: dict = {}
    timings: dict = {}
    for k, v in d.items():
        if is_timing_key(k):
            timings[k] = v
            continue
        r, t = split_timings(v)
        if t:
            timings[k] = t
        if r != {} or not t:  # a dict that held only timings leaves no empty husk behind
            rest[k] = r
    return rest, timings
