"""Theodolite's UC1 without its database: each sensor reading converted to kW and tagged with its
band, one output record per reading. Stateless and free of Python UDFs, so Spark's real-time mode
can run it as well as micro-batches (readings_kw.yaml compares the two).

``readings_kw_raw`` is the same job on Spark's own Kafka columns (``decode: raw``): it decodes the
reading itself and keeps the input record's Kafka timestamp as the output's ``timestamp``, so that
a real-time run reads each output record's latency exactly, from its own input record, instead of
between the bounds a send-time stamp shared by several records gives."""

from pyspark.sql import functions as F

READING = "identifier STRING, timestamp BIGINT, valueInW DOUBLE"


def readings_kw(readings, params):
    kw = F.col("valueInW") / 1000.0
    band = F.when(kw >= float(params.get("high_kw", 0.08)), "high").otherwise("normal")
    return readings.select(
        F.col("identifier").alias("key"), "identifier", "timestamp", kw.alias("valueInKW"), band.alias("band")
    )


def readings_kw_raw(records, params):
    reading = F.from_json(F.col("value").cast("string"), READING)
    return readings_kw(
        records.select(reading["identifier"].alias("identifier"), reading["valueInW"].alias("valueInW"), "timestamp"),
        params,
    )
