"""The embedded Apache Kafka broker: its start time, and its share of the CPUs under streaming load.

    .venv/bin/python benchmarks/embedded_broker.py [--starts 5] [--rates 20000,50000,100000] [--seconds 20]

1. Start time: ``--starts`` brokers one after the other, each on fresh storage: seconds from
   ``start()`` to a broker answering a metadata request (the storage format included), median and
   min-max.
2. CPU share: one broker, the load generator writing ``--rates`` records/s in turn into 8
   partitions while one consumer reads everything (as a streaming query does), ``--seconds`` each:
   the broker process's CPU time over the wall time, in percent of one CPU (this machine has
   ``os.cpu_count()`` of them), beside the generator's own.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time

from _procstat import cpu_seconds
from confluent_kafka import Consumer

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, LoadGenerator


def start_times(n: int) -> list[float]:
    out = []
    for _ in range(n):
        with EmbeddedBroker() as b:
            out.append(b.started_s)
    return out


def drain(bootstrap: str, topic: str, stop: threading.Event, counted: list[int]) -> None:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"drain-{topic}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    c.subscribe([topic])
    try:
        while not stop.is_set():
            counted[0] += sum(1 for m in c.consume(10_000, 0.2) if m.error() is None)
    finally:
        c.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--rates", default="20000,50000,100000")
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    rates = [int(r) for r in args.rates.split(",") if r]

    times = start_times(args.starts)
    print(
        f"start: median {statistics.median(times):.1f} s (min {min(times):.1f}, max {max(times):.1f}) "
        f"over {len(times)} starts, storage format included"
    )
    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        pid = broker.proc.pid
        print(f"CPU share on {os.cpu_count()} CPUs, {args.seconds:g} s per rate, 8 partitions, one consumer:")
        for rate in rates:
            topic = f"load-{rate}"
            access.create_topic(topic, 8)
            stop, counted = threading.Event(), [0]
            reader = threading.Thread(target=drain, args=(broker.bootstrap, topic, stop, counted), daemon=True)
            reader.start()
            cfg = GeneratorConfig(broker.bootstrap, topic=topic, sensors=rate, duration_s=args.seconds)
            b0, t0 = cpu_seconds(pid), time.monotonic()
            result = LoadGenerator(cfg).start().wait()
            wall = time.monotonic() - t0
            broker_pct = 100 * (cpu_seconds(pid) - b0) / wall
            stop.set()
            reader.join()
            print(
                f"  {rate:>7,} records/s target, {result.achieved_rate:>9,.0f} achieved: broker {broker_pct:5.1f} % "
                f"of one CPU, generator {100 * result.cpu_s / wall:5.1f} %, consumer read {counted[0]:,}"
            )


if __name__ == "__main__":
    from _main import run

    run(main)
