"""Where a micro-batch of Spark's Kafka connector spends its time, and what the settings a user can
change do to it: one SparkSession, 8 partitions, 100,000-record batches into ``noop``.

    .venv/bin/python benchmarks/spark_connector_profile.py [--records 500000] [--repeat 2] [--cpu-runs 5]

Part 1, per variant of read settings: records/s over the whole ``availableNow`` run, the median
steady batch (after the first), the first and the last batch, and the median of each phase of
Spark's progress report (``durationMs``: ``addBatch`` is the read and the sink; ``walCommit`` and
``commitOffsets`` write the checkpoint's offsets and commit logs, the same for any source).

Part 2, where the CPU goes: Spark's connector with streamscale's read settings and Spark's parquet
file stream source (the same records, files of one batch each) alternate; per run, the CPU time of
the Spark JVM's threads by kind (the tasks that read and write, the JIT compilers, the garbage
collector, the rest: planning, scheduling, the checkpoint) and of the broker's JVM, read from
/proc (Linux).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
from collections import Counter
from pathlib import Path

from source_throughput import drain, raw_consumer, write_batch_files

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
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name = Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip()
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[tid] = (name, (int(stat[11]) + int(stat[12])) / tick)
    return out


def kind(thread: str) -> str:
    if "CompilerThre" in thread:
        return "jit"
    if thread.startswith("Executor task"):
        return "tasks"
    if thread.startswith(("GC ", "G1 ")):
        return "gc"
    return "other"


def process_cpu(pid: int) -> float:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")


def cpu_of(run, spark_pid: int, broker_pid: int) -> dict:
    """Run ``run()`` (-> its batches' progress) and add up the CPU it cost, by kind of thread."""
    before, broker = thread_cpu(spark_pid), process_cpu(broker_pid)
    progress = run()
    after = thread_cpu(spark_pid)
    spent = Counter()
    for tid, (name, cpu) in after.items():
        spent[kind(name)] += cpu - before.get(tid, (name, 0.0))[1]
    times = [p["durationMs"]["triggerExecution"] for p in progress]
    return {"trigger_s": sum(times) / 1000, **{k: spent[k] for k in KINDS}, "broker": process_cpu(broker_pid) - broker}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--cpu-runs", type=int, default=5, help="runs of each reader in part 2 (0: skip it)")
    args = ap.parse_args()
    results: dict[str, list[dict]] = {}
    cpu: dict[str, list[dict]] = {}
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
                        cpu.setdefault(name, []).append(cpu_of(reader, spark_pid, broker.proc.pid))
                    print(f"CPU: run {i + 1}/{args.cpu_runs} done", flush=True)
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(args, results, cpu)


def report(args, results: dict[str, list[dict]], cpu: dict[str, list[dict]]) -> None:
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


if __name__ == "__main__":
    from _main import run

    run(main)
