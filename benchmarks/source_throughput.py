"""PySpark Kafka source throughput vs a raw confluent-kafka consumer on the same topic, same run.

    .venv/bin/python benchmarks/source_throughput.py [--records 1000000] [--partitions 8] [--master local[2]]

Prints records/s of: a raw consumer loop (consume() batches, counting records), the PySpark source through a trivial query (read -> count, raw columns), and the same with
JSON decoding in the source; and the ratio to raw (issue target: >= 40 %).
"""

from __future__ import annotations

import argparse
import tempfile
import time

from confluent_kafka import Consumer, TopicPartition

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, generate
from streamscale.sparkio.io import read_kafka, read_records
from streamscale.sparkio.session import build_session


def raw_consumer(bootstrap: str, topic: str, partitions: int, total: int) -> float:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-raw", "enable.auto.commit": False,
                  "max.partition.fetch.bytes": 8 * 1024 * 1024})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n = 0
    t = time.perf_counter()
    while n < total:
        # counting only: the most favourable loop for raw, so the ratio is conservative
        n += sum(1 for m in c.consume(20000, 1.0) if m.error() is None)
    dt = time.perf_counter() - t
    c.close()
    return n / dt


def spark_query(spark, df, total: int) -> tuple[float, int]:
    ckpt = tempfile.mkdtemp(prefix="bench-ckpt-")
    t = time.perf_counter()
    q = df.writeStream.format("noop").option("checkpointLocation", ckpt).trigger(availableNow=True).start()
    q.awaitTermination()
    dt = time.perf_counter() - t
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    assert rows == total, f"query read {rows} of {total}"
    return rows / dt, rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
        access.create_topic("warmup", args.partitions)
        access.create_topic("bench", args.partitions)
        generate(GeneratorConfig(broker.bootstrap, "warmup", sensors=1000, workers=1, records=20_000,
                                 throttle=False))
        res = generate(GeneratorConfig(broker.bootstrap, "bench", sensors=100_000, workers=2,
                                       records=args.records, throttle=False))
        print(f"produced {res.delivered:,} JSON ActivePowerRecords into {args.partitions} partitions")
        spark = build_session(args.master, "bench-source", shuffle_partitions=2)
        # the first query pays for the Python workers' start-up; not part of the figure
        spark_query(spark, read_kafka(spark, broker.bootstrap, "warmup", "earliest"), 20_000)
        raw = raw_consumer(broker.bootstrap, "bench", args.partitions, args.records)
        src, _ = spark_query(spark, read_kafka(spark, broker.bootstrap, "bench", "earliest"), args.records)
        dec, _ = spark_query(spark, read_records(spark, broker.bootstrap, "bench", starting_offsets="earliest"),
                             args.records)
        spark.stop()
    print(f"raw confluent-kafka consumer      : {raw:12,.0f} records/s")
    print(f"PySpark source, read -> count     : {src:12,.0f} records/s  ratio {src / raw:6.1%}")
    print(f"PySpark source + JSON decode      : {dec:12,.0f} records/s  ratio {dec / raw:6.1%}")


if __name__ == "__main__":
    main()
