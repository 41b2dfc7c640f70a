"""Running totals per user in update mode: every batch writes the users it changed, with their totals."""

from pyspark.sql import functions as F


def totals(payments, params):
    per_user = payments.groupBy("user").agg(
        F.count("*").alias("payments"),
        F.sum("cents").alias("cents"),
        F.max("at").alias("last_at"),
    )
    return per_user.withColumnRenamed("user", "key"), "update"
