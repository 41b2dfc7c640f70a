"""Stream-static join: each order enriched with its product's name and price from a small table."""

from pyspark.sql import functions as F


def enrich(orders, params):
    n = int(params.get("products", 50))
    products = orders.sparkSession.range(n).select(
        F.col("id").alias("product"),
        F.concat(F.lit("product-"), F.col("id").cast("string")).alias("name"),
        (F.col("id") % 10 + 1).alias("price"),
    )
    enriched = orders.join(F.broadcast(products), "product")
    return enriched.select(
        F.col("order").cast("string").alias("key"),
        "order",
        "name",
        "quantity",
        (F.col("quantity") * F.col("price")).alias("total"),
    )
