"""The batch watermark read from a checkpoint's offsets log (the late-record count depends on it)."""

from __future__ import annotations

import json

import pytest

from streamscale.errors import StreamscaleError
from streamscale.sparkio.checkpoint import (
    batch_for_offsets,
    batch_watermark_ms,
    late_events_watermark_ms,
    late_watermark_for_offsets,
)


def watermark_for_offsets(checkpoint: str, end: dict) -> int:
    """The eviction watermark of the batch whose offsets are ``end``."""
    return batch_watermark_ms(checkpoint, batch_for_offsets(checkpoint, end))


def write_batch(root, batch_id, watermark, *sources):
    d = root / "offsets"
    d.mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": watermark, "batchTimestampMs": 1, "conf": {}}
    lines = ["v1", json.dumps(meta)] + [s if isinstance(s, str) else json.dumps(s) for s in sources]
    (d / str(batch_id)).write_text("\n".join(lines))


def test_the_newest_batch_ending_at_the_offsets_gives_the_watermark(tmp_path):
    write_batch(tmp_path, 0, 0, {"t": {"0": 5, "1": 7}})
    write_batch(tmp_path, 1, 1000, {"t": {"0": 9, "1": 7}})
    write_batch(tmp_path, 2, 2500, {"t": {"0": 9, "1": 7}})  # a batch for the watermark alone: same offsets
    write_batch(tmp_path, 10, 4000, "-", {"t": {"0": 12, "1": 7}})  # another source first, none here
    (tmp_path / "offsets" / ".10.tmp").write_text("junk")
    assert watermark_for_offsets(str(tmp_path), {"t": {"0": 5, "1": 7}}) == 0
    assert watermark_for_offsets(str(tmp_path), {"t": {"1": 7, "0": 9}}) == 2500
    assert watermark_for_offsets(str(tmp_path), {"t": {"0": 12, "1": 7}}) == 4000  # 10 > 2: numeric order
    assert batch_watermark_ms(str(tmp_path), 1) == 1000
    with pytest.raises(StreamscaleError, match="no batch ends at offsets"):
        watermark_for_offsets(str(tmp_path), {"t": {"0": 99}})
    with pytest.raises(StreamscaleError, match="no offsets for batch 7"):
        batch_watermark_ms(str(tmp_path), 7)


def test_a_checkpoint_uri_is_read_through_pyarrow(tmp_path):
    write_batch(tmp_path, 3, 77, {"t": {"0": 1}})
    assert watermark_for_offsets(f"file://{tmp_path}", {"t": {"0": 1}}) == 77
    assert watermark_for_offsets(f"file:{tmp_path}", {"t": {"0": 1}}) == 77  # Hadoop's spelling


def test_late_events_use_the_previous_batchs_watermark(tmp_path):
    # Spark drops batch N's late rows with offsets/<N-1>'s batchWatermarkMs; 0 for batch 0 and
    # where the log has no entry for N-1 (purged)
    write_batch(tmp_path, 0, 0, {"t": {"0": 5}})
    write_batch(tmp_path, 1, 1000, {"t": {"0": 9}})
    write_batch(tmp_path, 2, 2500, {"t": {"0": 12}})
    write_batch(tmp_path, 5, 9000, {"t": {"0": 20}})
    assert [late_events_watermark_ms(str(tmp_path), b) for b in (0, 1, 2, 5)] == [0, 0, 1000, 0]
    assert late_watermark_for_offsets(str(tmp_path), {"t": {"0": 12}}) == 1000  # batch 2's: batch 1's watermark
    assert watermark_for_offsets(str(tmp_path), {"t": {"0": 12}}) == 2500  # its own, for eviction
