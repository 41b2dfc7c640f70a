"""What the four benchmark pipelines share: reading records, statistics, running, metrics.

A pipeline reads ActivePowerRecords from the input topic through the Kafka source (decoding in
the source; malformed values go to a dead-letter topic and are counted), builds its dataflow,
and writes results through the Kafka sink (or, for UC1, a side effect). ``start()`` returns a
:class:`PipelineRun` that turns Spark's query progress into the metrics the benchmark needs.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ConfigError
from streamscale.loadgen.feed import Feed
from streamscale.pipelines.progress import CREATED_BIN_MS, CREATED_BINS
from streamscale.pipelines.run import PipelineRun, temporary_checkpoint
from streamscale.pipelines.trigger import Trigger, parse_trigger, processing_time
from streamscale.sparkio.io import Decoding, WriteQuery, read_records

MIN_EVENT_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z: Spark's timestamp range, in epoch ms
MAX_EVENT_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


class PipelineParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_offsets_per_trigger: int | None = None
    # Kafka connector: "spark" (Spark's own format("kafka")) or "python" (streamscale's source and sink);
    # None: $STREAMSCALE_KAFKA_IMPL, else spark
    connector: Literal["python", "spark"] | None = None
    trigger_interval_s: float = 1.0
    # how the query triggers (streamscale.pipelines.trigger): None, a micro-batch every trigger_interval_s
    trigger: str | None = None
    dead_letter_topic: str | None = None
    # Bejeck and Wang's repartition merging (streamscale.topology.physical): None chooses per plan what is
    # faster on Spark, True always merges, False never
    optimize_topology: bool | None = None

    @field_validator("trigger")
    @classmethod
    def _trigger(cls, v):
        if v is not None:
            try:
                parse_trigger(v)
            except ConfigError as exc:
                raise ValueError(str(exc)) from None
        return v


class TumblingWindowParams(PipelineParams):
    """A job over tumbling event-time windows (UC2, UC4)."""

    window_s: float = Field(60.0, gt=0)
    lateness_s: float = Field(5.0, ge=0)
    # final (Henning and Hasselbring, §5.2: UC2 aggregates over tumbling windows and, unlike UC3, emits no early
    # results): one row per window when the watermark closes it. update: every changed window row
    # of every micro-batch, with its `final` flag (a second pass over each batch's rows).
    emit: Literal["update", "final"] = "final"


def event_time(df):
    from pyspark.sql import functions as F

    return df.withColumn("event_time", F.timestamp_millis(F.col("timestamp")))


def stats_columns(value_col: str = "valueInW", ts_col: str = "timestamp"):
    """count, sum, mean, min, max, population variance, and the newest event time (for latency)."""
    from pyspark.sql import functions as F

    v = F.col(value_col)
    return [
        F.count(v).alias("count"),
        F.sum(v).alias("sum"),
        F.avg(v).alias("mean"),
        F.min(v).alias("min"),
        F.max(v).alias("max"),
        F.var_pop(v).alias("variance"),
        F.max(ts_col).alias("max_event_ms"),
    ]


# What a windowed pipeline writes for each key and window (UC2-UC4's value columns after their keys).
WINDOW_STATS = ["windowStartMs", "windowEndMs", "count", "sum", "mean", "min", "max", "variance"]


def windowed_stats(df, window, keys: list[str]):
    """Group by window and keys; the statistics with the window as epoch milliseconds."""
    from pyspark.sql import functions as F

    agg = df.groupBy(window, *keys).agg(*stats_columns())
    return agg.select(
        *keys,
        F.unix_millis(F.col("window.start")).alias("windowStartMs"),
        F.unix_millis(F.col("window.end")).alias("windowEndMs"),
        *WINDOW_STATS[2:],
        "max_event_ms",
    )


def watermarked(records, lateness_s: float):
    """Event time and watermark; end-of-input markers move the watermark, then leave the stream."""
    from streamscale.pipelines.accounting import without_flush

    return without_flush(event_time(records).withWatermark("event_time", f"{int(lateness_s * 1000)} milliseconds"))


@dataclass(frozen=True)
class Reading:
    """How a run reads its input: from which offsets (``earliest``, ``latest`` or Spark's JSON),
    the consumer group its offsets are committed to (the lag is read from it), and the Kafka
    connector (spark or python; None: the pipeline's own)."""

    starting_offsets: str = "earliest"
    commit_group: str | None = None
    kafka_impl: str | None = None


@dataclass(frozen=True)
class Source:
    """One input topic as a query reads it: how its values decode, the column saying which rows
    decoded (the rest count as malformed), the name its counts are observed under (``input``, or
    ``input.NAME`` for one of several inputs: streamscale.pipelines.progress sums them)."""

    topic: str
    decoding: Decoding
    decoded: object
    observation: str = "input"
    max_offsets_per_trigger: int | None = None


def read_decoded(spark, bootstrap, source: Source, reading: Reading, watermark_from: str | None = None):
    """A topic's decoded, valid records (malformed ones counted); with ``watermark_from`` (the query's
    checkpoint) each row carries its micro-batch's watermark, for the late-record count."""
    from pyspark.sql import functions as F

    from streamscale.sparkio.io import kafka_impl as resolve_impl

    # the Python source commits each batch's offsets to the group itself; for Spark's connector
    # the run does (PipelineRun.commit_to)
    python = resolve_impl(reading.kafka_impl) == "python"
    opts = {"commitGroup": reading.commit_group} if reading.commit_group and python else {}
    if watermark_from:
        opts["batchWatermarkFrom"] = watermark_from
    df = read_records(
        spark,
        bootstrap,
        source.topic,
        source.decoding,
        starting_offsets=reading.starting_offsets,
        max_offsets_per_trigger=source.max_offsets_per_trigger,
        impl=reading.kafka_impl,
        options=opts,
    )
    # the late-record count is taken further on (accounting.py): only malformed ones here, and
    # when the batch's records were created, counted per CREATED_BIN_MS of their Kafka
    # timestamps; the run turns them into every record's latency to the batch's commit
    # (streamscale.pipelines.progress.processing_latencies). Binning the timestamps needs no clock on
    # the executors: a clock per row (reflect) with a histogram of latencies cost UC1 9-16 % of
    # its throughput, these bins ~3 % (benchmarks/decode_throughput.py's way, 2 CPUs).
    created = F.floor(F.unix_millis(F.col("kafka_timestamp")) / F.lit(CREATED_BIN_MS))
    df = df.observe(
        source.observation,
        F.count(F.when(~source.decoded, 1)).alias("malformed"),
        F.histogram_numeric(created, F.lit(CREATED_BINS)).alias("created_bins"),
    )
    return df.where(source.decoded)


@dataclass(frozen=True)
class Query:
    """Where one run of a pipeline reads and writes, and how it triggers."""

    spark: object
    bootstrap: KafkaConnection | str
    input_topic: str
    output_topic: str
    checkpoint: str
    trigger: dict
    name: str
    impl: str  # the Kafka connector: spark or python
    starting_offsets: str = "earliest"
    commit_group: str | None = None


class Pipeline(ABC):
    """One benchmark use case. Subclasses define ``build`` and ``describe``."""

    name: str = ""
    params_model: type[PipelineParams] = PipelineParams
    key_cols: list[str] = []
    value_cols: list[str] = []
    windowed: bool = True  # aggregates over event-time windows (UC2-UC4)
    # the parameter a load of N sensors sets to N: UC4's registry must know every sensor it reads
    sized_by: str | None = None

    @property
    def drops_late(self) -> bool:
        """Whether it may drop records behind a watermark (Spark's numRowsDroppedByWatermark), so
        that its dropped-records SLO applies: every windowed pipeline may (a job says for itself)."""
        return self.windowed

    @property
    def emit_final(self) -> bool:
        """One final row per window when the watermark closes it (Spark's append mode)."""
        return getattr(self.params, "emit", "update") == "final"

    def lateness_ms(self) -> int:
        return int(getattr(self.params, "lateness_s", 0) * 1000)

    def window_grid_ms(self) -> tuple[int, int] | None:
        """(size, slide) of the event-time windows in ms (Spark's ``window()`` from epoch 0), so
        that the output knows where window ends can lie; None: unknown (never assumed)."""
        size = getattr(self.params, "window_s", None)
        if size is None:
            return None
        slide = getattr(self.params, "slide_s", None) or size
        return int(size * 1000), int(slide * 1000)

    def __init__(self, params: PipelineParams | dict | None = None):
        if params is None:
            params = self.params_model()
        elif isinstance(params, dict):
            params = self.params_model(**params)
        self.params = params

    def read(
        self,
        spark,
        bootstrap: KafkaConnection | str,
        input_topic: str,
        starting_offsets: str,
        commit_group: str | None,
        kafka_impl: str | None = None,
        watermark_from: str | None = None,
    ):
        """Decoded, valid readings (malformed ones counted); with ``watermark_from`` (the query's
        checkpoint) each row carries its micro-batch's watermark, for the late-record count."""
        from streamscale.sparkio.io import kafka_impl as resolve_impl

        impl = resolve_impl(kafka_impl)
        decoding = Decoding(
            self.value_ddl(),
            self.value_format(),
            dead_letter_topic=self.params.dead_letter_topic if impl == "python" else None,
            native=self.trigger().real_time,  # real-time mode runs no Python UDF
            avro=self.avro(),
        )
        source = Source(
            input_topic, decoding, self.decoded(), max_offsets_per_trigger=self.params.max_offsets_per_trigger
        )
        return read_decoded(
            spark, bootstrap, source, Reading(starting_offsets, commit_group, kafka_impl), watermark_from
        )

    def feeds(self) -> tuple[Feed, ...]:
        """What a run's generators write (streamscale.loadgen.feed): the task samples, sensor
        readings into the run's input topic."""
        return (Feed(),)

    def input_topics(self, base: str) -> dict[str, int | None]:
        """The topics a run whose input is named ``base`` writes, each with its partitions (None:
        the run's own number): one per feed."""
        return {f.topic(base): f.partitions for f in self.feeds()}

    def read_topics(self, base: str) -> list[str]:
        """Of :meth:`input_topics`, the ones the pipeline's query reads: its lag and drain are theirs."""
        return [f.topic(base) for f in self.feeds() if f.read]

    @property
    def read_share(self) -> float:
        """The part of the load (records/s) written to :meth:`read_topics`."""
        return sum(f.share for f in self.feeds() if f.read)

    def value_ddl(self) -> str:
        """The records' value schema (the decoding contract's DDL): Theodolite's sensor reading."""
        from streamscale.sparkio.io import ACTIVE_POWER_DDL

        return ACTIVE_POWER_DDL

    def value_format(self) -> str:
        return "json"

    def avro(self) -> tuple[str, str, int] | None:
        """Avro records' (schema as JSON, wire, schema id); None for JSON and CSV."""
        return None

    def check(self, spark, bootstrap, input_topic: str, spark_conf: dict | None = None) -> None:
        """Build the dataflow once without running it, so that a broken one fails before the load
        starts (a user's job; the task samples are known to build), and keep real-time mode's
        rules (streamscale.pipelines.realtime) when it triggers so; ``spark_conf``: the settings
        it will run with (default: the session's)."""
        from streamscale.pipelines import realtime
        from streamscale.sparkio.io import kafka_impl

        trigger = self.trigger()
        if not trigger.real_time:
            return None
        realtime.check_setup(self, realtime.session_conf(spark) if spark_conf is None else spark_conf)
        records = self.read(spark, bootstrap, input_topic, "earliest", None, kafka_impl(self.params.connector))
        realtime.check_plan(spark, self.build(spark, records), trigger)
        return None

    def send_time_field(self) -> str | None:
        """The field of an output record's JSON value that holds its input record's send time, from
        which a real-time run reads each record's latency (None: its output has none)."""
        return None

    def decoded(self):
        """Column: the row is a reading the pipeline can use (else it counts as malformed)."""
        from pyspark.sql import functions as F

        decoded = F.col("value_error").isNull()
        if self.windowed:
            # A window needs a timestamp Spark can hold: one outside years 1-9999 (a valid int64
            # all the same) made the window arithmetic overflow and killed the query, again on
            # every restart. Such a reading counts as malformed.
            decoded = decoded & F.coalesce(F.col("timestamp").between(MIN_EVENT_MS, MAX_EVENT_MS), F.lit(False))
        return decoded

    def logical_plan(self):
        """The pipeline as a logical plan (streamscale.topology), from which ``build`` compiles."""
        raise NotImplementedError

    def build(self, spark, records, optimize: bool | None = None):
        """The dataflow from decoded records to the DataFrame the pipeline writes, compiled from the plan."""
        from streamscale.topology.compile import compile_plan
        from streamscale.topology.physical import physical_plan

        optimize = self.params.optimize_topology if optimize is None else optimize
        return compile_plan(physical_plan(self.logical_plan(), optimize), spark, {"input": records})["output"]

    @abstractmethod
    def describe(self) -> str:
        """The logical topology as text."""

    def query_settings(self, checkpoint: str | None, available_now: bool) -> tuple[str, dict, str]:
        """Checkpoint directory, trigger and a unique query name for a run of this pipeline.

        Without a checkpoint the run gets a temporary one, removed when the run stops (a named
        checkpoint is the user's and stays, to restart from)."""
        if not checkpoint:
            checkpoint = temporary_checkpoint(f"streamscale-{self.name}-")
        trigger = {"availableNow": True} if available_now else self.trigger().writer_kwargs()
        return checkpoint, trigger, f"{self.name}-{int(time.time() * 1000)}"

    def trigger(self) -> Trigger:
        """How its runs trigger: the ``trigger`` parameter, else a micro-batch every ``trigger_interval_s``."""
        if self.params.trigger is not None:
            return parse_trigger(self.params.trigger)
        return processing_time(self.params.trigger_interval_s)

    def finish(
        self,
        spark,
        bootstrap: KafkaConnection | str,
        input_topic: str,
        output_topic: str,
        checkpoint: str,
        timeout_s: float = 600,
        **start_options,
    ) -> PipelineRun:
        """End of a bounded input: close every window, so that ``emit: final`` emits the newest ones.

        Writes an end-of-input marker (streamscale.pipelines.accounting.flush_input) and runs the
        query to the end of the input: the marker's batch moves the watermark past every window,
        and Spark then runs one more batch without data that evicts (and in append mode emits)
        them before the ``availableNow`` run stops. Records written later with older timestamps
        count as late. Returns the run."""
        from streamscale.pipelines.accounting import flush_input

        if not checkpoint:
            raise ConfigError("finish() continues a query: give its checkpoint")
        flush_input(bootstrap, input_topic)
        run = self.start(spark, bootstrap, input_topic, output_topic, checkpoint, available_now=True, **start_options)
        run.await_available(timeout_s)
        if run.exception() is not None:
            raise run.exception()
        return run

    def start(
        self,
        spark,
        bootstrap: KafkaConnection | str,
        input_topic: str = "input",
        output_topic: str = "output",
        checkpoint: str | None = None,
        available_now: bool = False,
        reading: Reading = Reading(),  # noqa: B008 - frozen, never changed
    ) -> PipelineRun:
        """Read, build and write the pipeline as a streaming query (:meth:`write`, each pipeline's
        own), with the queries that route undecodable records, and the run that reads its progress."""
        from streamscale.sparkio.io import kafka_impl as resolve_impl

        checkpoint, trigger, query_name = self.query_settings(checkpoint, available_now)
        q = Query(
            spark,
            bootstrap,
            input_topic,
            output_topic,
            checkpoint,
            trigger,
            query_name,
            resolve_impl(reading.kafka_impl or self.params.connector),
            reading.starting_offsets,
            reading.commit_group,
        )
        query, extras = self.write(q)
        letters = self.dead_letter_queries(
            spark, bootstrap, input_topic, checkpoint, trigger, reading.starting_offsets, q.impl
        )
        return PipelineRun(
            self.name,
            [query, *letters],
            query,
            checkpoint,
            connector=q.impl,
            commit_to=self.committer(bootstrap, reading.commit_group, q.impl),
            **extras,
        )

    def read_input(self, q: Query, **options):
        """The query's decoded input records."""
        return self.read(q.spark, q.bootstrap, q.input_topic, q.starting_offsets, q.commit_group, q.impl, **options)

    def write(self, q: Query) -> tuple:
        """(the started query, what else its :class:`PipelineRun` needs). Windowed pipelines: Spark's
        update mode (or append mode with ``emit: final``) into the executor-side Kafka output (see
        streamscale.pipelines.output); late records counted on the executors
        (streamscale.pipelines.accounting)."""
        from streamscale.pipelines.output import Emission, WindowedOutput

        records = self.read_input(q, watermark_from=q.checkpoint if q.impl == "python" else None)
        out_df = self.build(q.spark, records)
        writer = WindowedOutput(
            q.bootstrap,
            q.output_topic,
            self.key_cols,
            self.value_cols,
            Emission(self.lateness_ms(), self.emit_final, self.window_grid_ms()),
            q.checkpoint,
            q.impl,
        )
        if q.impl == "spark" and self.emit_final:
            # straight into Spark's streaming Kafka sink: one job per batch (see pipelines.output)
            from streamscale.sparkio.io import write_kafka

            streamed = writer.streamed(out_df)
            query = write_kafka(
                streamed, q.bootstrap, q.output_topic, WriteQuery(q.checkpoint, q.trigger, name=q.name), "spark"
            )
        else:
            query = (
                out_df.writeStream.outputMode("append" if self.emit_final else "update")
                .foreachBatch(writer)
                .option("checkpointLocation", q.checkpoint)
                .trigger(**q.trigger)
                .queryName(q.name)
                .start()
            )
        return query, {"writer": writer, "replay": self.replayer(q.spark, q.bootstrap, q.impl)}

    def dead_letter_queries(
        self, spark, bootstrap, input_topic: str, checkpoint: str, trigger: dict, starting_offsets: str, impl: str
    ) -> list:
        """With Spark's connector and a dead-letter topic: the query that routes undecodable records
        there (the Python source routes them itself). Its checkpoint lies inside the run's."""
        if impl == "python" or not self.params.dead_letter_topic:
            return []
        from streamscale.sparkio.io import route_dead_letters

        return [
            route_dead_letters(
                spark,
                bootstrap,
                input_topic,
                Decoding(self.value_ddl(), self.value_format(), dead_letter_topic=self.params.dead_letter_topic),
                WriteQuery(f"{checkpoint.rstrip('/')}/dead-letters", trigger),
                starting_offsets,
                self.params.max_offsets_per_trigger,
            )
        ]

    def replayer(self, spark, bootstrap, impl: str):
        """How a run on Spark's connector counts its late records (streamscale.pipelines.replay)."""
        if impl == "python":
            return None
        from streamscale.pipelines.replay import count_late

        return lambda ranges: count_late(spark, bootstrap, self, ranges)

    @staticmethod
    def committer(bootstrap, commit_group: str | None, impl: str) -> tuple | None:
        """Where a run with Spark's connector commits its batches' offsets (see PipelineRun.commit_to)."""
        if not commit_group or impl == "python":
            return None
        from streamscale.broker.access import BrokerAccess

        return BrokerAccess(bootstrap), commit_group
