"""iclr25 — nineteen ICLR 2025 papers as reusable, tested software with honest reproductions.

Each system lives in ``iclr25.<slug>`` (its public API) with a reproduction in ``iclr25.<slug>.experiment``;
``iclr25.registry`` lists all of them, :func:`iclr25.run` runs one (``iclr25.harness.runs``), and the CLI
(``iclr25 list | run | config | report``) is a thin shell over that::

    import iclr25
    doc = iclr25.run("certainty_calibration", preset="quick", out="runs")   # the claims.json document
"""

from __future__ import annotations

from .errors import package_version

__version__ = package_version()  # from the installed distribution's metadata (pyproject.toml)
__all__ = ["run", "__version__"]


def run(slug, preset="quick", out="runs", *, seeds=None, seed=None, device=None, overrides=None) -> dict:
    """Run system ``slug``'s reproduction into ``out/<slug>`` and return its claims document
    (see :func:`iclr25.harness.runs.run`)."""
    from .harness.runs import run as _run

    return _run(slug, preset, out, seeds=seeds, seed=seed, device=device, overrides=overrides)
