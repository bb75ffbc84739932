"""Progress a person can watch: tqdm bars on a terminal, plain lines at a bounded rate in a log, and seed workers'
progress forwarded to the parent as one live line per seed. Silent under ``--quiet`` and in tests
(``ICLR25_QUIET=1``).

* On a terminal (stderr is a TTY) a loop shows a tqdm bar, as before.
* In a log (stderr is not a TTY: a file, a pipe, a Slurm job's output) a loop writes plain lines — no ``\\r``, no
  cursor codes — at most one every :data:`LOG_INTERVAL_S` seconds (``ICLR25_PROGRESS_INTERVAL``), each with the
  count, the elapsed time and an ETA (:class:`PlainProgress`).
* A seed worker (``--jobs N``) sends its loops' progress to the parent, which draws one line per running seed:
  tqdm bars at fixed positions on a terminal, :class:`PlainProgress` lines (bounded per seed) in a log.
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")
_QUIET = os.environ.get("ICLR25_QUIET", "") not in ("", "0")


def _interval_from_env() -> float:
    raw = os.environ.get("ICLR25_PROGRESS_INTERVAL", "")
    try:
        v = float(raw) if raw.strip() else 30.0
    except ValueError:
        return 30.0
    return v if math.isfinite(v) and v >= 0 else 30.0


LOG_INTERVAL_S = _interval_from_env()  # a log gets at most one progress line per task this often
FORWARD_INTERVAL_S = 0.5  # a worker sends at most this often per loop (and at a loop's first and last item)

_FORWARD: Any = None  # in a seed worker: the queue to the parent
_TASK = ""  # in a seed worker: the task being computed ("seed 3")


def set_quiet(quiet: bool) -> None:
    global _QUIET
    _QUIET = bool(quiet)


def is_quiet() -> bool:
    return _QUIET


def fmt_duration(seconds: float | None) -> str:
    """``m:ss`` or ``h:mm:ss`` (``?`` for an unknown or non-finite duration)."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "?"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


def eta_seconds(n: int, total: int | None, elapsed: float) -> float | None:
    """Remaining time at the rate so far: ``elapsed · (total − n) / n`` (``None`` before the first item or
    without a total)."""
    if not total or n <= 0:
        return None
    return max(0.0, elapsed * (total - n) / n)


def progress_line(key: str, desc: str, n: int, total: int | None, elapsed: float) -> str:
    """One plain progress line: ``[seed 3] train 120/500 (24%) · 0:42 elapsed · ETA 2:13``."""
    head = f"[{key}] " if key else ""
    count = f"{n}/{total} ({100 * n // total}%)" if total else f"{n}"
    what = f"{desc} {count}" if desc else count
    return (
        f"{head}{what} · {fmt_duration(elapsed)} elapsed · ETA {fmt_duration(eta_seconds(n, total, elapsed))}"
    )


class PlainProgress:
    """Progress as plain lines for a log: per task ``key``, a line at its first update, then at most one every
    ``interval`` seconds, and one when it is finished — so a task that runs ``T`` seconds writes at most
    ``2 + T / interval`` lines, whatever its loops do. ``clock`` is injectable (tests use a fake one)."""

    def __init__(
        self,
        write: Callable[[str], Any],
        interval: float = LOG_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ):
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not interval >= 0:
            raise ValueError(f"interval must be a number of seconds >= 0, got {interval!r}")
        self.write, self.interval, self.clock = write, float(interval), clock
        self._last: dict[str, float] = {}  # key -> when its last line was written
        self._loop: dict[str, tuple[str, float, int]] = {}  # key -> (desc, start of this loop, last n)
        self._begun: dict[str, float] = {}  # key -> first update

    def update(self, key: str, desc: str, n: int, total: int | None) -> bool:
        """Record progress ``n``/``total`` of loop ``desc`` in task ``key``; write a line if the rate allows.
        Returns whether a line was written."""
        now = self.clock()
        self._begun.setdefault(key, now)
        loop = self._loop.get(key)
        if loop is None or loop[0] != desc or n < loop[2]:  # a new loop (or the same one restarted)
            loop = (desc, now, n)
        self._loop[key] = (loop[0], loop[1], n)
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            return False
        self._last[key] = now
        self.write(progress_line(key, desc, n, total, now - loop[1]))
        return True

    def finish(self, key: str, note: str = "done") -> None:
        """The task ``key`` is over: one closing line with its total time."""
        now = self.clock()
        start = self._begun.pop(key, None)
        self._loop.pop(key, None)
        self._last.pop(key, None)
        took = "" if start is None else f" in {fmt_duration(now - start)}"
        head = f"[{key}] " if key else ""
        self.write(f"{head}{note}{took}")


