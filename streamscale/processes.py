"""Child-process hygiene: children that die with their parent (``PR_SET_PDEATHSIG``), and a stop
that ends in SIGKILL when a child does not go.

Neutral: every concern that starts a child (broker, Spark cluster, fault proxy, reliability
pipeline driver) passes one of these as ``preexec_fn``, so a SIGKILLed streamscale leaves nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess

_PR_SET_PDEATHSIG = 1


def _pdeathsig() -> None:
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except OSError:
        pass


def die_with_parent() -> None:
    """``preexec_fn``: SIGKILL when the parent dies, and a process group of its own — the child must
    not receive the terminal's Ctrl-C before the parent has decided to stop it; the parent stops it
    explicitly."""
    _pdeathsig()
    os.setpgrp()


def die_with_parent_in_own_session() -> None:
    """For a child that is stopped as a whole process group (os.killpg): a session of its own
    (setsid, not setpgrp: the group is then the session's) and SIGKILL when its parent dies.
    The parent must start it from a thread that lives as long as the child should: the signal
    follows the thread that forked."""
    _pdeathsig()
    os.setsid()


def stop_process(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout: float = 20.0) -> None:
    """Send ``sig`` to ``proc`` if it still runs and wait for it; SIGKILL after ``timeout`` s."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout)
