"""Large payments from Avro records in Confluent's wire format, decoded by the job itself: Spark's
Kafka columns (``decode: raw``), the 5-byte header (magic byte, schema id) cut off, the body read
by Spark's ``from_avro`` with the schema beside this file (payment.avsc)."""

from pathlib import Path

from pyspark.sql import functions as F
from pyspark.sql.avro.functions import from_avro

SCHEMA = (Path(__file__).parent / "payment.avsc").read_text()


def avro_payments(kafka, params):
    least = int(params.get("min_cents", 9000))
    body = F.substring(F.col("value"), 6, 2**31 - 1)  # after Confluent's magic byte and schema id
    p = kafka.select(from_avro(body, SCHEMA).alias("p")).select("p.*")
    return p.where(F.col("cents") >= least).select(F.col("user").alias("key"), "payment", "user", "cents", "at")
