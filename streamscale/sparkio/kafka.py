"""Kafka source and sink for Spark Structured Streaming, on PySpark's Python Data Source API.

Spark's own Kafka connector is a jar from a Maven repository; this is the
replacement that needs nothing but ``confluent-kafka``. Format name:
``streamscale-kafka`` (see :func:`streamscale.sparkio.io.read_kafka` for the
switch to the built-in ``kafka`` format).

Source
    One Spark task per group of Kafka partitions, reading each partition's offset range
    ``[start, end)`` (option ``maxPartitions``, the inverse of the built-in connector's
    ``minPartitions``: at most that many tasks per micro-batch, default the session's default
    parallelism, so 100 partitions on 2 cores cost 2 tasks, not 100). Readers stay with their
    Python worker across micro-batches (:mod:`streamscale.sparkio.readers`); with option
    ``claimGroups`` (local masters) a task takes the batch's group its worker is positioned for.
    Offsets are dicts ``{topic: {"<partition>": offset}}`` that Spark checkpoints,
    so a restarted query resumes exactly where the last committed batch ended.
    End offsets come from :class:`~streamscale.broker.access.BrokerAccess`, which
    works around the embedded broker's short ListOffsets answer. A read stops on
    the consumer's position, never on "last message offset == end - 1", because
    transaction markers leave offset gaps.

The jobs live in their own modules: :mod:`.options` (validated once), :mod:`.offsets`,
:mod:`.source`, :mod:`.readers` (pooled per worker), :mod:`.sink`, :mod:`.producers`.

Sink
    Rows with ``value`` (and optionally ``key``, ``topic``, ``partition``) are
    produced with an idempotent producer; the task flushes and fails on any
    delivery error, so a failed write fails the query instead of dropping records.
"""

from __future__ import annotations

import atexit

from pyspark.sql.datasource import DataSource

from streamscale.sparkio import readers
from streamscale.sparkio.offsets import limit_offsets
from streamscale.sparkio.options import ERROR_COLUMN, FORMAT_NAME, WATERMARK_FIELD, SourceConfig
from streamscale.sparkio.producers import close_producers, produce_all
from streamscale.sparkio.sink import KafkaBatchWriter, KafkaStreamWriter
from streamscale.sparkio.source import KafkaBatchReader, KafkaStreamReader, read_range, read_ranges

__all__ = [
    "ERROR_COLUMN",
    "FORMAT_NAME",
    "WATERMARK_FIELD",
    "KafkaDataSource",
    "SourceConfig",
    "limit_offsets",
    "produce_all",
    "read_range",
    "read_ranges",
]


class KafkaDataSource(DataSource):
    """``spark.readStream.format("streamscale-kafka")`` / ``writeStream.format(...)``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self):
        return SourceConfig.from_options(self.options).spark_ddl()

    def streamReader(self, schema):
        return KafkaStreamReader(self.options)

    def reader(self, schema):
        return KafkaBatchReader(self.options)

    def streamWriter(self, schema, overwrite):
        return KafkaStreamWriter(self.options, schema)

    def writer(self, schema, overwrite):
        return KafkaBatchWriter(self.options, schema)


def _close_clients() -> None:  # librdkafka handles destroyed at interpreter exit can crash
    close_producers()
    readers.close_readers()


atexit.register(_close_clients)
