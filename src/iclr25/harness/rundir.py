"""Run folders that resume: :class:`RunDir` (per-seed result files, checked and recomputed when they cannot be
trusted) and :class:`RunResult`, what an experiment's ``run`` returns.

Inside ``run`` use :class:`RunDir` to compute per-seed results that survive an interruption: a restarted run
skips seeds already on disk. A seed file is ``{"config_hash", "seed", "result", "result_sha256"}``; the hash is
SHA-256 of the canonical JSON of ``result`` (:func:`iclr25.common.io.canonical_json`: sorted keys, NaN/±inf as
their tags), so a file whose numbers were damaged or edited is recomputed rather than believed. An experiment
declares the keys every seed result must hold as numbers — ``RunDir(out, cfg, required=("ours/acc",
"base/acc"))`` — and a result lacking one is refused (:meth:`RunDir.map_seeds`). The run path
(:mod:`iclr25.harness.runs`) then writes the run's documents (:func:`iclr25.harness.artefacts.write_run`).
"""

from __future__ import annotations

import json
import os
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..common.claims import Claim
from ..common.io import (
    MAX_JSON_BYTES,
    UnsafeFileError,
    atomic_write_json,
    clean_stale_tmp,
    from_jsonable,
    parse_json,
    read_bytes_limited,
    sha256_json,
    to_jsonable,
)
from ..common.progress import log, progress
from ..common.results import config_hash, is_number, short_repr
from ..errors import RunWarning
from .interrupts import check_interrupt, worker_signals
from .workers import (
    ConnForward,
    Pool,
    SeedsComputed,
    current_context,
    current_worker,
    die_with_parent,
    jobs_setting,
    next_call,
    serve,
    start_method,
)


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
            if not is_number(d):
                problems.append(
                    f"holds {type(d).__name__} {short_repr(d)} at required key {key!r}, not a number"
                )
    return problems


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
        from ..common.device import is_main_process

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

        Missing seeds are computed, each writing its result file, by (:func:`iclr25.harness.workers.set_jobs`, the
        CLI's ``--jobs`` and ``--launcher``):

        * ``jobs`` = 1: here, one after the other;
        * ``jobs`` > 1 on CPU: forked worker processes (``fn`` is inherited, never pickled);
        * ``jobs`` > 1 when CUDA is involved (the run's device is ``cuda``, or CUDA is initialised here):
          *spawned* workers, each pinned to its own GPU (``CUDA_VISIBLE_DEVICES``), that re-import the
          experiment, replay its ``run`` up to this call and compute their seeds (:mod:`iclr25.harness.launch`);
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
        call = next_call()
        worker, context = current_worker(), current_context()
        if worker is not None and call == worker.call:
            self._compute_as_worker(fn, part, req)  # raises SeedsComputed: the worker's replay ends here
        from ..common.device import dist_info

        if dist_info()[1] > 1:
            return self._map_distributed(fn, seeds, desc, part, req)
        missing = [s for s in seeds if self.load_seed(s, part, req) is None]
        if missing and worker is None:
            if context is not None and context.launcher is not None:
                context.launcher.compute(context.job(call, part), missing)
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
        jobs = jobs_setting()
        if jobs != "auto":
            return int(jobs)
        from ..common.device import auto_jobs

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
        w = current_worker()
        if w.conn is not None:  # a local spawned worker: seeds from the parent, each outcome sent back
            w.done.extend(serve(w.conn, part, lambda s: self._compute_and_save(fn, s, part, req)))
            raise SeedsComputed(w.done)
        from ..common.progress import set_task, task_done

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

        from ..common.device import cuda_in_use
        from ..common.progress import board, is_quiet

        spawn = (
            start_method() == "spawn"
            or cuda_in_use()
            or (isinstance(self.device, str) and self.device.startswith("cuda"))
        )
        context = current_context()
        if spawn and context is None:
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
            from .launch import spawn_worker

            job = context.job(call, part)

            def make(conn: Any, gpu: str | None) -> Any:
                return ctx.Process(
                    target=spawn_worker, args=(job, gpu, conn, parent, not quiet), daemon=False
                )
        else:

            def make(conn: Any, gpu: str | None) -> Any:
                args = (self, conn, fn, part, required, parent, not quiet)
                return ctx.Process(target=fork_worker_main, args=args, daemon=False)

        pool = Pool(ctx, make, gpus, seeds, part, None if quiet else board())
        pool.run()
        pool.raise_or_warn()

    def _worker_gpus(self, n: int) -> list[str | None]:
        """The GPU each of ``n`` spawned workers is pinned to: the visible GPUs round-robin when the run's device
        is ``cuda``; none for ``cpu`` or one named GPU (``cuda:N``, shared by every worker)."""
        from ..common.device import visible_gpus, worker_gpus

        return worker_gpus(n, visible_gpus()) if self.device == "cuda" else [None] * n


def fork_worker_main(
    rd: RunDir, conn: Any, fn: Callable, part: str, required: Sequence[str], parent: int, forward: bool
) -> None:
    """A forked seed worker (``fn`` is inherited, never pickled); ``forward``: send its progress to the parent."""
    from ..common.progress import set_forward, set_quiet

    worker_signals()
    die_with_parent(parent)
    set_quiet(True)
    set_forward(ConnForward(conn) if forward else None)
    serve(conn, part, lambda s: rd._compute_and_save(fn, s, part, required))
    conn.close()
