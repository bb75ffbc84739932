"""Experiment contract, run folders that resume, and the artefacts every run writes.

An experiment module (``iclr25/<slug>/experiment.py``) provides::

    @dataclass(frozen=True)
    class Config(ExperimentConfig): ...          # every hyper-parameter, defaults from the paper
    PRESETS = {"smoke": Config(...), "quick": Config(...), "full": Config(...)}
    def run(cfg: Config, out: Path) -> RunResult: ...

``out`` is the system's own folder (``DIR/<slug>``). Inside ``run`` use :class:`RunDir` to compute
per-seed results that survive an interruption: a restarted run skips seeds already on disk.
:func:`write_run` then writes ``config.json, metrics.json, timings.json, report.md, claims.json`` (figures are
saved by the experiment under ``figures/``).

A seed file is ``{"config_hash", "seed", "result", "result_sha256"}``; the hash is SHA-256 of the canonical
JSON of ``result`` (:func:`iclr25.common.io.canonical_json`: sorted keys, NaN/±inf as their tags), so a file
whose numbers were damaged or edited is recomputed rather than believed. An experiment declares the keys every
seed result must hold as numbers — ``RunDir(out, cfg, required=("ours/acc", "base/acc"))`` — and a result
lacking one is refused (:meth:`RunDir.map_seeds`).

metrics.json is byte-identical across reruns of the same config and seeds: wall/CPU timings, which differ
from run to run, are moved to timings.json (:func:`is_timing_key` says which keys are timings).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .claims import Claim, Stat, claims_document
from .fields import check_fields
from .io import (
    MAX_JSON_BYTES,
    UnsafeFileError,
    as_float,
    atomic_write_json,
    clean_stale_tmp,
    from_jsonable,
    parse_json,
    read_bytes_limited,
    sha256_json,
    to_jsonable,
)
from .progress import log, progress

PRESET_NAMES = ("smoke", "quick", "real", "full")  # real: real models and data (iclr25.assets)
MAX_SEEDS = 1000  # a reproduction averages a handful of seeds; each seed is a separate run, kept in memory
SEED_LIMIT = 2**32  # seeds feed numpy/torch/CUDA generators that take 32-bit seeds: seed + seeds <= 2**32


class RunWarning(UserWarning):
    """Something in a run folder was wrong and was repaired (e.g. a damaged seed file was recomputed)."""


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


def _check_required(required: Any, name: str = "required") -> tuple[str, ...]:
    if isinstance(required, str) or not isinstance(required, (tuple, list)):
        raise ValueError(f"{name} must be a tuple of '/'-joined metric keys, got {required!r}")
    for k in required:
        if not isinstance(k, str) or not k or any(not p for p in k.split("/")):
            raise ValueError(f"{name} must hold non-empty '/'-joined metric keys like 'ours/acc', got {k!r}")
    return tuple(required)


def _required_problems(result: dict, required: Sequence[str]) -> list[str]:
    """What is wrong with ``result`` for the ``required`` keys: each must lead to a number (NaN/±inf count)."""
    problems = []
    for key in required:
        d: Any = result
        for part in key.split("/"):
            if not isinstance(d, dict) or part not in d:
                problems.append(f"lacks required key {key!r}")
                break
            d = d[part]
        else:
            if not _is_number(d):
                problems.append(f"holds {type(d).__name__} {_short(d)} at required key {key!r}, not a number")
    return problems


def _short(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


MAX_SEED_BYTES = MAX_JSON_BYTES


class RunDir:
    """A system's run folder: per-seed results under ``seeds/seed_<k>.json`` keyed by config hash.

    Opening it removes temporary files left by killed writers. A seed file that cannot be trusted — not
    UTF-8 JSON, not ``{"config_hash", "seed", "result": {...}, "result_sha256"}``, a result whose SHA-256 is
    missing (a file written before seed files carried one) or does not match, a result lacking one of the
    ``required`` keys or holding a non-number there, a folder, a device, a symlink leading out of the run
    folder, a file over :data:`MAX_SEED_BYTES`, JSON nested too deeply, or a copy of another seed's file — is
    moved to ``seeds/rejected/`` and recomputed with a :class:`RunWarning`; one from another config is
    recomputed (and overwritten) silently, as a changed config is expected to do.

    ``required``: '/'-joined keys every seed result must hold as numbers (NaN and ±inf count; booleans,
    ``None`` and strings do not), e.g. ``RunDir(out, cfg, required=("ours/acc", "base/acc"))``; a freshly
    computed result that breaks it raises ``ValueError`` (it is not saved). :meth:`map_seeds` takes its own
    ``required`` for a ``part`` whose results have other keys.
    """

    def __init__(self, out: str | Path, cfg: Any = None, required: Sequence[str] = ()):
        self.path = Path(out)
        self.required = _check_required(required)
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "figures").mkdir(exist_ok=True)
        clean_stale_tmp(self.path)
        self.cfg_hash = config_hash(cfg) if cfg is not None else ""
        self.device = str(getattr(cfg, "device", "cpu"))  # where seeds run: picks fork or spawn workers

    @property
    def figures(self) -> Path:
        return self.path / "figures"

    def seed_file(self, seed: int, part: str = "") -> Path:
        suffix = f"_{part}" if part else ""
        return self.path / "seeds" / f"seed_{int(seed)}{suffix}.json"

    def _problem(self, f: Path, seed: int, required: Sequence[str]) -> tuple[dict | None, str]:
        """``(result, "")`` for a valid file of this config, ``(None, "")`` for another config's file,
        ``(None, reason)`` for a file that cannot be trusted."""
        if f.is_dir() and not f.is_symlink():
            return None, "is a folder, not a file"
        try:
            d = parse_json(read_bytes_limited(f, MAX_SEED_BYTES, within=self.path), name=str(f))
        except UnsafeFileError as e:
            return None, f"is refused ({e})"
        except UnicodeDecodeError:
            return None, "is not UTF-8 text"
        except json.JSONDecodeError as e:
            return None, f"is not valid JSON ({e.msg} at line {e.lineno})"
        if not isinstance(d, dict):
            return None, f"holds a JSON {type(d).__name__}, not an object"
        missing = [k for k in ("config_hash", "seed", "result") if k not in d]
        if missing:
            return None, f"is missing key(s) {', '.join(missing)}"
        if not isinstance(d["result"], dict):
            return None, f"has a result of type {type(d['result']).__name__}, not an object"
        if not isinstance(d["seed"], int) or isinstance(d["seed"], bool) or d["seed"] != int(seed):
            return None, f"stores seed {d['seed']!r}, not seed {int(seed)} (a copy of another seed's file?)"
        if not isinstance(d["config_hash"], str):
            return None, "has a config_hash that is not a string"
        if d["config_hash"] != self.cfg_hash:
            return None, ""
        stored = d.get("result_sha256")
        if stored is None:
            return None, (
                "has no result_sha256 (written before seed files carried a hash of their result, or edited), "
                "so its numbers cannot be trusted"
            )
        if not isinstance(stored, str) or stored != sha256_json(d["result"]):
            return None, "has a result that does not match its result_sha256 (damaged or edited)"
        result = from_jsonable(d["result"])
        problems = _required_problems(result, required)
        if problems:
            return None, "; ".join(problems)
        return result, ""

    def load_seed(self, seed: int, part: str = "", required: Sequence[str] | None = None) -> dict | None:
        """The stored result of ``seed`` (non-finite tags decoded to floats), or ``None`` to recompute it.

        ``required`` defaults to the folder's (``RunDir(..., required=...)``)."""
        req = self.required if required is None else _check_required(required)
        f = self.seed_file(seed, part)
        if not f.exists() and not f.is_symlink():
            return None
        try:
            result, problem = self._problem(f, seed, req)
        except OSError as e:
            result, problem = None, f"cannot be read ({e.strerror or e})"
        if problem:
            self._reject(f, problem)
        return result

    def _reject(self, f: Path, problem: str) -> None:
        dest = f.parent / "rejected" / f"{f.name}.{time.strftime('%Y%m%dT%H%M%S')}.{uuid.uuid4().hex[:6]}"
        try:
            dest.parent.mkdir(exist_ok=True)
            os.replace(f, dest)
            where = f"moved to {dest}"
        except OSError as e:
            where = f"could not be moved aside ({e.strerror or e})"
            if f.is_dir():
                raise OSError(f"seed file {f} {problem} and could not be moved aside: {e}") from e
        warnings.warn(f"seed file {f} {problem}: {where}; recomputing that seed", RunWarning, stacklevel=3)

    def save_seed(self, seed: int, result: dict, part: str = "") -> None:
        """Write ``result`` (made JSON-able) with this config's hash and the SHA-256 of its canonical JSON."""
        from .device import is_main_process

        if not is_main_process():  # under torchrun only rank 0 writes the run folder
            return
        r = to_jsonable(result)
        atomic_write_json(
            self.seed_file(seed, part),
            {"config_hash": self.cfg_hash, "seed": int(seed), "result": r, "result_sha256": sha256_json(r)},
        )

    def map_seeds(
        self,
        fn: Callable[[int], dict],
        seeds: Sequence[int],
        desc: str = "seeds",
        part: str = "",
        required: Sequence[str] | None = None,
    ) -> dict[int, dict]:
        """``{seed: fn(seed)}``, reading finished seeds from disk instead of recomputing them.

        Missing seeds are computed, each writing its result file, by (:func:`set_jobs`, the CLI's ``--jobs``
        and ``--launcher``):

        * ``jobs`` = 1: here, one after the other;
        * ``jobs`` > 1 on CPU: forked worker processes (``fn`` is inherited, never pickled);
        * ``jobs`` > 1 when CUDA is involved (the run's device is ``cuda``, or CUDA is initialised here):
          *spawned* workers, each pinned to its own GPU (``CUDA_VISIBLE_DEVICES``), that re-import the
          experiment, replay its ``run`` up to this call and compute their seeds (:mod:`iclr25.launch`);
        * ``--launcher submitit``: one Slurm job per missing seed, the same replay; this call waits for them.

        A seed whose local worker failed is then computed here, so errors surface with their traceback. Every
        seed's result depends on its seed alone, so the numbers do not depend on how they were computed.
        Under ``torchrun`` every rank computes each missing seed together (the DDP parts shard the work), rank 0
        reads and writes the seed files and sends every rank the same result. Results come back exactly as a
        later run reads them from disk (NaN/inf included).

        ``required`` ('/'-joined keys, default: the folder's ``required``) must lead to a number in every result:
        a stored result that breaks it is moved aside and recomputed (:class:`RunWarning`), a fresh one raises
        ``ValueError`` naming the seed and the key, and is not saved.
        """
        req = self.required if required is None else _check_required(required)
        seeds = [int(s) for s in seeds]
        call = _next_call()
        if _WORKER is not None and call == _WORKER.call:
            self._compute_as_worker(fn, part, req)  # raises SeedsComputed: the worker's replay ends here
        from .device import dist_info

        if dist_info()[1] > 1:
            return self._map_distributed(fn, seeds, desc, part, req)
        missing = [s for s in seeds if self.load_seed(s, part, req) is None]
        if missing and _WORKER is None:
            if _CONTEXT is not None and _CONTEXT.launcher is not None:
                _CONTEXT.launcher.compute(_CONTEXT.job(call, part), missing)
            else:
                jobs = self._jobs()
                if jobs > 1 and len(missing) > 1:
                    self._compute_pool(fn, missing, part, req, jobs, call)
        out: dict[int, dict] = {}
        for s in progress(seeds, desc=desc):
            cached = self.load_seed(s, part, req)
            if cached is not None:
                if s not in missing:
                    log(f"[resume] seed {s}{' ' + part if part else ''}: read from {self.seed_file(s, part)}")
                out[s] = cached
                continue
            r = self._checked(fn(s), s, part, req)
            self.save_seed(s, r, part)
            out[s] = from_jsonable(r)
        return out

    @staticmethod
    def _checked(result: Any, seed: int, part: str, required: Sequence[str]) -> dict:
        r = to_jsonable(result)
        if not isinstance(r, dict):
            raise TypeError(
                f"the per-seed function must return a dict, got {type(r).__name__} for seed {seed}"
            )
        problems = _required_problems(from_jsonable(r), required)
        if problems:
            where = f"seed {seed}" + (f" (part {part!r})" if part else "")
            raise ValueError(
                f"the per-seed result of {where} {'; '.join(problems)} (required: every one of "
                f"{', '.join(map(repr, required))} must be a number; NaN counts, booleans/None/strings do not)"
            )
        return r

    def _jobs(self) -> int:
        if _JOBS != "auto":
            return int(_JOBS)
        from .device import auto_jobs

        return auto_jobs(self.device)

    def _map_distributed(
        self, fn: Callable[[int], dict], seeds: list[int], desc: str, part: str, req: Sequence[str]
    ) -> dict[int, dict]:
        """Under ``torchrun``: rank 0 decides which seeds are missing and owns the files; every rank computes a
        missing seed (its DDP parts shard the work) and receives rank 0's result, so all ranks go on with the
        same numbers."""
        import torch.distributed as dist

        rank = dist.get_rank()
        out: dict[int, dict] = {}
        for s in progress(seeds, desc=desc):
            box: list[Any] = [None]
            if rank == 0:
                box[0] = self.load_seed(s, part, req)
            dist.broadcast_object_list(box, src=0)
            if box[0] is None:  # missing: every rank takes part
                r = self._checked(fn(s), s, part, req)
                if rank == 0:
                    self.save_seed(s, r, part)
                    box[0] = from_jsonable(r)
                dist.broadcast_object_list(box, src=0)
            out[s] = box[0]
        return out

    def _compute_as_worker(self, fn: Callable[[int], dict], part: str, req: Sequence[str]) -> None:
        from .progress import set_task, task_done

        w = _WORKER
        for s in w.todo():
            key = f"{part} {s}" if part else f"seed {s}"
            set_task(key)
            try:
                r = self._checked(fn(s), s, part, req)
            except (TypeError, ValueError):
                if w.reraise:
                    raise
                task_done(key, "failed (recomputed by the parent)")
                continue  # not saved: the parent computes this seed itself and raises with the reason
            except Exception:
                if w.reraise:
                    raise
                import traceback

                traceback.print_exc()
                task_done(key, "failed (recomputed by the parent)")
                continue
            self.save_seed(s, r, part)
            w.done.append(s)
            task_done(key)
        raise SeedsComputed(w.done)

    def _compute_pool(
        self,
        fn: Callable[[int], dict],
        seeds: list[int],
        part: str,
        required: Sequence[str],
        jobs: int,
        call: int,
    ) -> None:
        """Compute ``seeds`` in ``jobs`` worker processes: forked on CPU, spawned (and pinned to GPUs) when
        CUDA is involved."""
        import multiprocessing as mp

        from .device import cuda_in_use
        from .progress import board, is_quiet

        spawn = (
            start_method() == "spawn"
            or cuda_in_use()
            or (isinstance(self.device, str) and self.device.startswith("cuda"))
        )
        if spawn and _CONTEXT is None:
            warnings.warn(
                "seed workers need the spawn start method here (CUDA is involved) but this run was not started "
                "through iclr25.run / `iclr25 run`, so the experiment cannot be re-imported in a worker; "
                "computing the seeds one after the other",
                RunWarning,
                stacklevel=3,
            )
            return
        ctx = mp.get_context("spawn" if spawn else "fork")
        n = min(jobs, len(seeds))
        gpus = self._worker_gpus(n) if spawn else [None] * n
        quiet = is_quiet()
        fwd = None if quiet else ctx.Queue()
        listener = None
        if fwd is not None:
            import threading

            listener = threading.Thread(target=_draw_forwarded, args=(fwd, board()), daemon=True)
            listener.start()
        parent = os.getpid()
        procs: list = []
        try:
            if spawn:
                from ..launch import spawn_worker

                tasks = ctx.Queue()
                for s in seeds:
                    tasks.put(s)
                for _ in range(n):
                    tasks.put(None)
                job = _CONTEXT.job(call, part)
                for g in gpus:
                    p = ctx.Process(target=spawn_worker, args=(job, g, tasks, fwd, parent), daemon=False)
                    p.start()
                    procs.append(p)
                for p in procs:
                    p.join()
                tasks.cancel_join_thread()  # seeds left by a worker that died: the parent computes them
            else:
                self._fork_workers(ctx, fn, seeds, part, required, n, fwd, parent, procs)
        finally:  # an exception or Ctrl-C here: no worker keeps writing after we are gone
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join()
            if fwd is not None:
                fwd.put(None)
                listener.join(timeout=5)

    def _worker_gpus(self, n: int) -> list[str | None]:
        """The GPU each of ``n`` spawned workers is pinned to: the visible GPUs round-robin when the run's device
        is ``cuda``; none for ``cpu`` or one named GPU (``cuda:N``, shared by every worker)."""
        from .device import visible_gpus, worker_gpus

        return worker_gpus(n, visible_gpus()) if self.device == "cuda" else [None] * n

    def _fork_workers(self, ctx, fn, seeds, part, required, n, fwd, parent, procs) -> None:  # noqa: ANN001
        def work(s: int) -> None:
            from .progress import set_forward, set_quiet, set_task, task_done

            _die_with_parent(parent)
            set_quiet(True)
            set_forward(fwd)
            key = f"{part} {s}" if part else f"seed {s}"
            set_task(key)
            try:
                r = self._checked(fn(s), s, part, required)
            except (TypeError, ValueError):
                task_done(key, "failed (recomputed by the parent)")
                os._exit(1)  # not saved: the parent computes this seed itself and raises with the reason
            self.save_seed(s, r, part)
            task_done(key)
            if fwd is not None:
                fwd.close()
                fwd.join_thread()  # the parent gets this worker's last lines before it exits

        pending = list(seeds)
        running: list = []
        while pending or running:
            while pending and len(running) < n:
                p = ctx.Process(target=work, args=(pending.pop(0),), daemon=False)
                p.start()
                running.append(p)
                procs.append(p)
            running[0].join()
            running = [p for p in running if p.is_alive()]


