"""Spark's Kafka connector and streamscale's Python source at streaming batch sizes, against the
strongest baselines, in one run and one session.

    .venv/bin/python benchmarks/source_throughput.py [--records 1000000] [--repeat 3] [--master local[2]]

Compares, on the same records (JSON ActivePowerRecords from the load generator, 8 partitions):

* a tuned raw confluent-kafka consumer (fetch.wait.max.ms=5, fetch.queue.backoff.ms=5, large fetch
  sizes) counting records: the limit of any Kafka reader here;
* Spark's own connector (``format("kafka")``, spark-sql-kafka-0-10) and the streamscale-kafka
  Python source, each into the ``noop`` sink, ``availableNow``, at maxOffsetsPerTrigger 20k / 100k /
  unbounded;
* Spark's parquet file stream source reading the same records (the Kafka columns) from files of
  exactly one batch each (``maxFilesPerTrigger=1``): the ceiling a source inside Spark can aim at.

Two rates per query: over the whole run (records / the summed ``durationMs.triggerExecution`` of
every micro-batch, the first included: what an ``availableNow`` user waits for), and steady
(the batches after the first), with the median ``triggerExecution`` of those. Each figure is the
median of ``--repeat`` runs with its min-max; ratios are of medians at the same batch size (the
unbounded rows against the raw consumer).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from _drain import drain
from confluent_kafka import Consumer, TopicPartition

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, generate
from streamscale.sparkio.io import read_kafka
from streamscale.sparkio.session import build_session

BATCHES = [20_000, 100_000, None]  # None: everything in one batch
PARTS = 8
CONNECTORS = ("spark", "python")


def raw_consumer(bootstrap: str, topic: str, partitions: int, total: int, collect: bool = False):
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bench-raw",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 5,
            "fetch.queue.backoff.ms": 5,
            "max.partition.fetch.bytes": 16 * 1024 * 1024,
            "fetch.max.bytes": 64 * 1024 * 1024,
            "queued.max.messages.kbytes": 256 * 1024,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    n, rows = 0, []
    t = time.perf_counter()
    while n < total:
        msgs = [m for m in c.consume(20000, 1.0) if m.error() is None]
        n += len(msgs)
        if collect:
            rows.extend((m.key(), m.value(), m.topic(), m.partition(), m.offset(), m.timestamp()[1]) for m in msgs)
    dt = time.perf_counter() - t
    c.close()
    return n / dt, rows


def write_batch_files(rows: list, directory: Path, batch: int | None) -> None:
    """The records as parquet files of exactly `batch` rows each (file order = read order)."""
    keys, values, topics, parts, offsets, ts = zip(*rows)
    table = pa.table(
        {
            "key": pa.array(keys, pa.binary()),
            "value": pa.array(values, pa.binary()),
            "topic": pa.array(topics, pa.string()),
            "partition": pa.array(parts, pa.int32()),
            "offset": pa.array(offsets, pa.int64()),
            "timestamp": pa.array([x * 1000 for x in ts], pa.timestamp("us", tz="UTC")),
        }
    )
    size = batch or 100_000
    directory.mkdir(parents=True)
    for i, start in enumerate(range(0, table.num_rows, size)):
        pq.write_table(table.slice(start, size), directory / f"part-{i:06d}.parquet")


def run_query(df, total: int) -> tuple[float, float, float]:
    """(steady records/s, median steady batch ms, whole-run records/s)"""
    progress = drain(df, total)
    rows = total
    whole = rows / (sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000)
    if len(progress) > 1:
        # the first batch of a query carries its start (the file source lists its directory, the
        # Kafka readers rewind to the topic's start): a streaming run pays it once, not per batch
        progress = progress[1:]
        rows = sum(p["numInputRows"] for p in progress)
    times = [p["durationMs"]["triggerExecution"] for p in progress]
    return rows / (sum(times) / 1000), statistics.median(times), whole


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):>10,.0f} ({min(values):,.0f}-{max(values):,.0f})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-source-"))
    results: dict[tuple, list] = {}
    try:
        with EmbeddedBroker() as broker, BrokerAccess(broker.bootstrap) as access:
            topic = f"bench-{PARTS}"
            access.create_topic(topic, PARTS)
            res = generate(
                GeneratorConfig(
                    broker.bootstrap, topic, sensors=100_000, workers=2, records=args.records, throttle=False
                )
            )
            assert res.delivered == args.records, res
            print(f"{args.records:,} JSON ActivePowerRecords in a topic of {PARTS} partitions; {args.master}")
            _, rows = raw_consumer(broker.bootstrap, topic, PARTS, args.records, collect=True)
            for b in BATCHES:
                write_batch_files(rows, work / f"files-{b}", b)
            spark = build_session(args.master, "bench-source", shuffle_partitions=2)
            schema = spark.read.parquet(str(work / "files-None")).schema

            def kafka(impl, b):
                df = read_kafka(spark, broker.bootstrap, topic, "earliest", max_offsets_per_trigger=b, impl=impl)
                return run_query(df, args.records)

            def files(b):
                reader = spark.readStream.schema(schema)
                if b is not None:
                    reader = reader.option("maxFilesPerTrigger", 1)
                return run_query(reader.parquet(str(work / f"files-{b}")), args.records)

            for impl in CONNECTORS:  # warm-up: Python workers, readers, JIT
                kafka(impl, 100_000)
            files(100_000)
            for rep in range(args.repeat):
                results.setdefault(("raw",), []).append(
                    (raw_consumer(broker.bootstrap, topic, PARTS, args.records)[0], 0.0, 0.0)
                )
                for b in BATCHES:
                    results.setdefault(("files", b), []).append(files(b))
                    for impl in CONNECTORS:
                        results.setdefault((impl, b), []).append(kafka(impl, b))
                print(f"repetition {rep + 1}/{args.repeat} done", flush=True)
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def col(key, i):
        return [r[i] for r in results[key]]

    def med(key, i):
        return statistics.median(col(key, i))

    raw = med(("raw",), 0)
    print(f"\nmedian of {args.repeat} (min-max); whole run = records / summed triggerExecution of all batches,")
    print("steady = the batches after the first, with their median triggerExecution\n")
    print(
        f"{'reader':<30}{'whole run records/s':>26}{'ratio':>12}{'steady records/s':>26}{'ratio':>12}{'batch ms':>10}"
    )
    print(f"{'raw consumer, tuned':<30}{spread(col(('raw',), 0)):>26}")
    for b in BATCHES:
        label = f"{b:,}" if b else "unbounded"
        fkey = ("files", b)
        rows_ = [
            ("parquet files", fkey),
            *((f"{'Spark connector' if i == 'spark' else 'Python source'}", (i, b)) for i in CONNECTORS),
        ]
        for name, key in rows_:
            if key[0] == "files":
                ratios = ("", "")
            elif b is None:
                ratios = (f"{med(key, 2) / raw:.0%} raw", f"{med(key, 0) / raw:.0%} raw")
            else:
                ratios = (f"{med(key, 2) / med(fkey, 2):.0%} file", f"{med(key, 0) / med(fkey, 0):.0%} file")
            print(
                f"{name + ', ' + label:<30}{spread(col(key, 2)):>26}{ratios[0]:>12}{spread(col(key, 0)):>26}"
                f"{ratios[1]:>12}{med(key, 1):>10,.0f}"
            )
        print(
            f"  Python source / Spark connector, {label}: whole run "
            f"{med(('python', b), 2) / med(('spark', b), 2):.0%}, "
            f"steady {med(('python', b), 0) / med(('spark', b), 0):.0%}"
        )


if __name__ == "__main__":
    from _main import run

    run(main)
