"""What a streaming query's progress report says, read the same way by the run and the replay."""

from __future__ import annotations

import json

# a batch's records are counted per bin of this many ms of their Kafka timestamps
# (streamscale.pipelines.base): exact counts while its records span up to 128 bins (6.4 s), merged
# neighbouring bins beyond (histogram_numeric's 128)
CREATED_BIN_MS = 50


def progress_offsets(value) -> dict:
    """A source's offsets in a progress report: a dict (streamscale's source) or the JSON text
    of one (Spark's Kafka source), as {topic: {partition: offset}}."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {}
    return value if isinstance(value, dict) else {}


def commit_ms(progress: dict) -> float | None:
    """When a batch committed, ms since the epoch: its progress timestamp (the trigger's start) plus
    its triggerExecution time."""
    from datetime import datetime

    try:
        start = datetime.fromisoformat(str(progress.get("timestamp")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return start * 1000 + float((progress.get("durationMs") or {}).get("triggerExecution", 0))


def processing_cdf(created_bins, committed_ms: float | None, bin_ms: float) -> tuple[list[int] | None, float | None]:
    """A batch's records at or below each latency edge (streamscale.pipelines.output.LATENCY_EDGES_MS)
    from their Kafka timestamp to the batch's commit, and the longest such latency, from the counts
    per ``bin_ms`` of their timestamps (histogram_numeric's pairs). A record is taken at its bin's
    start, the oldest its bin may hold: the latencies come out at or above the true ones."""
    import numpy as np

    from streamscale.pipelines.output import LATENCY_EDGES_MS

    if not created_bins or committed_ms is None:
        return None, None
    counts = np.zeros(len(LATENCY_EDGES_MS) + 1)
    edges = np.asarray(LATENCY_EDGES_MS)
    longest = 0.0
    for b in created_bins:
        latency = max(0.0, committed_ms - float(b["x"]) * bin_ms)
        longest = max(longest, latency)
        counts[int(np.searchsorted(edges, latency, side="left"))] += int(round(b["y"]))
    return [int(x) for x in np.cumsum(counts[:-1])], longest
