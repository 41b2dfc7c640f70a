"""Exact count of the records Spark's watermark drops, computed on the executors.

Spark drops a row of micro-batch N from a window aggregation when the row's window ends at or
before the batch's *late-events* watermark: since Spark 3.5 that is the previous batch's watermark
(``batchWatermarkMs`` of ``offsets/<N-1>`` in the checkpoint, 0 for the first batch), while state
is evicted with batch N's own (see :mod:`streamscale.sparkio.checkpoint`). A window ending between
the two keeps the rows of batch N and closes in the same batch. The Python Kafka source adds the
late-events watermark to every row (option ``batchWatermarkFrom``), so the count is an
``observe()`` metric over the rows entering the aggregation, whatever the number of keys or open
windows, and the same after a restart (a replayed batch reads the same offsets files). Spark's
connector has no such column: its runs are counted after the fact from the same columns
(:func:`capturing`, streamscale.pipelines.replay). Spark's own
``numRowsDroppedByWatermark`` counts rows after partial aggregation (ten late readings of one
sensor and window in one task count once): not records.

The windows of a reading are Spark's (``pyspark.sql.functions.window``): for slide s and length
w, the last window start is ``ts - ((ts % s) + s) % s`` and the candidates are that start minus
k*s for k < ceil(w / s), kept when they contain ts. Per record: the windows it was in
(``contributions``), those dropped (``dropped_contributions``) and whether any was dropped
(``dropped_records``: a record counts once).

End of input: a reading from sensor :data:`FLUSH_SENSOR` moves the watermark (to its timestamp
minus the lateness) and is then discarded, neither aggregated nor counted. Written after the
last records of a bounded run (:func:`flush_input`), it closes every window so that final-mode
output emits the newest ones too.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading

from streamscale.broker.connection import KafkaConnection
from streamscale.sparkio.kafka import WATERMARK_FIELD

ACCOUNTING_OBSERVATION = "late"
FLUSH_SENSOR = "__streamscale_end_of_input__"
FLUSH_TIMESTAMP_MS = 253_402_300_799_000  # 9999-12-31T23:59:59Z: closes every window there is
WATERMARK_COLUMN = "kafka_" + WATERMARK_FIELD


def has_watermark(df) -> bool:
    return WATERMARK_COLUMN in df.columns


def late_flags(window_ms: int, slide_ms: int, ts: str = "timestamp"):
    """(contained, late) Column pairs, one per candidate window of a reading."""
    from pyspark.sql import functions as F

    t = F.col(ts)
    last_start = t - F.pmod(t, F.lit(slide_ms))
    out = []
    for k in range(math.ceil(window_ms / slide_ms)):
        end = last_start - F.lit(k * slide_ms) + F.lit(window_ms)
        contained = end > t
        out.append((contained, contained & (end <= F.col(WATERMARK_COLUMN))))
    return out


def late_metrics(df, window_ms: int, slide_ms: int | None = None, registered=None, first=None) -> list:
    """The accounting's aggregate columns over rows that carry the late-events watermark column.

    Rows are readings (UC2, UC3) or, after a registry join, one row per (reading, ancestor group)
    (UC4): then ``registered`` is false on the row of an unregistered reading (left join) and
    ``first`` is true on one row per registered reading."""
    from pyspark.sql import functions as F

    flags = late_flags(window_ms, slide_ms or window_ms)
    as_int = [(F.when(c, 1).otherwise(0), F.when(x, 1).otherwise(0)) for c, x in flags]
    contributions = sum((c for c, _ in as_int), F.lit(0))
    dropped = sum((x for _, x in as_int), F.lit(0))
    any_dropped = dropped > 0
    if registered is None:
        return [
            F.sum(contributions).alias("contributions"),
            F.sum(dropped).alias("dropped_contributions"),
            F.count(F.when(any_dropped, 1)).alias("dropped_records"),
            F.lit(0).alias("unregistered"),
        ]
    reg = F.coalesce(registered, F.lit(False))
    return [
        F.sum(F.when(reg, contributions)).alias("contributions"),
        F.sum(F.when(reg, dropped)).alias("dropped_contributions"),
        F.count(F.when(reg & first & any_dropped, 1)).alias("dropped_records"),
        _unregistered(registered),
    ]


def _unregistered(registered):
    """Column: readings of sensors the registry does not know (left join: no group)."""
    from pyspark.sql import functions as F

    return F.count(F.when(~F.coalesce(registered, F.lit(False)), 1)).alias("unregistered")


class _Capture(threading.local):
    frames: list | None = None


_capture = _Capture()


@contextlib.contextmanager
def capturing():
    """Within: :func:`observe_late` attaches nothing and hands its (rows, aggregate columns) to the
    yielded list instead, so that a replay can aggregate them as a batch job
    (streamscale.pipelines.replay)."""
    _capture.frames = frames = []
    try:
        yield frames
    finally:
        _capture.frames = None


def observe_late(df, window_ms: int, slide_ms: int | None = None, registered=None, first=None):
    """``df`` with the accounting observation attached (nothing attached without a watermark
    column: Spark's connector, whose runs are counted by a replay). Arguments as in
    :func:`late_metrics`."""
    if not has_watermark(df):
        if registered is None:
            return df
        # no late count here (a replay counts them), but the unregistered readings, which need no
        # watermark: a batch the replay can skip keeps this count
        return df.observe(ACCOUNTING_OBSERVATION, _unregistered(registered))
    metrics = late_metrics(df, window_ms, slide_ms, registered, first)
    if _capture.frames is not None:
        _capture.frames.append((df, metrics))
        return df
    return df.observe(ACCOUNTING_OBSERVATION, *metrics)


def without_flush(df):
    from pyspark.sql import functions as F

    # The condition names the event time on purpose: Spark pushes filters that do not below the
    # watermark operator, and the marker would then never move the watermark.
    marker = F.col("identifier").eqNullSafe(F.lit(FLUSH_SENSOR)) & F.col("event_time").isNotNull()
    return df.where(~marker)


def flush_record(timestamp_ms: int = FLUSH_TIMESTAMP_MS) -> bytes:
    return json.dumps({"identifier": FLUSH_SENSOR, "timestamp": int(timestamp_ms), "valueInW": 0.0}).encode()


def flush_input(bootstrap: KafkaConnection | str, topic: str, timestamp_ms: int = FLUSH_TIMESTAMP_MS) -> None:
    """Mark the end of a bounded input: the next run of a windowed pipeline over ``topic`` closes
    (and in final mode emits) every window up to ``timestamp_ms`` minus the lateness. Records
    written after the marker with older timestamps are then late."""

    from streamscale.sparkio.kafka import produce_all

    p = KafkaConnection.of(bootstrap).producer({"enable.idempotence": True})
    produce_all(p, topic, [(FLUSH_SENSOR.encode(), flush_record(timestamp_ms), None, None, None)], timeout=30)
