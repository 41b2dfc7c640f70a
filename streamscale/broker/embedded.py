"""The embedded broker: Apache Kafka in KRaft mode, one local process (see :mod:`.kafka_server`).

Bound to loopback on a free port (or the one asked), with its storage formatted in a temporary
directory that is removed when it stops (``data_dir`` keeps it, and a broker started on a kept
directory finds its topics again). Its log goes to a file, never to the terminal. The child is
tied to the lifetime of the process that started it (``PR_SET_PDEATHSIG``) unless it is started as
a daemon by ``streamscale broker start``, and is stopped by its process id: a crashed test run
never leaves an orphaned JVM behind.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from streamscale.broker import kafka_server
from streamscale.broker.connection import BOOTSTRAP_ENV, KafkaConnection
from streamscale.errors import BrokerError
from streamscale.ports import free_port, port_in_use, port_open
from streamscale.processes import die_with_parent


def wait_until_ready(
    bootstrap: str, timeout: float = 60.0, proc: subprocess.Popen | None = None, log_path: Path | None = None
) -> None:
    """Block until the broker answers a metadata request naming itself (or raise)."""

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = _tail(log_path) if log_path else ""
            raise BrokerError(f"broker exited with code {proc.returncode} during start-up{tail}")
        if port_open(host, int(port)):
            try:
                admin = KafkaConnection(bootstrap).admin({"socket.timeout.ms": 2000, "log_level": 0})
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


def wait_for_group_coordinator(bootstrap: str, timeout: float = 60.0) -> None:
    """Block until the group coordinator answers (its offsets topic created and loaded), as a
    running cluster's does. A fresh broker creates ``__consumer_offsets`` on the first group
    request; librdkafka 2.16 crashed (SIGSEGV) in an OffsetFetch sent while it was still loading."""
    admin = KafkaConnection(bootstrap).admin({"log_level": 0})
    deadline = time.monotonic() + timeout
    while True:
        fut = admin.describe_consumer_groups(["streamscale-coordinator-check"], request_timeout=10)
        try:
            next(iter(fut.values())).result()
            return
        except Exception as exc:  # noqa: BLE001 - retried while the coordinator loads
            if not any(code in str(exc) for code in _COORDINATOR_WAIT) or time.monotonic() > deadline:
                raise BrokerError(f"the broker at {bootstrap} has no group coordinator: {exc}") from None
        time.sleep(0.1)


def _tail(path: Path | None, lines: int = 15) -> str:
    if path is None or not path.exists():
        return ""
    text = path.read_text(errors="replace").splitlines()[-lines:]
    return "\n--- broker log (" + str(path) + ") ---\n" + "\n".join(text)


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


class EmbeddedBroker:
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
        host: str = "127.0.0.1",
        netns: str | None = None,
        data_dir: str | os.PathLike | None = None,
    ):
        self.port = port
        self.host = host
        self.netns = netns  # run inside this network namespace (netem faults)
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
        attempts = 3 if self.port is None else 1
        last: Exception | None = None
        try:
            for _ in range(attempts):
                port = self.port or free_port()
                self.log_path = self.log_dir / f"kafka-{port}.log"
                try:
                    self._spawn(port)
                    wait_until_ready(f"{self.host}:{port}", self.ready_timeout, self.proc, self.log_path)
                    if not self.advertised_port:  # else its clients go through what it advertises
                        wait_for_group_coordinator(f"{self.host}:{port}", self.ready_timeout)
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
        text = kafka_server.server_properties(self.data_dir, self.host, port, self.controller_port, advertised)
        props, log4j = kafka_server.write_config(self.data_dir, text)
        self.properties_path = props
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            if not kafka_server.is_formatted(self.data_dir):
                kafka_server.format_storage(self.data_dir, props, log4j, log, prefix)
            cmd = kafka_server.server_command(props, log4j, prefix)
            if self.daemon:
                self.proc = subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
                )
            else:
                self.proc = subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=die_with_parent
                )
        finally:
            log.close()

    def _kill(self, timeout: float = 20.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()  # Kafka's own shutdown hook: logs closed cleanly
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self.proc = None

    def _remove_data(self) -> None:
        if self.data_dir is not None and not self.keep_data:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            self.data_dir = None

    def restart(self) -> None:
        """Stop the broker and start it again on the same port and storage: its topics and records stay."""
        self._kill()
        self._spawn(self.port)
        wait_until_ready(self.bootstrap, self.ready_timeout, self.proc, self.log_path)
        if not self.advertised_port:
            wait_for_group_coordinator(self.bootstrap, self.ready_timeout)

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
        )

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


# --- the daemon started by `streamscale broker start` --------------------------------------


def state_dir() -> Path:
    return Path(os.environ.get("STREAMSCALE_STATE_DIR", Path.home() / ".streamscale"))


def _state_file() -> Path:
    return state_dir() / "broker.json"


def _pid_is_our_broker(pid: int, properties: str) -> bool:
    try:
        cmdline = [a.decode(errors="replace") for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")]
    except OSError:
        return False
    return bool(properties) and kafka_server.is_server_cmdline(cmdline, properties)


def daemon_status() -> BrokerInfo | None:
    """The running daemon broker, or None (a stale state file is removed)."""
    path = _state_file()
    if not path.exists():
        return None
    try:
        info = BrokerInfo(**json.loads(path.read_text()))
    except (ValueError, TypeError):
        path.unlink(missing_ok=True)
        return None
    if not _pid_is_our_broker(info.pid, info.properties):
        path.unlink(missing_ok=True)
        return None
    return info


def daemon_start(port: int | None = None, data_dir: str | os.PathLike | None = None) -> BrokerInfo:
    running = daemon_status()
    if running is not None:
        raise BrokerError(
            f"a broker is already running at {running.bootstrap} (pid {running.pid}); "
            "stop it first with `streamscale broker stop`"
        )
    broker = EmbeddedBroker(port=port, log_dir=state_dir() / "logs", daemon=True, data_dir=data_dir).start()
    info = broker.info()
    state_dir().mkdir(parents=True, exist_ok=True)
    _state_file().write_text(json.dumps(asdict(info), indent=2))
    broker.proc = None  # the daemon outlives this process on purpose
    return info


def daemon_stop(timeout: float = 30.0) -> BrokerInfo | None:
    info = daemon_status()
    if info is None:
        return None
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _pid_is_our_broker(info.pid, info.properties):
        if _reap(info.pid):
            break
        time.sleep(0.05)
    if _pid_is_our_broker(info.pid, info.properties):
        os.kill(info.pid, signal.SIGKILL)
    if info.temporary and info.data_dir:
        shutil.rmtree(info.data_dir, ignore_errors=True)
    _state_file().unlink(missing_ok=True)
    return info


def _reap(pid: int) -> bool:
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        return False


def external_connection(bootstrap: str | None = None, properties: dict | None = None) -> KafkaConnection | None:
    """For commands that start their own embedded broker when given none: --bootstrap-servers,
    else $STREAMSCALE_BOOTSTRAP_SERVERS (which must answer), else None (start one)."""
    bootstrap = bootstrap or os.environ.get(BOOTSTRAP_ENV) or None
    if not bootstrap:
        return None
    from streamscale.broker.access import ensure_reachable

    conn = KafkaConnection.of(bootstrap, properties)
    ensure_reachable(conn)
    return conn


def resolve_connection(bootstrap: str | None = None, properties: dict | None = None) -> KafkaConnection:
    """--bootstrap-servers, else $STREAMSCALE_BOOTSTRAP_SERVERS, else the running daemon broker;
    checked to answer within $STREAMSCALE_CONNECT_TIMEOUT seconds (one clear error if not)."""
    from streamscale.broker.access import ensure_reachable

    chosen = external_connection(bootstrap, properties)  # the option or the environment, checked
    if chosen is not None:
        return chosen
    info = daemon_status()
    if info is not None:
        conn = KafkaConnection.of(info.bootstrap, properties)
        ensure_reachable(conn)
        return conn
    raise BrokerError(
        "no broker: start the embedded one with `streamscale broker start` "
        "or pass --bootstrap-servers HOST:PORT for an external Kafka cluster"
    )


def resolve_bootstrap(bootstrap: str | None) -> str:
    """:func:`resolve_connection`'s bootstrap (the older API)."""
    return resolve_connection(bootstrap).bootstrap
