"""Does a 1 s processing-time trigger hold while records arrive? The source in a real streaming run.

    .venv/bin/python benchmarks/source_trigger.py [--rate 20000] [--partitions 8] [--duration 40] [--repeat 3]

The load generator (2 processes) writes ``--rate`` JSON ActivePowerRecords per second into a topic;
a query reads it from ``latest`` with the streamscale-kafka source, JSON decoding in the source,
``trigger(processingTime="1 second")``, into the ``noop`` sink. After a 10 s warm-up the script
prints, per repetition, the median and 90th percentile of ``durationMs.triggerExecution``, the
median interval between batch starts (1 s when the trigger is kept) and the records per batch.
Generator, broker and Spark share the machine's cores.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
from datetime import datetime

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, generate
from streamscale.sparkio.io import read_records
from streamscale.sparkio.session import build_session
from streamscale.waiting import wait_for

WARMUP_S = 10


def one_run(spark, bootstrap: str, topic: str, rate: int, duration: float) -> dict:
    gen = threading.Thread(
        target=generate,
        daemon=True,
        args=(GeneratorConfig(bootstrap, topic, sensors=rate, workers=2, duration_s=duration),),
    )
    ckpt = tempfile.mkdtemp(prefix="bench-trigger-")
    q = (
        read_records(spark, bootstrap, topic, starting_offsets="latest")
        .writeStream.format("noop")
        .option("checkpointLocation", ckpt)
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        wait_for(lambda: q.lastProgress is not None, 60, "the first micro-batch")
        gen.start()
        gen.join()
        progress = list(q.recentProgress)
    finally:
        q.stop()
        shutil.rmtree(ckpt, ignore_errors=True)
    starts = [datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")) for p in progress]
    t0 = next(s for s, p in zip(starts, progress) if p["numInputRows"])
    steady = [(s, p) for s, p in zip(starts, progress) if (s - t0).total_seconds() >= WARMUP_S]
    times = sorted(p["durationMs"]["triggerExecution"] for _, p in steady)
    gaps = [(b[0] - a[0]).total_seconds() for a, b in zip(steady, steady[1:])]
    return {
        "batches": len(steady),
        "median_ms": statistics.median(times),
        "p90_ms": times[int(0.9 * (len(times) - 1))],
        "interval_s": statistics.median(gaps),
        "rows": statistics.median(p["numInputRows"] for _, p in steady),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--duration", type=float, default=40.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        spark = build_session(args.master, "bench-trigger", shuffle_partitions=2)
        print(
            f"{args.rate:,} records/s into {args.partitions} partitions, {args.duration:.0f} s per run, "
            f"trigger 1 s, {args.master}; after {WARMUP_S} s warm-up:"
        )
        for rep in range(args.repeat + 1):
            topic = f"trigger-{rep}"
            access.create_topic(topic, args.partitions)
            r = one_run(spark, broker.bootstrap, topic, args.rate, args.duration if rep else 15.0)
            if rep == 0:
                continue  # warm-up run: Python workers and readers start
            print(
                f"run {rep}: {r['batches']} batches, triggerExecution median {r['median_ms']:,.0f} ms "
                f"p90 {r['p90_ms']:,.0f} ms, batch interval median {r['interval_s']:.2f} s, "
                f"{r['rows']:,.0f} records per batch",
                flush=True,
            )
        spark.stop()


if __name__ == "__main__":
    from _main import run

    run(main)
