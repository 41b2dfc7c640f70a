"""A job written for the answer check, as a user new to streamscale would write it (not an example
of the project's): Nexmark-style hot items, bids per auction in 10 s windows sliding by 5 s,
appended once the watermark (5 s) passes a window's end."""

from pyspark.sql import functions as F


def hot_items(bids, params):
    counts = (
        bids.withWatermark("at", "5 seconds")
        .groupBy(F.window("at", "10 seconds", "5 seconds"), F.col("auction"))
        .agg(F.count("*").alias("bids"), F.max("price").alias("top"))
    )
    return counts.select(
        F.col("auction").alias("key"),
        F.col("window.start").alias("start"),
        F.col("window.end").alias("end"),
        "bids",
        "top",
    )
