"""Where a run's missing seeds are computed when not in this process: spawned GPU workers and cluster jobs.

A seed's result depends on its seed alone, and a finished seed is a file in the run folder
(:class:`iclr25.harness.rundir.RunDir`). So a seed can be computed anywhere that sees the folder: a
:class:`SeedJob` — the experiment module, the preset and ``--set`` overrides, the seed range, the device, the
run folder, which ``map_seeds`` call of the run it belongs to, and the seeds to compute — is plain picklable data.
The process that receives it re-imports the experiment, rebuilds the same config (its hash is checked),
*replays* ``run(cfg, out)`` up to that ``map_seeds`` call (earlier calls read their seeds from disk), computes
its seeds, writes their files and stops; claims, figures and the report stay with the parent, which reads the
seeds back through the usual resume.

* :func:`spawn_worker` — a local worker started with the ``spawn`` method and pinned to one GPU
  (``--jobs N`` when CUDA is involved).
* :class:`SubmititLauncher` — ``iclr25 run SLUG --launcher submitit``: one Slurm job per missing seed through
  `submitit <https://github.com/facebookincubator/submitit>`_ (the optional extra ``iclr25[cluster]``); the
  parent waits for them. A rerun of the same command resubmits only the seeds still missing.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CLUSTER_EXTRA = "pip install 'iclr25[cluster]'"
LAUNCHERS = ("local", "submitit", "submitit-local")  # submitit-local: submitit's LocalExecutor (for tests)


class LaunchError(RuntimeError):
    """A launcher cannot be used, or its jobs failed (CLI exit status 1, one line)."""


@dataclass(frozen=True)
class SeedJob:
    """Everything a worker or a cluster job needs to compute seeds of one run (plain, picklable data)."""

    module: str  # the experiment module, e.g. "iclr25.pds.experiment"
    slug: str
    preset: str
    overrides: dict
    seeds: int
    seed: int
    device: str
    out: str  # the system's run folder (DIR/<slug>), shared with the parent
    config_hash: str
    call: int = 0  # which RunDir.map_seeds call of run(cfg, out) the seeds belong to
    part: str = ""
    todo: tuple[int, ...] = ()


def job_template(exp: Any, slug: str, preset: str, cfg: Any, overrides: dict, dest: Path) -> SeedJob:
    """The :class:`SeedJob` of a run (``call``/``part``/``todo`` are filled in by ``map_seeds``)."""
    from ..common.results import config_hash

    return SeedJob(
        module=exp.__name__,
        slug=slug,
        preset=preset,
        overrides=dict(overrides or {}),
        seeds=int(cfg.seeds),
        seed=int(cfg.seed),
        device=str(cfg.device),
        out=str(dest),
        config_hash=config_hash(cfg),
    )


def replay(
    job: SeedJob, todo: Callable[[], Iterable[int]] | None, reraise: bool, conn: Any = None
) -> list[int]:
    """Rebuild the run's config, replay ``run`` up to ``map_seeds`` call ``job.call`` and compute the seeds
    ``todo()`` yields there — or, for a local worker, those the parent sends down ``conn`` (each outcome goes
    back the same way) — writing their files. Returns the seeds written."""
    from ..common.device import set_cpu_threads
    from ..common.results import config_hash
    from .configs import effective_config, no_network_env
    from .workers import RunContext, SeedsComputed, Worker, run_context

    no_network_env()
    exp = importlib.import_module(job.module)
    cfg, _ = effective_config(
        exp, job.preset, seeds=job.seeds, seed=job.seed, device=job.device, overrides=job.overrides
    )
    if config_hash(cfg) != job.config_hash:
        raise LaunchError(
            f"{job.slug}: the worker rebuilt a config with hash {config_hash(cfg)}, not the run's {job.config_hash} "
            "(another iclr25 version on the worker?)"
        )
    set_cpu_threads(getattr(cfg, "threads", None))
    worker = Worker(call=job.call, todo=todo, reraise=reraise, conn=conn)
    ctx = RunContext(job=lambda call, part: dataclasses.replace(job, call=call, part=part))
    with run_context(ctx, worker):
        try:
            exp.run(cfg, Path(job.out))
        except SeedsComputed as e:
            return e.seeds
    raise LaunchError(
        f"{job.slug}: the worker's replay of run() ended before its seed call #{job.call} (part {job.part!r}); "
        "run() must reach its map_seeds calls in the same order on every replay"
    )


def spawn_worker(job: SeedJob, gpu: str | None, conn: Any, parent: int, forward: bool = True) -> None:
    """A local seed worker started with ``spawn``: pinned to ``gpu`` before CUDA is initialised, it replays the
    run and computes the seeds the parent sends down ``conn`` (``None``: stop), sending back each outcome and,
    with ``forward``, its progress. It ignores SIGINT and prints no traceback: a replay that fails before its
    seeds is reported to the parent in one line (which then computes the seeds itself)."""
    from ..common.device import pin_gpu
    from ..common.progress import set_forward, set_quiet
    from ..common.results import short_repr
    from .interrupts import worker_signals
    from .workers import ConnForward, die_with_parent, send

    worker_signals()
    die_with_parent(parent)
    try:
        pin_gpu(gpu)
        set_quiet(True)
        set_forward(ConnForward(conn) if forward else None)
        replay(job, None, reraise=False, conn=conn)
    except BaseException as e:  # noqa: BLE001 — the parent says it in one line and computes the seeds itself
        send(conn, ("broken", f"{type(e).__name__}: {short_repr(str(e))}"))
        conn.close()
        import os

        os._exit(1)
    conn.close()


def run_seed_job(job: SeedJob) -> list[int]:
    """The function a cluster job runs: compute ``job.todo`` (one seed) into the shared run folder. A failing
    seed fails the job, with its traceback in the job's log."""
    return replay(job, lambda: iter(job.todo), reraise=True)


