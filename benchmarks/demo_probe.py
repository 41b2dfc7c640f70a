"""The demo's capacity probe batch by batch: how much of its spread is batch-to-batch noise.

    .venv/bin/python benchmarks/demo_probe.py [--batches 8] [--rounds 3]

The demo (``streamscale demo``) rates one core from the two batches after the first of a
300,000-record UC2 backlog (batches of 100,000 records from 100,000 sensors). Here the demo's own
probe (``benchmark.probe.probe_capacity``) drains the same backlog, ``--batches`` batches long,
once on 2 CPUs (as the demo does first, to warm the JVM) and then ``--rounds`` times on 1 CPU, each
in a Spark session of its own, and every batch's records/s is printed, with the demo's figure
(batches 2 and 3) and the median of the batches after the second beside it.
"""

from __future__ import annotations

import argparse
import statistics


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=8, help="batches of 100,000 records in the backlog (>= 4)")
    ap.add_argument("--rounds", type=int, default=3, help="drains on 1 CPU")
    args = ap.parse_args()
    if args.batches < 4:
        ap.error("--batches: at least 4 (the demo's two rated batches and two more)")

    from streamscale.benchmark.probe import probe_capacity
    from streamscale.broker import EmbeddedBroker
    from streamscale.demo import BATCH, PARAMS, PROBE_SENSORS, SUT

    def show(p) -> None:
        rates = [rows / ms * 1000 for rows, ms in p.per_batch]
        demo = p.per_batch[1:3]
        print(
            f"{p.cores} CPU{'s' if p.cores > 1 else ''}: {', '.join(f'{r:,.0f}' for r in rates)}; "
            f"the demo's figure {sum(r for r, _ in demo) / sum(ms for _, ms in demo) * 1000:,.0f}, "
            f"median after the second {statistics.median(rates[2:]):,.0f}",
            flush=True,
        )

    with EmbeddedBroker() as broker:
        print(f"UC2, {args.batches} batches of {BATCH:,} records from {PROBE_SENSORS:,} sensors; records/s per batch")
        probe_capacity(
            broker.bootstrap,
            [2] + [1] * args.rounds,
            SUT,
            PARAMS,
            records=args.batches * BATCH,
            batch_records=BATCH,
            sensors=PROBE_SENSORS,
            on_probe=show,
        )


if __name__ == "__main__":
    from _main import run

    run(main)
