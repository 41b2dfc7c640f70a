"""CPU time of a process or one of its threads, from Linux's /proc."""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int, tid: int | str | None = None) -> float:
    """User + system CPU seconds of process ``pid`` so far, or of its thread ``tid``
    (``OSError`` once it has ended)."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    # the command name, in parentheses, may hold spaces: the fields after it are fixed
    fields = Path(path).read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