class SeedsComputed(BaseException):
    """Raised in a seed worker's replay of ``run`` once its seeds are written: the rest of ``run`` (claims,
    figures) is the parent's. A ``BaseException`` so that an experiment's ``except Exception`` lets it pass."""

    def __init__(self, seeds: list[int]):
        super().__init__(f"seeds {seeds} computed")
        self.seeds = list(seeds)


@dataclass
class _Worker:
    """What a seed worker computes: at the ``call``-th ``map_seeds`` of its replay, the seeds ``todo()``
    yields; ``reraise``: a failing seed fails the worker (a cluster job) instead of being left to the parent."""

    call: int
    todo: Callable[[], Iterable[int]]
    reraise: bool = False
    done: list[int] = field(default_factory=list)


@dataclass
class RunContext:
    """Set by the run path around ``exp.run``: how a worker or a cluster job rebuilds this run (``job(call,
    part)`` → a picklable :class:`iclr25.launch.SeedJob`), and the launcher (``None``: local workers)."""

    job: Callable[[int, str], Any]
    launcher: Any = None
    calls: int = 0


_CONTEXT: RunContext | None = None
_WORKER: _Worker | None = None
_CALLS_NO_CONTEXT = [0]


def _next_call() -> int:
    """The index of this ``map_seeds`` call within the current run (a worker's replay counts the same way)."""
    if _CONTEXT is not None:
        _CONTEXT.calls += 1
        return _CONTEXT.calls - 1
    _CALLS_NO_CONTEXT[0] += 1
    return _CALLS_NO_CONTEXT[0] - 1


