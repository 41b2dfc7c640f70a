"""The demo's capacity probe batch by batch: how much of its spread is batch-to-batch noise.

    .venv/bin/python benchmarks/demo_probe.py [--batches 10] [--rounds 3]

The demo (``streamscale demo``) rates one core with its own probe (``benchmark.probe.probe_capacity``):
a UC2 backlog in batches of 100,000 records from 100,000 sensors, the first ``PROBE_WARM`` batches on
every CPU (closing windows), then Spark confined to one CPU, the batch running at that moment (it
closes the last warm window) and the one after it left out, and the two batches after those giving
the figure. Here that probe drains a longer backlog (``--batches``) ``--rounds``
times, each in a Spark session of its own, and every batch's records/s is printed, with the demo's
figure and the median of all the rated batches beside it.
"""

from __future__ import annotations

import argparse
import statistics


def main() -> None:
    from streamscale.demo import BATCH, PARAMS, PROBE_SENSORS, PROBE_WARM, SUT

    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--batches", type=int, default=PROBE_WARM + 6, help=f"batches of {BATCH:,} records (>= {PROBE_WARM + 4})"
    )
    ap.add_argument("--rounds", type=int, default=3, help="drains, each in a session of its own")
    args = ap.parse_args()
    if args.batches < PROBE_WARM + 4:
        ap.error(f"--batches: at least {PROBE_WARM + 4} (the warm ones, the two left out, the demo's two)")

    from streamscale.benchmark.probe import ProbeLoad, probe_capacity
    from streamscale.broker import EmbeddedBroker

    def show(p) -> None:
        rates = [rows / ms * 1000 for rows, ms in p.per_batch]
        demo = p.per_batch[p.unrated : p.unrated + 2]
        print(
            f"1 CPU: {', '.join(f'{r:,.0f}' for r in rates)} ({p.unrated} unrated); "
            f"the demo's figure {sum(r for r, _ in demo) / sum(ms for _, ms in demo) * 1000:,.0f}, "
            f"median of the rated {statistics.median(rates[p.unrated :]):,.0f}",
            flush=True,
        )

    with EmbeddedBroker() as broker:
        print(f"UC2, {args.batches} batches of {BATCH:,} records from {PROBE_SENSORS:,} sensors; records/s per batch")
        probe_capacity(
            broker.bootstrap,
            [1] * args.rounds,
            SUT,
            PARAMS,
            ProbeLoad(
                records=args.batches * BATCH, batch_records=BATCH, sensors=PROBE_SENSORS, warm_batches=PROBE_WARM
            ),
            on_probe=show,
        )


if __name__ == "__main__":
    from _main import run

    run(main)
