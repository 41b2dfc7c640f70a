"""How long a cluster of hosts of their own takes to start on this machine: a Spark master, WORKERS
workers and BROKERS Kafka brokers, each on a host of its own (root only), started and stopped
ROUNDS times; prints each start (until every worker is registered and every broker ready with a
group coordinator) and stop, and their medians.

    .venv/bin/python benchmarks/hosts_start.py [--rounds 5] [--workers 2] [--brokers 3]
"""

from __future__ import annotations

import argparse
import statistics
import time


def main() -> None:
    from streamscale.hosts.cluster import HostsCluster

    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--brokers", type=int, default=3)
    args = ap.parse_args()
    starts, stops = [], []
    for i in range(args.rounds):
        cluster = HostsCluster(workers=args.workers, brokers=args.brokers).start()
        starts.append(cluster.started_s)
        t0 = time.monotonic()
        cluster.stop()
        stops.append(time.monotonic() - t0)
        print(f"round {i + 1}: started in {starts[-1]:.1f} s, stopped in {stops[-1]:.1f} s", flush=True)
    print(
        f"1 master, {args.workers} workers, {args.brokers} brokers: start median {statistics.median(starts):.1f} s "
        f"({min(starts):.1f}-{max(starts):.1f} s over {args.rounds}), stop median {statistics.median(stops):.1f} s"
    )


if __name__ == "__main__":
    from _main import run

    run(main)
