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

One writer per run folder: the run path holds :func:`lock_run_folder` for the whole run (a second run into the
folder stops in one line naming the holder) and :func:`write_run` takes it again, so a run's documents are one
set; :func:`read_run_documents` reads claims.json, config.json and timings.json and checks their ``run_id``.
Under the CLI, SIGINT/SIGTERM are remembered (:func:`interrupt_handlers`): an interrupted run never writes its
documents (:func:`check_interrupt`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import threading
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
    TMP_SUFFIX,
    UnsafeFileError,
    as_float,
    atomic_write_json,
    clean_stale_tmp,
    from_jsonable,
    parse_json,
    read_bytes_limited,
    sha256_json,
    tmp_prefix,
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

        Each local worker takes seed after seed until none is left (its start-up is paid once, not per seed).
        A seed whose local worker failed is then computed here, so errors surface with their traceback; a worker
        killed mid-seed is reported (:class:`RunWarning`) and its seed computed here; an ``OSError`` in a worker (a
        full disk, an unwritable folder) stops the pool and is raised here, naming its file. Every seed's result
        depends on its seed alone, so the numbers do not depend on how they were computed.
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
            check_interrupt()
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
        w = _WORKER
        if w.conn is not None:  # a local spawned worker: seeds from the parent, each outcome sent back
            w.done.extend(_serve(w.conn, part, lambda s: self._compute_and_save(fn, s, part, req)))
            raise SeedsComputed(w.done)
        from .progress import set_task, task_done

        for s in w.todo():  # a cluster job: a failing seed fails the job, with its traceback in the job's log
            key = f"{part} {s}" if part else f"seed {s}"
            set_task(key)
            self._compute_and_save(fn, s, part, req)
            w.done.append(s)
            task_done(key)
        raise SeedsComputed(w.done)

    def _compute_and_save(self, fn: Callable[[int], dict], s: int, part: str, req: Sequence[str]) -> None:
        self.save_seed(s, self._checked(fn(s), s, part, req), part)

    def _compute_pool(
        self,
        fn: Callable[[int], dict],
        seeds: list[int],
        part: str,
        required: Sequence[str],
        jobs: int,
        call: int,
    ) -> None:
        """Compute ``seeds`` in ``jobs`` worker processes — forked on CPU, spawned (and pinned to GPUs) when CUDA
        is involved — each taking seed after seed from the parent until none is left (a worker pays its start-up
        once, not once per seed).

        A worker's outcome per seed comes back to the parent: a seed that failed (other than with an ``OSError``)
        is left missing, so the parent computes it itself and raises with the reason; an ``OSError`` (a full disk,
        a read-only folder, a path too long) stops the pool and is raised here, naming its file; a worker killed
        mid-seed (out of memory, a signal) is reported with a :class:`RunWarning` and its seed computed here.
        Workers ignore SIGINT (a Ctrl-C reaches the whole process group; the parent stops them), print no
        traceback, and die with the parent."""
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
        parent, quiet = os.getpid(), is_quiet()
        if spawn:
            from ..launch import spawn_worker

            job = _CONTEXT.job(call, part)

            def make(conn: Any, gpu: str | None) -> Any:
                return ctx.Process(
                    target=spawn_worker, args=(job, gpu, conn, parent, not quiet), daemon=False
                )
        else:

            def make(conn: Any, gpu: str | None) -> Any:
                args = (self, conn, fn, part, required, parent, not quiet)
                return ctx.Process(target=_fork_worker_main, args=args, daemon=False)

        pool = _Pool(ctx, make, gpus, seeds, part, None if quiet else board())
        pool.run()
        pool.raise_or_warn()

    def _worker_gpus(self, n: int) -> list[str | None]:
        """The GPU each of ``n`` spawned workers is pinned to: the visible GPUs round-robin when the run's device
        is ``cuda``; none for ``cpu`` or one named GPU (``cuda:N``, shared by every worker)."""
        from .device import visible_gpus, worker_gpus

        return worker_gpus(n, visible_gpus()) if self.device == "cuda" else [None] * n


class _ConnForward:
    """A seed worker's progress channel to the parent (what :func:`iclr25.common.progress.set_forward` takes):
    ``put`` sends the message down the worker's own pipe; nothing is shared between workers, so a worker killed
    mid-message cannot block another."""

    def __init__(self, conn: Any):
        self.conn = conn

    def put(self, msg: Any) -> None:
        self.conn.send(msg)


def _worker_signals() -> None:
    """In a seed worker: ignore SIGINT (a Ctrl-C reaches every process of the group; the parent stops its
    workers and says so once), die silently on SIGTERM, then let the signals in that the parent blocked while
    starting it."""
    import signal

    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    except (ValueError, OSError):  # not the main thread: leave them
        pass
    _INTERRUPTS.clear()
    try:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
    except (AttributeError, OSError, ValueError):
        pass


def _serve(conn: Any, part: str, compute: Callable[[int], None]) -> list[int]:
    """A seed worker's loop: take a seed from the parent (``None``: stop), ``compute`` it (which writes its file),
    send back ``("ok", s)``, ``("fail", s, reason)`` or — for an ``OSError``, after which the worker stops —
    ``("oserror", s, errno, strerror, filename)``. Never raises, never prints a traceback. Returns the seeds
    written."""
    from .progress import set_task, task_done

    done: list[int] = []
    while True:
        try:
            s = conn.recv()
        except (EOFError, OSError):
            return done
        if s is None:
            return done
        key = f"{part} {s}" if part else f"seed {s}"
        set_task(key)
        try:
            compute(s)
        except OSError as e:
            task_done(key, "failed")
            _send(conn, ("oserror", s, e.errno, e.strerror or str(e), e.filename))
            return done
        except BaseException as e:  # noqa: BLE001 — the parent recomputes this seed and raises with the reason
            task_done(key, "failed (recomputed by the parent)")
            _send(conn, ("fail", s, f"{type(e).__name__}: {_short(str(e))}"))
            continue
        done.append(s)
        task_done(key)
        _send(conn, ("ok", s))


def _send(conn: Any, msg: Any) -> None:
    try:
        conn.send(msg)
    except (OSError, ValueError):
        pass


def _fork_worker_main(
    rd: RunDir, conn: Any, fn: Callable, part: str, required: Sequence[str], parent: int, forward: bool
) -> None:
    """A forked seed worker (``fn`` is inherited, never pickled); ``forward``: send its progress to the parent."""
    from .progress import set_forward, set_quiet

    _worker_signals()
    _die_with_parent(parent)
    set_quiet(True)
    set_forward(_ConnForward(conn) if forward else None)
    _serve(conn, part, lambda s: rd._compute_and_save(fn, s, part, required))
    conn.close()


@dataclass
class _PoolWorker:
    proc: Any
    conn: Any
    seed: int | None = None  # the seed it is computing
    dead: bool = False
    eof: bool = False
    broken: str = ""  # why a spawned worker could not start computing


class _Pool:
    """The parent's side of a pool of seed workers: start them, hand out seeds one at a time as each worker
    finishes one, draw their progress, notice a worker that died, stop them all on an error or an interrupt."""

    def __init__(self, ctx: Any, make: Callable, gpus: list, seeds: list[int], part: str, board: Any):
        self.ctx, self.make, self.gpus, self.part, self.board = ctx, make, gpus, part, board
        self.pending = list(seeds)
        self.workers: list[_PoolWorker] = []
        self.os_error: tuple | None = None
        self.lost: list[tuple[int, str]] = []  # (seed, what happened to its worker)

    def _what(self, s: int) -> str:
        return f"{self.part} {s}" if self.part else f"seed {s}"

    def _give(self, w: _PoolWorker) -> None:
        s = self.pending.pop(0) if self.pending and self.os_error is None else None
        w.seed = s
        try:
            w.conn.send(s)
        except (OSError, ValueError):  # it died: noticed through its sentinel
            if s is not None:
                self.pending.insert(0, s)
                w.seed = None

    def _start(self) -> None:
        import signal

        for gpu in self.gpus:
            parent_end, child_end = self.ctx.Pipe()
            old = _block_stop_signals()  # the worker starts with them blocked and then ignores SIGINT
            try:
                p = self.make(child_end, gpu)
                p.start()
            finally:
                if old is not None:
                    signal.pthread_sigmask(signal.SIG_SETMASK, old)
            child_end.close()
            w = _PoolWorker(p, parent_end)
            self.workers.append(w)
            self._give(w)

    def _receive(self, w: _PoolWorker) -> None:
        """Handle every message waiting from ``w``."""
        while not w.eof:
            try:
                if not w.conn.poll():
                    return
                msg = w.conn.recv()
            except (EOFError, OSError):
                w.eof = True  # it closed its end (it is exiting): wait for its sentinel only
                return
            kind = msg[0]
            if kind in ("update", "done"):
                if self.board is not None:
                    _draw_message(self.board, msg)
            elif kind == "ok" or kind == "fail":  # a failed seed stays missing: the parent recomputes it
                self._give(w)
            elif kind == "oserror":
                if self.os_error is None:
                    self.os_error = msg[1:]
                w.seed = None
            elif kind == "broken":  # a spawned worker whose replay of run() failed before its seeds
                w.broken = msg[1]

    def run(self) -> None:
        from multiprocessing.connection import wait

        try:
            self._start()
            while True:
                live = [w for w in self.workers if not w.dead]
                if not live or self.os_error is not None:
                    break
                check_interrupt()
                waits = [w.conn for w in live if not w.eof] + [w.proc.sentinel for w in live]
                ready = set(wait(waits, timeout=1.0))
                for w in live:
                    if w.conn in ready:
                        self._receive(w)
                    if w.proc.sentinel in ready:
                        w.proc.join()
                        self._receive(w)  # its last messages, sent before it exited
                        w.dead = True
                        if w.seed is not None:
                            why = f"failed to start ({w.broken})" if w.broken else _exit_text(w.proc)
                            self.lost.append((w.seed, why))
                            w.seed = None
        finally:  # an error, Ctrl-C or SIGTERM here: no worker keeps writing after we are gone
            for w in self.workers:
                if w.proc.is_alive():
                    w.proc.kill()
                w.proc.join()
                w.conn.close()
            if self.board is not None:
                close = getattr(self.board, "close", None)
                if close is not None:
                    close()
        check_interrupt()

    def raise_or_warn(self) -> None:
        if self.os_error is not None:
            s, errno_, strerror, filename = self.os_error
            if errno_ is None:
                raise OSError(f"{self._what(s)}: {strerror}")
            raise OSError(errno_, strerror, filename)
        for s, what in self.lost:
            warnings.warn(
                f"{self._what(s)}: its worker {what}; recomputing it here", RunWarning, stacklevel=4
            )


def _exit_text(proc: Any) -> str:
    import signal

    code = proc.exitcode
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        oom = " (out of memory?)" if -code == signal.SIGKILL else ""
        return f"(pid {proc.pid}) was killed by {name}{oom}"
    return f"(pid {proc.pid}) exited with status {code} before finishing it"


class SeedsComputed(BaseException):
    """Raised in a seed worker's replay of ``run`` once its seeds are written: the rest of ``run`` (claims,
    figures) is the parent's. A ``BaseException`` so that an experiment's ``except Exception`` lets it pass."""

    def __init__(self, seeds: list[int]):
        super().__init__(f"seeds {seeds} computed")
        self.seeds = list(seeds)


@dataclass
class _Worker:
    """What a seed worker computes: at the ``call``-th ``map_seeds`` of its replay, the seeds ``todo()`` yields
    (a cluster job) or the parent sends down ``conn`` (a local spawned worker); ``reraise``: a failing seed fails
    the worker (a cluster job) instead of being left to the parent."""

    call: int
    todo: Callable[[], Iterable[int]] | None = None
    reraise: bool = False
    done: list[int] = field(default_factory=list)
    conn: Any = None  # a local spawned worker: its pipe to the parent (seeds in, outcomes and progress out)


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


def _draw_message(b: Any, msg: Any) -> None:
    """Draw one forwarded progress message (``("update", key, desc, n, total)`` or ``("done", key, note)``)."""
    try:
        if msg[0] == "update":
            b.update(*msg[1:])
        elif msg[0] == "done":
            b.finish(*msg[1:])
    except Exception:  # drawing must never break a run
        pass


def _draw_forwarded(q: Any, b: Any) -> None:
    """Draw the progress messages read from queue ``q`` until ``None``, then close the board."""
    while True:
        try:
            msg = q.get()
        except (EOFError, OSError):
            return
        if msg is None:
            break
        _draw_message(b, msg)
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


# -- interrupts ---------------------------------------------------------------------------------------------

_INTERRUPTS: list[int] = []  # SIGINT/SIGTERM received under interrupt_handlers (in order)


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM under :func:`interrupt_handlers`: the run stops; finished seeds are kept."""

    def __init__(self, signum: int):
        import signal

        self.signum = int(signum)
        try:
            name = signal.Signals(self.signum).name
        except ValueError:
            name = f"signal {self.signum}"
        super().__init__(name)
        self.name = name


def _stop_signals() -> set:
    import signal

    return {signal.SIGINT, signal.SIGTERM}


_STOP_SIGNALS = _stop_signals()


def _on_stop_signal(signum: int, frame: Any) -> None:
    _INTERRUPTS.append(signum)
    raise Interrupted(signum)


@contextlib.contextmanager
def interrupt_handlers():
    """SIGINT and SIGTERM raise :class:`Interrupted` (a ``KeyboardInterrupt``) and are remembered, so one that a
    library swallows (an exception raised inside a ``__del__`` or a callback is only printed) still stops the
    run at the next :func:`check_interrupt` — before seeds are handed out, before the run's documents are
    written. The CLI installs them around a command; outside the main thread this does nothing."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.getsignal(sig) for sig in _STOP_SIGNALS}
    _INTERRUPTS.clear()
    for sig in _STOP_SIGNALS:
        signal.signal(sig, _on_stop_signal)
    try:
        yield
    finally:
        for sig, h in old.items():
            if h is not None:
                signal.signal(sig, h)
        _INTERRUPTS.clear()


def check_interrupt() -> None:
    """Raise :class:`Interrupted` if a SIGINT/SIGTERM arrived under :func:`interrupt_handlers` (and was
    swallowed somewhere): an interrupted run never goes on to write its documents or exit 0."""
    if _INTERRUPTS:
        raise Interrupted(_INTERRUPTS[0])


@contextlib.contextmanager
def deferred_interrupts():
    """Hold SIGINT/SIGTERM back for the few milliseconds of a critical section (renaming a run's documents into
    place), then deliver them to whatever handler was installed. Main thread only; elsewhere a no-op."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    old = {sig: signal.getsignal(sig) for sig in _STOP_SIGNALS}
    old = {sig: h for sig, h in old.items() if h is not None}
    for sig in old:
        signal.signal(sig, lambda signum, frame: pending.append(signum))
    try:
        yield
    finally:
        for sig, h in old.items():
            signal.signal(sig, h)
        for sig in dict.fromkeys(pending):
            signal.raise_signal(sig)


def _block_stop_signals() -> Any:
    """Block SIGINT/SIGTERM in this thread (while a worker is forked or spawned); returns the old mask."""
    import signal

    try:
        return signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    except (AttributeError, OSError, ValueError):
        return None


# -- one writer per run folder ---------------------------------------------------------------------------------

LOCK_NAME = ".lock"  # in a system's run folder while a run (or a write_run) holds it


class RunFolderBusy(OSError):
    """Another process (or thread) holds the run folder's lock: one line naming the holder."""


@dataclass
class _Held:
    fd: int
    path: str
    thread: int
    count: int = 1


_HELD: dict[str, _Held] = {}
_HELD_GUARD = threading.Lock()


def _holder(lock_file: Path) -> str:
    """Who holds ``lock_file``, from what it wrote there: ``host H, pid P, started T``."""
    from .io import read_bytes_limited

    try:
        info = json.loads(read_bytes_limited(lock_file, 1 << 16).decode("utf-8"))
        parts = [f"host {info['host']}", f"pid {info['pid']}", f"started {info['started']}"]
        if info.get("command"):
            parts.append(f"command: {_short(info['command'])}")
        return ", ".join(parts)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "a process that has not written its name yet"


def _lock_info() -> bytes:
    import datetime
    import sys

    from .io import writer_identity

    ident = writer_identity()
    return json.dumps(
        {
            "host": ident["host"],
            "pid": os.getpid(),
            "boot_id": ident["boot_id"],
            "pidns": ident["pidns"],
            "started": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(sys.argv)[:300],
        }
    ).encode()


def _try_lock(lock_file: Path) -> int | None:
    """An fd holding an exclusive lock on ``lock_file`` (created if needed), or ``None`` when another process
    holds it. The lock is POSIX (``fcntl.lockf``): released when this process exits however it exits, not
    inherited by forked workers, and honoured across nodes by NFS."""
    import errno
    import fcntl

    while True:
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EACCES, errno.EAGAIN):
                return None
            raise
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock_file))
        except FileNotFoundError:
            same = False
        if same:  # not a file its last holder unlinked as we opened it
            return fd
        os.close(fd)


