"""Where a micro-batch of Spark's Kafka connector spends its time, and what the settings a user can
change do to it: one SparkSession, 8 partitions, 100,000-record batches into ``noop``.

    .venv/bin/python benchmarks/spark_connector_profile.py [--records 500000] [--repeat 2] [--cpu-runs 5] [--jfr]

Part 1, per variant of read settings: records/s over the whole ``availableNow`` run, the median
steady batch (after the first), the first and the last batch, and the median of each phase of
Spark's progress report (``durationMs``: ``addBatch`` is the read and the sink; ``walCommit`` and
``commitOffsets`` write the checkpoint's offsets and commit logs, the same for any source).

Part 2, where the CPU goes: Spark's connector with streamscale's read settings and Spark's parquet
file stream source (the same records, files of one batch each) alternate; per run, the CPU time of
the Spark JVM's threads by kind (the tasks that read and write, the JIT compilers, the garbage
collector, the rest: planning, scheduling, the checkpoint) and of the broker's JVM, read from
/proc (Linux). With ``--jfr``, Java Flight Recorder samples the task threads during the connector's
runs, and each sample is put down to the code it is in (the first frame, from the top, outside the
JDK and Scala's library).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from _drain import drain
from _procstat import cpu_seconds
from source_throughput import raw_consumer, write_batch_files

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, generate
from streamscale.sparkio.io import SPARK_READ_DEFAULTS
from streamscale.sparkio.session import build_session

BATCH = 100_000
PARTS = 8
POLL_8MB = {"kafka.max.poll.records": "20000", "kafka.max.partition.fetch.bytes": str(8 << 20)}
VARIANTS = {
    "defaults": {},
    "minPartitions=2": {"minPartitions": "2"},
    "fetch 8 MB/partition": {"kafka.max.partition.fetch.bytes": str(8 << 20), "kafka.fetch.max.bytes": str(64 << 20)},
    "poll 20k records, 8 MB": POLL_8MB,
    "... fetch.max.wait.ms 10": {**POLL_8MB, "kafka.fetch.max.wait.ms": "10"},
    "no consumer cache": {"kafka.consumer.cache.enabled": "false"},
}
PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")
KINDS = ("tasks", "jit", "gc", "other")


def batches(spark, bootstrap: str, topic: str, total: int, opts: dict) -> list[dict]:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(BATCH))
    )
    for k, v in opts.items():
        reader = reader.option(k, v)
    return drain(reader.load(), total)


def figures(progress: list[dict], total: int) -> dict:
    times = [p["durationMs"]["triggerExecution"] for p in progress]
    steady = progress[1:] or progress
    return {
        "whole": total / (sum(times) / 1000),
        "steady_ms": statistics.median(times[1:] or times),
        "first_ms": times[0],
        "last_ms": times[-1],
        **{k: statistics.median(p["durationMs"].get(k, 0) for p in steady) for k in PHASES},
    }


def thread_cpu(pid: int) -> dict[str, tuple[str, float]]:
    """thread id -> (its name, CPU seconds so far); the JVM names its native threads."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            out[tid] = (name, cpu_seconds(pid, tid))
        except OSError:  # the thread ended
            continue
    return out


def kind(thread: str) -> str:
    if "CompilerThre" in thread:
        return "jit"
    if thread.startswith("Executor task"):
        return "tasks"
    if thread.startswith(("GC ", "G1 ")):
        return "gc"
    return "other"


def cpu_of(run, spark_pid: int, broker_pid: int) -> dict:
    """Run ``run()`` (-> its batches' progress) and add up the CPU it cost, by kind of thread."""
    before, broker = thread_cpu(spark_pid), cpu_seconds(broker_pid)
    progress = run()
    after = thread_cpu(spark_pid)
    spent = Counter()
    for tid, (name, cpu) in after.items():
        spent[kind(name)] += cpu - before.get(tid, (name, 0.0))[1]
    times = [p["durationMs"]["triggerExecution"] for p in progress]
    return {"trigger_s": sum(times) / 1000, **{k: spent[k] for k in KINDS}, "broker": cpu_seconds(broker_pid) - broker}


# where a task thread's sample is, by the first frame outside the JDK and Scala's library
CODE = (
    ("org/apache/kafka/common/record", "kafka-clients: decode record batches"),
    ("org/apache/kafka/clients/consumer/internals/CompletedFetch", "kafka-clients: decode record batches"),
    ("org/apache/kafka/common/utils", "kafka-clients: decode record batches"),
    ("org/apache/kafka", "kafka-clients: fetch, network, the rest"),
    ("org/apache/spark/sql/kafka010", "Spark's connector: consumer, record -> row"),
    ("org/apache/spark/sql/catalyst/util", "Spark: timestamps, other conversions"),
    ("org/apache/spark/sql/catalyst/expressions/codegen", "Spark: UnsafeRow writes"),
    ("org/apache/spark/unsafe", "Spark: UnsafeRow writes"),
    ("org/apache/spark", "Spark: generated code, the sink, the task"),
)
LIBRARIES = ("java/", "javax/", "jdk/", "sun/", "scala/")


def jcmd(pid: int, *args: str) -> None:
    subprocess.run(["jcmd", str(pid), *args], check=True, capture_output=True, timeout=60)


