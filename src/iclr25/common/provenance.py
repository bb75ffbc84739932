"""Where a result comes from: commit, date, machine, load — stored in every claims.json (``provenance``)."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

_COMMIT: str | None = None


def git_commit() -> str:
    """The commit of the checkout this package runs from (``+dirty`` when tracked files under ``src`` differ),
    or ``"unknown"`` (an installed wheel, no git, or git too slow)."""
    global _COMMIT
    if _COMMIT is not None:
        return _COMMIT
    _COMMIT = "unknown"
    here = Path(__file__).resolve()
    root = next((p for p in here.parents if (p / ".git").exists()), None)
    if root is None:
        return _COMMIT
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, env=env
        )
        if head.returncode != 0:
            return _COMMIT
        commit = head.stdout.strip()
        diff = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", "HEAD", "--", "src"],
            capture_output=True,
            timeout=20,
            env=env,
        )
        _COMMIT = commit + ("+dirty" if diff.returncode == 1 else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return _COMMIT


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (OSError, AttributeError):
        return None


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def collect(
    *,
    preset: str,
    wall_s: float,
    device: str,
    load_start: list[float] | None,
    cpu_s: float | None = None,
    **extra,
) -> dict[str, Any]:
    """The provenance block of a finished run (``load_avg`` = 1/5/15-minute load at the start and the end)."""
    import numpy
    import torch

    from .. import __version__

    prov = {
        "git_commit": git_commit(),
        "date_utc": utc_now(),
        "wall_s": round(float(wall_s), 3),
        "cpu_s": None if cpu_s is None else round(float(cpu_s), 3),
        "load_avg_start": load_start,
        "load_avg_end": load_average(),
        "cpu_count": os.cpu_count(),
        "preset": preset,
        "device": device,
        "iclr25": __version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "platform": f"{sys.platform}-{platform.machine()}",
    }
    prov.update(extra)
    return prov