# -- submitit -------------------------------------------------------------------------------------------------


def require_submitit() -> Any:
    try:
        import submitit
    except ImportError:
        raise LaunchError(
            f"--launcher submitit needs the submitit package, which is not installed: {CLUSTER_EXTRA}"
        ) from None
    return submitit


@dataclass(frozen=True)
class SlurmOptions:
    """Slurm resources of each seed job (``None``: the cluster's default)."""

    partition: str | None = None
    gpus_per_task: int | None = None
    time_min: int | None = None
    cpus_per_task: int | None = None
    mem: str | None = None  # Slurm's --mem, e.g. "16G"

    def __post_init__(self) -> None:
        for name in ("gpus_per_task", "time_min", "cpus_per_task"):
            v = getattr(self, name)
            if v is not None and (
                not isinstance(v, int) or isinstance(v, bool) or v < (0 if "gpus" in name else 1)
            ):
                raise ValueError(f"{name} must be None or an int >= {0 if 'gpus' in name else 1}, got {v!r}")
        if self.partition is not None and (not isinstance(self.partition, str) or not self.partition.strip()):
            raise ValueError(f"partition must be None or a non-empty string, got {self.partition!r}")
        if self.mem is not None:
            import re

            if not isinstance(self.mem, str) or not re.fullmatch(r"\d+[KMGT]?", self.mem.strip().upper()):
                raise ValueError(f"mem must be None or a Slurm size like '16G' or '4000M', got {self.mem!r}")

    def executor_parameters(self) -> dict[str, Any]:
        p: dict[str, Any] = {}
        if self.time_min is not None:
            p["timeout_min"] = self.time_min
        if self.cpus_per_task is not None:
            p["cpus_per_task"] = self.cpus_per_task
        if self.partition is not None:
            p["slurm_partition"] = self.partition
        if self.gpus_per_task is not None:
            p["slurm_gpus_per_task"] = self.gpus_per_task
        if self.mem is not None:
            p["slurm_mem"] = self.mem.strip().upper()
        return p


class SubmititLauncher:
    """Computes a ``map_seeds`` call's missing seeds as one submitit job each and waits for them.

    ``cluster=None`` lets submitit pick (Slurm when ``sbatch`` is there); ``"local"`` uses its LocalExecutor
    (real subprocesses, real pickling of the job) — the CLI's ``--launcher submitit-local``. Job logs go to
    ``<run folder>/.submitit/<job id>/``."""

    def __init__(self, options: SlurmOptions | None = None, cluster: str | None = None):
        self.options = options or SlurmOptions()
        self.cluster = cluster
        self.submitted: list[str] = []  # job ids, in order
        require_submitit()

    def executor(self, folder: Path, slug: str) -> Any:
        """The submitit executor of a run's jobs (logs under ``folder``), with this launcher's resources."""
        submitit = require_submitit()
        ex = submitit.AutoExecutor(folder=str(folder), cluster=self.cluster)
        params = self.options.executor_parameters()
        if ex.cluster != "slurm":  # Slurm-only options mean nothing to the local executor
            params = {k: v for k, v in params.items() if not k.startswith("slurm_")}
        ex.update_parameters(name=f"iclr25-{slug}", **params)
        return ex

    def compute(self, job: SeedJob, seeds: list[int]) -> None:
        from ..common.progress import log

        folder = Path(job.out) / ".submitit"
        ex = self.executor(folder, job.slug)
        what = f"{job.part} " if job.part else "seed "
        jobs = []
        for s in seeds:
            j = ex.submit(run_seed_job, dataclasses.replace(job, todo=(int(s),)))
            self.submitted.append(str(j.job_id))
            jobs.append((s, j))
        log(
            f"[{ex.cluster}] submitted {len(jobs)} job(s) for {what.strip()}s {', '.join(map(str, seeds))}; "
            f"logs in {folder}; waiting"
        )
        failures = []
        for s, j in jobs:
            try:
                j.result()
                log(f"[{ex.cluster}] {what}{s} done (job {j.job_id})")
            except Exception as e:  # a job that failed or was killed: report, keep the others' seeds
                last = [ln for ln in str(e).strip().splitlines() if ln.strip()]
                failures.append(f"{what}{s} (job {j.job_id}: {last[-1] if last else type(e).__name__})")
        if failures:
            raise LaunchError(
                f"{job.slug}: {len(failures)} of {len(jobs)} job(s) failed: {'; '.join(failures)}. Finished seeds "
                f"are kept; logs in {folder}; run the same command again to resubmit the missing ones"
            )


def make_launcher(name: str, options: SlurmOptions | None = None) -> SubmititLauncher | None:
    """``"local"`` → ``None`` (worker processes on this machine); ``"submitit"`` / ``"submitit-local"`` → a
    :class:`SubmititLauncher`."""
    if name not in LAUNCHERS:
        raise ValueError(f"launcher must be one of {LAUNCHERS}, got {name!r}")
    if name == "local":
        return None
    return SubmititLauncher(options, cluster="local" if name == "submitit-local" else None)
