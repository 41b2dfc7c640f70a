"""A Spark standalone cluster and a Kafka cluster on hosts of their own, all on this machine: one
network namespace per host on one bridge (:class:`~streamscale.broker.clusternet.ClusterNetwork`),
the Spark master on the first host, one worker per host after it (each pinned to its own CPUs), then
the brokers (KRaft nodes, as :class:`~streamscale.broker.cluster.EmbeddedCluster` runs them). The
driver, the load generator and the lag sampler stay in this machine's own namespace, as on an edge
node: they reach every host through the bridge, at the address this machine has on it.

Every host has a private ``/tmp`` (:class:`~streamscale.hosts.host.Host`); the cluster's
``shared`` folder, outside ``/tmp``, is the one folder every host and the driver read at the same
path: where checkpoints go. What a run leaves is removed when the cluster stops, and, however this
process ends, by its guardian (namespaces with what runs in them, links, folders).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from streamscale.errors import ClusterError, StreamscaleError
from streamscale.hosts.host import Host, under_tmp
from streamscale.hosts.spark import StandaloneCluster
from streamscale.processes import remove_at_exit

# where the hosts' folders go: on disk, never under /tmp, which every host replaces by its own
HOSTS_DIR_ENV = "STREAMSCALE_HOSTS_DIR"


def hosts_root() -> Path:
    return Path(os.environ.get(HOSTS_DIR_ENV, "/var/tmp"))


def why_not() -> str | None:
    """Why hosts of their own cannot be made here (one line), or None."""
    if os.geteuid() != 0:
        return "hosts of their own need root (network and mount namespaces); run as root, or leave out cluster:"
    missing = [t for t in ("ip", "unshare", "taskset") if shutil.which(t) is None]
    if missing:
        return f"hosts of their own need {', '.join(missing)} (Debian packages iproute2, util-linux)"
    from streamscale.broker.clusternet import namespaces_available

    works, why = namespaces_available()  # root without the capability (a container's) cannot make them
    return None if works else f"hosts of their own need network namespaces: {why}"


class HostsCluster:
    """``workers`` Spark workers of ``worker_cores`` cores and ``brokers`` Kafka brokers, each on a
    host of its own, with a Spark master on one more; use as a context manager.

    >>> with HostsCluster(workers=2, brokers=1) as c:
    ...     c.master_url, c.bootstrap, c.shared  # spark://10.a.b.11:7077, 10.a.b.14:9092, /var/tmp/...
    """

    def __init__(
        self, workers: int = 2, worker_cores: int = 1, brokers: int = 3, log_dir=None, worker_memory: str = "1g"
    ):
        if not 1 <= workers <= 16 or not 1 <= brokers <= 9 or worker_cores < 1:
            raise ClusterError(
                f"a cluster here has 1 to 16 workers of 1 core or more and 1 to 9 brokers, not {workers} "
                f"workers of {worker_cores} and {brokers} brokers"
            )
        self.workers, self.worker_cores, self.brokers = workers, worker_cores, brokers
        self.worker_memory = worker_memory
        self.log_dir = Path(log_dir) if log_dir else None
        self.root: Path | None = None
        self.network = None
        self.hosts: list[Host] = []
        self.spark: StandaloneCluster | None = None
        self.kafka = None
        self.started_s: float | None = None

    # -- what it is ------------------------------------------------------------------------
    @property
    def master_url(self) -> str:
        return self.spark.master_url

    @property
    def bootstrap(self) -> str:
        return self.kafka.bootstrap

    @property
    def shared(self) -> Path:
        """The folder every host mounts at the same path (and the driver reads there too)."""
        return self.root / "shared"

    def role(self, role: str) -> list[Host]:
        return [h for h in self.hosts if h.role == role]

    # -- life ------------------------------------------------------------------------------
    def start(self) -> HostsCluster:
        from streamscale.broker.cluster import EmbeddedCluster
        from streamscale.broker.clusternet import ClusterNetwork

        why = why_not()
        if why:
            raise ClusterError(why)
        t0 = time.monotonic()
        try:
            self._make_hosts(ClusterNetwork)
            workers = self.role("worker")
            self.spark = StandaloneCluster(
                self.workers,
                self.worker_cores,
                self.worker_memory,
                self.log_dir,
                hosts=(self.role("master")[0], workers),
            )
            self.spark.start()
            self.kafka = EmbeddedCluster(
                self.brokers, log_dir=self.log_dir, data_dir=self.root / "kafka", hosts=self.role("broker")
            )
            self.kafka.keep_data = False  # its storage goes with the hosts: no clean shutdown needed (SIGKILL)
            self.kafka.start()
            for host, node in zip(self.role("broker"), self.kafka.nodes.values(), strict=True):
                host.pid = node.proc.pid
        except StreamscaleError as exc:
            self.stop()
            raise ClusterError(f"the cluster's hosts did not start: {exc}") from None
        except BaseException:
            self.stop()
            raise
        self.started_s = time.monotonic() - t0
        return self

    def _make_hosts(self, network_kind) -> None:
        hosts_root().mkdir(parents=True, exist_ok=True)
        self.root = Path(tempfile.mkdtemp(prefix="streamscale-hosts-", dir=hosts_root()))
        remove_at_exit(self.root)
        self.log_dir = self.log_dir or self.root / "logs"
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.shared.mkdir()
        self.network = network_kind(1 + self.workers + self.brokers).create()
        cpus = sorted(os.sched_getaffinity(0))
        roles = [("master", "master", [])]
        for i in range(1, self.workers + 1):  # worker i on its own CPUs, round the machine's
            own = [cpus[(k + (i - 1) * self.worker_cores) % len(cpus)] for k in range(self.worker_cores)]
            roles.append(("worker", f"worker-{i}", sorted(set(own))))
        roles += [("broker", f"broker-{i}", []) for i in range(1, self.brokers + 1)]
        needed = under_tmp(_installed() + [self.root])  # an install under /tmp stays every host's
        for node, (role, name, own) in enumerate(roles, start=1):
            folder = self.root / "hosts" / name
            host = Host(role, name, self.network.ip(node), self.network.netns(node), folder, own, needed)
            self.hosts.append(host.prepare())

    def stop(self) -> None:
        """Everything down: the workers and master, the brokers, the network, the folders (the
        executors' logs kept in the log folder)."""
        if self.spark is not None:
            self.spark.stop()
            self.spark = None
            self._keep_executor_logs()
        if self.kafka is not None:
            self.kafka.stop()
            self.kafka = None
        if self.network is not None:
            self.network.destroy()
            self.network = None
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)
            self.root = None
        for host in self.hosts:
            host.pid = None

    def _keep_executor_logs(self) -> None:
        """Each executor's stdout and stderr (in its worker's work folder, on its host) into the log
        folder, ``work/worker-N/app-…/ID/``, before the hosts' folders go."""
        if self.log_dir is None or self.root is None or self.log_dir.is_relative_to(self.root):
            return
        for host in self.role("worker"):
            for log in (host.folder / "work").glob("app-*/*/std*"):
                into = self.log_dir / "work" / host.name / log.parent.parent.name / log.parent.name
                into.mkdir(parents=True, exist_ok=True)
                shutil.copy2(log, into / log.name)

    def __enter__(self) -> HostsCluster:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- faults ----------------------------------------------------------------------------
    def start_worker(self, i: int) -> None:
        """Worker ``i`` up again, registered with the master."""
        self.spark.start_worker(i)

    def dead_workers(self) -> list[int]:
        return [i for i, p in self.spark.worker_procs.items() if p.poll() is not None]


def _installed() -> list[Path]:
    """What every host runs from: this Python's environment, Spark's home and Kafka's libraries."""
    import sys

    from streamscale.broker.kafka_server import kafka_libs
    from streamscale.sparkio.home import spark_home

    return [Path(sys.prefix), spark_home(), kafka_libs()]
