"""Read/write Kafka from Spark with either our Python data source or Spark's own connector.

The connector is chosen by ``impl`` (a pipeline's ``connector`` parameter) or, when not given,
``$STREAMSCALE_KAFKA_IMPL``: ``spark`` (default: ``format("kafka")``, Spark's
``spark-sql-kafka-0-10``, what production jobs run, which ``make install`` puts on every session's
classpath; ``builtin`` is the same) or ``python`` (:mod:`streamscale.sparkio.kafka`, for clusters
without that package).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ConfigError
from streamscale.sparkio import formats
from streamscale.sparkio.kafka import ERROR_COLUMN, FORMAT_NAME
from streamscale.sparkio.offsets import EARLIEST
from streamscale.sparkio.session import use_python_source

IMPLS = ("python", "spark")
_ALIASES = {"builtin": "spark"}

ACTIVE_POWER_DDL = "identifier STRING, timestamp BIGINT, valueInW DOUBLE"

# Spark's connector reads a task's range in polls of at most max.poll.records (kafka-clients: 500)
# from fetches of at most max.partition.fetch.bytes (1 MiB) per partition. Larger ones took a
# 100,000-record batch of 8 partitions from 719 to 440 ms (addBatch 540 -> 256 ms; whole runs
# 89,000 -> 114,000 records/s; benchmarks/spark_connector_profile.py). The user's own kafka.*
# properties and options override them.
# fetch.max.wait.ms: a cached consumer that has read to the end of the log leaves a fetch at the
# log's end in flight, which the broker holds for up to fetch.max.wait.ms (500 ms) when no record
# arrives; a task that then seeks and polls waits for it. So the batch that reads a topic's last
# records (every availableNow run's last batch, and any batch once a live input pauses) stalled
# ~500 ms per wave of tasks: 2.2-2.5 s of a 100,000-record batch on 8 partitions and 2 cores, where
# the other batches took 0.4-0.6 s. Spark's consumers fetch only inside a task's poll, so a short
# wait costs the broker no idle polling.
SPARK_READ_DEFAULTS = {
    "kafka.max.poll.records": "20000",
    "kafka.max.partition.fetch.bytes": str(8 << 20),
    "kafka.fetch.max.wait.ms": "10",
}

# Spark's Kafka sink produces with kafka-clients' defaults: batches of at most 16 KiB, sent as soon
# as the sender thread is free. Batches of up to 256 KiB that wait up to 5 ms to fill took the
# write of 100,000 JSON window rows into 8 partitions from 537 to 270 ms (median of 5, local[2]);
# neither changes what is delivered or how (acks, idempotence). The user's own properties override.
SPARK_WRITE_DEFAULTS = {"kafka.batch.size": str(256 << 10), "kafka.linger.ms": "5"}


def kafka_impl(impl: str | None = None) -> str:
    """The connector to use: ``python`` or ``spark`` (one clear error for anything else)."""
    impl = (impl or os.environ.get("STREAMSCALE_KAFKA_IMPL") or "spark").lower()
    impl = _ALIASES.get(impl, impl)
    if impl not in IMPLS:
        raise ConfigError(f"the Kafka connector must be one of {IMPLS}, not '{impl}'")
    return impl


def read_kafka(
    spark,
    bootstrap: KafkaConnection | str,
    topic: str,
    starting_offsets: str = "latest",
    max_offsets_per_trigger: int | None = None,
    impl: str | None = None,
    options: dict | None = None,
):
    """A streaming DataFrame with Spark's Kafka columns (key, value, topic, partition, offset, ...).
    ``bootstrap``: a connection (its properties become ``kafka.*`` options) or bootstrap servers."""
    impl = kafka_impl(impl)
    if impl == "python":
        use_python_source(spark)
    reader = spark.readStream.format(FORMAT_NAME if impl == "python" else "kafka")
    for k, v in _read_options(bootstrap, impl).items():
        reader = reader.option(k, v)
    reader = reader.option("subscribe", topic).option("startingOffsets", starting_offsets)
    if max_offsets_per_trigger:
        reader = reader.option("maxOffsetsPerTrigger", str(max_offsets_per_trigger))
    options = dict(options or {})
    if impl == "python" and not any(k.lower() == "maxpartitions" for k in options):
        parallelism = _default_parallelism(spark)
        if parallelism:
            options["maxPartitions"] = parallelism
    if impl == "python":
        asked = {k.lower(): str(v).strip().lower() for k, v in options.items()}.get("claimgroups")
        local = _local_master(spark)
        if asked == "true" and not local:
            raise ConfigError(
                "claimGroups=true needs a local master: executors that cannot see each other's claims "
                "would read a group of Kafka partitions twice"
            )
        if asked is None and local:
            options["claimGroups"] = "true"
    for k, v in options.items():
        reader = reader.option(k, str(v))
    try:
        return reader.load()
    except Exception as exc:
        if impl == "spark" and "Failed to find data source: kafka" in str(exc):
            raise ConfigError(
                "Spark's Kafka connector (spark-sql-kafka-0-10) is not on this session's classpath: "
                "run `make install`, add it with spark.jars, or choose connector=python"
            ) from None
        raise


def _kafka_options(defaults: dict, bootstrap: KafkaConnection | str, impl: str) -> dict:
    """The ``kafka.*`` options of a read or a write: the connection's properties over, for Spark's
    connector, streamscale's settings (``defaults``)."""
    java = impl == "spark"  # Spark's connector: Java's client, Java's property names
    return {**(defaults if java else {}), **KafkaConnection.of(bootstrap).spark_options(java=java)}


