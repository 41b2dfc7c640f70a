"""What the four benchmark pipelines share: reading records, statistics, running, metrics.

A pipeline reads ActivePowerRecords from the input topic through the Kafka source (decoding in
the source; malformed values go to a dead-letter topic and are counted), builds its dataflow,
and writes results through the Kafka sink (or, for UC1, a side effect). ``start()`` returns a
:class:`PipelineRun` that turns Spark's query progress into the metrics the benchmark needs.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ConfigError, SparkError, WaitTimeout
from streamscale.sparkio.io import read_records

MIN_EVENT_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z: Spark's timestamp range, in epoch ms
MAX_EVENT_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


class PipelineParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_offsets_per_trigger: int | None = None
    trigger_interval_s: float = 1.0
    dead_letter_topic: str | None = None
    # seed 004's repartition merging (streamscale.topology.physical): None chooses per plan what is
    # faster on Spark, True always merges, False never
    optimize_topology: bool | None = None


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


_EXCHANGE = re.compile(r"(?<![A-Za-z])(Exchange|ShuffleExchange)\s")


def count_shuffles(plan: str) -> int:
    """Shuffle stages in a physical plan: Exchange nodes that are not broadcasts."""
    return len(_EXCHANGE.findall(plan))


def _as_dict(row) -> dict:
    if row is None:
        return {}
    return row.asDict() if hasattr(row, "asDict") else dict(row)


@dataclass
class BatchMetrics:
    batch_id: int
    timestamp: str
    input_rows: int
    input_rate: float
    processed_rate: float
    batch_ms: int
    end_offsets: dict
    dropped_late: int
    malformed: int
    output_records: int | None
    max_latency_ms: float | None
    avg_latency_ms: float | None
    dropped_contributions: int = 0  # window contributions dropped (UC3: up to 3 per record)
    unregistered: int = 0  # UC4: readings of sensors not in the registry (not late)
    late_counted: bool = True  # False: no late accounting (Spark's builtin Kafka source)
    latency_cdf: list | None = None  # output rows at or below each latency edge (pipelines.output)


_TEMP_CHECKPOINTS: set[str] = set()  # checkpoints query_settings created, removed when their run stops
# Removed when their run stopped; until its Spark session stops, the state-store maintenance thread
# may still write a snapshot into one (the demo's test found state/0/0/.11.snapshot.crc left behind)
_REMOVED_CHECKPOINTS: set[str] = set()


def remove_checkpoint(path: str) -> None:
    """Remove a temporary checkpoint now, and again in :func:`remove_stopped_checkpoints`."""
    shutil.rmtree(path, ignore_errors=True)
    _REMOVED_CHECKPOINTS.add(path)


def remove_stopped_checkpoints() -> None:
    """Remove again what late writers put into the temporary checkpoints of stopped runs: call
    after the Spark session stopped (its maintenance thread is gone then); also at exit."""
    for path in list(_REMOVED_CHECKPOINTS):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            _REMOVED_CHECKPOINTS.discard(path)


atexit.register(remove_stopped_checkpoints)


@dataclass
class PipelineRun:
    """A started pipeline: its Spark queries and metrics collected from their progress."""

    name: str
    queries: list
    main_query: object
    checkpoint: str = ""
    writer: object | None = None
    batches: list[BatchMetrics] = field(default_factory=list)
    _seen: set = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def poll(self) -> list[BatchMetrics]:
        """New batches since the last poll (also kept in ``batches``)."""
        new = []
        with self._lock:
            for p in self.main_query.recentProgress:
                if p["batchId"] in self._seen:
                    continue
                self._seen.add(p["batchId"])
                m = self._metrics(p)
                self.batches.append(m)
                new.append(m)
        return new

    def _metrics(self, p: dict) -> BatchMetrics:
        from streamscale.pipelines.accounting import ACCOUNTING_OBSERVATION

        src = p["sources"][0] if p.get("sources") else {}
        obs = p.get("observedMetrics") or {}
        inp = _as_dict(obs.get("input"))
        late = _as_dict(obs.get(ACCOUNTING_OBSERVATION))
        out = self.writer.batches.pop(p["batchId"], None) if self.writer is not None else None
        return BatchMetrics(
            batch_id=p["batchId"],
            timestamp=p["timestamp"],
            input_rows=p.get("numInputRows", 0),
            input_rate=float(p.get("inputRowsPerSecond") or 0.0),
            processed_rate=float(p.get("processedRowsPerSecond") or 0.0),
            batch_ms=int(p.get("durationMs", {}).get("triggerExecution", 0)),
            end_offsets=src.get("endOffset") or {},
            dropped_late=int(late.get("dropped_records") or 0),
            malformed=int(inp.get("malformed") or 0),
            output_records=out.output_records if out else None,
            max_latency_ms=out.max_latency_ms if out else None,
            avg_latency_ms=out.avg_latency_ms if out else None,
            dropped_contributions=int(late.get("dropped_contributions") or 0),
            unregistered=int(late.get("unregistered") or 0),
            late_counted=self.writer is None or bool(late) or not p.get("numInputRows"),
            latency_cdf=out.latency_cdf if out else None,
        )

    def totals(self) -> dict:
        self.poll()
        return {
            "batches": len(self.batches),
            "input_rows": sum(b.input_rows for b in self.batches),
            "dropped_late": sum(b.dropped_late for b in self.batches),
            "dropped_contributions": sum(b.dropped_contributions for b in self.batches),
            "unregistered": sum(b.unregistered for b in self.batches),
            "malformed": sum(b.malformed for b in self.batches),
            "late_counted": all(b.late_counted for b in self.batches),
        }

    def shuffle_stages(self) -> int:
        return count_shuffles(self.physical_plan())

    def physical_plan(self) -> str:
        # what StreamingQuery.explain() prints, as a string; known once a batch has run
        plan = self.main_query._jsq.explainInternal(False)
        if "No physical plan" in plan:
            raise SparkError("no batch has run yet: the physical plan is known after the first")
        return plan

    def exception(self):
        for q in self.queries:
            if q.exception() is not None:
                return q.exception()
        return None

    def await_available(self, timeout: float = 600) -> None:
        """For availableNow runs: wait until every query finished, raise if one failed."""
        deadline = time.monotonic() + timeout
        for q in self.queries:
            q.awaitTermination(max(1.0, deadline - time.monotonic()))
            if q.isActive:
                raise WaitTimeout(f"{self.name}: query still running after {timeout} s")
        self.poll()
        if self.writer is not None:
            self.writer.close()

    def stop(self) -> None:
        for q in self.queries:
            try:
                q.stop()
            except Exception:  # noqa: BLE001 - stopping a failed query
                pass
        self.poll()
        if self.writer is not None:
            self.writer.close()
        if self.checkpoint in _TEMP_CHECKPOINTS:  # ours, not the user's: nothing left in $TMPDIR
            _TEMP_CHECKPOINTS.discard(self.checkpoint)
            remove_checkpoint(self.checkpoint)


class Pipeline(ABC):
    """One benchmark use case. Subclasses define ``build`` and ``describe``."""

    name: str = ""
    params_model: type[PipelineParams] = PipelineParams
    key_cols: list[str] = []
    value_cols: list[str] = []
    windowed: bool = True  # aggregates over event-time windows (UC2-UC4)

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
        from pyspark.sql import functions as F

        opts = {"commitGroup": commit_group} if commit_group else {}
        if watermark_from:
            opts["batchWatermarkFrom"] = watermark_from
        df = read_records(
            spark,
            bootstrap,
            input_topic,
            dead_letter_topic=self.params.dead_letter_topic,
            starting_offsets=starting_offsets,
            max_offsets_per_trigger=self.params.max_offsets_per_trigger,
            impl=kafka_impl,
            options=opts,
        )
        decoded = F.col("value_error").isNull()
        if self.windowed:
            # A window needs a timestamp Spark can hold: one outside years 1-9999 (a valid int64
            # all the same) made the window arithmetic overflow and killed the query, again on
            # every restart. Such a reading counts as malformed.
            decoded = decoded & F.coalesce(F.col("timestamp").between(MIN_EVENT_MS, MAX_EVENT_MS), F.lit(False))
        # the late-record count is taken further on (accounting.py): only malformed ones here
        df = df.observe("input", F.count(F.when(~decoded, 1)).alias("malformed"))
        return df.where(decoded)

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
            checkpoint = tempfile.mkdtemp(prefix=f"streamscale-{self.name}-")
            _TEMP_CHECKPOINTS.add(checkpoint)
        trigger = (
            {"availableNow": True} if available_now else {"processingTime": f"{self.params.trigger_interval_s} seconds"}
        )
        return checkpoint, trigger, f"{self.name}-{int(time.time() * 1000)}"

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
        starting_offsets: str = "earliest",
        commit_group: str | None = None,
        kafka_impl: str | None = None,
    ) -> PipelineRun:
        """Windowed pipelines: Spark's update mode (or append mode with ``emit: final``) into the
        executor-side Kafka output (see streamscale.pipelines.output); late records counted on the
        executors (streamscale.pipelines.accounting)."""
        from streamscale.pipelines.output import WindowedOutput
        from streamscale.sparkio.io import kafka_impl as resolve_impl

        checkpoint, trigger, query_name = self.query_settings(checkpoint, available_now)
        impl = resolve_impl(kafka_impl)
        records = self.read(
            spark,
            bootstrap,
            input_topic,
            starting_offsets,
            commit_group,
            impl,
            watermark_from=checkpoint if impl == "python" else None,
        )
        out_df = self.build(spark, records)
        writer = WindowedOutput(
            bootstrap,
            output_topic,
            self.key_cols,
            self.value_cols,
            self.lateness_ms(),
            self.emit_final,
            checkpoint,
            impl,
            window_grid_ms=self.window_grid_ms(),
        )
        query = (
            out_df.writeStream.outputMode("append" if self.emit_final else "update")
            .foreachBatch(writer)
            .option("checkpointLocation", checkpoint)
            .trigger(**trigger)
            .queryName(query_name)
            .start()
        )
        return PipelineRun(self.name, [query], query, checkpoint, writer)
