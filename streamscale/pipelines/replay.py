"""Exact late-record counts for runs on Spark's Kafka connector, by replaying their batches.

The Python source gives every row its micro-batch's late-events watermark (a column the
accounting observes in the stream, streamscale.pipelines.accounting). Spark's connector has no
such column and no way to add one, and Spark's own ``numRowsDroppedByWatermark`` counts rows after
partial aggregation (ten late readings of one sensor and window in one task count once). So a run
on Spark's connector keeps, per batch with input, the offsets it read (from the progress report:
``startOffset``/``endOffset``; the first batch of a checkpoint starts at the offsets in
``sources/0/0``) and the batch's late-events watermark (``offsets/<N-1>``, see
streamscale.sparkio.checkpoint). When the run stops, those ranges are read once more as one batch
job through Spark's connector, every record tagged with its batch and watermark, and the
pipeline's own dataflow is built over them up to its accounting, whose columns are aggregated per
batch: the same rows, the same rule, the same code. The reads run on the executors and the
checkpoint is read with pyarrow's file systems, so this holds on a cluster.

Checked, not assumed: the replay counts the rows it read per batch, and a batch whose count differs
from Spark's ``numInputRows`` (records removed by retention since, a topic deleted) stays "not
counted". Costs one more read of the run's input, after the run.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from streamscale.pipelines.progress import progress_offsets
from streamscale.sparkio.checkpoint import initial_offsets, late_events_watermark_ms

log = logging.getLogger(__name__)

BATCH_COLUMN = "_streamscale_batch"


@dataclass(frozen=True)
class BatchRange:
    """What batch ``batch_id`` read: offsets [start, end) per partition ({topic: {partition:
    offset}}; a partition missing from ``start`` was read from its earliest), with its late-events
    watermark and the rows Spark reported."""

    batch_id: int
    start: dict
    end: dict
    late_watermark_ms: int
    rows: int


def _epoch_ms(iso: str | None) -> int | None:
    """A progress report's event time (``2026-11-26T07:00:00.123Z``) in epoch ms."""
    if not iso:
        return None
    from datetime import datetime

    try:
        return round(datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp() * 1000)
    except ValueError:
        return None


def batch_range(progress: dict, checkpoint: str) -> BatchRange | None:
    """The range one progress report's batch read, or None when no record of it can be late: it
    read nothing, or its oldest event time (``eventTime.min``, over the rows entering the
    watermark) is at or after its late-events watermark W(N-1). Every window of a reading ends
    after the reading, so none of them then ends at or before W(N-1). In-order streams skip most
    batches so."""
    rows = int(progress.get("numInputRows") or 0)
    src = progress["sources"][0] if progress.get("sources") else {}
    end = progress_offsets(src.get("endOffset"))
    if not rows or not end:
        return None
    batch_id = int(progress["batchId"])
    late_wm = late_events_watermark_ms(checkpoint, batch_id)
    oldest = _epoch_ms((progress.get("eventTime") or {}).get("min"))
    if oldest is not None and oldest >= late_wm:
        return None
    # Spark reports no startOffset for a checkpoint's first batch
    start = progress_offsets(src.get("startOffset")) or initial_offsets(checkpoint)
    return BatchRange(batch_id, start, end, late_wm, rows)


def _bounds(ranges: list[BatchRange]) -> tuple[dict, dict]:
    """The smallest start and largest end per partition over the batches."""
    start: dict = {}
    end: dict = {}
    for r in ranges:
        for topic, parts in r.end.items():
            for p, off in parts.items():
                e = end.setdefault(topic, {})
                e[str(p)] = max(int(off), e.get(str(p), -1))
                first = int((r.start.get(topic) or {}).get(str(p), -2))
                s = start.setdefault(topic, {})
                s[str(p)] = min(first, s.get(str(p), first))
    return start, end


def count_late(spark, bootstrap, pipeline, ranges: list[BatchRange]) -> dict[int, dict]:
    """Per batch id: ``dropped_records``, ``dropped_contributions``, ``unregistered`` (as the
    stream's accounting observes them) for every batch whose replayed rows match Spark's count."""
    from pyspark.sql import functions as F

    from streamscale.pipelines.accounting import WATERMARK_COLUMN, capturing
    from streamscale.sparkio.io import decode_values, read_kafka_ranges

    if not ranges:
        return {}
    start, end = _bounds(ranges)
    rows = [
        (topic, int(p), int((r.start.get(topic) or {}).get(p, -2)), int(off), r.batch_id, r.late_watermark_ms)
        for r in ranges
        for topic, parts in r.end.items()
        for p, off in parts.items()
    ]
    bounds = spark.createDataFrame(
        rows, f"_t STRING, _p INT, _from BIGINT, _to BIGINT, {BATCH_COLUMN} BIGINT, {WATERMARK_COLUMN} BIGINT"
    )
    records = decode_values(read_kafka_ranges(spark, bootstrap, start, end))
    tagged = records.join(
        F.broadcast(bounds),
        (F.col("kafka_topic") == F.col("_t"))
        & (F.col("kafka_partition") == F.col("_p"))
        & (F.col("kafka_offset") >= F.col("_from"))
        & (F.col("kafka_offset") < F.col("_to")),
    ).drop("_t", "_p", "_from", "_to")
    tagged = tagged.persist()
    try:
        read = {r[BATCH_COLUMN]: r["n"] for r in tagged.groupBy(BATCH_COLUMN).agg(F.count("*").alias("n")).collect()}
        with capturing() as frames:
            pipeline.build(spark, tagged.where(pipeline.decoded()))
        if len(frames) != 1:
            log.warning("replay: the pipeline observed late records %d times, not once: not counted", len(frames))
            return {}
        df, metrics = frames[0]
        counted = {r[BATCH_COLUMN]: r.asDict() for r in df.groupBy(BATCH_COLUMN).agg(*metrics).collect()}
    finally:
        tagged.unpersist()
    out: dict[int, dict] = {}
    for r in ranges:
        if read.get(r.batch_id, 0) != r.rows:
            log.warning(
                "replay of batch %d read %d records, Spark read %d: its late records are not counted",
                r.batch_id,
                read.get(r.batch_id, 0),
                r.rows,
            )
            continue
        c = counted.get(r.batch_id, {})
        out[r.batch_id] = {
            "dropped_records": int(c.get("dropped_records") or 0),
            "dropped_contributions": int(c.get("dropped_contributions") or 0),
            "unregistered": int(c.get("unregistered") or 0),
        }
    return out
