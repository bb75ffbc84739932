"""One writer per run folder: the run lock (``<folder>/.lock``, POSIX ``fcntl.lockf``).

The run path holds :func:`lock_run_folder` for the whole run (a second run into the folder stops in one line
naming the holder) and :func:`iclr25.harness.artefacts.write_run` takes it again, so a run's documents are one
set.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from ..common.results import short_repr
from ..errors import RunWarning

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
    from ..common.io import read_bytes_limited

    try:
        info = json.loads(read_bytes_limited(lock_file, 1 << 16).decode("utf-8"))
        parts = [f"host {info['host']}", f"pid {info['pid']}", f"started {info['started']}"]
        if info.get("command"):
            parts.append(f"command: {short_repr(info['command'])}")
        return ", ".join(parts)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return "a process that has not written its name yet"


def _lock_info() -> bytes:
    import datetime
    import sys

    from ..common.io import writer_identity

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

    Re-entrant within a thread (the run path holds it around ``exp.run`` and
    :func:`iclr25.harness.artefacts.write_run` takes it again); another process — on this machine or, through
    NFS, on another node — or another thread waits up to ``wait`` seconds, then gets :class:`RunFolderBusy`, whose message names the holder (host, pid, start time, command).
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
