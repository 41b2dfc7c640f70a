"""streamscale: scalability benchmarking of PySpark Structured Streaming over Kafka."""

__version__ = "0.1.0"
