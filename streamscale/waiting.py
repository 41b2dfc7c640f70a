"""Waiting for a condition instead of sleeping a guessed time."""

from __future__ import annotations

import time
from collections.abc import Callable

from streamscale.errors import WaitTimeout


def wait_for(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)
