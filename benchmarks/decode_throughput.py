"""Decoding JSON values on Spark's connector: the decoding contract (``decode_values``: Arrow's
reader in the Python workers, an Arrow UDF of the value column) against Spark's own ``from_json``,
in one session.

    .venv/bin/python benchmarks/decode_throughput.py [--records 1000000] [--batch 100000] [--repeat 5] [--warmup 1]

The same topic (JSON ActivePowerRecords from the load generator, 10,000 sensors, 8 partitions) is
read from the start by a streaming query of Spark's connector, ``maxOffsetsPerTrigger`` =
``--batch``, ``availableNow``, into ``noop``, in two shapes:

* decode: the decoded rows and the pipelines' malformed count (an observation), nothing else;
* uc2: the same, then the valid rows' 10 s windows per sensor (count, sum, mean, min, max).

``from_json`` is what Spark's connector decoded with before: its rows are not the contract's (it
reads ``NaN``, ``1e400`` and ``Infinity`` as non-finite doubles, any JSON value of a STRING field
as its text, and ignores what follows the object), so it is the baseline for speed only. The
variants alternate run by run after ``--warmup`` unmeasured pairs; each repetition's ratio is
contract / from_json of that pair. Rate = records / summed ``triggerExecution`` of the batches
after the first. Printed: median rate (min-max) per variant, the ratio of the medians and the pairs'
ratios (median, min-max).
"""

from __future__ import annotations

import argparse
import statistics
import uuid

from _drain import drain

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.loadgen import GeneratorConfig, generate
from streamscale.sparkio import formats
from streamscale.sparkio.io import ACTIVE_POWER_DDL, ERROR_COLUMN, decode_values, read_kafka
from streamscale.sparkio.session import build_session


def from_json(raw):
    """Spark's own decoding (the baseline): a field is null where the value did not parse."""
    from pyspark.sql import functions as F

    parsed = raw.withColumn("_v", F.from_json(F.col("value").cast("string"), ACTIVE_POWER_DDL))
    fields = formats.parse_ddl(ACTIVE_POWER_DDL).names
    bad = F.lit(False)
    for f in fields:
        bad = bad | F.col(f"_v.{f}").isNull()
    cols = [F.col(c).alias("kafka_" + c) for c in raw.columns if c not in ("key", "value")]
    return parsed.select(
        *cols, *[F.col(f"_v.{f}").alias(f) for f in fields], F.when(bad, F.lit("malformed")).alias(ERROR_COLUMN)
    )


def measure(spark, bootstrap: str, topic: str, total: int, batch: int, decode, shape: str) -> float:
    from pyspark.sql import functions as F

    raw = read_kafka(spark, bootstrap, topic, "earliest", batch, "spark")
    df = decode(raw)
    df = df.observe(f"input_{uuid.uuid4().hex[:6]}", F.count(F.when(F.col(ERROR_COLUMN).isNotNull(), 1)).alias("m"))
    df = df.where(F.col(ERROR_COLUMN).isNull())
    if shape == "uc2":
        df = (
            df.withColumn("event_time", F.timestamp_millis("timestamp"))
            .withWatermark("event_time", "1 second")
            .groupBy(F.window("event_time", "10 seconds"), "identifier")
            .agg(F.count("valueInW"), F.sum("valueInW"), F.avg("valueInW"), F.min("valueInW"), F.max("valueInW"))
        )
    progress = drain(df, total)
    steady = progress[1:]
    return sum(p["numInputRows"] for p in steady) / (sum(p["durationMs"]["triggerExecution"] for p in steady) / 1000)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--master", default="local[2]")
    args = ap.parse_args()
    variants = {"from_json": from_json, "contract": lambda raw: decode_values(raw, ACTIVE_POWER_DDL)}
    topic = "decode-bench"
    with EmbeddedBroker() as broker:
        BrokerAccess(broker.bootstrap).create_topic(topic, 8)
        generate(GeneratorConfig(broker.bootstrap, topic=topic, sensors=10_000, records=args.records, throttle=False))
        spark = build_session(args.master, "decode-throughput")
        try:
            for shape in ("decode", "uc2"):
                rates: dict[str, list[float]] = {v: [] for v in variants}
                for i in range(args.warmup + args.repeat):
                    order = list(variants) if i % 2 == 0 else list(reversed(variants))
                    got = {
                        v: measure(spark, broker.bootstrap, topic, args.records, args.batch, variants[v], shape)
                        for v in order
                    }
                    if i >= args.warmup:
                        for v, r in got.items():
                            rates[v].append(r)
                        print(
                            f"{shape} {i - args.warmup + 1}/{args.repeat}: "
                            + ", ".join(f"{v} {r:,.0f}/s" for v, r in got.items()),
                            flush=True,
                        )
                med = {v: statistics.median(r) for v, r in rates.items()}
                pairs = [c / f for c, f in zip(rates["contract"], rates["from_json"])]
                print(
                    f"{shape}: from_json {med['from_json']:,.0f} records/s ({min(rates['from_json']):,.0f}-"
                    f"{max(rates['from_json']):,.0f}), contract {med['contract']:,.0f} ({min(rates['contract']):,.0f}-"
                    f"{max(rates['contract']):,.0f}); contract / from_json {med['contract'] / med['from_json']:.0%} "
                    f"(pairs {statistics.median(pairs):.0%}, {min(pairs):.0%}-{max(pairs):.0%})",
                    flush=True,
                )
        finally:
            spark.stop()


if __name__ == "__main__":
    from _main import run

    run(main)