def _acquire(folder: Path, wait: float) -> None:
    import errno

    key = os.path.realpath(folder)
    lock_file = Path(key) / LOCK_NAME
    me = threading.get_ident()
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        with _HELD_GUARD:
            held = _HELD.get(key)
            if held is not None and held.thread == me:
                held.count += 1
                return
            if held is None:
                try:
                    fd = _try_lock(lock_file)
                except OSError as e:
                    if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                        raise
                    warnings.warn(
                        f"cannot lock run folder {folder} ({e.strerror or e}: the filesystem does not support "
                        "locks); make sure no other run writes there at the same time",
                        RunWarning,
                        stacklevel=4,
                    )
                    fd = -1
                if fd is not None:
                    if fd >= 0:
                        os.ftruncate(fd, 0)
                        os.pwrite(fd, _lock_info(), 0)
                    _HELD[key] = _Held(fd, str(lock_file), me)
                    return
                who = _holder(lock_file)
            else:
                who = f"another thread of this process (pid {os.getpid()})"
        if time.monotonic() >= deadline:
            raise RunFolderBusy(
                f"run folder {folder} is in use by another iclr25 run ({who}); wait for it to finish, or "
                "write to another --out"
            )
        time.sleep(0.05)


def _release(folder: Path) -> None:
    key = os.path.realpath(folder)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is None:
            return
        held.count -= 1
        if held.count > 0:
            return
        del _HELD[key]
        if held.fd >= 0:
            try:  # unlinked while still held, so a waiter that opened it retries on a fresh file
                if os.path.samestat(os.fstat(held.fd), os.stat(held.path)):
                    os.unlink(held.path)
            except OSError:
                pass
            os.close(held.fd)  # releases the lock


