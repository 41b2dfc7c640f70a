"""A user's own PySpark streaming job under the method, beside UC1-UC4.

The job is a function ``job(records, params)``: ``records`` is the decoded record stream (a
streaming DataFrame of the records section's fields, timestamp fields as Spark timestamps;
malformed values already counted and left out) or, for a job of several inputs
(``benchmark.inputs``), a dict of them by input name; ``params`` the spec's ``params`` as a dict. It
returns a streaming DataFrame (written in append mode) or a pair ``(DataFrame, mode)`` with mode
``append``, ``update`` or ``complete``. Each output row goes to the output topic as one JSON object
of its columns; a column ``key`` is also the Kafka key. ``sink: noop`` runs it into Spark's noop
sink instead. Watermarks, state and joins are the job's own: its dropped records are the rows
Spark's stateful operators dropped behind the watermark (``numRowsDroppedByWatermark``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from streamscale.errors import ConfigError
from streamscale.loadgen.feed import Feed
from streamscale.loadgen.inputs import Input, Inputs
from streamscale.pipelines import jobref, realtime
from streamscale.pipelines.base import (
    MAX_EVENT_MS,
    MIN_EVENT_MS,
    Pipeline,
    PipelineParams,
    Query,
    Reading,
    Source,
    read_decoded,
)
from streamscale.pipelines.jobsetup import JobSetup, add_py_files, check_format, ship_py_files, start_sink
from streamscale.pipelines.progress import CREATED_BIN_MS, CREATED_BINS

MODES = ("append", "update", "complete")

# Theodolite's sensor reading, the records a job reads when the spec describes none
SENSOR_COLUMNS = [("identifier", "string"), ("timestamp", "timestamp"), ("valueInW", "double")]


class JobParams(PipelineParams):
    """streamscale's own settings of a job's run; any other parameter is the job's (it gets them all)."""

    model_config = ConfigDict(extra="allow")
    sink: Literal["kafka", "noop"] = Field("kafka", description="kafka: the output topic; noop: Spark's noop sink")
    window_s: float | None = Field(
        None, gt=0, description="the job's event-time window, if it has one: the lag trend fits its closes out"
    )
    slide_s: float | None = Field(None, gt=0, description="the window's slide (default: window_s)")


