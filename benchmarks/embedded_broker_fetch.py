"""The embedded broker's CPU while a reader follows the log end, over a run, per producer linger.

    .venv/bin/python benchmarks/embedded_broker_fetch.py [--rate 16384] [--duration 150] [--linger 20 200]

Tansu 0.6 with memory storage answers every fetch that finds data by listing *all* stored batches of
the partition (``DynoStore::fetch`` lists the partition's ``records/`` prefix, then reads the batches
from the fetch offset on), so a fetch costs more the more batches the partition holds. A reader at
the log end fetches whenever a new batch lands: the broker's work grows with the run's length
(batches stored) times the batches landing per second, both set by the producer's ``linger.ms``.

For each linger: a fresh topic (8 partitions), the load generator at ``--rate`` records/s (its own
settings but linger.ms), and one consumer with the Spark source's reader settings following the log
end. Printed every 15 s: the broker's CPU over those 15 s (share of one CPU), batches stored per
partition so far (an estimate: records / (rate per partition x linger)), the reader's lag.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.broker.connection import KafkaConnection
from streamscale.loadgen import GeneratorConfig
from streamscale.loadgen.generator import LoadGenerator
from streamscale.sparkio.readers import reader_conf

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


class Follower(threading.Thread):
    """Reads every partition from the start, as the Spark source's readers do (never paused)."""

    def __init__(self, bootstrap: str, topic: str, partitions: int):
        super().__init__(daemon=True)
        from confluent_kafka import TopicPartition

        conn = KafkaConnection.of(bootstrap)
        self.consumer = conn.consumer(defaults=reader_conf(conn))
        self.consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        self.read = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        while not self.stop_flag.is_set():
            for m in self.consumer.consume(num_messages=20_000, timeout=0.05):
                if m.error() is None:
                    self.read += 1

    def close(self) -> None:
        self.stop_flag.set()
        self.join(5)
        self.consumer.close()


def one_run(broker, access, linger: int, rate: int, duration: float, partitions: int) -> list[float]:
    topic = f"fetch-cost-linger{linger}"
    access.create_topic(topic, partitions)
    follower = Follower(broker.bootstrap, topic, partitions)
    follower.start()
    cfg = GeneratorConfig(
        broker.bootstrap, topic, sensors=rate, duration_s=duration, producer_config={"linger.ms": linger}
    )
    shares = []
    pid = broker.proc.pid
    try:
        with LoadGenerator(cfg) as gen:
            start = t0 = time.monotonic()
            c0 = cpu_s(pid)
            while time.monotonic() - start < duration:
                time.sleep(15.0)
                t1, c1 = time.monotonic(), cpu_s(pid)
                share = (c1 - c0) / (t1 - t0)
                shares.append(share)
                sent = gen.delivered()
                per_partition_batches = sent / partitions / max(1.0, rate / partitions * linger / 1000)
                print(
                    f"  linger {linger:>4} ms  t={t1 - start:5.0f} s  "
                    f"broker {100 * share:5.1f} % of a CPU  ~{per_partition_batches:7,.0f} batches/partition  "
                    f"reader lag {sent - follower.read:9,}",
                    flush=True,
                )
                t0, c0 = t1, c1
    finally:
        follower.close()
        access.delete_topics([topic])
    return shares


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rate", type=int, default=16_384, help="records/s (UC4 with 4^7 sensors: 16,384)")
    ap.add_argument("--duration", type=float, default=150.0)
    ap.add_argument("--linger", type=int, nargs="+", default=[20, 200])
    ap.add_argument("--partitions", type=int, default=8)
    args = ap.parse_args()
    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        summary = {}
        for linger in args.linger:
            print(f"producer linger.ms {linger}, {args.rate:,} records/s, {args.duration:.0f} s", flush=True)
            summary[linger] = one_run(broker, access, linger, args.rate, args.duration, args.partitions)
        print("broker CPU (% of one CPU) per 15 s, first -> last:")
        for linger, shares in summary.items():
            print(f"  linger {linger:>4} ms: " + " ".join(f"{100 * s:.0f}" for s in shares))


if __name__ == "__main__":
    from _main import run

    run(main)
