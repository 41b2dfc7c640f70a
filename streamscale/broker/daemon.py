"""What `streamscale broker start` leaves running: the embedded broker, or an embedded cluster
(``--brokers N``), as daemons that outlive the command, found again by their state file in
``$STREAMSCALE_STATE_DIR`` (default ``~/.streamscale``) and stopped by their process ids; and how
a command finds its Kafka: ``--bootstrap-servers``, the environment, else the daemon."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from streamscale.broker import kafka_server
from streamscale.broker.cluster import EmbeddedCluster
from streamscale.broker.connection import BOOTSTRAP_ENV, KafkaConnection
from streamscale.broker.embedded import BrokerInfo, EmbeddedBroker
from streamscale.errors import BrokerError
from streamscale.processes import Guardian, command_line, stat_fields


def state_dir() -> Path:
    return Path(os.environ.get("STREAMSCALE_STATE_DIR", Path.home() / ".streamscale"))


def _state_file() -> Path:
    return state_dir() / "broker.json"


def _pid_is_our_broker(pid: int, properties: str) -> bool:
    return bool(properties) and kafka_server.is_server_cmdline(command_line(pid), properties)


def running_state(path: Path, kind, alive):
    """The ``kind`` (BrokerInfo, ClusterInfo) a state file at ``path`` holds, when ``alive`` says it
    still runs; None otherwise, and an unreadable or stale file is removed."""
    if not path.exists():
        return None
    try:
        info = kind(**json.loads(path.read_text()))
    except (ValueError, TypeError):
        info = None
    if info is None or not alive(info):
        path.unlink(missing_ok=True)
        return None
    return info


def daemon_status() -> BrokerInfo | None:
    """The running daemon broker, or None (a stale state file is removed)."""
    return running_state(_state_file(), BrokerInfo, lambda i: _pid_is_our_broker(i.pid, i.properties))


def daemon_start(
    port: int | None = None, data_dir: str | os.PathLike | None = None, security: str = "plaintext"
) -> BrokerInfo:
    _refuse_if_running()
    with Guardian() as guardian:  # whatever this process dies of before the state file: the JVM too
        broker = EmbeddedBroker(
            port=port, log_dir=state_dir() / "logs", daemon=True, data_dir=data_dir, security=security
        )
        broker.guardian = guardian
        broker.start()
        info = broker.info()
        _abort_for_tests()
        state_dir().mkdir(parents=True, exist_ok=True)
        _state_file().write_text(json.dumps(asdict(info), indent=2))
        guardian.release()
    broker.proc = None  # the daemon outlives this process on purpose
    return info


ABORT_ENV = "STREAMSCALE_TEST_ABORT_BEFORE_RECORD"


def _abort_for_tests() -> None:
    """Tests: die as a C library's assertion does (SIGABRT) once the daemons run, before they are
    recorded — what the guardian is for."""
    if os.environ.get(ABORT_ENV) == "1":
        os.abort()


def daemon_stop(timeout: float = 30.0) -> BrokerInfo | None:
    info = daemon_status()
    if info is None:
        return None
    os.kill(info.pid, signal.SIGTERM)
    node = [{"pid": info.pid, "properties": info.properties}]
    if not _wait_gone(node, timeout) and _pid_is_our_broker(info.pid, info.properties):
        os.kill(info.pid, signal.SIGKILL)
        _wait_gone(node, timeout)
    if info.temporary and info.data_dir:
        shutil.rmtree(info.data_dir, ignore_errors=True)
    _state_file().unlink(missing_ok=True)
    return info


def _exiting(pid: int) -> bool:
    """A process that has let go of its memory (so its command line reads empty and it no longer
    looks like our broker) but is not yet a zombie: closing a JVM's files and sockets takes a while
    on a busy CPU, and the process is alive until it is done."""
    try:
        fields = stat_fields(pid)
        kernel_thread = int(fields[6]) & 0x00200000  # PF_KTHREAD: no command line either, never ours
        return fields[0] != "Z" and not kernel_thread and not command_line(pid)
    except (OSError, IndexError, ValueError):
        return False


def _wait_gone(nodes: list[dict], timeout: float) -> bool:
    """Wait until none of ``nodes`` (pid, properties) runs or is still exiting, reaping our own
    children; whether they all went in time."""
    deadline = time.monotonic() + timeout
    while True:
        going = [n for n in nodes if _pid_is_our_broker(n["pid"], n["properties"]) or _exiting(n["pid"])]
        for n in going:
            _reap(n["pid"])
        if not going:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


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

    running = daemon_status() or cluster_status()
    if running is not None and set(running.bootstrap.split(",")) & set(bootstrap.split(",")):
        # streamscale's own secured broker named by its address: its client properties by default
        properties = {**daemon_client_properties(running), **(properties or {})}
    conn = KafkaConnection.of(bootstrap, properties)
    ensure_reachable(conn)
    return conn


def resolve_connection(bootstrap: str | None = None, properties: dict | None = None) -> KafkaConnection:
    """--bootstrap-servers, else $STREAMSCALE_BOOTSTRAP_SERVERS, else the running daemon broker (or
    cluster);
    checked to answer within $STREAMSCALE_CONNECT_TIMEOUT seconds (one clear error if not)."""
    from streamscale.broker.access import ensure_reachable

    chosen = external_connection(bootstrap, properties)  # the option or the environment, checked
    if chosen is not None:
        return chosen
    info = daemon_status() or cluster_status()
    if info is not None:
        # a secured daemon: its client properties, under the user's (-X sasl.username=guest wins)
        conn = KafkaConnection.of(info.bootstrap, {**daemon_client_properties(info), **(properties or {})})
        ensure_reachable(conn)
        return conn
    raise BrokerError(
        "no broker: start the embedded one with `streamscale broker start` "
        "or pass --bootstrap-servers HOST:PORT for an external Kafka cluster"
    )


def daemon_client_properties(info) -> dict[str, str]:
    """The client properties of a running daemon broker or cluster (none for plaintext)."""
    from streamscale.broker.connection import read_properties_file

    path = getattr(info, "client_config", "")
    return read_properties_file(path) if path else {}


# --- an embedded cluster as a daemon ------------------------------------------------------


@dataclass
class ClusterInfo:
    bootstrap: str
    nodes: list[dict] = field(default_factory=list)  # id, pid, address, properties, log_path
    data_dir: str = ""
    temporary: bool = True
    started_at: float = 0.0
    security: str = "plaintext"
    client_config: str = ""  # sasl_ssl: the client properties file (--kafka-config, kcat -F)
    keeper_pid: int = 0  # the brokers of a cluster of hosts (streamscale.hosts.daemon): its keeper

    @property
    def pids(self) -> list[int]:
        return [n["pid"] for n in self.nodes]

    def alive(self) -> list[dict]:
        return [n for n in self.nodes if _pid_is_our_broker(n["pid"], n["properties"])]


def _cluster_file() -> Path:
    return state_dir() / "cluster.json"


def cluster_status() -> ClusterInfo | None:
    """The running daemon cluster (some node of it alive), or None (a stale state file is removed)."""
    return running_state(_cluster_file(), ClusterInfo, lambda i: bool(i.alive()))


def record_cluster(cluster: EmbeddedCluster, keeper_pid: int = 0) -> None:
    """Write down a running cluster's brokers where every command finds a broker (``keeper_pid``:
    the process that holds them, which ``cluster_stop`` asks to stop instead)."""
    info = _cluster_info(cluster)
    info.keeper_pid = keeper_pid
    state_dir().mkdir(parents=True, exist_ok=True)
    _cluster_file().write_text(json.dumps(asdict(info), indent=2))


def forget_cluster(keeper_pid: int) -> None:
    """Remove the record of the brokers ``keeper_pid`` held (another's is left alone)."""
    try:
        if json.loads(_cluster_file().read_text()).get("keeper_pid") == keeper_pid:
            _cluster_file().unlink(missing_ok=True)
    except (OSError, ValueError, AttributeError):
        pass


def _refuse_if_running() -> None:
    running = daemon_status() or cluster_status()
    if running is not None:
        what = "a broker" if isinstance(running, BrokerInfo) else "a cluster"
        raise BrokerError(
            f"{what} is already running at {running.bootstrap}; stop it first with `streamscale broker stop`"
        )


def cluster_start(brokers: int, data_dir: str | os.PathLike | None = None, security: str = "plaintext") -> ClusterInfo:
    """An embedded cluster of ``brokers`` nodes in the background (see :class:`EmbeddedCluster`)."""
    _refuse_if_running()
    with Guardian() as guardian:  # whatever this process dies of before the state file: the nodes too
        cluster = EmbeddedCluster(
            brokers, log_dir=state_dir() / "logs", daemon=True, data_dir=data_dir, security=security
        )
        cluster.guardian = guardian
        cluster.start()
        info = _cluster_info(cluster)
        _abort_for_tests()
        state_dir().mkdir(parents=True, exist_ok=True)
        _cluster_file().write_text(json.dumps(asdict(info), indent=2))
        guardian.release()
    for n in cluster.nodes.values():
        n.proc = None  # the daemons outlive this process on purpose
    return info


def _cluster_info(cluster: EmbeddedCluster) -> ClusterInfo:
    return ClusterInfo(
        bootstrap=cluster.bootstrap,
        nodes=[
            {
                "id": n.node_id,
                "pid": n.proc.pid,
                "address": n.address,
                "properties": str(n.props),
                "log_path": str(n.log_path),
            }
            for n in cluster.nodes.values()
        ],
        data_dir=str(cluster.root),
        temporary=not cluster.keep_data,
        started_at=time.time(),
        security=cluster.security,
        client_config=str(cluster.secrets.client_file) if cluster.secrets else "",
    )


def cluster_stop(timeout: float = 30.0) -> ClusterInfo | None:
    info = cluster_status()
    if info is None:
        return None
    if info.keeper_pid:  # the brokers of a cluster of hosts: its keeper stops them with the hosts
        os.kill(info.keeper_pid, signal.SIGTERM)
        deadline = time.monotonic() + 2 * timeout
        while command_line(info.keeper_pid) and time.monotonic() < deadline:  # a zombie has none
            time.sleep(0.1)
        _reap(info.keeper_pid)
        return info
    alive = info.alive()
    for n in alive:  # storage that is removed needs no clean shutdown (see EmbeddedCluster.stop)
        os.kill(n["pid"], signal.SIGKILL if info.temporary else signal.SIGTERM)
    if not _wait_gone(alive, timeout):
        for n in alive:
            if _pid_is_our_broker(n["pid"], n["properties"]):
                os.kill(n["pid"], signal.SIGKILL)
        _wait_gone(alive, timeout)
    if info.temporary and info.data_dir:
        shutil.rmtree(info.data_dir, ignore_errors=True)
    _cluster_file().unlink(missing_ok=True)
    return info