@contextlib.contextmanager
def run_context(ctx: RunContext | None, worker: _Worker | None = None):
    """Install ``ctx`` (and, in a seed worker, what it computes) for the duration of one ``exp.run``."""
    global _CONTEXT, _WORKER
    old = _CONTEXT, _WORKER
    _CONTEXT, _WORKER = ctx, worker
    try:
        yield ctx
    finally:
        _CONTEXT, _WORKER = old


def _draw_forwarded(q: Any, b: Any) -> None:
    """The parent's listener: draw the workers' progress messages until ``None``."""
    while True:
        try:
            msg = q.get()
        except (EOFError, OSError):
            return
        if msg is None:
            break
        try:
            if msg[0] == "update":
                b.update(*msg[1:])
            elif msg[0] == "done":
                b.finish(*msg[1:])
        except Exception:  # drawing must never break a run
            pass
    close = getattr(b, "close", None)
    if close is not None:
        close()


def _die_with_parent(parent: int) -> None:
    """In a worker: get SIGKILL when the parent dies (Linux ``PR_SET_PDEATHSIG``), and exit now if it
    already has."""
    import signal
    import sys

    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG = 1
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)


_JOBS: int | str = 1
_START_METHOD = os.environ.get("ICLR25_START_METHOD", "") or None