class TtyProgress:
    """One live tqdm bar per running task at a fixed position (elapsed time and ETA are tqdm's own)."""

    def __init__(self, file: Any = None):
        self.file = file if file is not None else sys.stderr
        self._bars: dict[str, tuple[Any, str, int | None]] = {}
        self._slots: dict[str, int] = {}

    def _slot(self, key: str) -> int:
        if key not in self._slots:
            used = set(self._slots.values())
            self._slots[key] = next(i for i in range(len(used) + 1) if i not in used)
        return self._slots[key]

    def update(self, key: str, desc: str, n: int, total: int | None) -> bool:
        bar = self._bars.get(key)
        if bar is None or bar[1] != desc or bar[2] != total:
            if bar is not None:
                bar[0].close()
            t = tqdm(
                total=total,
                desc=f"{key} {desc}".strip(),
                position=self._slot(key),
                leave=False,
                dynamic_ncols=True,
                file=self.file,
            )
            bar = (t, desc, total)
            self._bars[key] = bar
        bar[0].n = n
        bar[0].refresh()
        return True

    def finish(self, key: str, note: str = "done") -> None:
        bar = self._bars.pop(key, None)
        self._slots.pop(key, None)
        if bar is not None:
            bar[0].close()

    def close(self) -> None:
        for key in list(self._bars):
            self.finish(key)


def _stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def board(tty: bool | None = None) -> PlainProgress | TtyProgress:
    """Where the parent draws its workers' progress: bars on a terminal, plain lines in a log."""
    if tty if tty is not None else _stderr_is_tty():
        return TtyProgress()
    return PlainProgress(lambda s: tqdm.write(s, file=sys.stderr))


# -- seed workers ------------------------------------------------------------------------------------------


def set_forward(queue: Any) -> None:
    """In a seed worker: send progress to the parent through ``queue`` (``None``: draw nothing)."""
    global _FORWARD
    _FORWARD = queue


def set_task(key: str) -> None:
    """In a seed worker: the task its progress belongs to (``"seed 3"``)."""
    global _TASK
    _TASK = key


def task_done(key: str, note: str = "done") -> None:
    """In a seed worker: tell the parent that ``key`` finished."""
    if _FORWARD is not None:
        try:
            _FORWARD.put(("done", key, note))
        except (OSError, ValueError, AssertionError):
            pass


def _forwarded(it: Iterable[T], desc: str, total: int | None) -> Iterator[T]:
    q, key = _FORWARD, _TASK
    if total is None:
        try:
            total = len(it)  # type: ignore[arg-type]
        except TypeError:
            total = None
    last = -math.inf
    n = 0

    def send() -> None:
        try:
            q.put(("update", key, desc, n, total))
        except (OSError, ValueError, AssertionError):
            pass

    for x in it:
        now = time.monotonic()
        if now - last >= FORWARD_INTERVAL_S:
            send()
            last = now
        yield x
        n += 1
    send()


_LOG_BOARD: PlainProgress | None = None


def _logged(it: Iterable[T], desc: str, total: int | None) -> Iterator[T]:
    global _LOG_BOARD
    if _LOG_BOARD is None:
        _LOG_BOARD = PlainProgress(lambda s: tqdm.write(s, file=sys.stderr))
    b = _LOG_BOARD
    if total is None:
        try:
            total = len(it)  # type: ignore[arg-type]
        except TypeError:
            total = None
    n = 0
    for x in it:
        b.update("", desc, n, total)
        yield x
        n += 1


def progress(it: Iterable[T], desc: str = "", total: int | None = None, **kw) -> Iterable[T]:
    """``tqdm(it)`` on a terminal; plain, rate-bounded lines in a log; forwarded to the parent in a seed
    worker; nothing when quiet."""
    if _FORWARD is not None:
        return _forwarded(it, desc, total)
    if not _QUIET and not _stderr_is_tty():
        return _logged(it, desc, total)
    return tqdm(it, desc=desc, total=total, disable=_QUIET, leave=False, dynamic_ncols=True, **kw)


def log(msg: str) -> None:
    """A one-line status message, silent when quiet."""
    if not _QUIET:
        tqdm.write(msg)
