"""The console script as a user runs it: a subprocess with its output captured."""

import os
import subprocess
import sys
from pathlib import Path

EXE = str(Path(sys.executable).parent / "streamscale")


def run(*args, env=None, timeout=120):
    e = {**os.environ, **(env or {})}
    return subprocess.run([EXE, *args], capture_output=True, text=True, timeout=timeout, env=e)