def set_jobs(n: int | str) -> None:
    """How many seeds :meth:`RunDir.map_seeds` may compute at once (worker processes); 1 = sequential;
    ``"auto"`` = one per visible GPU when the run's device is ``cuda``, else one per CPU."""
    global _JOBS
    if n == "auto":
        _JOBS = "auto"
        return
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"jobs must be an int >= 1 or 'auto', got {n!r}")
    _JOBS = n


def _jobs_setting() -> int | str:
    """The current :func:`set_jobs` value (an int or ``"auto"``)."""
    return _JOBS


def start_method() -> str | None:
    """The start method forced for seed workers (``ICLR25_START_METHOD=spawn`` or :func:`set_start_method`);
    ``None``: fork on CPU, spawn when CUDA is involved."""
    return _START_METHOD


def set_start_method(method: str | None) -> None:
    """Force ``"spawn"`` for seed workers even on CPU (to check that spawned workers give the same numbers), or
    ``None`` for the default rule."""
    global _START_METHOD
    if method not in (None, "spawn"):
        raise ValueError(f"start method must be None or 'spawn', got {method!r}")
    _START_METHOD = method


def _is_number(v: Any) -> bool:
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
        if all(_is_number(v) for v in vals):
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
        if not _is_number(d) and not _is_number(_item(d)):
            raise ValueError(
                f"metric {key!r} for seed {s} must be a number, got {type(d).__name__} {_short(d)}"
            )
        res.append(as_float(d if _is_number(d) else _item(d)))
    return res


