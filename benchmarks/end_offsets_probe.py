"""What one exact end-offset read costs while the load generator writes: time per call and the
records its probe consumer handed to Python.

    .venv/bin/python benchmarks/end_offsets_probe.py [--rate 150000] [--partitions 8] [--calls 30]

``BrokerAccess.end_offsets`` (the lag sampler's once-a-second read, and the Spark source's per
micro-batch ``latestOffset``) fetches each partition from what ListOffsets answered, inside the
partition's last stored batch, to read the true high watermark. The fetch answers with whole
batches; a probe that kept the answered partitions assigned pulled every record behind them
through Python before it reached the next partition's answer (26,440 records per call at
150,000 records/s; under a capacity run's load one partition went unanswered for 15 s). Printed:
per call, median and maximum of its time and of the records the probe pulled, while the generator
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

    pulled: list[int] = []  # records each read's probe handed to Python

    def timed(access) -> tuple[float, dict]:
        t = time.monotonic()
        ends = access.end_offsets("input")
        pulled.append(access.last_probe_records)
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
        n_live = len(pulled)
        rest = [timed(access) for _ in range(max(3, args.calls // 3))]
    ends = rest[-1][1]

    def line(what, ms, counts):
        return (
            f"{what}: {statistics.median(ms):.0f} ms per call (max {max(ms):.0f}), records pulled "
            f"{statistics.median(counts):,.0f} (max {max(counts):,})"
        )

    print(f"{args.rate:,} records/s into {args.partitions} partitions, {len(live)} reads while it ran")
    print(line("  while writing", live, pulled[:n_live]))
    print(line("  at rest", [ms for ms, _ in rest], pulled[n_live:]))
    print(f"  end offsets at rest {sum(ends.values()):,}, records delivered {result.delivered:,}")


if __name__ == "__main__":
    from _main import run

    run(main)
