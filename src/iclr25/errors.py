"""The caller's errors, in a module of their own so that the registry, the run path, the CLI and ``verify``
import them without importing each other."""

from __future__ import annotations


class UsageError(ValueError):
    """Bad input from the caller (unknown system/preset/field, a value out of range): CLI exit status 2."""


def package_version() -> str:
    """The installed distribution's version (``importlib.metadata``); ``0+unknown`` for a source tree that was
    never installed (``PYTHONPATH=src``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("iclr25")
    except PackageNotFoundError:
        return "0+unknown"
