"""A Spark standalone cluster (master + workers) from pyspark's own jars: on loopback, or each daemon
on a host of its own (:class:`~streamscale.hosts.host.Host`).

The pip package has no start-master.sh; ``bin/spark-class`` runs the Master and Worker classes.
Every process is started by us and stopped by its process id (never by name).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from streamscale.errors import SparkError
from streamscale.ports import free_port
from streamscale.processes import die_with_parent
from streamscale.sparkio.driveropts import driver_java_options
from streamscale.sparkio.home import spark_home


class StandaloneCluster:
    def __init__(
        self,
        workers: int = 2,
        cores_per_worker: int = 1,
        memory_per_worker: str = "1g",
        log_dir: str | os.PathLike | None = None,
        timeout: float = 90.0,
        hosts: tuple | None = None,
    ):
        """``hosts``: (the master's Host, the workers' Hosts), each daemon on its host; default:
        every daemon on this machine's loopback."""
        self.workers, self.cores, self.memory = workers, cores_per_worker, memory_per_worker
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="streamscale-standalone-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.master_host, self.worker_hosts = hosts or (None, [None] * workers)
        self.procs: list[subprocess.Popen] = []
        self.worker_procs: dict[int, subprocess.Popen] = {}  # worker number (from 1): its daemon
        self.port = None
        self.ui_port = None

    @property
    def address(self) -> str:
        """The master's address: its host's, else loopback."""
        return _address(self.master_host)

    @property
    def master_url(self) -> str:
        return f"spark://{self.address}:{self.port}"

    def _spawn(self, name: str, args: list[str], host=None) -> subprocess.Popen:
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": _address(host),
            "SPARK_HOME": str(spark_home()),
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "SPARK_WORKER_DIR": str(host.folder / "work" if host else self.log_dir / "work"),  # a host's own disk
            # the master and workers run on pyspark's own classpath, the driver's: its class-data
            # archive serves them too (start 8.6-10.0 -> 5.2-7.0 s, 15-17 -> 8.5-12 CPU-s, one worker)
            "SPARK_DAEMON_JAVA_OPTS": f"{driver_java_options()} {os.environ.get('SPARK_DAEMON_JAVA_OPTS', '')}".strip(),
        }
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        # appended to: a worker started again writes on after its first life
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            p = subprocess.Popen(
                host.command(cmd) if host else cmd,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=die_with_parent,
            )
        finally:
            log.close()
        self.procs.append(p)
        if host:
            host.pid = p.pid
        return p

    def _ports(self) -> tuple[int, int]:
        """The master's port and UI port: Spark's own on a host of its own, free ones on loopback."""
        return (7077, 8080) if self.master_host else (free_port(), free_port())

    def start(self) -> StandaloneCluster:
        # the ports are free when picked, and another process may bind one before the master does;
        # Spark then moves to the next free port (spark.port.maxRetries), so the master's URL and
        # UI are the ports its log says it bound, never the ones asked for
        for name in ["master", *(f"worker-{i}" for i in range(1, self.workers + 1))]:
            # a log folder used before: its master's log would name the ports it bound then
            (self.log_dir / f"{name}.log").unlink(missing_ok=True)
        port, ui = self._ports()
        master = ["org.apache.spark.deploy.master.Master", "--host", self.address, "--port", str(port)]
        self._spawn("master", [*master, "--webui-port", str(ui)], self.master_host)
        self.port = self._await(lambda: self.bound_port("sparkMaster"), "the master to listen")
        self.ui_port = self._await(lambda: self.bound_port("MasterUI"), "the master's UI to listen")
        for i in range(1, self.workers + 1):
            self.start_worker(i, wait=False)
        self._await(lambda: self.registered_workers() >= self.workers, f"{self.workers} workers to register")
        return self

    def start_worker(self, i: int, wait: bool = True) -> None:
        """Worker ``i`` (from 1) started (again: after it died, it registers anew)."""
        host = self.worker_hosts[i - 1]
        gone = self.worker_procs.get(i)
        if gone is not None and gone.poll() is not None and gone in self.procs:  # died: not waited on
            self.procs.remove(gone)
        before = self.registered_workers()
        ui = "8081" if host else str(free_port())
        args = ["org.apache.spark.deploy.worker.Worker", self.master_url, "--host", _address(host)]
        args += ["--cores", str(self.cores), "--memory", self.memory, "--webui-port", ui]
        self.worker_procs[i] = self._spawn(f"worker-{i}", args, host)
        if wait:
            self._await(lambda: self.registered_workers() > before, f"worker {i} to register")

    def _master_log(self) -> str:
        log = self.log_dir / "master.log"
        return log.read_text(errors="replace") if log.exists() else ""

    def registered_workers(self) -> int:
        return self._master_log().count("Registering worker")

    def bound_port(self, service: str) -> int | None:
        """The port the master's log says ``service`` bound (None before it has)."""
        found = re.search(rf"Successfully started service '{re.escape(service)}' on port (\d+)", self._master_log())
        return int(found.group(1)) if found else None

    def _await(self, cond, what: str):
        """``cond()``'s first true value, polled until the timeout or until a process exits."""
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if any(p.poll() is not None for p in self.procs):
                raise SparkError(f"a Spark standalone process exited while waiting for {what}; logs in {self.log_dir}")
            if value := cond():
                return value
            time.sleep(0.2)
        raise SparkError(f"timed out waiting for {what}; logs in {self.log_dir}")

    def stop(self) -> None:
        for p in reversed(self.procs):  # workers first, then the master
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)
        self.procs.clear()

    def __enter__(self) -> StandaloneCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, *exc) -> None:
        self.stop()


def _address(host) -> str:
    """Where a daemon listens: its host's address, else (on this machine) loopback."""
    return host.ip if host else "127.0.0.1"
