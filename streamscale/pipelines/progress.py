"""What a streaming query's progress report says, read the same way by the run and the replay."""

from __future__ import annotations

import json

# a batch's records are counted per bin of this many ms of their Kafka timestamps
# (streamscale.pipelines.base), by a histogram of CREATED_BINS bins: exact counts while its records
# span up to 51 s, merged neighbouring bins beyond (histogram_numeric keeps at most that many). A
# histogram's cost follows the distinct bins a task meets, not its size (2,000,000 rows over 5 s of
# timestamps: 0.21 s with 1024 bins, 0.23 s with 128; over 30 s: 0.16 s and 0.22 s, where 128
# merged bins; medians of 4, 2 CPUs), and 128 bins (6.4 s) would merge the bins of a 5 s trigger's
# batches once they run a second late
CREATED_BIN_MS = 50
CREATED_BINS = 1024


def progress_offsets(value) -> dict:
    """A source's offsets in a progress report: a dict (streamscale's source) or the JSON text
    of one (Spark's Kafka source), as {topic: {partition: offset}}."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def source_offsets(sources: list) -> dict:
    """The end offsets of every source of a progress report (a query reading several topics has
    one source per topic), as {topic: {partition: offset}}."""
    merged: dict = {}
    for src in sources:
        for topic, parts in progress_offsets((src or {}).get("endOffset")).items():
            merged.setdefault(topic, {}).update(parts if isinstance(parts, dict) else {})
    return merged


def commit_ms(progress: dict) -> float | None:
    """When a batch committed, ms since the epoch: its progress timestamp (the trigger's start) plus
    its triggerExecution time."""
    from datetime import datetime

    try:
        start = datetime.fromisoformat(str(progress.get("timestamp")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return start * 1000 + float((progress.get("durationMs") or {}).get("triggerExecution", 0))


def processing_latencies(
    created_bins, committed_ms: float | None, bin_ms: float, bins: int = CREATED_BINS
) -> tuple[list[tuple[float, float, int]] | None, float | None]:
    """A batch's records' latencies from their Kafka timestamp to the batch's commit, as
    ``(low, high, records)``: that many records each took more than ``low`` and at most ``high``
    ms, from the counts per ``bin_ms`` of their timestamps (histogram_numeric's pairs); and the
    longest latency (``high`` of the oldest). A bin's records were created within its ``bin_ms``.
    A histogram holding ``bins`` pairs may have merged neighbouring bins (their pair sits at the
    merged bins' mean): its records are taken to lie between the neighbouring pairs."""
    if not created_bins or committed_ms is None:
        return None, None
    pairs = sorted((float(b["x"]), int(round(b["y"]))) for b in created_bins)
    merged = len(pairs) >= bins
    spans = []
    for i, (x, n) in enumerate(pairs):
        first, last = x, x
        if merged:  # the neighbours' keys bound this pair's (the outermost: mirrored)
            first = pairs[i - 1][0] if i > 0 else x - (pairs[1][0] - x if len(pairs) > 1 else 0)
            last = pairs[i + 1][0] if i + 1 < len(pairs) else x + (x - pairs[i - 1][0] if i > 0 else 0)
        high = max(0.0, committed_ms - first * bin_ms)
        low = max(0.0, committed_ms - (last + 1) * bin_ms)
        if n:
            spans.append((low, high, n))
    return spans, max((h for _, h, _ in spans), default=None)
