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
    Python worker across micro-batches (:mod:`streamscale.sparkio.readers`).
    Offsets are dicts ``{topic: {"<partition>": offset}}`` that Spark checkpoints,
    so a restarted query resumes exactly where the last committed batch ended.
    End offsets come from :class:`~streamscale.broker.access.BrokerAccess`, which
    works around the embedded broker's short ListOffsets answer. A read stops on
    the consumer's position, never on "last message offset == end - 1", because
    transaction markers leave offset gaps.

Sink
    Rows with ``value`` (and optionally ``key``, ``topic``, ``partition``) are
    produced with an idempotent producer; the task flushes and fails on any
    delivery error, so a failed write fails the query instead of dropping records.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)

from streamscale.errors import ConfigError, StreamscaleError
from streamscale.sparkio import formats, readers

try:  # Spark >= 4.1
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


try:
    from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter
except ImportError:  # pragma: no cover
    DataSourceArrowWriter = DataSourceStreamArrowWriter = None

FORMAT_NAME = "streamscale-kafka"

ERROR_COLUMN = "value_error"

_ARROW_BASE = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]

# With option batchWatermarkFrom=<the query's checkpoint>: every row carries the event-time
# watermark of its micro-batch (what Spark's stateful operators use in it), so late records can be
# counted exactly on the executors (streamscale.pipelines.accounting).
WATERMARK_FIELD = "batchWatermarkMs"

_EARLIEST, _LATEST = -2, -1
_BATCH_ROWS = 20_000


def _kafka_options(options) -> dict:
    """Options named ``kafka.*`` go to librdkafka, as Spark's source passes them to its consumer."""
    out = {}
    for k, v in options.items():
        if k.lower().startswith("kafka.") and k.lower() != "kafka.bootstrap.servers":
            out[k[len("kafka.") :]] = v
    return out


def _positive_int(opts: dict, name: str, default):
    """Option ``name`` (looked up lower-cased) as a positive whole number, or ``default``."""
    raw = opts.get(name.lower())
    if raw in (None, ""):
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number, not '{raw}'") from None
    if value <= 0:
        raise ConfigError(f"{name} must be positive")
    return value


