"""A broker node that dies during a run: the run is invalid with the reason named, runs again on
the nodes started again, and the answer says which runs the fault touched."""

import os
import signal
from datetime import UTC

import pytest

from streamscale.benchmark.execution import FAULT_REP, Execution
from streamscale.benchmark.experiment_runner import faulted
from streamscale.benchmark.faults import BrokerWatch
from streamscale.benchmark.spec import parse_spec
from streamscale.errors import BrokerError
from tests.benchmark.helpers import fake_result


class Proc:
    def __init__(self, pid, returncode=None):
        self.pid, self.returncode = pid, returncode

    def poll(self):
        return self.returncode


class Node:
    def __init__(self, proc):
        self.proc = proc


class FakeCluster:
    def __init__(self):
        self.nodes = {0: Node(Proc(10)), 1: Node(Proc(11)), 2: Node(Proc(12))}
        self.restored = 0

    def restore(self):
        self.restored += 1
        for i, n in self.nodes.items():
            if n.proc.poll() is not None:
                n.proc = Proc(100 + i)

    def pids(self):
        return [n.proc.pid for n in self.nodes.values()]


def test_the_watch_names_the_dead_node_and_starts_it_again():
    cluster = FakeCluster()
    watch = BrokerWatch(cluster)
    assert (watch.dead(), watch.fault(), watch.restore()) == ([], "", [])
    assert cluster.restored == 0  # nothing to start: the cluster is not touched
    cluster.nodes[1].proc.returncode = -9
    assert watch.dead() == ["node 1 (pid 11, exit -9)"]
    assert watch.fault() == "an embedded broker node died during the run: node 1 (pid 11, exit -9)"
    assert watch.restore() == ["node 1"] and watch.pids() == [10, 101, 12] and watch.dead() == []


def test_a_single_broker_that_died_stops_the_execution_with_one_line():
    class Broker:
        proc, log_path = Proc(7, returncode=-9), "/tmp/kafka-1.log"

    with pytest.raises(
        BrokerError, match=r"the embedded broker died \(broker \(pid 7, exit -9\); its log: /tmp/kafka-1"
    ):
        BrokerWatch(Broker()).restore()


def test_a_faulted_run_is_invalid_whatever_its_figures_said():
    r = faulted(fake_result(1000, 1, 0, passed=True), "an embedded broker node died during the run: node 2")
    assert (r.valid, r.passed, r.verdict) == (False, False, "invalid")
    assert r.note == "an embedded broker node died during the run: node 2: experiment invalid"


def _spec(name="faults", loads=(1000, 2000), duration_s=30, warmup_s=5, **sections):
    """UC1 into no sink on 1 core, every load once (no lower bound); ``sections``: more of the
    spec (``broker``), and ``topics`` for its benchmark section."""
    topics = sections.pop("topics", None)
    return parse_spec(
        {
            "name": name,
            **sections,
            "benchmark": {"sut": "uc1", "params": {"sink": "none"}, **({"topics": topics} if topics else {})},
            "execution": {
                "load": {"type": "sensors", "values": list(loads)},
                "resources": {"type": "cores", "values": [1]},
                "duration_s": duration_s,
                "max_duration_s": duration_s,  # a run undecided there ends there: the tests count runs
                "warmup_s": warmup_s,
                "repetitions": 1,
                "strategy": {"name": "full", "lower_bound": False},
            },
        }
    )


def test_a_run_a_fault_made_invalid_runs_again_and_the_answer_names_it(tmp_path, capsys):
    ran = []

    def run(load, res, rep, on_lag=None):
        ran.append((load, rep))
        r = fake_result(load, res, rep, passed=True)
        if (load, rep) == (2000, 0):  # a node died during the first run at 2,000
            return faulted(r, "an embedded broker node died during the run: node 1")
        return r

    summary = Execution(_spec(), tmp_path, run).run()
    assert ran == [(1000, 0), (2000, 0), (2000, FAULT_REP)]
    assert summary["results"] == [{"load": 1000.0, "resources": 1}, {"load": 2000.0, "resources": 1}]
    assert summary["fault_experiments"] == ["load2000_res1_rep0"]
    assert summary["answer"]["sentence"].endswith(
        "(1 run invalid where a broker node died, each run again: load2000_res1_rep0)"
    )
    assert "a broker fault made it invalid: run again once every node is up" in capsys.readouterr().out
    # resumed: both runs at 2,000 are recalled, none is run again
    ran.clear()
    again = Execution(_spec(), tmp_path, run).run()
    assert ran == [] and again["fault_experiments"] == ["load2000_res1_rep0"]


