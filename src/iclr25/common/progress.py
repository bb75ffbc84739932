"""Progress bars (tqdm) that fall silent under ``--quiet`` and in tests (``ICLR25_QUIET=1``)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")
_QUIET = os.environ.get("ICLR25_QUIET", "") not in ("", "0")


def set_quiet(quiet: bool) -> None:
    global _QUIET
    _QUIET = bool(quiet)


def is_quiet() -> bool:
    return _QUIET


def progress(it: Iterable[T], desc: str = "", total: int | None = None, **kw) -> Iterable[T]:
    """``tqdm(it)`` unless quiet."""
    return tqdm(it, desc=desc, total=total, disable=_QUIET, leave=False, dynamic_ncols=True, **kw)


def log(msg: str) -> None:
    """A one-line status message, silent when quiet."""
    if not _QUIET:
        tqdm.write(msg)
