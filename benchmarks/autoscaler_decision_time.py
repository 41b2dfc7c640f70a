"""Decision time of the assignment algorithms: 10,000 partitions onto about 2,000 consumers.

    .venv/bin/python benchmarks/autoscaler_decision_time.py [--partitions 10000] [--repeat 20]

Speeds are uniform in [0, 0.4 C] (a fifth of a consumer each on average); each timed call gets the
previous iteration's assignment, as in the running controller. Targets: MWF < 50 ms for 1,000
partitions, < 100 ms for 10,000.
"""

from __future__ import annotations

import argparse
import statistics
import time

from streamscale.autoscaler.binpacking import ALGORITHMS, consumers_used
from streamscale.autoscaler.evaluation import measurement_stream


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    C = 100.0
    stream = [
        {p: s * 0.4 for p, s in m.items()} for m in measurement_stream(args.partitions, args.repeat + 1, 5, C, seed=1)
    ]
    for name, algo in ALGORITHMS.items():
        prev = algo(stream[0], C, None)
        times = []
        for speeds in stream[1:]:
            t = time.perf_counter()
            prev = algo(speeds, C, prev)
            times.append((time.perf_counter() - t) * 1000)
        print(
            f"{name:5s}: median {statistics.median(times):7.2f} ms, max {max(times):7.2f} ms, "
            f"{consumers_used(prev)} consumers for {args.partitions} partitions"
        )


if __name__ == "__main__":
    from _main import run

    run(main)
