"""A streaming query run to the end of what is there: the progress its benchmarks read."""

from __future__ import annotations

import shutil
import tempfile


def drain(df, total: int) -> list[dict]:
    """Run ``df`` into ``noop`` with ``availableNow`` -> the progress of its batches with rows,
    which must hold ``total`` records."""
    ckpt = tempfile.mkdtemp(prefix="bench-ckpt-")
    try:
        q = df.writeStream.format("noop").option("checkpointLocation", ckpt).trigger(availableNow=True).start()
        q.awaitTermination()
        progress = [p for p in q.recentProgress if p["numInputRows"]]
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
    rows = sum(p["numInputRows"] for p in progress)
    if rows != total:
        raise SystemExit(f"query read {rows:,} of {total:,} records")
    return progress
