"""UC2's full pipeline against the same dataflow into ``noop``: what the output costs.

    .venv/bin/python benchmarks/windowed_output.py [--records 600000] [--batch 100000] [--repeat 3]

Per sensor count (100,000 and 10,000; one reading per sensor per second of event time, JSON, 8
partitions, load generator), in one SparkSession (``local[2]``):

* full: ``make_pipeline("uc2", {"emit": "update"}).start(...)``: the Kafka source, the window aggregation, the late
  count, the executor-side Kafka output;
* noop: the same DataFrame (same source options, same observations) written to Spark's ``noop``
  sink in update mode: the ceiling the output can aim at.

Both read the same topic from the start with ``maxOffsetsPerTrigger`` = ``--batch``, ``availableNow``.
Rate = records / summed ``triggerExecution`` of the batches after the first (query start-up is
left out for both alike). Median of ``--repeat`` runs (min-max), the two kinds alternating.
Issue 14's targets: full >= 80 % of noop at 100,000 sensors, >= 95 % at 10,000.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, generate
from streamscale.pipelines import make_pipeline
from streamscale.sparkio.session import build_session


def rate(query, total: int) -> tuple[float, float]:
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    if rows != total:
        raise SystemExit(f"query read {rows:,} of {total:,} records")
    progress = progress[1:] or progress
    times = [p["durationMs"]["triggerExecution"] for p in progress]
    return sum(p["numInputRows"] for p in progress) / (sum(times) / 1000), statistics.median(times)


def full(spark, bootstrap, topic, out, batch, total):
    pipe = make_pipeline("uc2", {"max_offsets_per_trigger": batch, "emit": "update"})
    ckpt = tempfile.mkdtemp(prefix="bench-uc2-")
    try:
        r = pipe.start(spark, bootstrap, topic, out, ckpt, available_now=True)
        r.await_available(1800)
        if r.exception() is not None:
            raise SystemExit(f"pipeline failed: {r.exception()}")
        return rate(r.main_query, total)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def noop(spark, bootstrap, topic, batch, total):
    pipe = make_pipeline("uc2", {"max_offsets_per_trigger": batch, "emit": "update"})
    ckpt = tempfile.mkdtemp(prefix="bench-uc2-noop-")
    try:
        records = pipe.read(spark, bootstrap, topic, "earliest", None, "python", watermark_from=ckpt)
        q = (
            pipe.build(spark, records)
            .writeStream.format("noop")
            .outputMode("update")
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        return rate(q, total)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def spread(values) -> str:
    return f"{statistics.median(values):>9,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=600_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--sensors", type=int, nargs="+", default=[100_000, 10_000])
    args = ap.parse_args()
    results: dict = {}
    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        for sensors in args.sensors:
            topic = f"uc2-in-{sensors}"
            access.create_topic(topic, 8)
            res = generate(
                GeneratorConfig(
                    broker.bootstrap, topic, sensors=sensors, workers=2, records=args.records, throttle=False
                )
            )
            assert res.delivered == args.records, res
        spark = build_session(args.master, "bench-windowed-output", shuffle_partitions=2)
        print(
            f"{args.records:,} JSON readings per sensor count, 8 partitions, batches of {args.batch:,}; {args.master}",
            flush=True,
        )
        for sensors in args.sensors:
            topic = f"uc2-in-{sensors}"
            noop(spark, broker.bootstrap, topic, args.batch, args.records)  # warm-up
            for rep in range(args.repeat):
                out = f"uc2-out-{sensors}-{rep}"
                access.create_topic(out, 8)
                results.setdefault((sensors, "noop"), []).append(
                    noop(spark, broker.bootstrap, topic, args.batch, args.records)
                )
                results.setdefault((sensors, "full"), []).append(
                    full(spark, broker.bootstrap, topic, out, args.batch, args.records)
                )
                access.delete_topics([out])
                print(f"{sensors:,} sensors: repetition {rep + 1}/{args.repeat} done", flush=True)
        spark.stop()
    print(f"\nmedian of {args.repeat} (min-max); rate = records / summed triggerExecution\n")
    print(
        f"{'UC2, 60 s windows':<34}{'full pipeline':>28}{'same dataflow into noop':>30}{'ratio':>8}"
        f"{'median batch ms (full/noop)':>30}"
    )
    for sensors in args.sensors:
        f = [r for r, _ in results[(sensors, "full")]]
        n = [r for r, _ in results[(sensors, "noop")]]
        fb = statistics.median(t for _, t in results[(sensors, "full")])
        nb = statistics.median(t for _, t in results[(sensors, "noop")])
        print(
            f"{f'{sensors:,} sensors':<34}{spread(f):>28}{spread(n):>30}"
            f"{statistics.median(f) / statistics.median(n):>8.0%}{f'{fb:,.0f} / {nb:,.0f}':>30}"
        )


if __name__ == "__main__":
    main()
