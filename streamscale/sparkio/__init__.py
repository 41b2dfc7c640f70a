"""Spark I/O concern: Kafka source and sink on PySpark's Python Data Source API, session set-up."""
