"""The caller's errors and the run engine's warning, in a module of their own so that the registry and the
modules of the run path (:mod:`iclr25.harness`) import them without importing each other."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad input from the caller (unknown system/preset/field, a value out of range): CLI exit status 2."""


class RunWarning(UserWarning):
    """Something in a run folder was wrong and was repaired (e.g. a damaged seed file was recomputed)."""


def package_version() -> str:
    """The installed distribution's version (``importlib.metadata``); ``0+unknown`` for a source tree that was
    never installed (``PYTHONPATH=src``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("iclr25")
    except PackageNotFoundError:
        return "0+unknown"