def _read_options(bootstrap: KafkaConnection | str, impl: str) -> dict:
    return _kafka_options(SPARK_READ_DEFAULTS, bootstrap, impl)


def _write_options(bootstrap: KafkaConnection | str, impl: str, topic: str, options: dict | None) -> dict:
    """The options of a write: streamscale's write settings (``SPARK_WRITE_DEFAULTS``) under the
    connection's properties, under the caller's options."""
    return {**_kafka_options(SPARK_WRITE_DEFAULTS, bootstrap, impl), "topic": topic, **(options or {})}


def _default_parallelism(spark) -> int | None:
    """Tasks that fit the cores: the source groups Kafka partitions into this many tasks."""
    try:
        return int(spark.sparkContext.defaultParallelism)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext: the source's own default
        return None


def _local_master(spark) -> bool:
    """Every executor on this machine (a local master): the source's tasks may claim groups."""
    try:
        return str(spark.sparkContext.master).startswith("local")
    except Exception:  # noqa: BLE001 - Spark Connect: the executors' hosts are unknown
        return False


@dataclass(frozen=True)
class Decoding:
    """How record values are decoded: their fields as a DDL string in ``value_format`` (json or
    csv); ``include_raw``: keep Spark's ``key`` and ``value`` columns too (as ``kafka_key`` and
    ``kafka_value``); ``dead_letter_topic``: where values that do not decode go."""

    value_ddl: str = ACTIVE_POWER_DDL
    value_format: str = "json"
    include_raw: bool = False
    dead_letter_topic: str | None = None
    # Spark's own from_json / from_csv instead of the contract's Python decoder (real-time mode runs
    # no Python): a value counts as malformed when it does not parse or a field is missing or null
    native: bool = False
    # value_format avro: (the schema as JSON, the wire: plain or confluent, the schema id it carries)
    avro: tuple[str, str, int] | None = None


@dataclass(frozen=True)
class WriteQuery:
    """How a streaming query that writes is started: its checkpoint, trigger (``DataStreamWriter.trigger``'s
    keywords), output mode and name."""

    checkpoint: str
    trigger: dict | None = None
    output_mode: str = "append"
    name: str | None = None


