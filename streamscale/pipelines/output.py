"""Output of the windowed pipelines (UC2-UC4), written by the executors.

With ``emit: final`` on Spark's connector the window rows go straight into Spark's streaming Kafka
sink, observed on the way (rows, latency; :func:`streamed`): one job per micro-batch, as a
production job writes. Otherwise ``foreachBatch`` hands each micro-batch of window rows to the
Kafka batch writer (the streamscale-kafka sink, or Spark's ``kafka``): update mode needs the
batch's own next watermark for its ``final`` flags, which only a pass over the batch gives. Either
way the rows are encoded by Spark (``to_json``) and produced by the tasks, so the driver holds
nothing that grows with keys or open windows. What comes back to the driver is one small
observation per batch (rows written, latency). A replayed batch (restart) writes the same rows
again: the output is at-least-once, and the rows of a window are idempotent updates keyed by
(key, window).

Each row carries ``final``: true when no later row for its window can follow. With ``emit:
final`` (Spark's append mode) every row is final, one per window, emitted when the watermark
closes it. With ``emit: update`` a row is final when its window ends at or before W(N+1), the
watermark Spark uses after this batch: max(W(N), newest event time of the batch - lateness); the
newest event time is taken from the batch's rows (a persisted pass over them) and W(N) from the
checkpoint (streamscale.sparkio.checkpoint). A bound per row (the row's own newest event time)
would save that pass but never mark anything: a window's readings all lie before its end.
Windows of in-order data usually close after their last update, so a consumer that wants exactly
one final row per window uses ``emit: final``.

In append mode batch N emits the windows Spark evicts: those with an end in (W(N-1), W(N)] (rows
of windows ending at or before W(N-1) were evicted before or dropped as late). Window ends lie on a
grid (size + k * slide from epoch 0), so when no end lies between the two watermarks the batch
cannot emit a row: it still runs (an action must commit its state), into ``noop`` with its rows
counted by an observation, without building the output's columns or starting the Python writer
(~100 ms of fixed cost, on most batches of a run: a 60 s window closes once a minute); a
``count()`` instead cost ~17-40 ms more per batch (a shuffle to one partition, a stage). Should such
a batch count rows after all, the batch is computed again and its rows written: never lost.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from streamscale.broker.connection import KafkaConnection

# Output latency buckets (ms): rows at or below each edge are counted per batch, so a run's
# percentile is exact at this resolution (streamscale.experiment.slo.latency_percentile_ms)
LATENCY_EDGES_MS = tuple(2 ** (k / 4) for k in range(100))  # 1 ms ... 7.9 h, steps of 19 %

log = logging.getLogger(__name__)


def window_end_between(grid_ms: tuple[int, int], low_ms: int, high_ms: int) -> bool:
    """Whether a window end of the grid (size, slide) lies in [low, high] (inclusive on both
    sides: the check only saves work, so it errs towards writing)."""
    size, slide = grid_ms
    phase = size % slide  # ends are size + k * slide = phase + j * slide
    return (high_ms - phase) // slide > (low_ms - 1 - phase) // slide


@dataclass
class BatchOutput:
    output_records: int
    max_latency_ms: float | None
    avg_latency_ms: float | None
    latency_cdf: list | None = None  # rows at or below each of LATENCY_EDGES_MS


def latency_bucket(latency):
    """Column: the index k of the first edge >= latency (len(edges) beyond the last)."""
    from pyspark.sql import functions as F

    # the 1e-9 keeps a latency exactly on an edge in that edge's bucket (log2 rounds 2^3.5 up)
    k = F.ceil(F.lit(4.0) * F.log2(F.greatest(latency, F.lit(1.0))) - F.lit(1e-9))
    return F.least(F.greatest(k, F.lit(0)), F.lit(len(LATENCY_EDGES_MS)))


def shifted_cdf(cdf: list[int] | None, shift_ms: float) -> list[int] | None:
    """Rows at or below each edge once every latency grows by ``shift_ms`` (>= 0), from rows at or
    below each edge before: rows with latency + shift <= edge k include those at or below the
    largest edge <= edge k - shift. The count can only come out lower, so a percentile read from
    it stays at or above the true value (one bucket coarser at most)."""
    if not cdf or shift_ms <= 0:
        return cdf
    import numpy as np

    edges = np.asarray(LATENCY_EDGES_MS)
    j = np.searchsorted(edges, edges - shift_ms, side="right") - 1
    return [int(cdf[i]) if i >= 0 else 0 for i in j]


def cumulative(buckets) -> list[int] | None:
    """histogram_numeric's (bucket, count) pairs -> rows at or below each edge (a bucket may come
    in several pairs: partial histograms are appended when merged)."""
    if not buckets:
        return None
    counts = [0] * (len(LATENCY_EDGES_MS) + 1)
    for b in buckets:
        counts[int(round(b["x"]))] += int(round(b["y"]))
    out, run = [], 0
    for c in counts[:-1]:  # the last bucket: beyond the largest edge
        run += c
        out.append(run)
    return out


OUTPUT_OBSERVATION = "streamscale-output"
# the rows' clock as a column: Spark refuses reflect() (nondeterministic) inside an aggregate's
# arguments, and takes a column computed below it
EMITTED = "_streamscale_emitted_ms"


def not_inlined(value):
    """Column: the long ``value`` (a literal or the batch's timestamp, new in every batch), read
    when a row is evaluated instead of written into the generated code. Spark writes a long
    literal into the Java it generates for a stage, so a new value each batch made a new class:
    ~2 Janino compiles of the output stage per batch (20-35 ms each), and code the JIT met cold,
    in every batch. An interpreted ``java.lang.Long.valueOf`` (``reflect``) keeps the code the
    same from batch to batch, and costs less than the compiles even at 100,000 rows a batch (a
    parquet stream of such batches into ``noop`` with the output's columns and observation:
    ~170 against ~220 ms per batch, 2 CPUs)."""
    from pyspark.sql import functions as F

    return F.reflect(F.lit("java.lang.Long"), F.lit("valueOf"), value.cast("long")).cast("long")


def _metrics(latency):
    from pyspark.sql import functions as F

    # bucket k holds latencies in (edge k-1, edge k]: one index per row, counted by one histogram
    # over at most 101 distinct values with 128 bins, which keeps every value in a bin of its own
    # (exact counts); 100 conditional counts per row cost ~30 % of a batch
    return (
        F.count(F.lit(1)).alias("rows"),
        F.max(latency).alias("max_latency_ms"),
        F.avg(latency).alias("avg_latency_ms"),
        F.histogram_numeric(latency_bucket(latency), F.lit(128)).alias("latency_buckets"),
    )


def batch_output(got: dict, written_ms: float) -> BatchOutput:
    """A batch's output from its observation; latencies grow by ``written_ms``, the time from the
    clock they were taken against until the rows were written."""
    return BatchOutput(
        output_records=int(got.get("rows") or 0),
        max_latency_ms=None if got.get("max_latency_ms") is None else float(got["max_latency_ms"]) + written_ms,
        avg_latency_ms=None if got.get("avg_latency_ms") is None else float(got["avg_latency_ms"]) + written_ms,
        latency_cdf=shifted_cdf(cumulative(got.get("latency_buckets")), written_ms),
    )


def streamed_written_ms(progress: dict) -> float:
    """For :func:`streamed` rows: their clock is the batch's timestamp (taken as the batch starts),
    and they are written when the sink's ``addBatch`` ends: everything but the commit after it."""
    d = progress.get("durationMs") or {}
    return max(0.0, float(d.get("triggerExecution", 0)) - float(d.get("commitOffsets", 0)))


@dataclass(frozen=True)
class Emission:
    """When a windowed output's rows are written: the watermark trails the newest event by
    ``lateness_ms``; ``final``: a window once, when the watermark passes its end (else each update);
    ``window_grid_ms``: (size, slide) of the windows, where a batch can tell that none ended."""

    lateness_ms: int
    final: bool
    window_grid_ms: tuple[int, int] | None = None


class WindowedOutput:
    def __init__(
        self,
        bootstrap: KafkaConnection | str,
        topic: str,
        key_cols: list[str],
        value_cols: list[str],
        emission: Emission,
        checkpoint: str,
        kafka_impl: str | None = None,
    ):
        self.bootstrap, self.topic = bootstrap, topic
        self.key_cols, self.value_cols = key_cols, value_cols
        self.lateness_ms, self.emit_final = emission.lateness_ms, emission.final
        window_grid_ms = emission.window_grid_ms
        from streamscale.sparkio.io import kafka_impl as resolve_impl

        # resolved once: which write reports its observation (the Python sink's) decides how rows
        # are counted, and an unresolved default must not pick the other write
        self.checkpoint, self.kafka_impl = checkpoint, resolve_impl(kafka_impl)
        self.window_grid_ms = window_grid_ms
        self.skipped_writes = 0  # append-mode batches that could not emit: counted, not written
        self.batches: dict[int, BatchOutput] = {}  # taken by PipelineRun.poll: a few batches at most

    def next_watermark(self, newest_event_ms: int | None, batch_id: int) -> int:
        """The watermark the batch after ``batch_id`` evicts with, from this batch's newest event."""
        from streamscale.sparkio.checkpoint import batch_watermark_ms

        current = batch_watermark_ms(self.checkpoint, batch_id)
        return current if newest_event_ms is None else max(current, int(newest_event_ms) - self.lateness_ms)

    def can_emit(self, batch_id: int) -> bool:
        """Append mode: whether batch ``batch_id`` may emit a row (see the module's docstring)."""
        from streamscale.errors import SparkError
        from streamscale.sparkio.checkpoint import batch_watermark_ms

        if not self.emit_final or self.window_grid_ms is None or batch_id == 0:
            return True
        try:
            before = batch_watermark_ms(self.checkpoint, batch_id - 1)
            now = batch_watermark_ms(self.checkpoint, batch_id)
        except SparkError:  # e.g. the previous batch's offsets purged: do not guess
            return True
        return now > before and window_end_between(self.window_grid_ms, before + 1, now)

    def _ran_without_output(self, batch_df, batch_id: int) -> int:
        """Run a batch that cannot emit into ``noop`` (the action commits its state). Returns the
        rows it emitted all the same (0 but for a window end off the grid)."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        # the action runs the batch (and commits its state); into `noop` with the rows observed,
        # not count(): a count adds a shuffle to one partition and a stage, ~17-40 ms on each such
        # batch (most of a run's: UC2's 60 s window closes once a minute)
        obs = Observation(f"streamscale-no-output-{batch_id}")
        batch_df.observe(obs, F.count(F.lit(1)).alias("rows")).write.format("noop").mode("overwrite").save()
        rows = int(obs.get.get("rows") or 0)
        if rows:
            log.warning("batch %s emitted %s rows where none were expected: written again", batch_id, rows)
        else:
            self.skipped_writes += 1
            self.batches[batch_id] = BatchOutput(0, None, None, None)
        return rows

    def __call__(self, batch_df, batch_id: int) -> None:
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from streamscale.errors import SparkError
        from streamscale.sparkio.io import write_kafka_batch

        now = int(time.time() * 1000)
        expected = None  # rows a batch thought empty emitted: the batch is recomputed and written
        if not self.can_emit(batch_id):
            expected = self._ran_without_output(batch_df, batch_id)
            if not expected:
                return
        cached, got = None, None
        batch_df = batch_df.withColumn(EMITTED, not_inlined(F.lit(now)))
        metrics = _metrics(F.col(EMITTED) - F.col("max_event_ms"))
        # Spark's Kafka sink is a V1 write, whose inner query does not report an observe()
        # (Observation.get would wait for ever): with it the batch's rows (one per window) are kept
        # and the output's metrics counted by a job of their own
        counted_apart = self.kafka_impl == "spark"
        if counted_apart or not self.emit_final:
            cached = batch_df = batch_df.persist()
        try:
            newest = F.max("max_event_ms").alias("_newest")
            if self.emit_final:
                final = F.lit(True)
            else:
                if counted_apart:
                    # one job for the final flags' watermark and the metrics (their clock is `now`,
                    # not the write's): it computes the batch, which the write then reads from memory
                    got = batch_df.agg(newest, *metrics).first().asDict()
                    newest_ms = got.pop("_newest")
                else:
                    newest_ms = batch_df.agg(newest).first()[0]
                final = F.col("windowEndMs") <= not_inlined(F.lit(self.next_watermark(newest_ms, batch_id)))
            key, value = self.record(F.col(EMITTED), final)
            if counted_apart:
                write_kafka_batch(
                    batch_df.select(key.alias("key"), value.alias("value")), self.bootstrap, self.topic, "spark"
                )
                if got is None:
                    got = batch_df.agg(*metrics).first().asDict()
            else:
                obs = Observation(f"streamscale-output-{batch_id}")
                observed = batch_df.observe(obs, *metrics)
                write_kafka_batch(
                    observed.select(key.alias("key"), value.alias("value")), self.bootstrap, self.topic, self.kafka_impl
                )
                got = obs.get
            # The batch's aggregation runs inside the write (the DataFrame is lazy): a row is out once
            # its task's producer delivered it, by the time the write returns; latency is measured to
            # then (counted from `now`, before the work, it would leave the batch's processing out).
            written_ms = int(time.time() * 1000) - now
        finally:
            if cached is not None:
                cached.unpersist()
        if expected is not None and int(got.get("rows") or 0) != expected:
            raise SparkError(f"batch {batch_id}: {expected} window rows, {got.get('rows')} when computed again")
        self.batches[batch_id] = batch_output(got, written_ms)

    def record(self, now, final):
        """The (key, value) columns of a window row: its keys joined by ``;``, and its value
        columns, ``emittedAtMs`` and ``final`` as JSON."""
        from pyspark.sql import functions as F

        value = F.to_json(
            F.struct(*[F.col(c) for c in self.value_cols], now.alias("emittedAtMs"), final.alias("final"))
        )
        return F.concat_ws(";", *[F.col(c).cast("string") for c in self.key_cols]), value

    def streamed(self, out_df):
        """``emit: final`` on Spark's connector: the rows as the streaming Kafka sink takes them,
        observed as :data:`OUTPUT_OBSERVATION`. Their clock is ``current_timestamp()``, which a
        streaming query fixes per micro-batch (the batch's timestamp)."""
        from pyspark.sql import functions as F

        clocked = out_df.withColumn(EMITTED, not_inlined(F.unix_millis(F.current_timestamp())))
        key, value = self.record(F.col(EMITTED), F.lit(True))
        observed = clocked.observe(OUTPUT_OBSERVATION, *_metrics(F.col(EMITTED) - F.col("max_event_ms")))
        return observed.select(key.alias("key"), value.alias("value"))

    def close(self) -> None:
        """Nothing to flush: the executors' producers deliver before their tasks end."""
