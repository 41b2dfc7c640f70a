"""Spark I/O concern: reading and writing Kafka from Spark with Spark's own connector (the default)
or streamscale's source and sink on PySpark's Python Data Source API, the one decoding contract of
record values both enforce, and SparkSession set-up."""
