"""Where streamscale's own lines go: rich consoles that wrap only on a terminal.

Rich wraps at 80 columns when its output is not a terminal (a log file, CI, ``| tee``), which
broke paths and figures mid-line; there a line is written whole and the reader's viewer wraps it.
"""

from __future__ import annotations

import sys

from rich.console import Console


def console(stderr: bool = False) -> Console:
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    # no width of its own: each line whole (soft_wrap), tables as wide as their cells
    return Console(stderr=stderr, soft_wrap=True, width=100_000)