@dataclass(frozen=True)
class SourceConfig:
    bootstrap: str
    topics: tuple[str, ...]
    starting: str
    max_offsets_per_trigger: int | None
    kafka: tuple[tuple[str, str], ...]
    value_format: str
    value_schema: str | None
    dead_letter_topic: str | None
    commit_group: str | None
    fail_on_data_loss: bool
    poll_timeout_s: float
    include_raw: bool
    max_partitions: int
    watermark_from: str | None = None  # a query's checkpoint: add its batch watermark as a column

    @classmethod
    def from_options(cls, options) -> SourceConfig:
        opts = {k.lower(): v for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers")
        if not bootstrap:
            raise ConfigError("option 'kafka.bootstrap.servers' is required")
        if "subscribe" not in opts:
            raise ConfigError("option 'subscribe' (topic name, or comma-separated names) is required")
        topics = tuple(t.strip() for t in opts["subscribe"].split(",") if t.strip())
        if not topics:
            raise ConfigError("option 'subscribe' names no topic")
        from streamscale.broker.access import check_topic_name

        for t in topics:
            check_topic_name(t, "subscribed topic")
        max_off = _positive_int(opts, "maxOffsetsPerTrigger", None)
        max_parts = _positive_int(opts, "maxPartitions", os.cpu_count() or 2)
        fmt = opts.get("valueformat", "raw").lower()
        if fmt not in formats.FORMATS:
            raise ConfigError(f"valueFormat must be one of {formats.FORMATS}, not '{fmt}'")
        schema = opts.get("valueschema")
        if fmt != "raw":
            if not schema:
                raise ConfigError(
                    f"valueFormat={fmt} needs option valueSchema, e.g. "
                    "'identifier STRING, timestamp BIGINT, valueInW DOUBLE'"
                )
            formats.parse_ddl(schema)
        return cls(
            bootstrap=bootstrap,
            topics=topics,
            starting=opts.get("startingoffsets", "latest"),
            max_offsets_per_trigger=max_off,
            kafka=tuple(sorted(_kafka_options(options).items())),
            value_format=fmt,
            value_schema=schema,
            dead_letter_topic=opts.get("deadlettertopic") or None,
            commit_group=opts.get("commitgroup") or None,
            fail_on_data_loss=opts.get("failondataloss", "true").lower() != "false",
            poll_timeout_s=float(opts.get("polltimeoutms", "120000")) / 1000.0,
            include_raw=opts.get("includeraw", "true").lower() != "false" or fmt == "raw",
            max_partitions=max_parts,
            watermark_from=opts.get("batchwatermarkfrom") or None,
        )

    @property
    def meta_prefix(self) -> str:
        """Decoded values name their own fields (an ActivePowerRecord has a 'timestamp'), so the
        Kafka metadata columns are then called kafka_topic, kafka_offset, ... to never clash."""
        return "" if self.value_format == "raw" else "kafka_"

    def arrow_schema(self) -> pa.Schema:
        base = [f for f in _ARROW_BASE if self.include_raw or f.name not in ("key", "value")]
        fields = [f.with_name(self.meta_prefix + f.name) for f in base]
        if self.value_format != "raw":
            decoded = formats.parse_ddl(self.value_schema)
            clash = {f.name for f in fields} & set(decoded.names) | ({ERROR_COLUMN} & set(decoded.names))
            if clash:
                raise ConfigError(f"valueSchema fields {sorted(clash)} clash with the source's own columns")
            fields += list(decoded)
            fields.append(pa.field(ERROR_COLUMN, pa.string()))
        if self.watermark_from:
            fields.append(pa.field(self.meta_prefix + WATERMARK_FIELD, pa.int64()))
        return pa.schema(fields)

    def spark_ddl(self) -> str:
        names = {
            pa.binary(): "BINARY",
            pa.string(): "STRING",
            pa.int32(): "INT",
            pa.int64(): "BIGINT",
            pa.float64(): "DOUBLE",
            pa.float32(): "FLOAT",
            pa.bool_(): "BOOLEAN",
        }
        return ", ".join(
            f"`{f.name}` {'TIMESTAMP' if pa.types.is_timestamp(f.type) else names[f.type]}" for f in self.arrow_schema()
        )


class KafkaInputPartition(InputPartition):
    """One Spark task: ranges [start, end) of one group of Kafka partitions (see readers.group_of),
    and the micro-batch's watermark when the source was asked for it (``batchWatermarkFrom``)."""

    def __init__(self, group: tuple, ranges: tuple[tuple[str, int, int, int], ...], watermark_ms: int | None = None):
        super().__init__((group, ranges, watermark_ms))
        self.group, self.ranges, self.watermark_ms = group, ranges, watermark_ms


# -- worker-side client caches: a Python worker serves many tasks, so clients outlive a batch --
_LOCK = threading.Lock()
_PRODUCERS: dict[tuple, object] = {}


def _producer(bootstrap: str, extra: tuple[tuple[str, str], ...]):
    from confluent_kafka import Producer

    key = (bootstrap, extra)
    with _LOCK:
        p = _PRODUCERS.get(key)
        if p is None:
            conf = {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "batch.num.messages": 10000,
                "queue.buffering.max.kbytes": 512 * 1024,
                "allow.auto.create.topics": False,
            }
            conf.update(dict(extra))
            p = Producer(conf)
            _PRODUCERS[key] = p
        return p


class _Delivery:
    """Counts delivery reports; the first failure is kept to be raised."""

    def __init__(self):
        self.ok = 0
        self.failed = 0
        self.first_error: str | None = None

    def __call__(self, err, msg):
        if err is None:
            self.ok += 1
        else:
            self.failed += 1
            if self.first_error is None:
                self.first_error = f"{err.str()} (topic {msg.topic()})"


def produce_all(producer, topic_default: str | None, rows, timeout: float = 120.0) -> int:
    """Produce (key, value, topic, partition, headers) tuples; return the count or raise on any loss."""
    report = _Delivery()
    sent = 0
    for key, value, topic, partition, headers in rows:
        topic = topic or topic_default
        if topic is None:
            raise ConfigError("the Kafka sink needs option 'topic' or a 'topic' column")
        kwargs = {"key": key, "value": value, "on_delivery": report}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1
        if sent % 10000 == 0:
            producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining:
        raise StreamscaleError(f"Kafka sink: {remaining} records not delivered within {timeout:.0f} s")
    if report.failed:
        raise StreamscaleError(f"Kafka sink: {report.failed} of {sent} records failed: {report.first_error}")
    if report.ok != sent:
        raise StreamscaleError(f"Kafka sink: {sent} produced but {report.ok} acknowledged")
    return sent


def read_ranges(cfg: SourceConfig, group: tuple, ranges, watermark_ms: int | None = None) -> Iterator[pa.RecordBatch]:
    """Yield Arrow record batches holding exactly the records of ``ranges`` (topic, partition,
    start, end), read by this worker's reader for ``group``; ``watermark_ms`` fills the batch
    watermark column when the source has one."""
    schema = cfg.arrow_schema()
    ranges = [r for r in ranges if r[3] > r[2]]
    if not ranges:
        return
    reader = readers.group_reader(cfg.bootstrap, cfg.kafka, group)
    dlq = _producer(cfg.bootstrap, ()) if cfg.dead_letter_topic else None
    decode_schema = formats.parse_ddl(cfg.value_schema) if cfg.value_format != "raw" else None
    pending: list = []
    rows = 0
    for runs in reader.read(ranges, cfg.poll_timeout_s, cfg.fail_on_data_loss):
        pending.extend(runs)
        rows += sum(len(msgs) for _, msgs in runs)
        # fewer, larger Arrow batches: each one is a round trip to the JVM
        if rows >= _BATCH_ROWS:
            yield _to_arrow(pending, schema, cfg, decode_schema, dlq, watermark_ms)
            pending, rows = [], 0
    if pending:
        yield _to_arrow(pending, schema, cfg, decode_schema, dlq, watermark_ms)
    if dlq is not None:
        remaining = dlq.flush(60)
        if remaining:
            raise StreamscaleError(f"dead-letter topic: {remaining} records not delivered")


def read_range(cfg: SourceConfig, topic: str, partition: int, start: int, end: int):
    """Yield Arrow record batches holding exactly the records of [start, end) of one partition."""
    return read_ranges(cfg, ((topic, partition),), [(topic, partition, start, end)])


def _to_arrow(
    runs, schema: pa.Schema, cfg: SourceConfig, decode_schema, dlq, watermark_ms: int | None = None
) -> pa.RecordBatch:
    """Runs of one partition's messages -> one Arrow batch (topic and partition from the runs)."""
    msgs = [m for _, run in runs for m in run] if len(runs) > 1 else runs[0][1]
    lengths = [len(run) for _, run in runs]
    values = [m.value() for m in msgs]
    ts = np.array([m.timestamp() for m in msgs], dtype=np.int64).reshape(-1, 2)
    cols: list[pa.Array] = []
    if cfg.include_raw:
        cols += [pa.array([m.key() for m in msgs], pa.binary()), pa.array(values, pa.binary())]
    cols += [
        pa.DictionaryArray.from_arrays(
            np.repeat(np.arange(len(runs), dtype=np.int32), lengths), pa.array([t for (t, _), _ in runs], pa.string())
        ).cast(pa.string()),
        pa.array(np.repeat(np.array([p for (_, p), _ in runs], dtype=np.int32), lengths)),
        pa.array([m.offset() for m in msgs], pa.int64()),
        pa.array(ts[:, 1] * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array(ts[:, 0].astype(np.int32)),
    ]
    if decode_schema is not None:
        decoded, errors = formats.decode(values, cfg.value_format, decode_schema)
        cols += decoded
        cols.append(pa.array(errors, pa.string()))
        if dlq is not None and any(e is not None for e in errors):
            _send_dead_letters(dlq, cfg.dead_letter_topic, msgs, errors)
    if cfg.watermark_from:
        cols.append(pa.array(np.full(len(msgs), 0 if watermark_ms is None else watermark_ms, dtype=np.int64)))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _send_dead_letters(dlq, dlq_topic: str, msgs, errors) -> None:
    rows = []
    for m, e in zip(msgs, errors):
        if e is not None:
            headers = [
                ("error", e.encode()),
                ("source.topic", m.topic().encode()),
                ("source.partition", str(m.partition()).encode()),
                ("source.offset", str(m.offset()).encode()),
            ]
            rows.append((m.key(), m.value(), dlq_topic, None, headers))
    produce_all(dlq, dlq_topic, rows)


# -- offsets ---------------------------------------------------------------------------------
def _parse_starting(spec: str, topics: tuple[str, ...]) -> dict | str:
    s = spec.strip()
    if s.lower() in ("earliest", "latest"):
        return s.lower()
    try:
        parsed = json.loads(s)
    except ValueError:
        raise ConfigError(
            'startingOffsets must be \'earliest\', \'latest\' or JSON like {"topic": {"0": 23, "1": -2}}'
        ) from None
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise ConfigError('startingOffsets JSON must look like {"topic": {"0": 23, "1": -2}}')
    unknown = set(parsed) - set(topics)
    if unknown:
        raise ConfigError(f"startingOffsets names topics not subscribed: {sorted(unknown)}")
    return parsed


def limit_offsets(start: dict, end: dict, max_rows: int) -> dict:
    """Cap a batch at ``max_rows`` records, spread over partitions in proportion to what is available."""
    avail = {(t, p): end[t][p] - start.get(t, {}).get(p, 0) for t in end for p in end[t]}
    total = sum(v for v in avail.values() if v > 0)
    if total <= max_rows:
        return end
    take = {k: (v * max_rows) // total if v > 0 else 0 for k, v in avail.items()}
    left = max_rows - sum(take.values())
    for k in sorted(avail, key=lambda k: avail[k] - take[k], reverse=True):
        if left <= 0:
            break
        extra = min(left, avail[k] - take[k])
        if extra > 0:
            take[k] += extra
            left -= extra
    out: dict = {}
    for (t, p), n in take.items():
        out.setdefault(t, {})[p] = start.get(t, {}).get(p, 0) + n
    return out


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.cfg = SourceConfig.from_options(options)
        self._access = None
        self._target: dict | None = None

    def __getstate__(self):  # the admin client stays on the driver side
        state = dict(self.__dict__)
        state["_access"] = None
        return state

    @property
    def access(self):
        if self._access is None:
            from streamscale.broker.access import BrokerAccess

            # Only connection settings apply to the admin side; consumer settings would be warned about.
            conn = {k: v for k, v in self.cfg.kafka if k.startswith(("security.", "sasl.", "ssl.", "client."))}
            self._access = BrokerAccess(self.cfg.bootstrap, conn)
        return self._access

    def _isolation(self) -> str:
        return dict(self.cfg.kafka).get("isolation.level", "read_uncommitted")

    def _ends(self) -> dict:
        return {
            t: {str(p): o for p, o in self.access.end_offsets(t, self._isolation()).items()} for t in self.cfg.topics
        }

    def _starts(self) -> dict:
        return {t: {str(p): o for p, o in self.access.start_offsets(t).items()} for t in self.cfg.topics}

    def initialOffset(self) -> dict:
        spec = _parse_starting(self.cfg.starting, self.cfg.topics)
        if spec == "earliest":
            return self._starts()
        ends = self._ends()
        if spec == "latest":
            return ends
        starts = self._starts()
        out = {}
        for t in self.cfg.topics:
            out[t] = {}
            for p, e in ends[t].items():
                o = int(spec.get(t, {}).get(p, _LATEST))
                out[t][p] = starts[t][p] if o == _EARLIEST else e if o == _LATEST else o
        return out

    def getDefaultReadLimit(self):
        if self.cfg.max_offsets_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.cfg.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._ends()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        ends = self._target if self._target is not None else self._ends()
        start = start or {}
        # Partitions that appeared since `start` are read from their beginning.
        full = {t: {p: max(e, start.get(t, {}).get(p, 0)) for p, e in ends[t].items()} for t in ends}
        for t, parts in start.items():
            for p, o in parts.items():
                full.setdefault(t, {}).setdefault(p, o)
        max_rows = getattr(limit, "max_rows", None)
        if max_rows is None and limit is None and self.cfg.max_offsets_per_trigger:
            max_rows = self.cfg.max_offsets_per_trigger
        if max_rows:
            return limit_offsets(start, full, max_rows)
        return full

    def reportLatestOffset(self):
        try:
            return self._ends()
        except Exception:  # noqa: BLE001 - only for the progress report
            return None

    def partitions(self, start: dict, end: dict):
        """One task per group of Kafka partitions; groups are fixed (index mod maxPartitions), so a
        worker's reader for a group keeps its prefetched records for the group's next ranges."""
        tps = sorted(((t, int(p)) for t in end for p in end[t]), key=lambda tp: (tp[0], tp[1]))
        groups = min(self.cfg.max_partitions, len(tps)) or 1
        ranges: dict[int, list] = {}
        for i, (t, p) in enumerate(tps):
            s, e = int(start.get(t, {}).get(str(p), 0)), int(end[t][str(p)])
            if e > s:
                ranges.setdefault(readers.group_of(i, groups), []).append((t, p, s, e))
        watermark = None
        if ranges and self.cfg.watermark_from:
            from streamscale.sparkio.checkpoint import watermark_for_offsets

            watermark = watermark_for_offsets(self.cfg.watermark_from, end)
        return [
            KafkaInputPartition((self.cfg.topics, groups, g), tuple(r), watermark) for g, r in sorted(ranges.items())
        ]

    def read(self, partition: KafkaInputPartition):
        return read_ranges(self.cfg, partition.group, partition.ranges, partition.watermark_ms)

    def commit(self, end: dict) -> None:
        if self.cfg.commit_group:
            for t, parts in end.items():
                self.access.commit_offsets(self.cfg.commit_group, t, {int(p): int(o) for p, o in parts.items()})

    def stop(self) -> None:
        if self._access is not None:
            self._access.close()
            self._access = None


class KafkaBatchReader(DataSourceReader):
    """Batch read of [startingOffsets, endingOffsets) for checks and tools."""

    def __init__(self, options):
        self.stream = KafkaStreamReader({"startingOffsets": "earliest", **dict(options)})
        ending = {k.lower(): v for k, v in options.items()}.get("endingoffsets", "latest")
        if ending.strip().lower() != "latest":
            raise ConfigError("batch reads support endingOffsets=latest only")

    def partitions(self):
        start = self.stream.initialOffset()
        end = self.stream.latestOffset(start, ReadAllAvailable() if ReadAllAvailable else None)
        self.stream.stop()
        return self.stream.partitions(start, end)

    def read(self, partition):
        return self.stream.read(partition)


# -- sink ------------------------------------------------------------------------------------
class _SinkCommit(WriterCommitMessage):
    def __init__(self, count: int):
        self.count = count


def _sink_conf(options) -> tuple[str, str | None, tuple]:
    opts = {k.lower(): v for k, v in options.items()}
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise ConfigError("option 'kafka.bootstrap.servers' is required")
    topic = opts.get("topic")
    if topic is not None:
        from streamscale.broker.access import check_topic_name

        check_topic_name(topic, "sink topic")
    return bootstrap, topic, tuple(sorted(_kafka_options(options).items()))


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
        self.bootstrap, self.topic, self.extra = _sink_conf(options)
        if "value" not in schema.fieldNames():
            raise ConfigError("the Kafka sink needs a 'value' column")
        if self.topic is None and "topic" not in schema.fieldNames():
            raise ConfigError("the Kafka sink needs option 'topic' or a 'topic' column")

    def _write_rows(self, rows) -> _SinkCommit:
        return _SinkCommit(produce_all(_producer(self.bootstrap, self.extra), self.topic, rows))


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
    with _LOCK:
        for p in _PRODUCERS.values():
            p.flush(10)
        _PRODUCERS.clear()
    readers.close_readers()


import atexit  # noqa: E402

atexit.register(_close_clients)
