"""The demo's capacity probe batch by batch: how much of its spread is batch-to-batch noise.

    .venv/bin/python benchmarks/demo_probe.py [--batches 8] [--rounds 3]

The demo (``streamscale demo``) rates one core from the two batches after the first of a
300,000-record UC2 backlog (batches of 100,000 records from 100,000 sensors). Here the same
backlog, ``--batches`` batches long, is drained once on 2 CPUs (as the demo does first, to warm
the JVM) and then ``--rounds`` times on 1 CPU, each in a Spark session of its own, and every
batch's records/s is printed, with the demo's figure (batches 2 and 3) and the median of the
batches after the second beside it.
"""

from __future__ import annotations

import argparse
import statistics
import uuid


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=8, help="batches of 100,000 records in the backlog (>= 4)")
    ap.add_argument("--rounds", type=int, default=3, help="drains on 1 CPU")
    args = ap.parse_args()
    if args.batches < 4:
        ap.error("--batches: at least 4 (the demo's two rated batches and two more)")

    from streamscale.benchmark.probe import fill_backlog
    from streamscale.broker import BrokerAccess, EmbeddedBroker
    from streamscale.demo import BATCH, PARAMS, PROBE_SENSORS
    from streamscale.errors import ConfigError
    from streamscale.experiment.cpus import confine_spark, release_spark
    from streamscale.experiment.sut import warm_up_workers
    from streamscale.pipelines import make_pipeline
    from streamscale.pipelines.base import remove_stopped_checkpoints
    from streamscale.sparkio.session import build_session

    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        topic = f"demo-probe-{uuid.uuid4().hex[:8]}"
        access.create_topics({topic: 4, f"{topic}-out": 4})
        records = args.batches * BATCH
        if fill_backlog(broker.bootstrap, topic, records, PROBE_SENSORS) < records:
            raise ConfigError("the broker did not take the whole backlog")
        print(f"UC2, {args.batches} batches of {BATCH:,} records from {PROBE_SENSORS:,} sensors; records/s per batch")
        for i, cores in enumerate([2] + [1] * args.rounds):
            spark = build_session(f"local[{cores}]", "streamscale-demo-probe")
            try:
                confine_spark(spark, cores)
                warm_up_workers(spark, access, broker.bootstrap, f"{topic}-{i}")
                run = make_pipeline("uc2", PARAMS).start(
                    spark, broker.bootstrap, topic, f"{topic}-out", available_now=True
                )
                try:
                    run.await_available(600)
                finally:
                    run.stop()
                batches = [b for b in run.batches if b.input_rows]
                rates = [b.input_rows / b.batch_ms * 1000 for b in batches]
                demo = sum(b.input_rows for b in batches[1:3]) / sum(b.batch_ms for b in batches[1:3]) * 1000
                print(
                    f"{cores} CPU{'s' if cores > 1 else ''}: {', '.join(f'{r:,.0f}' for r in rates)}; "
                    f"the demo's figure {demo:,.0f}, median after the second {statistics.median(rates[2:]):,.0f}",
                    flush=True,
                )
            finally:
                spark.stop()
                remove_stopped_checkpoints()
                release_spark()


if __name__ == "__main__":
    from _main import run

    run(main)
