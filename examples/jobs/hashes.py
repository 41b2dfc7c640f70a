"""A job whose cost per record is a parameter: ``rounds`` chained SHA-256 of a record's key and
value (each round hashes the last round's digest), computed by Spark's own ``sha2`` in the JVM. One
round is cheap; sixteen cost about sixteen times as much CPU per record, so the same records give
capacities that differ by a known factor: what a capacity gate between two versions must tell."""

from pyspark.sql import functions as F


def hashes(records, params):
    digest = F.concat_ws(":", F.col("item"), F.col("amount").cast("string"))
    for _ in range(int(params.get("rounds", 1))):
        digest = F.sha2(digest, 256)
    return records.select(F.col("item").alias("key"), digest.alias("digest"))
