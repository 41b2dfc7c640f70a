"""What one exact end-offset read (ListOffsets) costs while the load generator writes.

    .venv/bin/python benchmarks/end_offsets_probe.py [--rate 150000] [--partitions 8] [--calls 30]

``BrokerAccess.end_offsets`` is the lag sampler's once-a-second read and the Spark source's per
micro-batch ``latestOffset``. Printed: per call, median and maximum of its time while the generator
runs, then with the topic at rest; and whether the offsets read at rest equal the records delivered.
"""

from __future__ import annotations

import argparse
import statistics
import time

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, LoadGenerator


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=150_000, help="records/s the generator writes (one sensor each)")
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--calls", type=int, default=30, help="reads while the generator runs (a third as many at rest)")
    args = ap.parse_args()

    def timed(access) -> tuple[float, dict]:
        t = time.monotonic()
        ends = access.end_offsets("input")
        return (time.monotonic() - t) * 1000, ends

    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        access.create_topic("input", args.partitions)
        cfg = GeneratorConfig(broker.bootstrap, topic="input", sensors=args.rate, duration_s=args.calls + 30)
        gen = LoadGenerator(cfg).start()
        live = []
        try:
            time.sleep(5)  # past the generator's start
            for _ in range(args.calls):
                live.append(timed(access)[0])
                time.sleep(0.5)
        finally:
            result = gen.stop()
        rest = [timed(access) for _ in range(max(3, args.calls // 3))]
    ends = rest[-1][1]

    def line(what, ms):
        return f"{what}: {statistics.median(ms):.1f} ms per call (max {max(ms):.1f})"

    print(f"{args.rate:,} records/s into {args.partitions} partitions, {len(live)} reads while it ran")
    print(line("  while writing", live))
    print(line("  at rest", [ms for ms, _ in rest]))
    print(f"  end offsets at rest {sum(ends.values()):,}, records delivered {result.delivered:,}")


if __name__ == "__main__":
    from _main import run

    run(main)