def where_tasks_are(recording: Path) -> tuple[int, Counter]:
    """(samples of task threads, samples by code) of a JFR recording."""
    out = subprocess.run(
        ["jfr", "print", "--json", "--events", "jdk.ExecutionSample", str(recording)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    code: Counter = Counter()
    n = 0
    for event in json.loads(out)["recording"]["events"]:
        values = event["values"]
        thread = (values.get("sampledThread") or {}).get("javaName") or ""
        if not thread.startswith("Executor task"):
            continue
        n += 1
        # lambdas' classes are named with dots
        frames = [
            f["method"]["type"]["name"].replace(".", "/") for f in (values.get("stackTrace") or {}).get("frames", [])
        ]
        first = next((f for f in frames if not f.startswith(LIBRARIES)), None)
        if first is None:  # JFR keeps the top 64 frames: the JDK's or Scala's code, called from deeper down
            code["JDK or Scala library, caller beyond the recorded frames"] += 1
            continue
        code[next((label for prefix, label in CODE if first.startswith(prefix)), "other: " + first)] += 1
    return n, code


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cpu-runs", type=int, default=5, help="runs of each reader in part 2 (0: skip it)")
    ap.add_argument("--jfr", action="store_true", help="in part 2, sample where the connector's tasks are")
    args = ap.parse_args()
    missing = [tool for tool in ("jcmd", "jfr") if args.jfr and shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"--jfr needs the JDK's {' and '.join(missing)} on PATH")
    results: dict[str, list[dict]] = {}
    cpu: dict[str, list[dict]] = {}
    samples: tuple[int, Counter] = (0, Counter())
    work = Path(tempfile.mkdtemp(prefix="bench-profile-"))
    try:
        with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
            topic = "profile"
            access.create_topic(topic, PARTS)
            generate(
                GeneratorConfig(
                    broker.bootstrap, topic, sensors=100_000, workers=2, records=args.records, throttle=False
                )
            )
            spark = build_session("local[2]", "bench-connector-profile", shuffle_partitions=2)
            batches(spark, broker.bootstrap, topic, args.records, {})  # warm-up: JIT, consumers
            for rep in range(args.repeat):
                for name, opts in VARIANTS.items():
                    progress = batches(spark, broker.bootstrap, topic, args.records, opts)
                    results.setdefault(name, []).append(figures(progress, args.records))
                print(f"settings: repetition {rep + 1}/{args.repeat} done", flush=True)
            if args.cpu_runs:
                _, rows = raw_consumer(broker.bootstrap, topic, PARTS, args.records, collect=True)
                write_batch_files(rows, work / "files", BATCH)
                files = str(work / "files")
                schema = spark.read.parquet(files).schema
                spark_pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
                readers = {
                    "Spark's connector": lambda: batches(
                        spark, broker.bootstrap, topic, args.records, SPARK_READ_DEFAULTS
                    ),
                    "parquet files": lambda: drain(
                        spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(files), args.records
                    ),
                }
                for reader in readers.values():  # warm-up of the file source
                    reader()
                for i in range(args.cpu_runs):
                    for name, reader in readers.items():
                        sample = args.jfr and name == "Spark's connector"
                        if sample:
                            jcmd(spark_pid, "JFR.start", "name=tasks", "settings=profile")
                        cpu.setdefault(name, []).append(cpu_of(reader, spark_pid, broker.proc.pid))
                        if sample:
                            recording = work / f"tasks-{i}.jfr"
                            jcmd(spark_pid, "JFR.stop", "name=tasks", f"filename={recording}")
                            n, code = where_tasks_are(recording)
                            samples = (samples[0] + n, samples[1] + code)
                    print(f"CPU: run {i + 1}/{args.cpu_runs} done", flush=True)
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(args, results, cpu, samples)


def report(args, results: dict[str, list[dict]], cpu: dict[str, list[dict]], samples: tuple[int, Counter]) -> None:
    print(f"\n{args.records:,} records, {PARTS} partitions, batches of {BATCH:,}; median of {args.repeat} (min-max)")
    print(
        f"{'variant':<26}{'whole run records/s':>28}{'steady ms':>11}{'first ms':>10}{'last ms':>9}"
        + "".join(f"{k:>15}" for k in PHASES)
    )
    for name, rs in results.items():
        whole = [r["whole"] for r in rs]
        line = f"{name:<26}{statistics.median(whole):>12,.0f} ({min(whole):,.0f}-{max(whole):,.0f})"
        line += "".join(
            f"{statistics.median(r[k] for r in rs):>{w},.0f}"
            for k, w in (("steady_ms", 11), ("first_ms", 10), ("last_ms", 9))
        )
        line += "".join(f"{statistics.median(r[k] for r in rs):>15,.0f}" for k in PHASES)
        print(line)
    if not cpu:
        return
    print(
        f"\nCPU seconds per run of {args.records:,} records, median of {args.cpu_runs}"
        " (Spark's JVM by thread; the broker)"
    )
    cols = ("trigger_s", *KINDS, "broker")
    print(f"{'reader':<20}" + "".join(f"{c:>12}" for c in ("run (s)", *KINDS, "broker", "records/s")))
    for name, rs in cpu.items():
        med = {c: statistics.median(r[c] for r in rs) for c in cols}
        print(f"{name:<20}" + "".join(f"{med[c]:>12.2f}" for c in cols) + f"{args.records / med['trigger_s']:>12,.0f}")

    n, code = samples
    if n:
        print(f"\nWhere the connector's tasks are: {n:,} samples of the task threads (JFR), by code")
        for label, k in code.most_common(12):
            print(f"{k / n:>7.1%}  {label}")


if __name__ == "__main__":
    from _main import run

    run(main)