class UserJob(Pipeline):
    params_model = JobParams
    windowed = False
    drops_late = True  # its watermarks and state are its own: Spark counts what they drop

    def __init__(self, ref: str, params: dict | None = None, records=None, setup: JobSetup | None = None):
        self.ref = ref
        self.setup = setup or JobSetup()
        add_py_files(self.setup.py_files)  # before the job's import, which may need them
        self.fn = jobref.load(ref)
        self.name = jobref.display_name(ref)
        self.inputs = records if isinstance(records, Inputs) else None  # several: records per input
        self.records = None if self.inputs is not None else records
        self.job_params = {k: v for k, v in (params or {}).items()}
        super().__init__(params or {})
        if records is not None and getattr(records, "raw", False) and not self.raw:
            raise ConfigError(
                "records.raw sends a sample's bytes as they are: set benchmark.decode: raw (the job decodes)"
            )
        if self.inputs is not None and self.trigger().real_time:
            raise ConfigError(
                f"trigger {self.trigger()}: a real-time run here reads one input topic, and job {self.name} has "
                f"{len(self.inputs)} ({', '.join(self.inputs.names)})"
            )
        for i in self.inputs or ():
            if i.records.raw and i.decode != "raw":
                raise ConfigError(
                    f"inputs.{i.name}.records.raw sends a sample's bytes as they are: set its decode: raw"
                )
        if self.setup.own_sink and self.params.sink == "noop":
            raise ConfigError("params.sink: noop and benchmark.sink both say where the job writes: keep one")

    @property
    def raw(self) -> bool:
        return self.setup.decode == "raw"

    # -- the records ---------------------------------------------------------------------------
    def columns(self) -> list[tuple[str, str]]:
        return self.records.columns() if self.records is not None else SENSOR_COLUMNS

    def value_ddl(self) -> str:
        if self.records is not None:
            return self.records.value_ddl()
        return super().value_ddl()

    def value_format(self) -> str:
        return self.records.encoding if self.records is not None else "json"

    def avro(self) -> tuple[str, str, int] | None:
        return avro_of(self.records)

    def decoded(self):
        return decoded_of(self.columns())

    def feeds(self) -> tuple[Feed, ...]:
        """Its records into the run's input topic, or one feed per input."""
        return (Feed(records=self.records),) if self.inputs is None else self.inputs.feeds()

    def describe(self) -> str:
        sink = "Spark's noop sink" if self.params.sink == "noop" else "Kafka output topic (JSON of its columns)"
        if self.setup.own_sink:
            sink = self.setup.describe_sink()
        if self.inputs is None:
            source = _describe_source("Kafka input topic", self.raw, self.value_format(), self.columns())
            arg = "records"
        else:
            source = [
                line
                for i in self.inputs
                for line in _describe_source(
                    f"input {i.name} ({i.share:g} of the load)",
                    i.decode == "raw",
                    i.records.encoding,
                    i.records.columns(),
                )
            ]
            arg = "{" + ", ".join(self.inputs.names) + "}"
        return "\n".join(
            [f"job {self.name} ({self.ref})", *source, f"  --> {self.name}({arg}, params)", f"  --> {sink}"]
        )

    def window_grid_ms(self):
        if self.params.window_s is None:
            return None
        return int(self.params.window_s * 1000), int((self.params.slide_s or self.params.window_s) * 1000)

    # -- building ----------------------------------------------------------------------------------
    def build(self, spark, records, optimize=None):
        """The job's output and its mode: the job called on the record stream."""
        from pyspark.sql import DataFrame

        if self.inputs is not None:
            stream = {
                i.name: records[i.name] if i.decode == "raw" else _as_fields(records[i.name], i.records.columns())
                for i in self.inputs
            }
        else:
            stream = records if self.raw else _as_fields(records, self.columns())
        try:
            out = self.fn(stream, dict(self.job_params))
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - the user's code: its own message, on one line
            raise ConfigError(f"job {self.name} raised while being built: {_first_line(exc)}") from None
        mode = "append"
        if isinstance(out, tuple):
            if len(out) != 2 or not isinstance(out[1], str) or out[1] not in MODES:
                raise ConfigError(
                    f"job {self.name} returned a tuple: return a DataFrame or (DataFrame, mode), "
                    f"mode one of {', '.join(MODES)}"
                )
            out, mode = out
        if not isinstance(out, DataFrame):
            raise ConfigError(
                f"job {self.name} returned {type(out).__name__}, not a DataFrame: return the streaming DataFrame "
                "its output is (or a pair (DataFrame, mode))"
            )
        if not out.isStreaming:
            raise ConfigError(
                f"job {self.name} returned a batch DataFrame: build the output from the records it is given"
            )
        return out, mode

    def check(self, spark, bootstrap, input_topic: str, spark_conf: dict | None = None) -> None:
        from streamscale.sparkio.io import kafka_impl

        impl = kafka_impl(self.params.connector)
        if self.setup.sink_format:
            check_format(spark, self.setup.sink_format)
        trigger = self.trigger()
        if trigger.real_time:
            realtime.check_setup(self, realtime.session_conf(spark) if spark_conf is None else spark_conf)
        out, mode = self.build(spark, self.read(spark, bootstrap, input_topic, "earliest", None, impl))
        self._check_reads(out, input_topic)
        if trigger.real_time:
            self._check_real_time(spark, out, mode, trigger)

    def _check_reads(self, out, input_topic: str) -> None:
        """Every input the job is given is read by its query, or the spec says it is not: an input
        nothing reads would be loaded, judged by its lag and drained for nothing."""
        from streamscale.sparkio.planread import topics_read

        read = topics_read(out) if self.inputs is not None else None
        if read is None:
            return
        feeds = self.feeds()
        reads = sorted(f.name for f in feeds if f.topic(input_topic) in read)
        for f in feeds:
            if not f.read and f.topic(input_topic) in read:
                raise ConfigError(
                    f"inputs.{f.name}.unread: true, but job {self.name} reads {f.name}: leave unread out, so that "
                    "its lag is judged"
                )
            if f.read and f.topic(input_topic) not in read:
                raise ConfigError(
                    f"inputs.{f.name}: job {self.name} never reads it (its query reads {', '.join(reads) or 'none'}): "
                    f"remove it from benchmark.inputs, or set inputs.{f.name}.unread: true to load it all the same"
                )

    def _check_real_time(self, spark, out, mode: str, trigger) -> None:
        """Real-time mode's rules on the job's output (streamscale.pipelines.realtime) first, as
        Spark enforces them, then the send-time column each record's latency is read from."""
        realtime.check_plan(spark, out, trigger)
        if mode == "complete":
            raise ConfigError(
                f"trigger {trigger}: real-time mode runs update output mode, and job {self.name} returned complete"
            )
        field = self.send_time_field()
        if field is None:
            raise ConfigError(
                f"trigger {trigger}: a real-time run reads each record's latency from its send time at the "
                "output topic: give the records a field with gen: now (a replay its event_time) and keep it "
                f"in the output of job {self.name}"
            )
        if field not in out.columns:
            raise ConfigError(
                f"trigger {trigger}: a real-time run reads each record's latency from its send time at the "
                f"output topic: keep the column {field} in the output of job {self.name} "
                f"(it has {', '.join(out.columns)})"
            )

    def send_time_field(self) -> str | None:
        """Kafka's ``timestamp`` with decode raw; else the records' field the generator stamps with
        the send time (``gen: now``, a replay's ``event_time``; the sensor readings' ``timestamp``)."""
        if self.raw or self.records is None:
            return "timestamp"
        return self.records.send_time_field()

    def read(self, spark, bootstrap, input_topic: str, starting_offsets: str, commit_group, kafka_impl=None, **kw):  # noqa: PLR0913
        """``decode: raw``: Spark's Kafka columns as its connector gives them, headers included
        (nothing is malformed); else the records' fields (:meth:`Pipeline.read`). Several inputs:
        a dict of them by name, each read from its own topic (:meth:`input_topics`)."""
        reading = Reading(starting_offsets, commit_group, kafka_impl)
        if self.inputs is not None:
            feeds = self.inputs.feeds()
            return {
                i.name: self._read_input(spark, bootstrap, i, f.topic(input_topic), reading)
                for i, f in zip(self.inputs, feeds, strict=True)
            }
        if not self.raw:
            return super().read(spark, bootstrap, input_topic, starting_offsets, commit_group, kafka_impl, **kw)
        return read_raw(spark, bootstrap, input_topic, reading, self.params.max_offsets_per_trigger)

    def _read_input(self, spark, bootstrap, i: Input, topic: str, reading: Reading):
        observation = f"input.{i.name}"
        if i.decode == "raw":
            return read_raw(spark, bootstrap, topic, reading, self.params.max_offsets_per_trigger, observation)
        from streamscale.sparkio.io import Decoding

        r = i.records
        decoding = Decoding(r.value_ddl(), r.encoding, native=self.trigger().real_time, avro=avro_of(r))
        source = Source(topic, decoding, decoded_of(r.columns()), observation, self.params.max_offsets_per_trigger)
        return read_decoded(spark, bootstrap, source, reading)

    def write(self, q: Query) -> tuple:
        from pyspark.sql import functions as F

        from streamscale.sparkio.io import WriteQuery, write_kafka

        self._ship(q.spark)
        out, mode = self.build(q.spark, self.read_input(q))
        try:
            if self.setup.own_sink:
                query = start_sink(out, mode, q, self.setup, self.name)
            elif self.params.sink == "noop":
                w = out.writeStream.format("noop").outputMode(mode).option("checkpointLocation", q.checkpoint)
                query = w.trigger(**q.trigger).queryName(q.name).start()
            else:
                cols = [F.to_json(F.struct(*[F.col(f"`{c}`") for c in out.columns])).alias("value")]
                if "key" in out.columns:
                    cols.insert(0, F.col("key").cast("string").alias("key"))
                rows = out.select(*cols)
                query = write_kafka(
                    rows, q.bootstrap, q.output_topic, WriteQuery(q.checkpoint, q.trigger, mode, q.name), q.impl
                )
        except ConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - Spark refused the job's plan (e.g. a mode it cannot run)
            raise ConfigError(f"job {self.name} cannot run as a streaming query: {_first_line(exc)}") from None
        return query, {"state_drops": True}

    def _ship(self, spark) -> None:
        """On a cluster master, the job's file goes to the executors (what it imports from beside it)."""
        path = jobref.job_file(self.ref)
        try:
            local = str(spark.sparkContext.master).startswith("local")
        except Exception:  # noqa: BLE001 - Spark Connect: no context to ship files with
            return
        if path is not None and not local:
            spark.sparkContext.addPyFile(str(path))
        ship_py_files(spark, self.setup.py_files)


