"""Theodolite's UC1 without its database: each sensor reading converted to kW and tagged with its
band, one output record per reading. Stateless and free of Python UDFs, so Spark's real-time mode
can run it as well as micro-batches (readings_kw.yaml compares the two)."""

from pyspark.sql import functions as F


def readings_kw(readings, params):
    kw = F.col("valueInW") / 1000.0
    band = F.when(kw >= float(params.get("high_kw", 0.08)), "high").otherwise("normal")
    return readings.select(
        F.col("identifier").alias("key"), "identifier", "timestamp", kw.alias("valueInKW"), band.alias("band")
    )
