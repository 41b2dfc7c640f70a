"""A Spark standalone cluster (master + workers) on loopback from pyspark's own jars.

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
    ):
        self.workers, self.cores, self.memory = workers, cores_per_worker, memory_per_worker
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="streamscale-standalone-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.timeout = timeout
        self.procs: list[subprocess.Popen] = []
        self.port = None
        self.ui_port = None

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen:
        env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_HOME": str(spark_home()),
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "SPARK_WORKER_DIR": str(self.log_dir / "work"),
            # the master and workers run on pyspark's own classpath, the driver's: its class-data
            # archive serves them too (start 8.6-10.0 -> 5.2-7.0 s, 15-17 -> 8.5-12 CPU-s, one worker)
            "SPARK_DAEMON_JAVA_OPTS": f"{driver_java_options()} {os.environ.get('SPARK_DAEMON_JAVA_OPTS', '')}".strip(),
        }
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - handed to the child
        try:
            p = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                preexec_fn=die_with_parent,
            )
        finally:
            log.close()
        self.procs.append(p)
        return p

    def start(self) -> StandaloneCluster:
        # the ports are free when picked, and another process may bind one before the master does;
        # Spark then moves to the next free port (spark.port.maxRetries), so the master's URL and
        # UI are the ports its log says it bound, never the ones asked for
        self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(free_port()),
                "--webui-port",
                str(free_port()),
            ],
        )
        self.port = self._await(lambda: self.bound_port("sparkMaster"), "the master to listen")
        self.ui_port = self._await(lambda: self.bound_port("MasterUI"), "the master's UI to listen")
        for i in range(self.workers):
            self._spawn(
                f"worker-{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    self.master_url,
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    str(free_port()),
                ],
            )
        self._await(lambda: self.registered_workers() >= self.workers, f"{self.workers} workers to register")
        return self

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
