"""iclr25 — nineteen ICLR 2025 papers as reusable, tested software with honest reproductions.

Each system lives in ``iclr25.<slug>`` (its public API) with a reproduction in ``iclr25.<slug>.experiment``;
``iclr25.registry`` lists all of them and ``iclr25.cli`` runs them (``iclr25 list | run | report``).
"""

__version__ = "0.1.0"
