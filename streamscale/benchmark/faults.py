"""The embedded Kafka as a benchmark's runs see it: which of its nodes died during a run, and every
node up again before the next one.

A run during which a node of the embedded broker or cluster died measured the fault, not the job:
it is invalid with that reason and runs again once the nodes are back (:mod:`.execution`). A single
embedded broker that died cannot be started again under its clients (its storage and port are
gone with it), so the execution stops there with one line; it resumes when run again.
"""

from __future__ import annotations

import math
import time

from streamscale.errors import BrokerError

RECOVERY_S = 60.0  # how long a run goes on past a host's fault to see the job recover


class BrokerWatch:
    """Watches an embedded :class:`~streamscale.broker.EmbeddedBroker` or
    :class:`~streamscale.broker.cluster.EmbeddedCluster` (anything with ``nodes`` or ``proc``)."""

    kind = "a broker"  # whose fault, as the run line says it
    where = "of the embedded broker"  # what the run line says was started again
    recovers = False  # a run stops at the next look after a fault (what follows measures the fault)

    def __init__(self, kafka):
        self.kafka = kafka

    def _procs(self) -> dict[str, object]:
        nodes = getattr(self.kafka, "nodes", None)
        if nodes is not None:
            return {f"node {i}": n.proc for i, n in sorted(nodes.items())}
        return {"broker": self.kafka.proc}

    def dead(self) -> list[str]:
        """The nodes no longer running, each as "node 2 (pid 4711, exit -9)"."""
        out = []
        for name, proc in self._procs().items():
            if proc is None:
                out.append(f"{name} (stopped)")
            elif proc.poll() is not None:
                out.append(f"{name} (pid {proc.pid}, exit {proc.returncode})")
        return out

    def fault(self) -> str:
        """What a run saw of the broker: "" when every node ran, else the note that makes it invalid."""
        dead = self.dead()
        if not dead:
            return ""
        what = "an embedded broker node" if len(dead) == 1 else "embedded broker nodes"
        return f"{what} died during the run: {', '.join(dead)}"

    def restore(self) -> list[str]:
        """Start the nodes that died again and wait until every one answers; the names of those
        started. A single broker cannot be: BrokerError, with what to do."""
        dead = self.dead()
        if not dead:
            return []
        if not hasattr(self.kafka, "restore"):
            log = getattr(self.kafka, "log_path", None)
            raise BrokerError(
                f"the embedded broker died ({', '.join(dead)}; its log: {log}): the execution stops here; "
                "run it again to resume where it stopped"
            )
        self.kafka.restore()
        return [d.split(" (")[0] for d in dead]

    def pids(self) -> list[int]:
        return list(self.kafka.pids())


class HostsWatch(BrokerWatch):
    """Watches a :class:`~streamscale.hosts.cluster.HostsCluster` a run started: its brokers as
    :class:`BrokerWatch` does, and its Spark workers, each a host whose death (and its executor's)
    makes the run invalid, naming the host; every host is up again before the next run."""

    kind = "a host's"
    where = "of the cluster's hosts"
    recovers = True  # a run goes on past a host's fault to see the job recover (Recovery)

    def __init__(self, hosts):
        super().__init__(hosts.kafka)
        self.hosts = hosts

    def dead(self) -> list[str]:
        out = super().dead()
        for i in self.hosts.dead_workers():
            host = self.hosts.role("worker")[i - 1]
            proc = self.hosts.spark.worker_procs[i]
            out.append(f"{host.name} at {host.ip} (pid {proc.pid}, exit {proc.returncode})")
        return out

    def fault(self) -> str:
        dead = self.dead()
        if not dead:
            return ""
        return f"a host of the cluster died during the run (its executors with it): {', '.join(dead)}"

    def restore(self) -> list[str]:
        """The workers that died started again (each registers with the master, and the running
        application gets its executor back), then the brokers; the names of those started."""
        started = []
        for i in self.hosts.dead_workers():
            self.hosts.start_worker(i)
            started.append(self.hosts.role("worker")[i - 1].name)
        return started + super().restore()


class Recovery:
    """A judged run's looks on a cluster of hosts: until a host dies, the run's own judge; from the
    look that first sees the fault on, the run goes on (up to :data:`RECOVERY_S` past it: its
    ``holds_until``) until the lag after a commit is back at or below the highest it was after a
    commit between the warm-up and the fault: ``recovery_s`` is how long that took (inf: not within
    RECOVERY_S; NaN: no fault was seen, or no commit before it to compare with)."""

    def __init__(self, judge, watch, warmup_s: float):
        self.judge, self.watch, self.warmup_s = judge, watch, warmup_s
        self.fault_s: float | None = None  # when the fault was seen, s since the lag sampler's start
        self.ceiling: float | None = None
        self.holds_until = 0.0  # monotonic: the run goes on at least until then
        self.recovery_s = float("nan")

    def __call__(self, lag, batches, t0_wall, topic) -> bool:
        from streamscale.experiment.slo import batch_boundary_lags

        if self.fault_s is None:
            if not self.watch.dead():
                return self.judge(lag, batches, t0_wall, topic)
            self.fault_s = time.time() - t0_wall
            self.holds_until = time.monotonic() + RECOVERY_S
            before = [(t, v) for t, v in zip(*batch_boundary_lags(batches, lag, t0_wall, topic)) if t <= self.fault_s]
            steady = [v for t, v in before if t >= self.warmup_s] or [v for _, v in before]
            self.ceiling = max(steady) if steady else None
            return self.ceiling is None  # nothing to recover to: the run ends, as at any fault
        commits = zip(*batch_boundary_lags(batches, lag, t0_wall, topic))
        back = [t for t, v in commits if t > self.fault_s and v <= self.ceiling]
        if back:
            self.recovery_s = round(back[0] - self.fault_s, 1)
            return True
        if time.monotonic() >= self.holds_until:
            self.recovery_s = math.inf
            return True
        return False

    def said(self) -> str:
        """The recovery as the run's fault says it ("" without one)."""
        if self.fault_s is None or math.isnan(self.recovery_s):
            return ""
        if math.isinf(self.recovery_s):
            return f"the lag not recovered within {RECOVERY_S:.0f} s"
        return f"the lag recovered in {self.recovery_s:g} s"