def avro_of(records) -> tuple[str, str, int] | None:
    """Avro records' (schema as JSON, wire, schema id) for the decoding; None for other records."""
    if records is None or records.encoding != "avro":
        return None
    import json

    return json.dumps(records.avro_schema()), records.wire, records.schema_id


def decoded_of(columns: list[tuple[str, str]]):
    """Column: the row's value decoded, every timestamp one Spark can hold (else it is malformed)."""
    from pyspark.sql import functions as F

    ok = F.col("value_error").isNull()
    for name, t in columns:
        if t == "timestamp":
            # a Spark timestamp holds years 1-9999: another one is malformed, not an overflow
            ok = ok & F.coalesce(F.col(name).between(MIN_EVENT_MS, MAX_EVENT_MS), F.lit(False))
    return ok


def _as_fields(records, columns: list[tuple[str, str]]):
    """The records' fields, timestamps (epoch ms on the wire) as Spark timestamps."""
    from pyspark.sql import functions as F

    return records.select(
        *[F.timestamp_millis(F.col(n)).alias(n) if t == "timestamp" else F.col(n) for n, t in columns]
    )


def _describe_source(what: str, raw: bool, encoding: str, columns) -> list[str]:
    if raw:
        return [f"  Source: {what} -> Spark's Kafka columns (key, value, ..., headers), decoded by the job"]
    cols = ", ".join(f"{n} {t}" for n, t in columns)
    return [f"  Source: {what} -> decode {encoding.upper()} records ({cols})", "  --> filter malformed (counted)"]


