"""What TLS and SASL cost a Spark job: UC1's drain rate on one core, PLAINTEXT against SASL_SSL.

    .venv/bin/python benchmarks/secured_capacity.py [--repeat 3] [--batches 8] [--connector spark]

Two embedded brokers run side by side, one PLAINTEXT, one SASL_SSL (TLS 1.3, SCRAM-SHA-512, ACLs
on: ``broker start --security sasl_ssl``). Each round drains a UC1 backlog from each in turn (the
order alternates round by round, so a drift of the machine falls on both alike) with Spark
confined to one CPU, in batches of 50,000 records: a drain probe's run (one SutRun that writes the
backlog before its query starts, as ``benchmark run``'s probe does), rated by its batches after
the first, which pays the cold start. One Spark session serves every drain. Two first rounds warm
everything and are not counted; the figure is the geometric mean of the rounds' ratios (orders
alternating: a steady drift cancels), with the rounds' range. Spark reads the input and writes
UC1's output through the broker, so both directions of the job's Kafka traffic pay the
encryption. Printed: each drain's records/s, each round's SASL_SSL/PLAINTEXT ratio, and the
medians with their range.
"""

from __future__ import annotations

import argparse
import statistics

BATCH = 50_000
MIN_BATCHES = 4  # the first pays the cold start, the rest are rated
WARM_ROUNDS = 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=6, help="rounds (each drains both brokers; even: both orders alike)")
    ap.add_argument(
        "--batches", type=int, default=16, help=f"batches of {BATCH:,} records per drain (>= {MIN_BATCHES})"
    )
    ap.add_argument("--connector", default="spark", help="spark (Spark's own, Java's client) or python")
    args = ap.parse_args()
    if args.batches < MIN_BATCHES:
        ap.error(f"--batches: at least {MIN_BATCHES}")

    from contextlib import ExitStack

    from streamscale.broker import EmbeddedBroker
    from streamscale.experiment.sessions import SparkSessions

    params = {"connector": args.connector, "sink": "kafka", "max_offsets_per_trigger": BATCH}  # output via the broker
    rates: dict[str, list[float]] = {"PLAINTEXT": [], "SASL_SSL": []}
    with ExitStack() as stack:
        brokers = {
            "PLAINTEXT": stack.enter_context(EmbeddedBroker()),
            "SASL_SSL": stack.enter_context(EmbeddedBroker(security="sasl_ssl")),
        }
        sessions = SparkSessions()
        stack.callback(sessions.close)
        print(
            f"UC1 on 1 CPU, {args.connector} connector, {args.batches} batches of {BATCH:,} records per drain; "
            "records/s of the batches after the first",
            flush=True,
        )
        # The first rounds warm both brokers, the OS's caches and Spark's driver JVM (one for every
        # drain); shown, not counted. Measured: the drains kept getting faster over a run (57,000
        # to 108,000 records/s), so that in every round the second drain was the faster; the order
        # alternates and the figure is the geometric mean of the rounds' ratios, in which a drift
        # steady over two rounds cancels.
        for i in range(1 - WARM_ROUNDS, args.repeat + 1):
            order = list(brokers) if i % 2 == 0 else list(reversed(brokers))
            for name in order:
                rate, batches = _drain(brokers[name].connection, sessions, params, args.batches * BATCH)
                label = f"round {i}" if i > 0 else "warm-up"
                print(f"{label}: {name:9s} {rate:>9,.0f} records/s ({batches} batches)", flush=True)
                if i > 0:
                    rates[name].append(rate)
            if i > 0:
                ratio = rates["SASL_SSL"][-1] / rates["PLAINTEXT"][-1]
                print(f"round {i}: SASL_SSL / PLAINTEXT = {ratio:.3f}", flush=True)
    ratios = [s / p for s, p in zip(rates["SASL_SSL"], rates["PLAINTEXT"], strict=True)]
    balanced = statistics.geometric_mean(ratios)
    for name, values in rates.items():
        print(
            f"{name:9s} median {statistics.median(values):,.0f} records/s "
            f"(range {min(values):,.0f}-{max(values):,.0f}, {len(values)} drains)"
        )
    print(
        f"SASL_SSL / PLAINTEXT: {balanced:.3f} (geometric mean of {len(ratios)} rounds in alternating order; "
        f"rounds {min(ratios):.3f}-{max(ratios):.3f}); TLS + SASL cost {1 - balanced:.1%} of one core's UC1 capacity"
    )


def _drain(connection, sessions, params: dict, records: int) -> tuple[float, int]:
    """(records/s, batches rated) of one drain of ``records`` UC1 records on one CPU."""
    from streamscale.benchmark.drainprobe import DRAIN_S, drain_of
    from streamscale.experiment.sut import Context, Placement, StopPolicy, Workload, run_sut

    result = run_sut(
        Workload("uc1", params, rate=BATCH, partitions=4),
        Placement("local[1]", cpus=1),
        StopPolicy(0.0, drain_s=DRAIN_S, backlog=records),
        Context(bootstrap=connection, sessions=sessions),
    )
    if result.undrained:
        raise SystemExit(f"the drain left {result.undrained:,} of {records:,} records unread within {DRAIN_S:g} s")
    d = drain_of(result, 2, BATCH, records, BATCH)  # a later round's rating: the batches after the first
    return d.rate, d.batches


if __name__ == "__main__":
    from _main import run

    run(main)
