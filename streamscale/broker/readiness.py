"""Waiting for a broker: until it answers a metadata request naming itself, and until its group
coordinator answers (the embedded broker's and the embedded cluster's start-up)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import BrokerError
from streamscale.ports import port_open


def wait_until_ready(
    target: KafkaConnection | str,
    timeout: float = 60.0,
    proc: subprocess.Popen | None = None,
    log_path: Path | None = None,
) -> None:
    """Block until the broker answers a metadata request naming itself (or raise)."""
    conn = KafkaConnection.of(target)
    bootstrap = conn.bootstrap
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    deadline = time.monotonic() + timeout
    # one admin client for the whole wait, made once the port is open: a client made and dropped
    # every poll while the broker starts leaves requests in flight in clients being destroyed
    admin = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = _tail(log_path) if log_path else ""
            raise BrokerError(f"broker exited with code {proc.returncode} during start-up{tail}")
        if port_open(host, int(port)):
            try:
                if admin is None:
                    admin = conn.admin({"socket.timeout.ms": 2000, "log_level": 0})
                if admin.list_topics(timeout=2).brokers:
                    return
            except Exception:  # noqa: BLE001 - keep polling until the deadline
                pass
        time.sleep(0.05)
    raise BrokerError(f"broker at {bootstrap} was not ready after {timeout:.0f} s{_tail(log_path)}")


# Retried until the deadline: the coordinator still loading, or a request that timed out on a busy
# machine (the broker answers later; a dead one fails the deadline).
_COORDINATOR_WAIT = (
    "NOT_COORDINATOR",
    "COORDINATOR_NOT_AVAILABLE",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "_TIMED_OUT",
    "_TRANSPORT",
)


def wait_for_group_coordinator(target: KafkaConnection | str, timeout: float = 60.0) -> None:
    """Block until the group coordinator answers (its offsets topic created and loaded), as a
    running cluster's does. A fresh broker creates ``__consumer_offsets`` on the first group
    request; librdkafka 2.16 crashed (SIGSEGV) in an OffsetFetch sent while it was still loading."""
    conn = KafkaConnection.of(target)
    admin = conn.admin({"log_level": 0})
    deadline = time.monotonic() + timeout
    while True:
        fut = admin.describe_consumer_groups(["streamscale-coordinator-check"], request_timeout=10)
        try:
            next(iter(fut.values())).result()
            return
        except Exception as exc:  # noqa: BLE001 - retried while the coordinator loads
            if not any(code in str(exc) for code in _COORDINATOR_WAIT) or time.monotonic() > deadline:
                raise BrokerError(f"the broker at {conn.bootstrap} has no group coordinator: {exc}") from None
        time.sleep(0.1)


def _tail(path: Path | None, lines: int = 15) -> str:
    if path is None or not path.exists():
        return ""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n--- broker log (" + str(path) + ") ---\n" + "\n".join(text)
