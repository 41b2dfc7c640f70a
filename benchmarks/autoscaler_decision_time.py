"""Decision time of the assignment algorithms: 1,000 partitions onto about 200 consumers.

    .venv/bin/python benchmarks/autoscaler_decision_time.py [--partitions 1000] [--repeat 20]

Speeds are uniform in [0, 0.4 C] (about 200 consumers' worth); each timed call gets the previous
iteration's assignment, as in the running controller. Target (issue 5): MWF < 50 ms.
"""

from __future__ import annotations

import argparse
import statistics
import time

from streamscale.autoscaler.binpacking import ALGORITHMS, consumers_used
from streamscale.autoscaler.evaluation import measurement_stream


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    C = 100.0
    stream = [{p: s * 0.4 for p, s in m.items()}
              for m in measurement_stream(args.partitions, args.repeat + 1, 5, C, seed=1)]
    for name, algo in ALGORITHMS.items():
        prev = algo(stream[0], C, None)
        times = []
        for speeds in stream[1:]:
            t = time.perf_counter()
            prev = algo(speeds, C, prev)
            times.append((time.perf_counter() - t) * 1000)
        print(f"{name:5s}: median {statistics.median(times):7.2f} ms, max {max(times):7.2f} ms, "
              f"{consumers_used(prev)} consumers for {args.partitions} partitions")


if __name__ == "__main__":
    main()
