"""Figures for run reports without pyplot: :func:`subplots` builds a :class:`matplotlib.figure.Figure` that
renders with the Agg canvas, so writing a report never switches the caller's matplotlib backend (a notebook
keeps its inline backend) and needs no ``plt.close``. Save it with :func:`iclr25.common.io.atomic_savefig`."""

from __future__ import annotations

from typing import Any

__all__ = ["subplots"]


def subplots(nrows: int = 1, ncols: int = 1, *, figsize: tuple[float, float] | None = None, **kwargs: Any):
    """``(figure, axes)`` like ``pyplot.subplots(nrows, ncols, figsize=..., **kwargs)`` (``squeeze``,
    ``sharex``, ``gridspec_kw``, …), on a standalone Agg figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, **kwargs)
