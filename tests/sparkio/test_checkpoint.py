"""The batch watermark read from a checkpoint's offsets log (the late-record count depends on it)."""

from __future__ import annotations

import json

import pytest

from streamscale.errors import StreamscaleError
from streamscale.sparkio.checkpoint import batch_watermark_ms, watermark_for_offsets


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