def read_raw(spark, bootstrap, topic: str, reading: Reading, max_offsets: int | None, observation: str = "input"):
    """Spark's Kafka columns of ``topic`` as its connector gives them, headers included (nothing is
    malformed); when its records were created observed as :func:`read_decoded` does."""
    from pyspark.sql import functions as F

    from streamscale.sparkio.io import kafka_impl as resolve_impl
    from streamscale.sparkio.io import read_kafka

    impl = resolve_impl(reading.kafka_impl)
    if impl != "spark":
        raise ConfigError("decode: raw hands the job the columns of Spark's Kafka connector: use connector spark")
    df = read_kafka(spark, bootstrap, topic, reading.starting_offsets, max_offsets, impl, {"includeHeaders": "true"})
    created = F.floor(F.unix_millis(F.col("timestamp")) / F.lit(CREATED_BIN_MS))
    return df.observe(
        observation,
        F.count(F.when(F.lit(False), 1)).alias("malformed"),
        F.histogram_numeric(created, F.lit(CREATED_BINS)).alias("created_bins"),
    )


def _first_line(exc: BaseException) -> str:
    """An error's first line: Spark's messages go on with the whole plan."""
    text = str(exc).strip()
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return f"{type(exc).__name__}: {first[:400]}" if first else type(exc).__name__
