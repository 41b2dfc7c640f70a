"""What `streamscale cluster start` leaves running: a keeper process (``python -m
streamscale.hosts.daemon``) in a session of its own that starts a :class:`HostsCluster`, writes it
down in ``$STREAMSCALE_STATE_DIR/hosts.json`` (its brokers also in ``cluster.json``, where every
command finds a broker, so that ``broker status`` and ``broker stop`` see them), and holds it until
SIGTERM. The hosts' daemons die with the keeper; however the keeper ends, its guardian removes the
hosts' namespaces (with what still runs in them), links and folders."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from streamscale.broker import daemon as broker_daemon
from streamscale.errors import ClusterError, StreamscaleError
from streamscale.processes import command_line

KEEPER = "streamscale.hosts.daemon"


@dataclass
class HostsInfo:
    keeper_pid: int
    master_url: str
    bootstrap: str
    shared: str
    log_dir: str
    workers: int
    worker_cores: int
    brokers: int
    started_s: float = 0.0
    hosts: list[dict] = field(default_factory=list)  # role, name, address, pid, cpus

    def shape(self) -> tuple[int, int, int]:
        return self.workers, self.worker_cores, self.brokers


def hosts_file() -> Path:
    return broker_daemon.state_dir() / "hosts.json"


def _is_keeper(pid: int) -> bool:
    return KEEPER in command_line(pid)


def hosts_status() -> HostsInfo | None:
    """The running cluster of hosts, or None (a stale state file is removed)."""
    return broker_daemon.running_state(hosts_file(), HostsInfo, lambda i: _is_keeper(i.keeper_pid))


def running_for(master: str | None) -> HostsInfo | None:
    """The running cluster of hosts whose master is ``master`` (None: no such)."""
    info = hosts_status() if master else None
    return info if info is not None and info.master_url == master else None


def start_daemon(workers: int, worker_cores: int, brokers: int, timeout: float = 180.0) -> HostsInfo:
    """Start the keeper and wait until it says the cluster runs (or why it does not)."""
    from streamscale.hosts.cluster import why_not

    if why := why_not():
        raise ClusterError(why)
    running = broker_daemon.daemon_status() or broker_daemon.cluster_status() or hosts_status()
    if running is not None:
        raise ClusterError(
            f"a broker or cluster is already running at {running.bootstrap}; stop it first with "
            "`streamscale cluster stop` (or `streamscale broker stop`)"
        )
    logs = broker_daemon.state_dir() / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    args = json.dumps({"workers": workers, "worker_cores": worker_cores, "brokers": brokers})
    with open(logs / "hosts-keeper.log", "ab") as err:
        keeper = subprocess.Popen(
            [sys.executable, "-m", KEEPER, args],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # outlives this command, and the terminal's Ctrl-C
            text=True,
        )
    said = _first_line(keeper, timeout)
    if said != "ready":
        raise ClusterError(said.removeprefix("error: ") or f"the cluster's keeper ended; its log: {err.name}")
    info = hosts_status()
    if info is None:
        raise ClusterError(f"the cluster's keeper said it was ready and is gone; its log: {err.name}")
    return info


def _first_line(proc: subprocess.Popen, timeout: float) -> str:
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        if not sel.select(timeout):
            proc.terminate()
            return f"error: the cluster did not start within {timeout:.0f} s"
    return proc.stdout.readline().strip()


def stop_daemon(timeout: float = 60.0) -> HostsInfo | None:
    """SIGTERM to the keeper, which stops every host; SIGKILL after ``timeout`` (its guardian then
    removes the hosts)."""
    info = hosts_status()
    if info is None:
        return None
    os.kill(info.keeper_pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while _is_keeper(info.keeper_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if _is_keeper(info.keeper_pid):
        os.kill(info.keeper_pid, signal.SIGKILL)
        while _is_keeper(info.keeper_pid):
            time.sleep(0.1)
    hosts_file().unlink(missing_ok=True)
    return info


def _keep(args: dict) -> None:
    """The keeper's life: start the hosts, write them down, say "ready", hold until SIGTERM."""
    from streamscale.hosts.cluster import HostsCluster
    from streamscale.processes import sigterm_ends_like_ctrl_c

    sigterm_ends_like_ctrl_c()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    cluster = HostsCluster(log_dir=broker_daemon.state_dir() / "logs" / "hosts", **args)
    try:
        try:
            cluster.start()
        except StreamscaleError as exc:
            print(f"error: {exc}", flush=True)
            return
        _write_down(cluster)
        print("ready", flush=True)
        sys.stdout.close()
        while True:
            signal.pause()
    except SystemExit:
        pass
    finally:
        hosts_file().unlink(missing_ok=True)
        broker_daemon.forget_cluster(os.getpid())
        cluster.stop()


def _write_down(cluster) -> None:
    info = HostsInfo(
        keeper_pid=os.getpid(),
        master_url=cluster.master_url,
        bootstrap=cluster.bootstrap,
        shared=str(cluster.shared),
        log_dir=str(cluster.log_dir),
        workers=cluster.workers,
        worker_cores=cluster.worker_cores,
        brokers=cluster.brokers,
        started_s=round(cluster.started_s or 0.0, 1),
        hosts=[h.describe() for h in cluster.hosts],
    )
    broker_daemon.state_dir().mkdir(parents=True, exist_ok=True)
    hosts_file().write_text(json.dumps(asdict(info), indent=2))
    broker_daemon.record_cluster(cluster.kafka, keeper_pid=os.getpid())


if __name__ == "__main__":
    _keep(json.loads(sys.argv[1]))
