"""UC2's full pipeline against the same dataflow into ``noop``: what the output costs.

    .venv/bin/python benchmarks/windowed_output.py [--records 600000] [--final-records 1300000]
        [--batch 100000] [--repeat 5] [--warmup 2] [--emit final update] [--connector spark|python]

Per sensor count (100,000 and 10,000; one reading per sensor per second of event time, JSON, 8
partitions, load generator), in one SparkSession (``local[2]``), for each output mode:

* full: ``make_pipeline("uc2", {"emit": ...}).start(...)``: the Kafka source, the window
  aggregation, the late count, the executor-side Kafka output;
* noop: the same DataFrame (the same connector and source options, the same observations)
  written to Spark's ``noop`` sink in the same output mode: the ceiling the output can aim at.

``emit: final`` (UC2's default: one row per window when the watermark closes it) reads
``--final-records`` readings whose event time starts 5 s before a minute ends, so that windows
close (and their rows are written) within the run: at 100,000 sensors one window of 100,000 rows
in 13 batches, four times the share of a steady run (one in 60). ``emit: update`` writes every
changed window row of every batch (about one per reading at 100,000 sensors) with its ``final`` flag.

Both read the same topic from the start with ``maxOffsetsPerTrigger`` = ``--batch``, ``availableNow``,
so their batches hold the same records. Rate = records / summed ``triggerExecution`` of the
batches after the first (query start-up is left out for both alike). The JVM keeps getting faster
over a session's first runs (noop at 10,000 sensors: 129,000 records/s in the first measured run,
185,000-210,000 from the fourth), so ``--warmup`` pairs run unmeasured first, and the two kinds
take turns at going first; each repetition's ratio is full / noop of that pair. Printed: median
rate of ``--repeat`` runs (min-max), the ratio of the medians, the pairs' ratios (median,
min-max), the ratio from each batch's median time (``batch_median_ratio``), and where the
difference lies: the median time of a batch that wrote rows (full) and of the same batch into
``noop``, the median of the other batches, and the Janino compiles of generated code per run.
Targets: full >= 90 % of noop at 100,000 sensors, >= 95 % at 10,000.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, generate
from streamscale.pipelines import make_pipeline
from streamscale.sparkio.session import build_session, codegen_compiles


@dataclass
class Run:
    rate: float  # records / summed triggerExecution of the batches after the first
    batch_ms: dict[int, int]  # triggerExecution per batch id (batches with input)
    written: dict[int, int]  # rows written per batch id (full pipeline; empty for noop)
    compiles: int = 0  # Janino compiles of generated code during the run


def measured(progress: list[dict], total: int) -> tuple[float, dict[int, int]]:
    progress = [p for p in progress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in progress)
    if rows != total:
        raise SystemExit(f"query read {rows:,} of {total:,} records")
    times = {p["batchId"]: p["durationMs"]["triggerExecution"] for p in progress}
    later = progress[1:] or progress
    return sum(p["numInputRows"] for p in later) / (sum(times[p["batchId"]] for p in later) / 1000), times


def full(spark, bootstrap, topic, out, batch, total, emit, connector) -> Run:
    pipe = make_pipeline("uc2", {"max_offsets_per_trigger": batch, "emit": emit}, connector=connector)
    ckpt = tempfile.mkdtemp(prefix="bench-uc2-")
    try:
        r = pipe.start(spark, bootstrap, topic, out, ckpt, available_now=True)
        r.await_available(1800)
        if r.exception() is not None:
            raise SystemExit(f"pipeline failed: {r.exception()}")
        rate, times = measured(r.main_query.recentProgress, total)
        return Run(rate, times, {b.batch_id: b.output_records for b in r.batches if b.output_records})
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def noop(spark, bootstrap, topic, batch, total, emit, connector) -> Run:
    pipe = make_pipeline("uc2", {"max_offsets_per_trigger": batch, "emit": emit}, connector=connector)
    ckpt = tempfile.mkdtemp(prefix="bench-uc2-noop-")
    try:
        # the same reader as the full pipeline's (the Python source takes the watermark column)
        records = pipe.read(
            spark, bootstrap, topic, "earliest", None, connector, watermark_from=ckpt if connector == "python" else None
        )
        q = (
            pipe.build(spark, records)
            .writeStream.format("noop")
            .outputMode("append" if pipe.emit_final else "update")
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination()
        return Run(*measured(q.recentProgress, total), {})
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)


def median_compiles(runs: list[Run]) -> str:
    return f"{statistics.median(r.compiles for r in runs):.0f}"


def spread(values) -> str:
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def split_ms(run: Run, writing: set[int]) -> tuple[float, float]:
    """Median time of the batches in ``writing`` and of the others (the first left out)."""
    first = min(run.batch_ms)
    later = {b: t for b, t in run.batch_ms.items() if b != first}
    w = [t for b, t in later.items() if b in writing]
    o = [t for b, t in later.items() if b not in writing]
    return (statistics.median(w) if w else float("nan")), (statistics.median(o) if o else float("nan"))


def batch_median_ratio(full_runs: list[Run], noop_runs: list[Run]) -> float:
    """full / noop from each batch's median time over the repetitions (the first batch left out):
    both kinds run the same batches, and a median per batch is not moved by one run's stall (one
    batch of 13 took 0.8-1.1 s against ~0.5 in most runs of either kind, at random)."""

    def total(runs: list[Run]) -> float:
        ids = sorted(set.intersection(*(set(r.batch_ms) for r in runs)))[1:]
        return sum(statistics.median(r.batch_ms[b] for r in runs) for b in ids)

    return total(noop_runs) / total(full_runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=600_000, help="readings per sensor count, emit update")
    ap.add_argument("--final-records", type=int, default=1_300_000, help="readings per sensor count, emit final")
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2, help="unmeasured pairs (noop, full) per case first")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--sensors", type=int, nargs="+", default=[100_000, 10_000])
    ap.add_argument("--emit", nargs="+", choices=["final", "update"], default=["final", "update"])
    ap.add_argument("--connector", choices=["spark", "python"], default="spark", help="both runs read with it")
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
        print(f"JSON readings, 8 partitions, batches of {args.batch:,}; {args.master}; {args.connector}", flush=True)
        for sensors in args.sensors:
            for emit in args.emit:
                topic, n = f"uc2-in-{sensors}-{emit}", records[emit]
                for rep in range(-args.warmup, args.repeat):
                    out = f"uc2-out-{sensors}-{emit}-{rep + args.warmup}"
                    access.create_topic(out, 8)
                    # the kinds take turns at going first: neither gets the warmer JVM throughout
                    for kind in sorted(("noop", "full"), reverse=rep % 2 == 1):
                        before = codegen_compiles(spark)
                        if kind == "noop":
                            run = noop(spark, broker.bootstrap, topic, args.batch, n, emit, args.connector)
                        else:
                            run = full(spark, broker.bootstrap, topic, out, args.batch, n, emit, args.connector)
                        run.compiles = codegen_compiles(spark) - before
                        if rep >= 0:
                            results.setdefault((sensors, emit, kind), []).append(run)
                    access.delete_topics([out])
                    label = "warm-up" if rep < 0 else "repetition"
                    number = rep + args.warmup + 1 if rep < 0 else rep + 1
                    total = args.warmup if rep < 0 else args.repeat
                    print(f"{sensors:,} sensors, emit {emit}: {label} {number}/{total} done", flush=True)
        spark.stop()
    print(
        f"\nmedian of {args.repeat} (min-max) after {args.warmup} unmeasured pairs; rate = records / summed "
        "triggerExecution; pair ratio = full / noop of one repetition\n"
    )
    print(
        f"{'UC2, 60 s windows':<36}{'full pipeline':>28}{'same dataflow into noop':>28}{'ratio':>7}"
        f"{'pair ratios':>18}{'batch medians':>15}{'writing batch ms':>20}{'other batches ms':>20}{'rows written':>14}"
    )
    for sensors in args.sensors:
        for emit in args.emit:
            full_runs, noop_runs = results[(sensors, emit, "full")], results[(sensors, emit, "noop")]
            f = [r.rate for r in full_runs]
            n = [r.rate for r in noop_runs]
            pairs = [a / b for a, b in zip(f, n, strict=True)]
            # per pair: the batches the full pipeline wrote rows in, timed in both kinds
            w_full, o_full, w_noop, o_noop = [], [], [], []
            for a, b in zip(full_runs, noop_runs, strict=True):
                writing = set(a.written)
                (wf, of), (wn, on) = split_ms(a, writing), split_ms(b, writing)
                w_full.append(wf), o_full.append(of), w_noop.append(wn), o_noop.append(on)
            label = f"{sensors:,} sensors, emit {emit} ({records[emit]:,})"
            print(
                f"{label:<36}{spread(f):>28}{spread(n):>28}"
                f"{statistics.median(f) / statistics.median(n):>7.0%}"
                f"{f'{statistics.median(pairs):.0%} ({min(pairs):.0%}-{max(pairs):.0%})':>18}"
                f"{batch_median_ratio(full_runs, noop_runs):>15.0%}"
                f"{f'{statistics.median(w_full):,.0f} / {statistics.median(w_noop):,.0f}':>20}"
                f"{f'{statistics.median(o_full):,.0f} / {statistics.median(o_noop):,.0f}':>20}"
                f"{statistics.median(sum(r.written.values()) for r in full_runs):>14,.0f}"
                f"{f'{median_compiles(full_runs)} / {median_compiles(noop_runs)}':>10}"
            )
    print(
        "\nbatch medians: full / noop from each batch's median time over the repetitions; writing batch ms: "
        "median time of the batches in which the full pipeline wrote rows (full / the same "
        "batches into noop); other batches ms: the rest (full / noop); the first batch left out of both; "
        "compiles: Janino compiles of generated code per run (full / noop)"
    )


if __name__ == "__main__":
    from _main import run

    run(main)
