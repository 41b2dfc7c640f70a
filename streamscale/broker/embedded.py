"""The embedded broker: Apache Kafka in KRaft mode, one local process (see :mod:`.kafka_server`).

Bound to loopback on a free port (or the one asked), with its storage formatted in a temporary
directory that is removed when it stops (``data_dir`` keeps it, and a broker started on a kept
directory finds its topics again). Its log goes to a file, never to the terminal. The child is
tied to the lifetime of the process that started it (``PR_SET_PDEATHSIG``) unless it is started as
a daemon by ``streamscale broker start``, and is stopped by its process id: a crashed test run
never leaves an orphaned JVM behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from streamscale.broker import kafka_server
from streamscale.broker.connection import KafkaConnection
from streamscale.broker.readiness import wait_for_group_coordinator, wait_until_ready
from streamscale.broker.security import SecuredKafka, Security, check_mode
from streamscale.errors import BrokerError
from streamscale.ports import free_port, port_in_use
from streamscale.processes import die_with_parent, remove_at_exit, stop_process


@dataclass
class BrokerInfo:
    pid: int
    port: int
    bootstrap: str
    log_path: str
    binary: str
    started_at: float
    properties: str = ""  # the server.properties it runs with (identifies the process)
    data_dir: str = ""
    temporary: bool = True  # data_dir is removed when the broker stops
    security: str = "plaintext"
    client_config: str = ""  # sasl_ssl: the client properties file (--kafka-config, kcat -F)


@dataclass(frozen=True)
class Namespace:
    """A network namespace a broker runs in (``ip netns``), listening on ``host``, its address there."""

    name: str
    host: str


class EmbeddedBroker(SecuredKafka):
    """Start Apache Kafka on a free loopback port; use as a context manager.

    >>> with EmbeddedBroker() as broker:
    ...     broker.bootstrap  # '127.0.0.1:NNNNN'
    """

    def __init__(
        self,
        port: int | None = None,
        log_dir: str | os.PathLike | None = None,
        ready_timeout: float = 90.0,
        daemon: bool = False,
        advertised_port: int | None = None,
        namespace: Namespace | None = None,
        data_dir: str | os.PathLike | None = None,
        security: str = "plaintext",
    ):
        self.security = check_mode(security)
        self.secrets = None  # sasl_ssl: its Security (certificates, users, client properties)
        self.guardian = None  # a daemon's: kills the broker if the starting process dies first
        self.port = port
        self.host = namespace.host if namespace else "127.0.0.1"
        self.netns = namespace.name if namespace else None  # run inside this network namespace (netem faults)
        # clients learn broker addresses from metadata: a fault proxy in front of the broker must be
        # what the broker advertises, or clients would bypass it after bootstrapping
        self.advertised_port = advertised_port
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.gettempdir()) / "streamscale-broker"
        self.ready_timeout = ready_timeout
        self.daemon = daemon
        self.keep_data = data_dir is not None
        self.data_dir: Path | None = Path(data_dir).resolve() if data_dir is not None else None
        self.controller_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.binary: str | None = None
        self.properties_path: Path | None = None
        self.started_s: float | None = None  # seconds from start() to a broker answering

    def pids(self) -> list[int]:
        """The broker's process ids (one JVM; none before it starts)."""
        return [self.proc.pid] if self.proc is not None else []

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise BrokerError("broker not started")
        return f"{self.host}:{self.port}"

    def start(self) -> EmbeddedBroker:
        t0 = time.monotonic()
        self.binary = kafka_server.java_binary()
        kafka_server.kafka_libs()  # one clear error before anything is created
        kafka_server.heap()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        if self.port is not None and not self.netns and port_in_use(self.host, self.port):
            # otherwise whatever listens there would answer the readiness check, and the start
            # would be reported as a success
            raise BrokerError(
                f"port {self.port} on {self.host} is already in use: choose another --port, or stop what listens there"
            )
        if self.data_dir is None:
            self.data_dir = Path(tempfile.mkdtemp(prefix="streamscale-kafka-"))
            if self.guardian is not None:
                self.guardian.remove(self.data_dir)
            elif not self.daemon:
                remove_at_exit(self.data_dir)
        attempts = 3 if self.port is None else 1
        last: Exception | None = None
        try:
            for _ in range(attempts):
                port = self.port or free_port()
                self.log_path = self.log_dir / f"kafka-{port}.log"
                try:
                    self._spawn(port)
                    at = KafkaConnection.of(f"{self.host}:{port}", self.client_properties())
                    wait_until_ready(at, self.ready_timeout, self.proc, self.log_path)
                    if not self.advertised_port:  # else its clients go through what it advertises
                        wait_for_group_coordinator(at, self.ready_timeout)
                    self.port = port
                    self.started_s = time.monotonic() - t0
                    return self
                except BrokerError as exc:  # port taken between probe and bind: try another
                    last = exc
                    self._kill()
            raise BrokerError(f"could not start the embedded broker: {last}")
        except BaseException:
            self._remove_data()
            raise

    def _spawn(self, port: int) -> None:
        if not self.daemon and threading.current_thread() is not threading.main_thread():
            # PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process:
            # a broker started from a short-lived thread would be killed as soon as that thread returns
            raise BrokerError("start (or restart) the embedded broker from the main thread")
        assert self.data_dir is not None and self.log_path is not None
        if self.controller_port is None or self.port != port:
            self.controller_port = free_port(self.host) if not self.netns else port + 1
        advertised = f"127.0.0.1:{self.advertised_port}" if self.advertised_port else f"{self.host}:{port}"
        extra, format_args = None, None
        if self.security == "sasl_ssl":
            self.secrets = Security.prepare(self.data_dir, [self.host])
            extra = self.secrets.server_settings(self.host, port, self.controller_port, advertised)
            format_args = self.secrets.format_arguments()
        text = kafka_server.server_properties(self.data_dir, self.host, port, self.controller_port, advertised, extra)
        props, log4j = kafka_server.write_config(self.data_dir, text)
        self.properties_path = props
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            if not kafka_server.is_formatted(self.data_dir):
                kafka_server.format_storage(self.data_dir, props, log4j, log, prefix, extra_args=format_args)
            cmd = kafka_server.server_command(props, log4j, prefix)
            if self.daemon:
                self.proc = subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
                )
                if self.guardian is not None:
                    self.guardian.watch(self.proc.pid)
            else:
                self.proc = subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent
                )
        finally:
            log.close()

    def _kill(self, timeout: float = 20.0) -> None:
        if self.proc is None:
            return
        stop_process(self.proc, signal.SIGTERM, timeout)  # Kafka's own shutdown hook: logs closed cleanly
        self.proc = None

    def _remove_data(self) -> None:
        if self.data_dir is not None and not self.keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def restart(self) -> None:
        """Stop the broker and start it again on the same port and storage: its topics and records stay."""
        self._kill()
        self._spawn(self.port)
        wait_until_ready(self.connection, self.ready_timeout, self.proc, self.log_path)
        if not self.advertised_port:
            wait_for_group_coordinator(self.connection, self.ready_timeout)

    def stop(self) -> None:
        self._kill()
        self._remove_data()

    def info(self) -> BrokerInfo:
        assert self.proc is not None and self.port is not None
        return BrokerInfo(
            pid=self.proc.pid,
            port=self.port,
            bootstrap=self.bootstrap,
            log_path=str(self.log_path),
            binary=str(self.binary),
            started_at=time.time(),
            properties=str(self.properties_path),
            data_dir=str(self.data_dir),
            temporary=not self.keep_data,
            security=self.security,
            client_config=str(self.secrets.client_file) if self.secrets else "",
        )

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