def read_records(
    spark,
    bootstrap: KafkaConnection | str,
    topic: str,
    decoding: Decoding = Decoding(),  # noqa: B008 - frozen, never changed
    starting_offsets: str = "latest",
    max_offsets_per_trigger: int | None = None,
    impl: str | None = None,
    options: dict | None = None,
):
    """A streaming DataFrame of decoded record values, ``value_error``, and the Kafka metadata as
    ``kafka_topic``, ``kafka_partition``, ``kafka_offset``, ``kafka_timestamp``, ``kafka_timestampType``.

    Rows whose value could not be decoded have ``value_error`` set (and, with the Python source,
    went to the decoding's dead-letter topic); pipelines filter them out and count them.
    """
    impl = kafka_impl(impl)
    d = decoding
    if d.value_format == "avro" and impl == "python":
        raise ConfigError("encoding avro is decoded by Spark's from_avro: use connector spark")
    if impl == "python":
        opts = {
            "valueFormat": d.value_format,
            "valueSchema": d.value_ddl,
            "includeRaw": str(d.include_raw).lower(),
            **(options or {}),
        }
        if d.dead_letter_topic:
            opts["deadLetterTopic"] = d.dead_letter_topic
        return read_kafka(spark, bootstrap, topic, starting_offsets, max_offsets_per_trigger, impl, opts)
    if d.dead_letter_topic:
        raise ConfigError(
            "with Spark's connector dead letters are routed by a query of their own (route_dead_letters), "
            "not by the source"
        )
    raw = read_kafka(spark, bootstrap, topic, starting_offsets, max_offsets_per_trigger, impl, options)
    if d.value_format == "avro":
        return decode_avro(raw, d.value_ddl, d.avro, d.include_raw)
    if d.native:
        return decode_natively(raw, d.value_ddl, d.value_format, d.include_raw)
    return decode_values(raw, d.value_ddl, d.value_format, d.include_raw)


