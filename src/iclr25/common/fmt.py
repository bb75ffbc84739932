"""One way to print a number, a mean ± std and a threshold — used by the CLI, report.md and the HTML report.

NaN prints as ``NaN`` (a value that could not be measured, e.g. a ratio against a zero baseline), ±inf as
``∞``/``−∞``; nothing is ever floored or hidden.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .io import as_float

DIGITS = 4  # significant digits of every number in the scoreboards


def fmt_num(x: Any, digits: int = DIGITS) -> str:
    """``x`` with ``digits`` significant digits; ``None`` → ``—``, NaN → ``NaN``, ±inf → ``∞``/``−∞``."""
    if x is None:
        return "—"
    try:
        f = as_float(x)
    except ValueError:
        return str(x)
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "∞" if f > 0 else "−∞"
    s = f"{f:.{digits}g}"
    return "0" if s == "-0" else s


def fmt_stat(mean: Any, std: Any, digits: int = DIGITS) -> str:
    """``"mean ± std"`` (std with 2 significant digits) or ``NaN`` when the mean is undefined."""
    m = fmt_num(mean, digits)
    if m in ("NaN", "—"):
        return m
    return f"{m} ± {fmt_num(std, 2)}"


def fmt_fixed(values: Sequence[float], digits: int = 3) -> str:
    """``"mean ± std"`` with ``digits`` decimals of per-seed values (report tables inside experiments).

    NaN seeds are not dropped: the mean is then ``NaN`` and the count of undefined seeds is stated.
    """
    import numpy as np

    a = np.asarray([as_float(v) for v in values], dtype=float)
    if a.size == 0:
        return "—"
    bad = int(np.isnan(a).sum())
    if bad:
        return f"NaN ({bad}/{a.size} seeds undefined)"
    return f"{a.mean():.{digits}f} ± {a.std():.{digits}f}"


def fmt_seconds(x: Any) -> str:
    """Wall time: ``12.3 s``, ``4.5 min``, or ``—`` when unknown."""
    try:
        f = as_float(x)
    except ValueError:
        return "—"
    if not math.isfinite(f):
        return "—"
    return f"{f:.1f} s" if f < 120 else f"{f / 60:.1f} min"


def md_cell(text: Any) -> str:
    """Text safe inside one Markdown table cell: ``|`` escaped, newlines folded into spaces."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\r", " ").replace("\n", " ")