@contextlib.contextmanager
def lock_run_folder(folder: str | os.PathLike, wait: float = 0.0):
    """Hold ``folder``'s run lock (``<folder>/.lock``) for the block: one writer per run folder.

    Re-entrant within a thread (the run path holds it around ``exp.run`` and :func:`write_run` takes it again);
    another process — on this machine or, through NFS, on another node — or another thread waits up to ``wait``
    seconds, then gets :class:`RunFolderBusy`, whose message names the holder (host, pid, start time, command).
    Seed workers and cluster jobs do not take it: they write seed files into a folder their parent holds. The
    lock is POSIX (``fcntl.lockf``): it goes with the process however the process ends, and is dropped if the
    process itself opens and closes ``.lock`` (nothing in iclr25 does; an experiment must not copy its own run
    folder while it runs)."""
    folder = Path(folder)
    _acquire(folder, wait)
    try:
        yield
    finally:
        _release(folder)


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
    never sees a ``claims.json`` beside artefacts of another run. The folder's run lock (:func:`lock_run_folder`,
    waited for up to :data:`WRITE_LOCK_WAIT_S`) makes two writers take turns, and SIGINT/SIGTERM wait for the
    renames (milliseconds). config.json, timings.json and claims.json's
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
    with lock_run_folder(out, wait=WRITE_LOCK_WAIT_S):  # one writer: never a set mixed from two writers
        stage = Path(tempfile.mkdtemp(prefix=tmp_prefix("write"), suffix=TMP_SUFFIX, dir=out))
        try:
            for name in ARTEFACTS:
                try:
                    with open(stage / name, "w", encoding="utf-8") as f:
                        f.write(texts[name])
                        f.flush()
                        os.fsync(f.fileno())
                except OSError as e:  # a full disk fails in write(), which names no file
                    if e.filename is None and e.errno is not None:
                        raise OSError(e.errno, e.strerror, str(out / name)) from e
                    raise
                os.chmod(stage / name, 0o644)
            marker = out / "claims.json"
            if marker.is_dir() and not marker.is_symlink():
                raise IsADirectoryError(f"{marker} is a folder; remove it to write this run")
            check_interrupt()  # an interrupted run writes nothing
            with deferred_interrupts():  # the renames are one unit: a Ctrl-C waits for them (milliseconds)
                marker.unlink(missing_ok=True)
                for name in ARTEFACTS:
                    os.replace(stage / name, out / name)
                _fsync_dir(out)
        finally:
            shutil.rmtree(stage, ignore_errors=True)
    return json.loads(texts["claims.json"])


