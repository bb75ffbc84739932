"""Seed workers: the pool of local worker processes, what a worker computes, and the run context.

:meth:`iclr25.harness.rundir.RunDir.map_seeds` hands its missing seeds to a :class:`Pool` of forked (CPU) or
spawned (CUDA, :func:`iclr25.harness.launch.spawn_worker`) workers, each taking seed after seed from the parent
(:func:`serve`); a spawned worker or a cluster job replays ``run`` under :func:`run_context` with the
:class:`Worker` it is, and stops with :class:`SeedsComputed`. :func:`set_jobs` / :func:`set_start_method` are
the CLI's ``--jobs`` and ``ICLR25_START_METHOD``.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ..common.results import short_repr
from ..errors import RunWarning
from .interrupts import block_stop_signals, check_interrupt


class ConnForward:
    """A seed worker's progress channel to the parent (what :func:`iclr25.common.progress.set_forward` takes):
    ``put`` sends the message down the worker's own pipe; nothing is shared between workers, so a worker killed
    mid-message cannot block another."""

    def __init__(self, conn: Any):
        self.conn = conn

    def put(self, msg: Any) -> None:
        self.conn.send(msg)


def serve(conn: Any, part: str, compute: Callable[[int], None]) -> list[int]:
    """A seed worker's loop: take a seed from the parent (``None``: stop), ``compute`` it (which writes its file),
    send back ``("ok", s)``, ``("fail", s, reason)`` or — for an ``OSError``, after which the worker stops —
    ``("oserror", s, errno, strerror, filename)``. Never raises, never prints a traceback. Returns the seeds
    written."""
    from ..common.progress import set_task, task_done

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
            send(conn, ("oserror", s, e.errno, e.strerror or str(e), e.filename))
            return done
        except BaseException as e:  # noqa: BLE001 — the parent recomputes this seed and raises with the reason
            task_done(key, "failed (recomputed by the parent)")
            send(conn, ("fail", s, f"{type(e).__name__}: {short_repr(str(e))}"))
            continue
        done.append(s)
        task_done(key)
        send(conn, ("ok", s))


def send(conn: Any, msg: Any) -> None:
    try:
        conn.send(msg)
    except (OSError, ValueError):
        pass


@dataclass
class PoolWorker:
    proc: Any
    conn: Any
    seed: int | None = None  # the seed it is computing
    dead: bool = False
    eof: bool = False
    broken: str = ""  # why a spawned worker could not start computing


class Pool:
    """The parent's side of a pool of seed workers: start them, hand out seeds one at a time as each worker
    finishes one, draw their progress, notice a worker that died, stop them all on an error or an interrupt."""

    def __init__(self, ctx: Any, make: Callable, gpus: list, seeds: list[int], part: str, board: Any):
        self.ctx, self.make, self.gpus, self.part, self.board = ctx, make, gpus, part, board
        self.pending = list(seeds)
        self.workers: list[PoolWorker] = []
        self.os_error: tuple | None = None
        self.lost: list[tuple[int, str]] = []  # (seed, what happened to its worker)

    def _what(self, s: int) -> str:
        return f"{self.part} {s}" if self.part else f"seed {s}"

    def _give(self, w: PoolWorker) -> None:
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
            old = block_stop_signals()  # the worker starts with them blocked and then ignores SIGINT
            try:
                p = self.make(child_end, gpu)
                p.start()
            finally:
                if old is not None:
                    signal.pthread_sigmask(signal.SIG_SETMASK, old)
            child_end.close()
            w = PoolWorker(p, parent_end)
            self.workers.append(w)
            self._give(w)

    def _receive(self, w: PoolWorker) -> None:
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
                    draw_message(self.board, msg)
            elif kind == "ok":
                self._give(w)
            elif kind == "fail":  # it stays missing and the parent recomputes it: say why now, not after
                warnings.warn(  # every other seed has finished (the recomputation shows the traceback)
                    f"{self._what(msg[1])}: failed in its worker ({msg[2]}); the other seeds go on, then it is "
                    "recomputed here to show the traceback",
                    RunWarning,
                    stacklevel=2,
                )
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
                            why = f"failed to start ({w.broken})" if w.broken else exit_text(w.proc)
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


def exit_text(proc: Any) -> str:
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
class Worker:
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
    part)`` → a picklable :class:`iclr25.harness.launch.SeedJob`), and the launcher (``None``: local workers)."""

    job: Callable[[int, str], Any]
    launcher: Any = None
    calls: int = 0


_CONTEXT: RunContext | None = None
_WORKER: Worker | None = None
_CALLS_NO_CONTEXT = [0]


def next_call() -> int:
    """The index of this ``map_seeds`` call within the current run (a worker's replay counts the same way)."""
    if _CONTEXT is not None:
        _CONTEXT.calls += 1
        return _CONTEXT.calls - 1
    _CALLS_NO_CONTEXT[0] += 1
    return _CALLS_NO_CONTEXT[0] - 1


def current_context() -> RunContext | None:
    """The :class:`RunContext` of the run in progress (``None`` outside the run path)."""
    return _CONTEXT


def current_worker() -> Worker | None:
    """What this process computes when it is a seed worker replaying a run (``None`` in the parent)."""
    return _WORKER


@contextlib.contextmanager
def run_context(ctx: RunContext | None, worker: Worker | None = None):
    """Install ``ctx`` (and, in a seed worker, what it computes) for the duration of one ``exp.run``."""
    global _CONTEXT, _WORKER
    old = _CONTEXT, _WORKER
    _CONTEXT, _WORKER = ctx, worker
    try:
        yield ctx
    finally:
        _CONTEXT, _WORKER = old


def draw_message(b: Any, msg: Any) -> None:
    """Draw one forwarded progress message (``("update", key, desc, n, total)`` or ``("done", key, note)``)."""
    try:
        if msg[0] == "update":
            b.update(*msg[1:])
        elif msg[0] == "done":
            b.finish(*msg[1:])
    except Exception:  # drawing must never break a run
        pass


def draw_forwarded(q: Any, b: Any) -> None:
    """Draw the progress messages read from queue ``q`` until ``None``, then close the board."""
    while True:
        try:
            msg = q.get()
        except (EOFError, OSError):
            return
        if msg is None:
            break
        draw_message(b, msg)
    close = getattr(b, "close", None)
    if close is not None:
        close()


def die_with_parent(parent: int) -> None:
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


def jobs_setting() -> int | str:
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
