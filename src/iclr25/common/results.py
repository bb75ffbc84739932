"""Experiment contract, run folders that resume, and the artefacts every run writes.

An experiment module (``iclr25/<slug>/experiment.py``) provides::

    @dataclass(frozen=True)
    class Config(ExperimentConfig): ...          # every hyper-parameter, defaults from the paper
    PRESETS = {"smoke": Config(...), "quick": Config(...), "full": Config(...)}
    def run(cfg: Config, out: Path) -> RunResult: ...

``out`` is the system's own folder (``DIR/<slug>``). Inside ``run`` use :class:`RunDir` to compute
per-seed results that survive an interruption: a restarted run skips seeds already on disk.
:func:`write_run` then writes ``config.json, metrics.json, claims.json, report.md, figures/*.png``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .claims import Claim, Stat, claims_document
from .io import atomic_write_json, atomic_write_text, read_json, to_jsonable
from .progress import log, progress

PRESET_NAMES = ("smoke", "quick", "full")


@dataclass(frozen=True)
class ExperimentConfig:
    """Fields every experiment config has. Subclasses add their own (all with defaults)."""

    seeds: int = 3  # number of seeds; seed values are seed, seed+1, ...
    seed: int = 0  # first seed
    device: str = "cpu"
    threads: int | None = 1  # torch CPU threads (tiny models run fastest single-threaded); None = default

    def __post_init__(self) -> None:
        if not isinstance(self.seeds, int) or self.seeds < 1:
            raise ValueError(f"seeds must be an int >= 1, got {self.seeds!r}")
        if not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")
        if self.device not in ("cpu", "cuda", "auto") and not str(self.device).startswith("cuda:"):
            raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'auto', got {self.device!r}")

    @property
    def seed_list(self) -> list[int]:
        return [self.seed + i for i in range(self.seeds)]


def config_hash(cfg: Any, ignore: Sequence[str] = ("seeds", "seed", "device", "threads")) -> str:
    """Hash of the config fields that change a seed's results (not which or how many seeds, nor where it runs)."""
    d = to_jsonable(dataclasses.asdict(cfg)) if dataclasses.is_dataclass(cfg) else to_jsonable(cfg)
    for k in ignore:
        d.pop(k, None)
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


@dataclass(kw_only=True)
class RunResult:
    """What ``run`` returns: aggregated metrics, per-seed metrics, claims, figures and a report body.

    ``slug``, ``preset`` and ``runtime_s`` are filled in by the run path (the experiment does not know them).
    """

    seeds: list[int]
    metrics: dict[str, Any]
    claims: list[Claim]
    slug: str = ""
    preset: str = ""
    per_seed: dict[int, dict[str, Any]] = field(default_factory=dict)
    figures: list[Path] = field(default_factory=list)
    report_md: str = ""  # the experiment's own section (tables, deviations); claims are added by write_run
    runtime_s: float = 0.0
    valid: bool = (
        True  # False when a precondition of the experiment failed (the claims are then not meaningful)
    )
    invalid_reason: str = ""


class RunDir:
    """A system's run folder: per-seed results under ``seeds/seed_<k>.json`` keyed by config hash."""

    def __init__(self, out: str | Path, cfg: Any = None):
        self.path = Path(out)
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "figures").mkdir(exist_ok=True)
        self.cfg_hash = config_hash(cfg) if cfg is not None else ""

    @property
    def figures(self) -> Path:
        return self.path / "figures"

    def seed_file(self, seed: int, part: str = "") -> Path:
        suffix = f"_{part}" if part else ""
        return self.path / "seeds" / f"seed_{int(seed)}{suffix}.json"

    def load_seed(self, seed: int, part: str = "") -> dict | None:
        f = self.seed_file(seed, part)
        if not f.exists():
            return None
        try:
            d = read_json(f)
        except (json.JSONDecodeError, OSError):
            return None
        if d.get("config_hash") != self.cfg_hash:
            return None
        return d["result"]

    def save_seed(self, seed: int, result: dict, part: str = "") -> None:
        atomic_write_json(
            self.seed_file(seed, part), {"config_hash": self.cfg_hash, "seed": int(seed), "result": result}
        )

    def map_seeds(
        self, fn: Callable[[int], dict], seeds: Sequence[int], desc: str = "seeds", part: str = ""
    ) -> dict[int, dict]:
        """``{seed: fn(seed)}``, reading finished seeds from disk instead of recomputing them.

        With :func:`set_jobs` > 1 (the CLI's ``--jobs``), missing seeds are computed in forked worker processes,
        each writing its result file; a seed whose worker failed is then computed here, so errors surface with
        their traceback. Every seed's result depends on its seed alone, so the numbers do not depend on ``jobs``.
        """
        seeds = [int(s) for s in seeds]
        missing = [s for s in seeds if self.load_seed(s, part) is None]
        if _JOBS > 1 and len(missing) > 1:
            self._compute_forked(fn, missing, part)
        out: dict[int, dict] = {}
        for s in progress(seeds, desc=desc):
            cached = self.load_seed(s, part)
            if cached is not None:
                if s not in missing:
                    log(f"[resume] seed {s}{' ' + part if part else ''}: read from {self.seed_file(s, part)}")
                out[s] = cached
                continue
            r = to_jsonable(fn(s))
            self.save_seed(s, r, part)
            out[s] = r
        return out

    def _compute_forked(self, fn: Callable[[int], dict], seeds: list[int], part: str) -> None:
        import multiprocessing as mp

        ctx = mp.get_context("fork")  # the closure ``fn`` is inherited, never pickled

        def work(s: int) -> None:
            from .progress import set_quiet

            set_quiet(True)
            self.save_seed(s, to_jsonable(fn(s)), part)

        pending = list(seeds)
        running: list = []
        while pending or running:
            while pending and len(running) < _JOBS:
                p = ctx.Process(target=work, args=(pending.pop(0),), daemon=False)
                p.start()
                running.append(p)
            running[0].join()
            running = [p for p in running if p.is_alive()]