ARTEFACTS = (
    "config.json",
    "metrics.json",
    "timings.json",
    "report.md",
    "claims.json",
)  # claims.json last: marks a run

TIMING_WORDS = frozenset({"s", "sec", "secs", "seconds", "time", "times", "timing", "timings", "runtime"})


def is_timing_key(key: str) -> bool:
    """Whether a (possibly '/'-joined) metric key is a timing: one of its path segments has a '_'-separated word
    in :data:`TIMING_WORDS` (``time_s``, ``train_cpu_s``, ``seconds``, ``timing/cascade_ratio``,
    ``unlearn_time_ratio``, ``atom_structures_per_s``). Timings change from run to run, so :func:`write_run`
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


def write_run(
    result: RunResult,
    cfg: Any,
    out: str | Path,
    *,
    provenance: dict | None = None,
) -> dict:
    """Write ``config.json, metrics.json, timings.json, report.md, claims.json`` into ``out`` as one unit;
    return claims.json.

    All five are written into a temporary folder first (a failure there leaves ``out`` untouched), then moved
    in with ``claims.json`` — the file that marks a finished run — removed first and moved in last, so a reader
    never sees a ``claims.json`` beside artefacts of another run. config.json, timings.json and claims.json's
    provenance carry the same ``run_id``. metrics.json holds no run id and no timing (:func:`split_timings`
    moves every timing key of the aggregate and the per-seed results to timings.json), so it is byte-identical
    across reruns of the same config and seeds.
    """
    from .render import run_report_md

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    run_id = uuid.uuid4().hex
    prov = {"run_id": run_id, **(provenance or {})}
    # the overrides are recorded once, in the provenance (claims.json), which both reports show with the hash
    config = {"preset": result.preset, "run_id": run_id, **to_jsonable(dataclasses.asdict(cfg))}
    config["config_hash"] = config_hash(cfg)
    per_seed = {str(k): v for k, v in sorted(result.per_seed.items())}
    agg, agg_t = split_timings(to_jsonable(result.metrics))
    per_seed, per_seed_t = split_timings(to_jsonable(per_seed))
    head = {"slug": result.slug, "preset": result.preset, "seeds": result.seeds}
    metrics = {
        **head,
        "valid": result.valid,
        "invalid_reason": result.invalid_reason,
        "aggregate": agg,
        "per_seed": per_seed,
    }
    timings = {**head, "run_id": run_id, "aggregate": agg_t, "per_seed": per_seed_t}
    doc = claims_document(result.slug, result.preset, result.seeds, result.runtime_s, result.claims, prov)
    doc["valid"] = bool(result.valid)
    doc["invalid_reason"] = result.invalid_reason
    report = run_report_md(doc, result.claims, result.report_md, result.figures)
    texts = {
        "config.json": _dumps(config),
        "metrics.json": _dumps(metrics),
        "timings.json": _dumps(timings),
        "report.md": report,
        "claims.json": _dumps(doc),
    }
    stage = Path(tempfile.mkdtemp(prefix=f".write.pid{os.getpid()}.", suffix=".tmp", dir=out))
    try:
        for name in ARTEFACTS:
            with open(stage / name, "w", encoding="utf-8") as f:
                f.write(texts[name])
                f.flush()
                os.fsync(f.fileno())
            os.chmod(stage / name, 0o644)
        marker = out / "claims.json"
        if marker.is_dir() and not marker.is_symlink():
            raise IsADirectoryError(f"{marker} is a folder; remove it to write this run")
        marker.unlink(missing_ok=True)
        for name in ARTEFACTS:
            os.replace(stage / name, out / name)
        _fsync_dir(out)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return json.loads(texts["claims.json"])


def _dumps(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2, allow_nan=False) + "\n"


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
