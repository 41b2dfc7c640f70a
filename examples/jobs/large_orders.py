"""Large orders into Parquet files: the orders of at least ``min_quantity`` items, with their
value, written by Spark's own file sink (``benchmark.sink``), not to a Kafka topic."""

from pyspark.sql import functions as F


def large_orders(orders, params):
    least = int(params.get("min_quantity", 4))
    return orders.where(F.col("quantity") >= least).select(
        "order", "product", "quantity", (F.col("quantity") * (F.col("product") % 10 + 1)).alias("value"), "at"
    )
