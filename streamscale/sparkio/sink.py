"""The Kafka sink: rows with ``value`` (and optionally ``key``, ``topic``, ``partition``) produced
with an idempotent producer; a task flushes and fails on any delivery error, so a failed write fails
the query instead of dropping records."""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamWriter, DataSourceWriter, WriterCommitMessage

from streamscale.errors import ConfigError
from streamscale.sparkio.options import sink_conf
from streamscale.sparkio.producers import produce_all, producer

try:
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover
    DataSourceArrowWriter = DataSourceStreamArrowWriter = None


class _SinkCommit(WriterCommitMessage):
    def __init__(self, count: int):
        self.count = count


def _as_bytes(v):
    if v is None or isinstance(v, bytes):
        return v
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return str(v).encode()


def _arrow_rows(batches):
    for rb in batches:
        names = rb.schema.names
        if "value" not in names:
            raise ConfigError("the Kafka sink needs a 'value' column")
        n = rb.num_rows
        col = {name: rb.column(name).to_pylist() for name in ("key", "value", "topic", "partition") if name in names}
        keys, values = col.get("key", [None] * n), col["value"]
        topics, parts = col.get("topic", [None] * n), col.get("partition", [None] * n)
        for i in range(n):
            yield _as_bytes(keys[i]), _as_bytes(values[i]), topics[i], parts[i], None


class _SinkWriterMixin:
    def _init(self, options, schema):
        self.bootstrap, self.topic, self.extra = sink_conf(options)
        if "value" not in schema.fieldNames():
            raise ConfigError("the Kafka sink needs a 'value' column")
        if self.topic is None and "topic" not in schema.fieldNames():
            raise ConfigError("the Kafka sink needs option 'topic' or a 'topic' column")

    def _write_rows(self, rows) -> _SinkCommit:
        return _SinkCommit(produce_all(producer(self.bootstrap, self.extra), self.topic, rows))


_ArrowBase = DataSourceStreamArrowWriter or DataSourceStreamWriter


class KafkaStreamWriter(_SinkWriterMixin, _ArrowBase):
    def __init__(self, options, schema):
        self._init(options, schema)

    def write(self, iterator):
        if DataSourceStreamArrowWriter is not None:
            return self._write_rows(_arrow_rows(iterator))
        return self._write_rows(
            (
                _as_bytes(r["key"]) if "key" in r else None,
                _as_bytes(r["value"]),
                r["topic"] if "topic" in r else None,
                r["partition"] if "partition" in r else None,
                None,
            )
            for r in iterator
        )

    def commit(self, messages, batchId) -> None:
        pass

    def abort(self, messages, batchId) -> None:
        pass


_BatchBase = DataSourceArrowWriter or DataSourceWriter


class KafkaBatchWriter(_SinkWriterMixin, _BatchBase):
    def __init__(self, options, schema):
        self._init(options, schema)

    def write(self, iterator):
        return self._write_rows(_arrow_rows(iterator))