_JOBS = 1


def set_jobs(n: int) -> None:
    """How many seeds :meth:`RunDir.map_seeds` may compute at once (worker processes); 1 = sequential."""
    global _JOBS
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"jobs must be an int >= 1, got {n!r}")
    _JOBS = n


def aggregate(per_seed: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Mean/std/values for every numeric leaf shared by all seeds (nested dicts flattened with '/')."""
    flat = [_flatten(d) for d in per_seed.values()]
    if not flat:
        return {}
    keys = [k for k in flat[0] if all(k in f for f in flat)]
    agg: dict[str, Any] = {}
    for k in keys:
        vals = [f[k] for f in flat]
        if all(isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None for v in vals):
            agg[k] = Stat.of(vals).to_json()
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
    """Per-seed values of a (possibly nested, '/'-separated) metric, in seed order."""
    res = []
    for s in sorted(per_seed):
        d: Any = per_seed[s]
        for part in key.split("/"):
            d = d[part]
        res.append(float(d))
    return res


def claims_table_md(claims: Sequence[Claim]) -> str:
    """Markdown table of claims; a compound claim gets its own row followed by one ``↳`` row per part."""
    rows = [
        "| claim | statement | method | baseline | compared | threshold | verdict |",
        "|---|---|---|---|---|---|---|",
    ]

    def row(cid: str, c: Claim) -> str:
        base = c.baseline.fmt() if c.baseline else "—"
        red = ", every seed" if c.reduce == "all" else ""
        return (
            f"| {cid} | {c.statement} | {c.method.fmt()} | {base} | {c.compare}{red}: {c.measured:.4g} | "
            f"{c.direction} {c.threshold:g} | {'✓' if c.holds else '✗'} |"
        )

    for c in claims:
        if c.parts:
            rows.append(
                f"| `{c.id}` | {c.statement} | all of {len(c.parts)} parts | | | | {'✓' if c.holds else '✗'} |"
            )
            rows += [row(f"↳ `{p.id}`", p) for p in c.parts]
        else:
            rows.append(row(f"`{c.id}`", c))
    notes = [f"- `{c.id}`: {c.note}" for c in claims if c.note]
    return "\n".join(rows) + ("\n\n" + "\n".join(notes) if notes else "")


def write_run(result: RunResult, cfg: Any, out: str | Path) -> None:
    """Write ``config.json, metrics.json, claims.json, report.md`` atomically into ``out``."""
    out = Path(out)
    atomic_write_json(out / "config.json", {"preset": result.preset, **to_jsonable(dataclasses.asdict(cfg))})
    metrics = {
        "slug": result.slug,
        "preset": result.preset,
        "seeds": result.seeds,
        "valid": result.valid,
        "invalid_reason": result.invalid_reason,
        "aggregate": result.metrics,
        "per_seed": {str(k): v for k, v in sorted(result.per_seed.items())},
    }
    atomic_write_json(out / "metrics.json", metrics)
    doc = claims_document(result.slug, result.preset, result.seeds, result.runtime_s, result.claims)
    doc["valid"] = result.valid
    doc["invalid_reason"] = result.invalid_reason
    atomic_write_json(out / "claims.json", doc)
    held = sum(c.holds for c in result.claims)
    head = f"# {result.slug} — preset `{result.preset}`, seeds {result.seeds}, {result.runtime_s:.1f} s\n\n"
    if not result.valid:
        head += f"**RUN INVALID:** {result.invalid_reason}\n\n"
    head += f"**Claims held: {held}/{len(result.claims)}**\n\n" + claims_table_md(result.claims) + "\n\n"
    figs = "".join(f"![{p.stem}](figures/{p.name})\n\n" for p in result.figures)
    atomic_write_text(out / "report.md", head + result.report_md.strip() + "\n\n" + figs)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t


def mean_std(x: Sequence[float], digits: int = 3) -> str:
    """``"mean ± std"`` of per-seed values with ``digits`` decimals (for report tables)."""
    a = np.asarray(x, dtype=float)
    return f"{a.mean():.{digits}f} ± {a.std():.{digits}f}"
