"""SIGINT/SIGTERM under the run path: remembered, checked before anything is written, held back around renames.

Under the CLI, SIGINT/SIGTERM are remembered (:func:`interrupt_handlers`): an interrupted run never writes its
documents (:func:`check_interrupt`). Seed workers ignore SIGINT (:func:`worker_signals`); the parent blocks the
stop signals while it starts one (:func:`block_stop_signals`).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

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


STOP_SIGNALS = _stop_signals()


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
    old = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    _INTERRUPTS.clear()
    for sig in STOP_SIGNALS:
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
    old = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
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


def block_stop_signals() -> Any:
    """Block SIGINT/SIGTERM in this thread (while a worker is forked or spawned); returns the old mask."""
    import signal

    try:
        return signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    except (AttributeError, OSError, ValueError):
        return None


def worker_signals() -> None:
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
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    except (AttributeError, OSError, ValueError):
        pass
