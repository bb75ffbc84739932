"""``iclr25 verify SLUG [--seeds K]``: re-run the first K seeds of a committed reference and compare.

(Placeholder committed by the lead so the CLI hook exists; the implementation replaces this file.)
"""

from __future__ import annotations

import argparse


def cmd_verify(args: argparse.Namespace) -> int:
    raise NotImplementedError("iclr25 verify is being implemented")