WRITE_LOCK_WAIT_S = 60.0  # write_run waits this long for another writer of the same folder


def read_run_documents(folder: str | os.PathLike, attempts: int = 20) -> dict[str, Any]:
    """``{"claims.json": ..., "config.json": ..., "timings.json": ...}`` of one finished run in ``folder``, read
    so that all three belong to the same run: their ``run_id`` must agree (claims.json's is in its provenance).
    A reader that raced a writer reads again (up to ``attempts`` times); documents that never agree raise
    ``ValueError`` naming the run ids. ``FileNotFoundError`` when the folder holds no finished run."""
    from .io import read_json

    folder = Path(folder)
    seen: dict[str, Any] = {}
    for _ in range(max(1, attempts)):
        docs = {n: read_json(folder / n) for n in ("claims.json", "config.json", "timings.json")}
        ids = {
            "claims.json": (docs["claims.json"].get("provenance") or {}).get("run_id"),
            "config.json": docs["config.json"].get("run_id"),
            "timings.json": docs["timings.json"].get("run_id"),
        }
        if len(set(ids.values())) == 1 and None not in ids.values():
            return docs
        seen = ids
        time.sleep(0.05)
    raise ValueError(
        f"the documents in {folder} belong to different runs (run ids {seen}); rerun to rewrite them"
    )


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
