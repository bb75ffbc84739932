"""The run path: one function runs a system's reproduction into a folder and returns its claims document.

>>> import iclr25
>>> doc = iclr25.run("certainty_calibration", preset="smoke", out="runs")     # doctest: +SKIP
>>> [(c["id"], c["holds"]) for c in doc["claims"]]                            # doctest: +SKIP

The CLI (``iclr25 run``) is a thin shell around :func:`run`. Steps: build the effective config (preset,
then ``overrides``, then ``seeds``/``seed``/``device``; every value validated by the config dataclass), check
the output folder and lock it (one run per folder: a second run into it stops in one line naming the holder),
call the experiment's ``run(cfg, out/<slug>)``, and :func:`finish_run` — fill in slug, preset and wall time,
attach provenance, write the artefacts as one unit.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from ..common.results import PRESET_NAMES, config_hash
from ..errors import UsageError
from .artefacts import write_run
from .configs import effective_config, experiment_module, no_network_env
from .interrupts import check_interrupt
from .rundir import RunResult


class RunPathError(OSError):
    """The output folder cannot be used (a file in the way, no permission): CLI exit status 1, one line."""


# -- the output folder --------------------------------------------------------------------------------------


def check_out(out: str | os.PathLike, slug: str | None = None) -> Path:
    """Create ``out`` (and ``out/<slug>``) or raise :class:`RunPathError` / :class:`UsageError` in one line."""
    if out is None or str(out).strip() == "":
        raise UsageError("--out must name a folder, got an empty string")
    if "\x00" in str(out):
        raise UsageError(f"--out {str(out)!r} is not a usable path: it contains a NUL byte")
    out = Path(out)
    targets = [out] + ([out / slug, out / slug / "seeds", out / slug / "figures"] if slug else [])
    try:
        for t in targets:
            if t.exists() and not t.is_dir():
                raise RunPathError(f"{t} exists and is a file, not a folder")
    except (ValueError, UnicodeError) as e:  # NUL bytes, unencodable names
        raise UsageError(f"--out {str(out)!r} is not a usable path: {e}") from None
    try:
        for t in targets[:2]:
            t.mkdir(parents=True, exist_ok=True)
    except FileExistsError as e:
        raise RunPathError(f"cannot create folder {e.filename}: a file is in the way") from None
    except NotADirectoryError as e:
        raise RunPathError(f"cannot create folder {e.filename}: a parent is a file, not a folder") from None
    except PermissionError as e:
        raise RunPathError(f"cannot create folder {e.filename or out}: permission denied") from None
    except OSError as e:
        raise RunPathError(f"cannot create folder {e.filename or out}: {e.strerror or e}") from None
    last = targets[1] if slug else out
    if not os.access(last, os.W_OK | os.X_OK):
        raise RunPathError(f"folder {last} is not writable")
    return last


# -- running ------------------------------------------------------------------------------------------------


def _cpu_seconds() -> float | None:
    try:
        import resource

        a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime
    except (ImportError, OSError):
        return None


def finish_run(
    result: RunResult,
    cfg: Any,
    dest: str | Path,
    *,
    slug: str,
    preset: str,
    started: float,
    load_start: list[float] | None = None,
    cpu_start: float | None = None,
    overrides: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict:
    """Fill in what the experiment does not know (slug, preset, wall time), attach provenance and write the
    run's artefacts as one unit. Returns the claims document. ``extra``: more provenance (world size, backend,
    launcher). Under ``torchrun`` only rank 0 writes; the other ranks get the same document, unwritten."""
    from ..common.claims import claims_document
    from ..common.device import is_main_process
    from ..common.io import to_jsonable
    from . import provenance

    if not isinstance(result, RunResult):
        raise TypeError(f"{slug}: run() must return a RunResult, got {type(result).__name__}")
    check_interrupt()  # a Ctrl-C that something swallowed still stops the run before it writes anything
    wall = time.perf_counter() - started
    cpu_now = _cpu_seconds()
    result.slug, result.preset, result.runtime_s = slug, preset, wall
    if not is_main_process():
        doc = claims_document(
            slug, preset, result.seeds, wall, result.claims, {"preset": preset, **(extra or {})}
        )
        return to_jsonable(doc)
    prov = provenance.collect(
        preset=preset,
        wall_s=wall,
        device=str(getattr(cfg, "device", "cpu")),
        load_start=load_start,
        cpu_s=None if cpu_now is None or cpu_start is None else cpu_now - cpu_start,
        overrides=overrides or {},
        config_hash=config_hash(cfg),  # lets `iclr25 verify` check that it rebuilt the reference's config
        **(extra or {}),
    )
    return write_run(result, cfg, dest, provenance=prov)


def run_experiment(
    exp: ModuleType,
    slug: str,
    preset: str = "quick",
    out: str | os.PathLike = "runs",
    seeds: int | None = None,
    seed: int | None = None,
    device: str | None = None,
    overrides: list[str] | dict[str, Any] | None = None,
    *,
    launcher: Any = None,
    config: tuple[Any, dict[str, Any]] | None = None,
) -> dict:
    """Run an experiment module (``PRESETS``, ``run(cfg, out)``) into ``out/<slug>``; return its claims.json.

    ``config``: the ``(cfg, applied overrides)`` pair :func:`effective_config` already built for these arguments
    (the CLI validates every system's config before running any, and passes that build on); ``None`` builds it
    here from ``preset``, ``seeds``, ``seed``, ``device`` and ``overrides``.

    ``launcher``: where missing seeds are computed (``None``: here and in local worker processes, see
    :func:`iclr25.harness.workers.set_jobs`; a :class:`iclr25.harness.launch.SubmititLauncher`: one cluster job
    per seed). Under ``torchrun`` (``WORLD_SIZE`` > 1) the process group is initialised (gloo on CPU, nccl on CUDA), every
    rank runs the experiment (its DDP parts shard the work), and only rank 0 prints and writes the run folder;
    the world size and backend go into the provenance."""
    from ..common.device import init_distributed, set_cpu_threads
    from ..common.progress import set_quiet
    from . import provenance
    from .launch import job_template
    from .locks import lock_run_folder
    from .workers import RunContext, run_context

    no_network_env()
    if config is None:
        config = effective_config(exp, preset, seeds=seeds, seed=seed, device=device, overrides=overrides)
    cfg, applied = config
    dist = init_distributed(str(cfg.device))
    if dist is not None and dist["rank"] != 0:
        set_quiet(True)
    dest = check_out(out, slug)
    # one run per folder: a second run into it (another config, another node) stops here in one line naming
    # the holder; under torchrun only rank 0 writes, so only rank 0 holds it
    lock = lock_run_folder(dest) if dist is None or dist["rank"] == 0 else contextlib.nullcontext()
    with lock:
        set_cpu_threads(getattr(cfg, "threads", None))
        load_start, cpu_start = provenance.load_average(), _cpu_seconds()
        template = job_template(exp, slug, preset, cfg, applied, dest)
        ctx = RunContext(
            job=lambda call, part: dataclasses.replace(template, call=call, part=part), launcher=launcher
        )
        t0 = time.perf_counter()
        with run_context(ctx):
            result = exp.run(cfg, dest)
        extra: dict[str, Any] = {
            "world_size": 1 if dist is None else dist["world_size"],
            "backend": None if dist is None else dist["backend"],
            "launcher": "local"
            if launcher is None
            else f"submitit:{getattr(launcher, 'cluster', None) or 'auto'}",
            "jobs": _resolved_jobs(str(cfg.device)) if launcher is None and dist is None else None,
        }
        return finish_run(
            result,
            cfg,
            dest,
            slug=slug,
            preset=preset,
            started=t0,
            load_start=load_start,
            cpu_start=cpu_start,
            overrides=applied,
            extra=extra,
        )


def _resolved_jobs(device: str) -> int:
    """The number of local seed workers a run may use (``--jobs``, ``auto`` resolved for ``device``)."""
    from ..common.device import auto_jobs
    from .workers import jobs_setting

    j = jobs_setting()
    return auto_jobs(device) if j == "auto" else int(j)


def run(
    slug: str,
    preset: str = "quick",
    out: str | os.PathLike = "runs",
    *,
    seeds: int | None = None,
    seed: int | None = None,
    device: str | None = None,
    overrides: list[str] | dict[str, Any] | None = None,
    launcher: Any = None,
) -> dict:
    """Run system ``slug``'s reproduction with ``preset`` into ``out/<slug>`` and return its claims document.

    ``device=None`` uses the preset's device (``full`` presets ask for CUDA); ``"auto"`` picks CUDA when
    present. ``overrides`` (``{"field": value}`` or ``["field=value"]``) change config fields, validated by the
    config dataclass and recorded in config.json (and in the config hash that guards cached seeds).
    ``launcher``: see :func:`run_experiment` (``iclr25.harness.launch.make_launcher("submitit")`` for Slurm).
    Raises :class:`UsageError` for bad arguments and :class:`RunPathError` for an unusable ``out``.
    """
    if preset not in PRESET_NAMES:
        raise UsageError(f"unknown preset {preset!r}; valid: {', '.join(PRESET_NAMES)}")
    return run_experiment(
        experiment_module(slug), slug, preset, out, seeds, seed, device, overrides, launcher=launcher
    )
