"""Options of the ``streamscale-kafka`` source and sink, validated once here (as Spark's
``KafkaSourceProvider`` does): every ``kafka.*`` option goes to librdkafka with the prefix stripped;
the source's own options (``subscribe``, ``startingOffsets``, ``maxOffsetsPerTrigger``,
``maxPartitions``, ``valueFormat``, ...) become a :class:`SourceConfig` every other module reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import pyarrow as pa

from streamscale.broker.connection import check_known
from streamscale.errors import ConfigError
from streamscale.sparkio import formats

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

# With option batchWatermarkFrom=<the query's checkpoint>: every row carries the watermark below
# which Spark's stateful operators drop its micro-batch's rows as late (the previous batch's
# batchWatermarkMs: streamscale.sparkio.checkpoint), so late records can be counted exactly on
# the executors (streamscale.pipelines.accounting).
WATERMARK_FIELD = "lateWatermarkMs"


# kafka.* options the source manages itself, refused with what to use instead (as Spark's own)
_SOURCE_MANAGED = {
    "group.id": "the source tracks offsets in Spark's checkpoint, not in a consumer group (commitGroup "
    "commits them for monitoring)",
    "enable.auto.commit": "the source never commits through the consumer",
    "auto.offset.reset": "use the option startingOffsets",
}


def kafka_options(options) -> dict:
    """Options named ``kafka.*`` go to librdkafka, as Spark's source passes them to its consumer;
    checked here once (a name or value librdkafka refuses is one line naming it)."""
    out = {}
    for k, v in options.items():
        if k.lower().startswith("kafka.") and k.lower() != "kafka.bootstrap.servers":
            name = k[len("kafka.") :]
            if name in _SOURCE_MANAGED:
                raise ConfigError(f"Kafka option 'kafka.{name}' is not supported: {_SOURCE_MANAGED[name]}")
            out[name] = v
    check_known(out)
    return out


def positive_int(opts: dict, name: str, default):
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


def _boolean(opts: dict, name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw in (None, ""):
        return default
    if str(raw).strip().lower() not in ("true", "false"):
        raise ConfigError(f"{name} must be true or false, not '{raw}'")
    return str(raw).strip().lower() == "true"


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
    # Every executor on this machine (local[N]): a task may take whichever group of the micro-batch
    # its worker's reader is positioned for (readers.claim_group) rather than the fixed one.
    claim_groups: bool = False

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
        max_off = positive_int(opts, "maxOffsetsPerTrigger", None)
        max_parts = positive_int(opts, "maxPartitions", os.cpu_count() or 2)
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
            kafka=tuple(sorted(kafka_options(options).items())),
            value_format=fmt,
            value_schema=schema,
            dead_letter_topic=opts.get("deadlettertopic") or None,
            commit_group=opts.get("commitgroup") or None,
            fail_on_data_loss=opts.get("failondataloss", "true").lower() != "false",
            poll_timeout_s=float(opts.get("polltimeoutms", "120000")) / 1000.0,
            include_raw=opts.get("includeraw", "true").lower() != "false" or fmt == "raw",
            max_partitions=max_parts,
            watermark_from=opts.get("batchwatermarkfrom") or None,
            claim_groups=_boolean(opts, "claimGroups", False),
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


def sink_conf(options) -> tuple[str, str | None, tuple]:
    opts = {k.lower(): v for k, v in options.items()}
    bootstrap = opts.get("kafka.bootstrap.servers")
    if not bootstrap:
        raise ConfigError("option 'kafka.bootstrap.servers' is required")
    topic = opts.get("topic")
    if topic is not None:
        from streamscale.broker.access import check_topic_name

        check_topic_name(topic, "sink topic")
    return bootstrap, topic, tuple(sorted(kafka_options(options).items()))
