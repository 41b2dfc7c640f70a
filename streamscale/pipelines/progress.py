"""What a streaming query's progress report says, read the same way by the run and the replay."""

from __future__ import annotations

import json


def progress_offsets(value) -> dict:
    """A source's offsets in a progress report: a dict (streamscale's source) or the JSON text
    of one (Spark's Kafka source), as {topic: {partition: offset}}."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def processing_cdf(wait_buckets, batch_ms: float) -> list[int] | None:
    """Records of a batch at or below each latency edge (streamscale.pipelines.output.LATENCY_EDGES_MS)
    from their Kafka timestamp to the batch's commit: the observed wait until the batch started
    (``wait_buckets``, histogram_numeric's pairs), every one grown by the batch's own time."""
    from streamscale.pipelines.output import cumulative, shifted_cdf

    return shifted_cdf(cumulative(wait_buckets), batch_ms)