def test_a_fault_that_touches_the_run_again_too_leaves_the_point_invalid(tmp_path):
    def run(load, res, rep, on_lag=None):
        r = fake_result(load, res, rep, passed=True)
        return faulted(r, "node 1 died") if load == 2000 else r

    summary = Execution(_spec(), tmp_path, run).run()
    # run twice, invalid twice: no amount is said to hold 2,000, and no run is a third time
    assert summary["results"] == [{"load": 1000.0, "resources": 1}, {"load": 2000.0, "resources": None}]
    ids = sorted(r.exp_id for r in Execution(_spec(), tmp_path, run).done.values())
    assert ids == ["load1000_res1_rep0", "load2000_res1_rep0", f"load2000_res1_rep{FAULT_REP}"]


def test_a_real_cluster_node_killed_is_seen_dead_and_started_again(tmp_path):
    from streamscale.broker.cluster import EmbeddedCluster

    with EmbeddedCluster(3, log_dir=tmp_path / "logs") as cluster:
        watch = BrokerWatch(cluster)
        assert watch.dead() == []
        victim = cluster.nodes[2].proc.pid
        os.kill(victim, signal.SIGKILL)
        cluster.nodes[2].proc.wait(30)
        assert watch.dead() == [f"node 2 (pid {victim}, exit -9)"]
        assert watch.restore() == ["node 2"]
        assert watch.dead() == [] and victim not in watch.pids() and len(watch.pids()) == 3
        # the node answers again: the cluster has its three brokers
        admin = cluster.connection.admin()
        assert sorted(admin.list_topics(timeout=10).brokers) == sorted(cluster.nodes)
    assert all(not n.alive() for n in cluster.nodes.values())


@pytest.mark.spark
@pytest.mark.slow
def test_a_node_killed_during_a_benchmark_run_makes_it_invalid_and_the_next_runs_on_three(tmp_path, monkeypatch):
    import csv
    import json

    from streamscale.benchmark.execution import run_execution
    from streamscale.broker.cluster import EmbeddedCluster

    clusters = []
    start = EmbeddedCluster.start

    def spy(self):
        clusters.append(self)
        return start(self)

    monkeypatch.setattr(EmbeddedCluster, "start", spy)

    class KillAt15s:  # the live page's hooks: the lag sampler's seconds of the running experiment
        def __init__(self):
            self.experiment, self.killed = {}, None

        def start_experiment(self, **info):
            self.experiment = info

        def add_sample(self, t_s, lag):
            e = self.experiment
            if self.killed is None and (e["load"], e["repetition"]) == (10_000, 0) and t_s >= 15:
                self.killed = clusters[0].nodes[1].proc.pid
                os.kill(self.killed, signal.SIGKILL)

        def end_experiment(self, result):
            pass

    spec = _spec(
        "killed",
        (5_000, 10_000),
        duration_s=40,
        warmup_s=10,
        broker={"brokers": 3},
        topics={"partitions": 4, "replication_factor": 3, "min_insync_replicas": 2},
    )
    live = KillAt15s()
    summary = run_execution(spec, tmp_path, live=live)
    assert live.killed is not None
    rows = {r["exp_id"]: r for r in csv.DictReader(open(tmp_path / "experiments.csv"))}
    hit = rows["load10000_res1_rep0"]
    assert (hit["valid"], hit["verdict"]) == ("False", "invalid")
    assert hit["fault"] == f"an embedded broker node died during the run: node 1 (pid {live.killed}, exit -9)"
    assert hit["note"].startswith(hit["fault"] + ": experiment invalid")
    again = rows[f"load10000_res1_rep{FAULT_REP}"]
    assert again["fault"] == ""  # on the three nodes again
    assert summary["fault_experiments"] == ["load10000_res1_rep0"]
    assert "each run again: load10000_res1_rep0" in summary["answer"]["sentence"]
    assert json.loads((tmp_path / "summary.json").read_text())["fault_experiments"] == ["load10000_res1_rep0"]
    assert all(not n.alive() for n in clusters[0].nodes.values())  # and nothing left running


class FakeHosts:
    """A cluster of hosts' faces the watch reads: its brokers, its workers' daemons and hosts."""

    class Worker:
        def __init__(self, name, ip):
            self.name, self.ip = name, ip

    def __init__(self):
        self.kafka = FakeCluster()
        self.spark = type("Spark", (), {})()
        self.spark.worker_procs = {1: Proc(21), 2: Proc(22)}
        self.workers = [self.Worker("worker-1", "10.9.8.12"), self.Worker("worker-2", "10.9.8.13")]
        self.started: list[int] = []

    def role(self, role):
        assert role == "worker"
        return self.workers

    def dead_workers(self):
        return [i for i, p in self.spark.worker_procs.items() if p.poll() is not None]

    def start_worker(self, i):
        self.started.append(i)
        self.spark.worker_procs[i] = Proc(200 + i)


