"""Reliability end to end through Spark: ids from the input topic through a UC1-style pass-through
query to the output topic, with a fault mid-run: the query's process killed (SIGKILL, driver and
executors) and restarted from its checkpoint, or, on an embedded cluster, the leader of the output
topic's first partition killed (SIGKILL) while the query runs on. Loss and duplicates are counted
on the output topic.

The Kafka sink of Structured Streaming is at-least-once: a micro-batch whose output was written but
whose commit did not reach the checkpoint is written again after a restart. So alpha must be 0
and beta shows how much the fault cost; the tests assert exactly that.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from streamscale.broker.access import BrokerAccess
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ReliabilityError
from streamscale.reliability.tester import account, make_value, receive


@dataclass
class PipelineResult:
    N: int
    M: int
    distinct: int
    lost: int
    duplicated: int
    alpha: float
    beta: float
    output_at_kill: int
    first_run_s: float
    restart_run_s: float
    connector: str = "spark"  # the Kafka connector the query read and wrote with
    fault: str = "query killed"
    killed_node: int | None = None  # the broker a leader kill took down
    query_restarts: int = 0  # times the query failed and was started again from its checkpoint
    replication_factor: int = 1

    def row(self) -> dict:
        return asdict(self)


def _spark_job(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="UC1-style pass-through query (reliability end to end)")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--kafka-properties", default="{}", help="the user's Kafka client properties (JSON)")
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--checkpoint", required=True)
    ap.add_argument("--master", default="local[1]")
    ap.add_argument("--max-offsets", type=int, default=2000)
    ap.add_argument("--available-now", action="store_true", help="process what is there, then exit")
    ap.add_argument("--connector", default=None, help="Kafka connector: spark or python")
    a = ap.parse_args(argv)
    from streamscale.sparkio.io import WriteQuery, read_kafka, write_kafka
    from streamscale.sparkio.session import build_session

    spark = build_session(a.master, "streamscale-reliability-pipeline", shuffle_partitions=1, python_source=False)
    conn = KafkaConnection.of(a.bootstrap, json.loads(a.kafka_properties))
    df = read_kafka(
        spark, conn, a.input, starting_offsets="earliest", max_offsets_per_trigger=a.max_offsets, impl=a.connector
    )
    trigger = {"availableNow": True} if a.available_now else {"processingTime": "200 milliseconds"}
    q = write_kafka(df.select("key", "value"), conn, a.output, WriteQuery(a.checkpoint, trigger), impl=a.connector)
    q.awaitTermination()
    spark.stop()
    return 0


def _start(args: list[str], log: Path) -> subprocess.Popen:
    from streamscale.processes import die_with_parent_in_own_session

    with open(log, "ab") as f:
        # own session: SIGKILL to the group takes the driver, its JVM and the Python workers at
        # once; and the driver dies with this process (its JVM follows: Spark's gateway exits
        # when its driver's pipe closes), so a killed `reliability pipeline` leaves nothing behind
        return subprocess.Popen(
            [sys.executable, "-m", "streamscale.reliability.pipeline", *args],
            stdout=f,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent_in_own_session,
        )


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(30)


@dataclass(frozen=True)
class PipelineTrial:
    """What a pipeline trial does: ``n`` records of ``size`` bytes through a Kafka-to-Kafka query of
    ``partitions``, and ``kill`` (``query``: its processes, then a restart from the checkpoint, or
    ``leader``: of the output topic's partition 0) once ``kill_at_fraction`` of them are written."""

    n: int = 20_000
    size: int = 100
    partitions: int = 2
    kill_at_fraction: float = 0.3
    master: str = "local[1]"
    timeout_s: float = 300
    connector: str | None = None
    kill: str = "query"


def run_pipeline_trial(
    bootstrap: KafkaConnection | str,
    work_dir: Path,
    trial: PipelineTrial = PipelineTrial(),  # noqa: B008 - frozen, never changed
    cluster=None,
    topics_out: list[str] | None = None,
) -> PipelineResult:
    """``cluster``: the :class:`EmbeddedCluster` whose leader a ``leader`` kill kills (its topics get
    up to 3 replicas, 2 in sync); ``topics_out`` collects the topics the trial made."""
    from streamscale.sparkio.io import kafka_impl

    connector = kafka_impl(trial.connector)  # checked here, not in the child process
    if trial.kill not in ("query", "leader"):
        raise ReliabilityError(f"kill must be query or leader, not {trial.kill!r}")
    if trial.kill == "leader" and cluster is None:
        raise ReliabilityError("killing a partition's leader needs the embedded cluster")
    conn = KafkaConnection.of(bootstrap)
    work_dir.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    src, dst = f"trak-in-{tag}", f"trak-out-{tag}"
    if topics_out is not None:
        topics_out.extend([src, dst])
    rf = min(3, cluster.brokers) if cluster is not None else 1
    config = {"min.insync.replicas": str(max(1, rf - 1))}
    n = trial.n
    with BrokerAccess(conn) as access:
        access.create_topics({src: trial.partitions, dst: trial.partitions}, rf, config)
        _write_input(conn, src, n, trial.size)
        args = [
            *("--bootstrap", conn.bootstrap, "--kafka-properties", json.dumps(dict(conn.properties))),
            *("--input", src, "--output", dst, "--checkpoint", str(work_dir / f"checkpoint-{tag}")),
            *("--master", trial.master, "--connector", connector),
        ]
        run = _Run(access, dst, work_dir / f"pipeline-{tag}.log", trial.timeout_s)
        if trial.kill == "query":
            result = run.query_killed(args, n, trial.kill_at_fraction)
        else:
            result = run.leader_killed(args, n, trial.kill_at_fraction, cluster)
    ids = receive(conn, dst, "read_uncommitted", trial.timeout_s)
    m, distinct, lost, dup = account(ids, n)
    return PipelineResult(
        *(n, m, distinct, lost, dup, lost / n, dup / n),
        *result,
        connector=connector,
        replication_factor=rf,
        fault="query killed" if trial.kill == "query" else "leader killed",
        killed_node=run.killed_node,
        query_restarts=run.restarts,
    )


def _write_input(conn: KafkaConnection, topic: str, n: int, size: int) -> None:
    p = conn.producer({"enable.idempotence": True, "linger.ms": 5})
    for i in range(n):
        while True:
            try:
                p.produce(topic, make_value(i, size))
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(60) != 0:
        raise ReliabilityError("could not write the input records")


class _Run:
    """The query's runs of one trial, and the fault between them."""

    def __init__(self, access: BrokerAccess, dst: str, log: Path, timeout_s: float):
        self.access, self.dst, self.log, self.timeout_s = access, dst, log, timeout_s
        self.killed_node: int | None = None
        self.restarts = 0

    def written(self) -> int:
        return sum(self.access.end_offsets(self.dst).values())

    def _until_written(self, proc: subprocess.Popen, count: float, t0: float) -> None:
        written = 0
        while written < count:
            if proc.poll() is not None:
                raise ReliabilityError(f"the pipeline exited early (code {proc.returncode}); see {self.log}")
            if time.monotonic() - t0 > self.timeout_s:
                raise ReliabilityError(f"the pipeline wrote only {written} records in {self.timeout_s} s")
            time.sleep(0.2)  # polling the output's end offsets, not waiting blindly
            written = self.written()

    def _to_the_end(self, args: list[str], n: int, proc: subprocess.Popen | None = None) -> None:
        """The query processes what is there and exits; one that fails is started again from its
        checkpoint (up to 3 times)."""
        while True:
            proc = proc or _start([*args, "--available-now", "--max-offsets", str(n)], self.log)
            try:
                proc.wait(self.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise ReliabilityError(
                    f"the pipeline did not finish within {self.timeout_s} s; see {self.log}"
                ) from None
            if proc.returncode == 0:
                return
            if self.restarts >= 3:
                raise ReliabilityError(
                    f"the pipeline failed (code {proc.returncode}) {self.restarts + 1} times; see {self.log}"
                )
            self.restarts += 1
            proc = None

    def query_killed(self, args: list[str], n: int, kill_at: float) -> tuple[int, float, float]:
        # small batches before the kill (so it lands mid-run), one big catch-up batch after it
        t0 = time.monotonic()
        proc = _start([*args, "--max-offsets", str(max(100, n // 20))], self.log)
        try:
            self._until_written(proc, kill_at * n, t0)
        finally:
            _kill_group(proc)
        first = time.monotonic() - t0
        at_kill = self.written()
        t1 = time.monotonic()
        self.restarts = 1
        self._to_the_end(args, n)
        return at_kill, first, time.monotonic() - t1

    def leader_killed(self, args: list[str], n: int, kill_at: float, cluster) -> tuple[int, float, float]:
        # one run in small batches; the output's leader dies under it, and the query carries on
        # (or, failing, is started again from its checkpoint)
        t0 = time.monotonic()
        proc = _start([*args, "--available-now", "--max-offsets", str(max(100, n // 40))], self.log)
        try:
            self._until_written(proc, kill_at * n, t0)
            at_kill = self.written()
            self.killed_node = cluster.leader(self.dst, 0)
            cluster.kill(self.killed_node, hard=True)
            first = time.monotonic() - t0
            self._to_the_end(args, n, proc)
        except BaseException:
            _kill_group(proc)
            raise
        rest = time.monotonic() - t0 - first
        cluster.restore()
        return at_kill, first, rest


if __name__ == "__main__":
    sys.exit(_spark_job())
