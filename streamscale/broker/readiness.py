"""Waiting for a broker: until it answers a metadata request naming itself, and until its group
coordinator answers (the embedded broker's and the embedded cluster's start-up)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from streamscale.broker.connection import KafkaConnection
from streamscale.broker.log_dirs import admin_arguments, quiet_kafka_python
from streamscale.errors import BrokerError
from streamscale.ports import port_open

READY_LOOK_S = 5.0  # one metadata look; a cold broker's first TLS and SASL handshake fits in it


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
    # A client is made once the port is open, and a look that fails drops it: a broker that
    # advertises another address (a fault proxy's, not listening yet) names that address in its
    # first answer, and a client that got the answer after its look timed out (a TLS and SASL
    # handshake on a cold broker can take seconds) sends every later request there and never asks
    # the bootstrap address again. A client lives at least a second, so that one refused at once
    # is not followed by a new one every poll.
    admin, made = None, 0.0
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = _tail(log_path) if log_path else ""
            raise BrokerError(f"broker exited with code {proc.returncode} during start-up{tail}")
        if port_open(host, int(port)):
            look = max(0.5, min(READY_LOOK_S, deadline - time.monotonic()))
            try:
                if admin is None:
                    admin, made = conn.admin({"socket.timeout.ms": int(look * 1000), "log_level": 0}), time.monotonic()
                if admin.list_topics(timeout=look).brokers:
                    return
            except Exception:  # noqa: BLE001 - keep polling until the deadline
                if time.monotonic() - made >= 1.0:
                    admin = None
        time.sleep(0.05)
    raise BrokerError(f"broker at {bootstrap} was not ready after {timeout:.0f} s{_tail(log_path)}")


# The coordinator is asked through kafka-python, not librdkafka: librdkafka 2.16's coordinator-based
# admin requests (DescribeConsumerGroups) abort the process (rd_kafka_admin_coord_request:
# "Assertion eonce->refcnt > 0") when the coordinator moves while a request waits for it, which is
# what a starting cluster's coordinator does; an OffsetFetch sent while it loads crashed it too.
COORDINATOR_CHECK_GROUP = "streamscale-coordinator-check"


def _coordinator_error(conn: KafkaConnection) -> Exception | None:
    """None when the group coordinator answers DescribeGroups without error, else the error."""
    from kafka import KafkaAdminClient

    quiet_kafka_python()
    try:
        admin = KafkaAdminClient(**{**admin_arguments(conn), "request_timeout_ms": 10_000})
    except Exception as exc:  # noqa: BLE001 - no connection yet: retried until the deadline
        return _Retriable(f"no connection: {exc}")
    try:
        error = admin.describe_groups([COORDINATOR_CHECK_GROUP])[COORDINATOR_CHECK_GROUP]["error"]
        # no such group is the coordinator's answer too (Kafka 4 says so instead of "Dead")
        return None if error is None or "GroupIdNotFound" in error else _from_text(error)
    except Exception as exc:  # noqa: BLE001 - sorted into retriable or not by the caller
        return exc
    finally:
        admin.close()


class _Retriable(Exception):
    retriable = True


def _from_text(error: str) -> Exception:
    """kafka-python reports a group's error as text ("[Error 14] CoordinatorLoadInProgressError: ...")."""
    import kafka.errors as errors

    name = error.split("] ", 1)[-1].split(":", 1)[0]
    cls = getattr(errors, name, None)
    return _Retriable(error) if cls is not None and getattr(cls, "retriable", False) else RuntimeError(error)


def wait_for_group_coordinator(target: KafkaConnection | str, timeout: float = 60.0) -> None:
    """Block until the group coordinator answers (its offsets topic created and loaded), as a
    running cluster's does: a fresh broker creates ``__consumer_offsets`` on the first group
    request. Retriable errors (the coordinator moving or loading, a timeout on a busy machine)
    are retried until the deadline; any other fails at once."""
    conn = KafkaConnection.of(target)
    deadline = time.monotonic() + timeout
    while True:
        exc = _coordinator_error(conn)
        if exc is None:
            return
        if not getattr(exc, "retriable", False) or time.monotonic() > deadline:
            raise BrokerError(f"the broker at {conn.bootstrap} has no group coordinator: {exc}") from None
        time.sleep(0.2)


def _tail(path: Path | None, lines: int = 15) -> str:
    if path is None or not path.exists():
        return ""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n--- broker log (" + str(path) + ") ---\n" + "\n".join(text)