def test_the_hosts_watch_names_the_worker_host_that_died_and_starts_it_again():
    from streamscale.benchmark.faults import HostsWatch

    hosts = FakeHosts()
    watch = HostsWatch(hosts)
    assert (watch.dead(), watch.fault(), watch.restore()) == ([], "", [])
    hosts.spark.worker_procs[2].returncode = -9
    assert watch.fault() == (
        "a host of the cluster died during the run (its executors with it): worker-2 at 10.9.8.13 (pid 22, exit -9)"
    )
    assert watch.restore() == ["worker-2"] and hosts.started == [2] and watch.dead() == []
    hosts.kafka.nodes[0].proc.returncode = -9  # a broker host: as an embedded cluster's node
    assert watch.dead() == ["node 0 (pid 10, exit -9)"] and watch.restore() == ["node 0"]


def _commits(t0_wall, rate, lag_at):
    """Lag samples and one-second batches of a query fed ``rate`` records/s, whose lag right after
    the commit at second t is ``lag_at(t)`` (what Recovery reads, made by hand)."""
    from datetime import datetime

    from streamscale.experiment.lagsampler import LagSample

    samples = [LagSample(t, 0, rate * t, 0) for t in range(0, 121)]
    batches = []
    for t in range(1, 120):
        start = datetime.fromtimestamp(t0_wall + t - 0.5, UTC).isoformat()
        done = rate * t - lag_at(t)  # the batch ends at t: the lag after it is the end minus its offsets
        batches.append({"timestamp": start, "batch_ms": 500, "input_rows": 1, "end_offsets": {"in": {"0": done}}})
    return samples, batches


class Dead:
    def __init__(self):
        self.dead_now = False

    def dead(self):
        return ["worker-2 at 10.9.8.13 (pid 22, exit -9)"] if self.dead_now else []


def test_a_hosts_fault_holds_the_run_until_the_lag_after_a_commit_is_back_at_its_maximum_before_it(monkeypatch):
    import math

    from streamscale.benchmark import faults

    t0_wall = 1_000_000.0

    # steady 2,000 after each commit up to the fault at 40 s (its maximum before: 3,000 at 30 s), then
    # 20,000 at 41 s, worked off by 2,000 a second: 4,000 at 49 s, 2,000 (at most 3,000) at 50 s
    def lag_at(t):
        if t <= 40:
            return 3_000 if t == 30 else 2_000
        return max(1_000, 20_000 - 2_000 * (t - 41))

    samples, batches = _commits(t0_wall, 10_000, lag_at)
    watch, looked = Dead(), []
    recovery = faults.Recovery(lambda *a: looked.append(a) or False, watch, warmup_s=10)
    now = {"wall": t0_wall + 35, "mono": 500.0}
    monkeypatch.setattr(faults.time, "time", lambda: now["wall"])
    monkeypatch.setattr(faults.time, "monotonic", lambda: now["mono"])

    def look(at_s):
        now["wall"], now["mono"] = t0_wall + at_s, 500.0 + at_s
        upto = [b for b in batches if b["timestamp"] <= faults_iso(t0_wall + at_s)]
        return recovery([s for s in samples if s.t_s <= at_s], upto, t0_wall, "in")

    assert look(35) is False and len(looked) == 1  # no fault: the run's own judge
    watch.dead_now = True
    assert look(40.2) is False and recovery.ceiling == 3_000 and recovery.holds_until == 540.2 + 60
    assert look(45) is False and len(looked) == 1  # past the fault the judge is not asked: it is invalid anyway
    assert look(50) is True and recovery.recovery_s == 9.8  # the commit at 50 s, 9.8 s after the fault was seen
    assert recovery.said() == "the lag recovered in 9.8 s"
    never = faults.Recovery(lambda *a: False, watch, warmup_s=10)
    recovery = never
    samples, batches = _commits(t0_wall, 10_000, lambda t: 2_000 if t <= 40 else 50_000)
    assert look(40.2) is False and look(99) is False and look(100.3) is True and math.isinf(never.recovery_s)
    assert never.said() == "the lag not recovered within 60 s"


def faults_iso(wall):
    from datetime import datetime

    return datetime.fromtimestamp(wall, UTC).isoformat()
