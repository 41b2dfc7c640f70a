"""UC2's full pipeline against the same dataflow into ``noop``: what the output costs.

    .venv/bin/python benchmarks/windowed_output.py [--records 600000] [--final-records 1300000]
        [--batch 100000] [--repeat 3] [--emit final update]

Per sensor count (100,000 and 10,000; one reading per sensor per second of event time, JSON, 8
partitions, load generator), in one SparkSession (``local[2]``), for each output mode:

* full: ``make_pipeline("uc2", {"emit": ...}).start(...)``: the Kafka source, the window
  aggregation, the late count, the executor-side Kafka output;
* noop: the same DataFrame (same source options, same observations) written to Spark's ``noop``
  sink in the same output mode: the ceiling the output can aim at.

``emit: final`` (UC2's default: one row per window when the watermark closes it) reads
``--final-records`` readings whose event time starts 5 s before a minute ends, so that windows
close (and their rows are written) within the run: at 100,000 sensors one window of 100,000 rows
in 13 batches, four times the share of a steady run (one in 60). ``emit: update`` writes every
changed window row of every batch (about one per reading at 100,000 sensors) with its ``final`` flag.

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
import time

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


def full(spark, bootstrap, topic, out, batch, total, emit):
    pipe = make_pipeline("uc2", {"max_offsets_per_trigger": batch, "emit": emit})
    ckpt = tempfile.mkdtemp(prefix="bench-uc2-")
    try:
        r = pipe.start(spark, bootstrap, topic, out, ckpt, available_now=True)
        r.await_available(1800)
        if r.exception() is not None:
            raise SystemExit(f"pipeline failed: {r.exception()}")
        return (*rate(r.main_query, total), sum(b.output_records or 0 for b in r.batches))
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def noop(spark, bootstrap, topic, batch, total, emit):
    pipe = make_pipeline("uc2", {"max_offsets_per_trigger": batch, "emit": emit})
    ckpt = tempfile.mkdtemp(prefix="bench-uc2-noop-")
    try:
        records = pipe.read(spark, bootstrap, topic, "earliest", None, "python", watermark_from=ckpt)
        q = (
            pipe.build(spark, records)
            .writeStream.format("noop")
            .outputMode("append" if pipe.emit_final else "update")
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        return (*rate(q, total), 0)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def spread(values) -> str:
    return f"{statistics.median(values):>9,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=600_000, help="readings per sensor count, emit update")
    ap.add_argument("--final-records", type=int, default=1_300_000, help="readings per sensor count, emit final")
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--sensors", type=int, nargs="+", default=[100_000, 10_000])
    ap.add_argument("--emit", nargs="+", choices=["final", "update"], default=["final", "update"])
    args = ap.parse_args()
    records = {"final": args.final_records, "update": args.records}
    # a minute ends 5 s after the first reading: windows close within a final-mode run
    minute = (time.time_ns() // 1_000_000) // 60_000 * 60_000
    results: dict = {}
    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        for sensors in args.sensors:
            for emit in args.emit:
                topic = f"uc2-in-{sensors}-{emit}"
                access.create_topic(topic, 8)
                res = generate(
                    GeneratorConfig(
                        broker.bootstrap,
                        topic,
                        sensors=sensors,
                        workers=2,
                        records=records[emit],
                        throttle=False,
                        start_time_ms=minute - 5_000 if emit == "final" else None,
                    )
                )
                assert res.delivered == records[emit], res
        spark = build_session(args.master, "bench-windowed-output", shuffle_partitions=2)
        print(f"JSON readings, 8 partitions, batches of {args.batch:,}; {args.master}", flush=True)
        for sensors in args.sensors:
            for emit in args.emit:
                topic, n = f"uc2-in-{sensors}-{emit}", records[emit]
                noop(spark, broker.bootstrap, topic, args.batch, n, emit)  # warm-up
                for rep in range(args.repeat):
                    out = f"uc2-out-{sensors}-{emit}-{rep}"
                    access.create_topic(out, 8)
                    results.setdefault((sensors, emit, "noop"), []).append(
                        noop(spark, broker.bootstrap, topic, args.batch, n, emit)
                    )
                    results.setdefault((sensors, emit, "full"), []).append(
                        full(spark, broker.bootstrap, topic, out, args.batch, n, emit)
                    )
                    access.delete_topics([out])
                    print(f"{sensors:,} sensors, emit {emit}: repetition {rep + 1}/{args.repeat} done", flush=True)
        spark.stop()
    print(f"\nmedian of {args.repeat} (min-max); rate = records / summed triggerExecution\n")
    print(
        f"{'UC2, 60 s windows':<34}{'full pipeline':>28}{'same dataflow into noop':>30}{'ratio':>8}"
        f"{'median batch ms (full/noop)':>30}{'rows written':>14}"
    )
    for sensors in args.sensors:
        for emit in args.emit:
            full_runs, noop_runs = results[(sensors, emit, "full")], results[(sensors, emit, "noop")]
            f = [r for r, _, _ in full_runs]
            n = [r for r, _, _ in noop_runs]
            fb = statistics.median(t for _, t, _ in full_runs)
            nb = statistics.median(t for _, t, _ in noop_runs)
            label = f"{sensors:,} sensors, emit {emit} ({records[emit]:,})"
            print(
                f"{label:<34}{spread(f):>28}{spread(n):>30}"
                f"{statistics.median(f) / statistics.median(n):>8.0%}{f'{fb:,.0f} / {nb:,.0f}':>30}"
                f"{statistics.median(w for _, _, w in full_runs):>14,.0f}"
            )


if __name__ == "__main__":
    from _main import run

    run(main)
