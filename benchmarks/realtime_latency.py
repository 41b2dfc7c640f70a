"""Spark's real-time mode against micro-batches: the same stateless job, load and cores, runs
alternating in one process, each record's processing latency after the warm-up.

    .venv/bin/python benchmarks/realtime_latency.py [--rate 10000] [--cores 1] [--repeat 3] [--seconds 125]

The job is ``examples/jobs/readings_kw.py`` (a reading in kW with its band), fed sensor readings at
``--rate`` records/s into ``--cores`` partitions, on ``local[cores]`` confined to that many CPUs; by
default its ``readings_kw_raw`` (``--decode raw``: the job decodes Kafka's columns itself and keeps
each input record's Kafka timestamp, so each output record's latency is exact), with ``--decode
fields`` its ``readings_kw`` on streamscale's decoding (a real-time record's latency then lies
between the bounds the send-time stamp it shares with the records sent together gives).
Micro-batches trigger every ``--interval`` (processing_time; by default every 1 second, and 0:
one after another, the lowest latency micro-batches reach); real-time mode checkpoints every
``--checkpoint`` (default 30 seconds: Spark's guide calls the duration a checkpoint interval, not a
latency target, and defaults it to 5 minutes).
Each run lasts ``--seconds`` and is judged after ``--warmup`` seconds (default 35), which must
exceed the checkpoint interval: a run's latencies are taken batch by batch, and real-time mode's
first batch holds the records of the query's cold start.

* micro-batches: each record's latency from its Kafka timestamp to its batch's commit (what a
  benchmark run reads);
* real-time mode: each record's latency from its Kafka timestamp to its output record's timestamp
  (streamscale.experiment.outlatency);

where a record's Kafka timestamp is the broker's, set as it appended the record (the topics'
``message.timestamp.type: LogAppendTime``; ``--send-time``: the generator's, at its send, which
includes the ~100 ms its producer holds a record on average before sending, linger.ms 200);
``--linger-ms``: the generator's producer sends that often instead (5: records arrive as they are
due rather than in bursts of 200 ms of the load, which real-time mode then works through one by one);

and prints each run's p50, p95 and p99 (each at the high bound of what the run's records give,
never below the true value) and what they were taken over: the batches ending after the warm-up,
their records and the share of them over 100 ms; then per repetition the ratio of the p99s
(real-time over each micro-batch interval), medians and ranges. The configurations alternate, each
first in turn.

Each real-time batch holds one checkpoint's stall (the records that arrive while Spark ends one
batch's tasks and starts the next's wait), at its start. A run that ends just after a checkpoint
counts a whole stall on the few seconds of records its last batch holds, and so more stalls than
its length has checkpoints; one that ends a little before a checkpoint counts one per interval,
e.g. ``--checkpoint "5 minutes" --warmup 305 --seconds 585`` (one batch: 285 s of records, one stall).
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from streamscale.broker import EmbeddedBroker
from streamscale.errors import ConfigError
from streamscale.experiment.processing import processing_percentile_ms
from streamscale.experiment.slo import after_warmup, batch_end_s, progress_field
from streamscale.experiment.sut import Context, Placement, StopPolicy, Workload, run_sut
from streamscale.pipelines.jobsetup import JobSetup
from streamscale.pipelines.trigger import parse_duration

JOB = Path(__file__).resolve().parents[1] / "examples" / "jobs" / "readings_kw.py"


def one_run(args, bootstrap: str, trigger: str) -> dict:
    params = {"trigger": trigger, "connector": "spark", "high_kw": 0.08}
    raw = args.decode == "raw"
    r = run_sut(
        Workload(
            f"{JOB}:readings_kw_raw" if raw else f"{JOB}:readings_kw",
            params,
            rate=args.rate,
            partitions=args.cores,
            job=JobSetup(decode=args.decode),
            producer_config=None if args.linger_ms is None else {"linger.ms": args.linger_ms},
        ),
        Placement(f"local[{args.cores}]", cpus=args.cores),
        StopPolicy(args.seconds, drain_s=120),
        # the broker stamps each record as it appends it: a latency from when a consumer could read
        # the record, not from the generator's send (its producer holds records for linger.ms)
        Context(bootstrap, topic_config={"message.timestamp.type": "LogAppendTime"} if args.append_time else None),
    )
    pcts = {q: processing_percentile_ms(r.batches, q, r.t0_wall, args.warmup) for q in (0.5, 0.95, 0.99)}
    return {"trigger": trigger, "at": r.latency_at, "pcts": pcts, "rate": r.generator_rate, "left": r.undrained,
            "judged": judged(r.batches, r.t0_wall, args.warmup)}  # fmt: skip


def judged(batches, t0_wall: float, warmup: float) -> str:
    """What a run's percentiles were taken over: its batches after the warm-up (for real-time
    mode, each one checkpoint interval and the stall at its start), their records and the share of
    them over 100 ms."""
    kept = [b for b in after_warmup(batches, t0_wall, warmup) if progress_field(b, "processing_latency")]
    spans = [s for b in kept for s in progress_field(b, "processing_latency")]
    records = sum(n for _, _, n in spans)
    over = sum(n for _, high, n in spans if high > 100)
    ends = [batch_end_s(b, t0_wall) for b in kept]
    where = f", ending {min(ends):.0f}-{max(ends):.0f} s" if ends else ""
    return f"{len(kept)} batches{where}, {records:,.0f} records, {over / max(records, 1):.2%} over 100 ms"


def add_run_options(ap: argparse.ArgumentParser) -> None:
    """The options of one run (``one_run``), shared with realtime_timeline.py."""
    ap.add_argument("--rate", type=float, default=10_000)
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=125)
    ap.add_argument("--checkpoint", default="30 seconds", help="real-time mode's checkpoint interval")
    ap.add_argument(
        "--linger-ms", type=int, help="the generator's linger.ms (default 200: records sent in bursts every 200 ms)"
    )
    ap.add_argument(
        "--decode",
        choices=("raw", "fields"),
        default="raw",
        help="raw: the job decodes Kafka's columns and keeps each input's Kafka timestamp (latencies exact); "
        "fields: streamscale decodes, latencies traced by the send-time stamp",
    )


def check_run_options(args) -> float:
    """The checkpoint interval in seconds; a bad option is one line and exit 2 (through ConfigError)
    before anything starts."""
    if args.linger_ms is not None and args.linger_ms < 0:
        raise ConfigError(f"--linger-ms {args.linger_ms}: a time in milliseconds, 0 or more")
    return parse_duration(args.checkpoint)[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    add_run_options(ap)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=float, default=35)
    ap.add_argument(
        "--interval", nargs="+", default=["1 second", "0"], help="micro-batch trigger intervals (0: one after another)"
    )
    ap.add_argument(
        "--send-time", dest="append_time", action="store_false", help="latency from the send, not the append"
    )
    args = ap.parse_args()
    if check_run_options(args) >= args.warmup:
        raise ConfigError(
            f"--warmup {args.warmup:g} must exceed the checkpoint interval ({args.checkpoint}): "
            "real-time mode's first batch holds the query's cold start"
        )
    rt = f"real_time:{args.checkpoint}"
    kinds = [*(f"processing_time:{interval}" for interval in args.interval), rt]
    got: dict[str, list[dict]] = {k: [] for k in kinds}
    with EmbeddedBroker() as broker:
        for i in range(args.repeat):
            for trigger in kinds[i % len(kinds) :] + kinds[: i % len(kinds)]:  # each first in turn
                run = one_run(args, broker.bootstrap, trigger)
                got[trigger].append(run)
                p = run["pcts"]
                print(
                    f"{trigger:<28} p50 {p[0.5]:>7,.0f} ms  p95 {p[0.95]:>7,.0f} ms  p99 {p[0.99]:>7,.0f} ms "
                    f"(at the {run['at']}; load {run['rate']:,.0f}/s; {run['left']:,} left undrained; "
                    f"judged {run['judged']})",
                    flush=True,
                )
    for trigger, runs in got.items():
        for q in (0.5, 0.95, 0.99):
            xs = [r["pcts"][q] for r in runs]
            mid = statistics.median(xs)
            print(f"{trigger}: p{round(q * 100)} median {mid:,.0f} ms ({min(xs):,.0f}-{max(xs):,.0f})")
    for mb in kinds[:-1]:
        ratios = [r["pcts"][0.99] / m["pcts"][0.99] for m, r in zip(got[mb], got[rt], strict=True)]
        print(
            f"p99 real-time / {mb}: median {statistics.median(ratios):.3f} "
            f"(repetitions {min(ratios):.3f}-{max(ratios):.3f}; target at most 0.1)"
        )


if __name__ == "__main__":
    from _main import run

    run(main)