def decode_values(raw, value_ddl: str = ACTIVE_POWER_DDL, value_format: str = "json", include_raw: bool = False):
    """Rows of Spark's Kafka columns (a stream or a batch) -> the columns the Python source gives:
    the Kafka metadata as ``kafka_*``, the value's fields, and ``value_error`` where the value breaks
    the decoding contract (:mod:`streamscale.sparkio.formats`), decided on the executors by the
    same code as in the Python source."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from streamscale.sparkio.arrowdecode import decoding_udf

    if value_format not in ("json", "csv"):
        raise ConfigError(f"valueFormat must be one of ('json', 'csv') to decode values, not '{value_format}'")
    spark_types = {
        "string": T.StringType(),
        "int64": T.LongType(),
        "int32": T.IntegerType(),
        "double": T.DoubleType(),
        "float": T.FloatType(),
        "bool": T.BooleanType(),
    }
    fields = formats.parse_ddl(value_ddl)
    struct = T.StructType(
        [T.StructField(f.name, spark_types[str(f.type)]) for f in fields]
        + [T.StructField(ERROR_COLUMN, T.StringType())]
    )
    udf = decoding_udf(value_format, value_ddl, ERROR_COLUMN, struct)
    kept = [F.col(c).alias(f"kafka_{c}") for c in raw.columns if include_raw or c not in ("key", "value")]
    decoded = raw.select(*kept, udf(F.col("value")).alias("_decoded"))
    return decoded.select(
        *[f"kafka_{c}" for c in raw.columns if include_raw or c not in ("key", "value")], "_decoded.*"
    )


CORRUPT_COLUMN = "_streamscale_corrupt"


def decode_avro(raw, value_ddl: str, avro: tuple[str, str, int] | None, include_raw: bool = False):
    """:func:`decode_values`'s columns from Avro bodies by Spark's own ``from_avro`` (spark-avro):
    ``value_error`` says a value that does not decode with the schema or has a null field (or, in
    Confluent's wire format, lacks its magic byte or carries another schema id). A ``timestamp-millis`` field is
    handed on as epoch milliseconds, as every other timestamp."""
    from pyspark.sql import functions as F

    from streamscale.sparkio.session import has_spark_avro

    if avro is None:
        raise ConfigError("encoding avro needs the records' schema")
    if not has_spark_avro():
        raise ConfigError("Spark's Avro functions (spark-avro) are not installed here: run make install")
    from pyspark.sql.avro.functions import from_avro

    schema, wire, schema_id = avro
    names = [f.name for f in formats.parse_ddl(value_ddl)]
    millis = set(formats.avro_timestamp_millis(json.loads(schema)))
    body, framed = F.col("value"), F.lit(True)
    if wire == "confluent":
        body = F.substring(F.col("value"), 6, 2**31 - 1)
        head = F.hex(F.substring(F.col("value"), 1, 5))
        framed = F.coalesce(head == F.lit("00" + f"{schema_id:08X}"), F.lit(False))
    parsed = F.when(framed, from_avro(body, schema, {"mode": "PERMISSIVE"}))
    kept = [F.col(c).alias(f"kafka_{c}") for c in raw.columns if include_raw or c not in ("key", "value")]
    rows = raw.select(*kept, framed.alias("_framed"), parsed.alias("_decoded"))
    # from_avro's PERMISSIVE mode gives a value it cannot decode as a row of nulls
    undecoded = F.col("_decoded").isNull()
    for n in names:
        undecoded = undecoded | F.col(f"_decoded.`{n}`").isNull()
    error = F.when(~F.col("_framed"), F.lit(f"not in Confluent's wire format with schema id {schema_id}")).when(
        undecoded, F.lit("does not decode as Avro of the records' schema (or a field is null)")
    )
    fields = [
        (F.unix_millis(F.col(f"_decoded.`{n}`")) if n in millis else F.col(f"_decoded.`{n}`")).alias(n) for n in names
    ]
    return rows.select(
        *[f"kafka_{c}" for c in raw.columns if include_raw or c not in ("key", "value")],
        *fields,
        error.alias(ERROR_COLUMN),
    )


def decode_natively(raw, value_ddl: str, value_format: str = "json", include_raw: bool = False):
    """:func:`decode_values`'s columns by Spark's own ``from_json`` / ``from_csv`` (no Python on the
    executors): ``value_error`` says a value that does not parse, or whose field is missing or null.
    The contract's stricter checks (an integer out of its type's range, a duplicate key) are
    Spark's parser's here."""
    from pyspark.sql import functions as F

    if value_format not in ("json", "csv"):
        raise ConfigError(f"valueFormat must be one of ('json', 'csv') to decode values, not '{value_format}'")
    names = [f.name for f in formats.parse_ddl(value_ddl)]
    schema = f"{value_ddl}, `{CORRUPT_COLUMN}` STRING"
    opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
    text = F.col("value").cast("string")
    parsed = F.from_json(text, schema, opts) if value_format == "json" else F.from_csv(text, schema, opts)
    kept = [F.col(c).alias(f"kafka_{c}") for c in raw.columns if include_raw or c not in ("key", "value")]
    rows = raw.select(*kept, parsed.alias("_decoded"))
    missing = F.lit(False)
    for n in names:
        missing = missing | F.col(f"_decoded.`{n}`").isNull()
    error = F.when(
        F.col("_decoded").isNull() | F.col(f"_decoded.{CORRUPT_COLUMN}").isNotNull(), F.lit("does not parse")
    ).when(missing, F.lit("a field is missing or null"))
    return rows.select(
        *[f"kafka_{c}" for c in raw.columns if include_raw or c not in ("key", "value")],
        *[F.col(f"_decoded.`{n}`").alias(n) for n in names],
        error.alias(ERROR_COLUMN),
    )


def read_kafka_ranges(spark, bootstrap: KafkaConnection | str, start: dict, end: dict):
    """A batch DataFrame (Spark's connector) of the records in [start, end) per partition, offsets
    as {topic: {partition: offset}}; a partition missing from ``start`` is read from its earliest."""
    assign = {t: sorted(int(p) for p in parts) for t, parts in end.items()}
    starting = {t: {str(p): int((start.get(t) or {}).get(str(p), EARLIEST)) for p in ps} for t, ps in assign.items()}
    ending = {t: {str(p): int(end[t][str(p)]) for p in ps} for t, ps in assign.items()}
    reader = spark.read.format("kafka")
    for k, v in _read_options(bootstrap, "spark").items():
        reader = reader.option(k, v)
    return (
        reader.option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("failOnDataLoss", "true")
        .load()
    )


def route_dead_letters(
    spark,
    bootstrap: KafkaConnection | str,
    topic: str,
    decoding: Decoding,
    query: WriteQuery,
    starting_offsets: str = "latest",
    max_offsets_per_trigger: int | None = None,
):
    """Start a query (Spark's connector) that copies every record of ``topic`` whose value does not
    decode to ``decoding.dead_letter_topic``, key and value unchanged, with the headers the Python source
    gives a dead letter (``error``, ``source.topic``, ``source.partition``, ``source.offset``).

    Spark's connector has no dead-letter path, and one query cannot write two outputs, so this one
    reads the input a second time. Delivery is at-least-once, as the Python source's."""
    from pyspark.sql import functions as F

    if not decoding.dead_letter_topic:
        raise ConfigError("route_dead_letters needs the decoding's dead_letter_topic")
    raw = read_kafka(spark, bootstrap, topic, starting_offsets, max_offsets_per_trigger, "spark")
    rows = decode_values(raw, decoding.value_ddl, decoding.value_format, include_raw=True)
    rows = rows.where(F.col(ERROR_COLUMN).isNotNull())

    def header(name: str, col):
        return F.struct(F.lit(name).alias("key"), col.cast("string").cast("binary").alias("value"))

    letters = rows.select(
        F.col("kafka_key").alias("key"),
        F.col("kafka_value").alias("value"),
        F.array(
            header("error", F.col(ERROR_COLUMN)),
            header("source.topic", F.col("kafka_topic")),
            header("source.partition", F.col("kafka_partition")),
            header("source.offset", F.col("kafka_offset")),
        ).alias("headers"),
    )
    return write_kafka(letters, bootstrap, decoding.dead_letter_topic, replace(query, output_mode="append"), "spark")


def write_kafka(
    df,
    bootstrap: KafkaConnection | str,
    topic: str,
    query: WriteQuery,
    impl: str | None = None,
    options: dict | None = None,
):
    """Start a streaming query writing ``value`` (and ``key``) columns to ``topic``.

    Python data source sinks accept Append mode only (Spark requires SupportsStreamingUpdateAsAppend,
    which they do not declare), so Update mode writes each micro-batch with the batch writer from
    ``foreachBatch``: the same producer, the same failure semantics.
    """
    impl = kafka_impl(impl)
    if impl == "python":
        use_python_source(df.sparkSession)
    opts = _write_options(bootstrap, impl, topic, options)
    mode = query.output_mode
    if "realTime" in (query.trigger or {}) and mode == "append":
        mode = "update"  # real-time mode runs update only: for the stateless queries it runs, the same rows
    w = df.writeStream.option("checkpointLocation", query.checkpoint).outputMode(mode)
    if impl == "python" and mode in ("update", "complete"):

        def write_batch(batch_df, _batch_id):
            writer = batch_df.write.format(FORMAT_NAME).mode("append")
            for k, v in opts.items():
                writer = writer.option(k, str(v))
            writer.save()

        w = w.foreachBatch(write_batch)
    else:
        w = w.format(FORMAT_NAME if impl == "python" else "kafka")
        for k, v in opts.items():
            w = w.option(k, str(v))
    if query.trigger:
        w = w.trigger(**query.trigger)
    if query.name:
        w = w.queryName(query.name)
    return w.start()


def write_kafka_batch(
    df, bootstrap: KafkaConnection | str, topic: str, impl: str | None = None, options: dict | None = None
) -> None:
    """Write a (batch) DataFrame's ``value`` (and ``key``) columns to ``topic`` from the executors,
    e.g. one micro-batch inside ``foreachBatch``."""
    impl = kafka_impl(impl)
    if impl == "python":
        use_python_source(df.sparkSession)
    w = df.write.format(FORMAT_NAME if impl == "python" else "kafka").mode("append")
    for k, v in _write_options(bootstrap, impl, topic, options).items():
        w = w.option(k, str(v))
    w.save()
