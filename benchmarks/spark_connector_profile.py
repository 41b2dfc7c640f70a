"""Where a micro-batch of Spark's Kafka connector spends its time, and what the settings a user can
change do to it: one SparkSession, 8 partitions, 100,000-record batches into ``noop``.

    .venv/bin/python benchmarks/spark_connector_profile.py [--records 500000] [--repeat 2]

Per variant: records/s over the whole ``availableNow`` run, the median steady batch (after the
first), the first batch, and the median of each phase of Spark's progress report (``durationMs``:
``addBatch`` is the read and the sink; ``walCommit`` and ``commitOffsets`` write the checkpoint's
offsets and commit logs, the same for any source).
"""

from __future__ import annotations

import argparse
import statistics

from source_throughput import drain

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, generate
from streamscale.sparkio.session import build_session

BATCH = 100_000
PARTS = 8
VARIANTS = {
    "defaults": {},
    "minPartitions=2": {"minPartitions": "2"},
    "fetch 8 MB/partition": {"kafka.max.partition.fetch.bytes": str(8 << 20), "kafka.fetch.max.bytes": str(64 << 20)},
    "poll 20k records, 8 MB": {"kafka.max.poll.records": "20000", "kafka.max.partition.fetch.bytes": str(8 << 20)},
    "no consumer cache": {"kafka.consumer.cache.enabled": "false"},
}
PHASES = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def run_query(spark, bootstrap: str, topic: str, total: int, opts: dict) -> dict:
    reader = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", str(BATCH))
    )
    for k, v in opts.items():
        reader = reader.option(k, v)
    batches = drain(reader.load(), total)
    steady = batches[1:] or batches
    return {
        "whole": total / (sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000),
        "steady_ms": statistics.median(p["durationMs"]["triggerExecution"] for p in steady),
        "first_ms": batches[0]["durationMs"]["triggerExecution"],
        **{k: statistics.median(p["durationMs"].get(k, 0) for p in steady) for k in PHASES},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    results: dict[str, list[dict]] = {}
    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        topic = "profile"
        access.create_topic(topic, PARTS)
        generate(
            GeneratorConfig(broker.bootstrap, topic, sensors=100_000, workers=2, records=args.records, throttle=False)
        )
        spark = build_session("local[2]", "bench-connector-profile", shuffle_partitions=2)
        run_query(spark, broker.bootstrap, topic, args.records, {})  # warm-up: JIT, consumers
        for rep in range(args.repeat):
            for name, opts in VARIANTS.items():
                results.setdefault(name, []).append(run_query(spark, broker.bootstrap, topic, args.records, opts))
            print(f"repetition {rep + 1}/{args.repeat} done", flush=True)
        spark.stop()
    print(f"\n{args.records:,} records, {PARTS} partitions, batches of {BATCH:,}; median of {args.repeat} (min-max)")
    print(
        f"{'variant':<26}{'whole run records/s':>28}{'steady ms':>11}{'first ms':>10}"
        + "".join(f"{k:>15}" for k in PHASES)
    )
    for name, rs in results.items():
        whole = [r["whole"] for r in rs]
        line = f"{name:<26}{statistics.median(whole):>12,.0f} ({min(whole):,.0f}-{max(whole):,.0f})"
        steady, first = (statistics.median(r[k] for r in rs) for k in ("steady_ms", "first_ms"))
        line += f"{steady:>11,.0f}{first:>10,.0f}"
        line += "".join(f"{statistics.median(r[k] for r in rs):>15,.0f}" for k in PHASES)
        print(line)


if __name__ == "__main__":
    from _main import run

    run(main)
