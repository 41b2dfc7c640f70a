"""Reliability end to end through Spark: ids from the input topic through a UC1-style pass-through
query to the output topic, with the query's process killed (SIGKILL, driver and executors) mid-run
and restarted from its checkpoint. Loss and duplicates are counted on the output topic.

The Kafka sink of Structured Streaming is at-least-once: a micro-batch whose output was written but
whose commit did not reach the checkpoint is written again after the restart. So alpha must be 0
and beta shows how much the kill cost; the test asserts exactly that.
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
    from streamscale.sparkio.io import read_kafka, write_kafka
    from streamscale.sparkio.session import build_session

    spark = build_session(a.master, "streamscale-reliability-pipeline", shuffle_partitions=1, python_source=False)
    conn = KafkaConnection.of(a.bootstrap, json.loads(a.kafka_properties))
    df = read_kafka(
        spark, conn, a.input, starting_offsets="earliest", max_offsets_per_trigger=a.max_offsets, impl=a.connector
    )
    trigger = {"availableNow": True} if a.available_now else {"processingTime": "200 milliseconds"}
    q = write_kafka(df.select("key", "value"), conn, a.output, a.checkpoint, impl=a.connector, trigger=trigger)
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


def run_pipeline_trial(
    bootstrap: KafkaConnection | str,
    work_dir: Path,
    n: int = 20_000,
    size: int = 100,
    partitions: int = 2,
    kill_at_fraction: float = 0.3,
    master: str = "local[1]",
    timeout_s: float = 300,
    topics_out: list[str] | None = None,
    connector: str | None = None,
) -> PipelineResult:
    from streamscale.sparkio.io import kafka_impl

    connector = kafka_impl(connector)  # checked here, not in the child process
    conn = KafkaConnection.of(bootstrap)
    work_dir.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:8]
    src, dst = f"trak-in-{tag}", f"trak-out-{tag}"
    if topics_out is not None:
        topics_out.extend([src, dst])
    with BrokerAccess(conn) as access:
        access.create_topics({src: partitions, dst: partitions})
        p = conn.producer({"enable.idempotence": True, "linger.ms": 5})
        for i in range(n):
            while True:
                try:
                    p.produce(src, make_value(i, size))
                    break
                except BufferError:
                    p.poll(0.01)
        if p.flush(60) != 0:
            raise ReliabilityError("could not write the input records")
        args = [
            "--bootstrap",
            conn.bootstrap,
            "--kafka-properties",
            json.dumps(dict(conn.properties)),
            "--input",
            src,
            "--output",
            dst,
            "--checkpoint",
            str(work_dir / f"checkpoint-{tag}"),
            "--master",
            master,
            "--connector",
            connector,
        ]
        # small batches before the kill (so it lands mid-run), one big catch-up batch after it
        first_args = [*args, "--max-offsets", str(max(100, n // 20))]
        log = work_dir / f"pipeline-{tag}.log"
        t0 = time.monotonic()
        proc = _start(first_args, log)
        written = 0
        try:
            while written < kill_at_fraction * n:
                if proc.poll() is not None:
                    raise ReliabilityError(f"the pipeline exited early (code {proc.returncode}); see {log}")
                if time.monotonic() - t0 > timeout_s:
                    raise ReliabilityError(f"the pipeline wrote only {written} of {n} records in {timeout_s} s")
                time.sleep(0.2)  # polling the output's end offsets, not waiting blindly
                written = sum(access.end_offsets(dst).values())
        finally:
            _kill_group(proc)
        first = time.monotonic() - t0
        at_kill = sum(access.end_offsets(dst).values())
        t1 = time.monotonic()
        proc = _start([*args, "--available-now", "--max-offsets", str(n)], log)
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            raise ReliabilityError(f"the restarted pipeline did not finish within {timeout_s} s; see {log}") from None
        if proc.returncode != 0:
            raise ReliabilityError(f"the restarted pipeline failed (code {proc.returncode}); see {log}")
        restart = time.monotonic() - t1
    ids = receive(conn, dst, "read_uncommitted", timeout_s)
    m, distinct, lost, dup = account(ids, n)
    return PipelineResult(n, m, distinct, lost, dup, lost / n, dup / n, at_kill, first, restart, connector)


if __name__ == "__main__":
    sys.exit(_spark_job())
