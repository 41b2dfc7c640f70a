"""What a streaming query's checkpoint says about a micro-batch: its event-time watermark.

Spark writes ``<checkpoint>/offsets/<batch id>`` before it runs the batch: a version line, the
batch metadata (``batchWatermarkMs`` is the watermark the batch's stateful operators use: what
they drop as late and what they evict) and one line of offsets per source. A replayed batch
reads the same file, so anything derived from it is the same after a restart.

Read with pyarrow's file systems, so a checkpoint on HDFS or S3 works as well as a local one.
"""

from __future__ import annotations

import json
import os

from streamscale.errors import SparkError


def _fs(checkpoint: str):
    from pyarrow import fs

    if checkpoint.startswith("file:"):  # Hadoop's file:/x and file:///x alike
        return fs.LocalFileSystem(), os.path.abspath("/" + checkpoint[len("file:") :].lstrip("/"))
    if "://" in checkpoint:
        return fs.FileSystem.from_uri(checkpoint)
    return fs.LocalFileSystem(), os.path.abspath(checkpoint)


def _lines(filesystem, path: str) -> list[str]:
    with filesystem.open_input_stream(path) as f:
        return f.read().decode("utf-8").splitlines()


def _watermark(metadata: dict) -> int:
    return int(metadata.get("batchWatermarkMs", 0))


def batch_metadata(checkpoint: str, batch_id: int) -> dict:
    """The metadata line of batch ``batch_id`` (``batchWatermarkMs``, ``batchTimestampMs``, ...)."""
    filesystem, root = _fs(checkpoint)
    try:
        lines = _lines(filesystem, f"{root}/offsets/{batch_id}")
    except (FileNotFoundError, OSError) as e:
        raise SparkError(f"checkpoint {checkpoint}: no offsets for batch {batch_id} ({e})") from None
    return json.loads(lines[1])


def batch_watermark_ms(checkpoint: str, batch_id: int) -> int:
    return _watermark(batch_metadata(checkpoint, batch_id))


def watermark_for_offsets(checkpoint: str, end: dict) -> int:
    """The watermark of the newest batch whose offsets for one source are ``end``.

    Called while that batch is being planned: its offsets file is then the newest one (an older
    batch can end at the same offsets, e.g. before a batch without data, and is older)."""
    filesystem, root = _fs(checkpoint)
    from pyarrow import fs

    try:
        infos = filesystem.get_file_info(fs.FileSelector(f"{root}/offsets", allow_not_found=True))
    except OSError as e:
        raise SparkError(f"checkpoint {checkpoint}: cannot list its offsets ({e})") from None
    ids = sorted((int(i.base_name) for i in infos if i.base_name.isdigit()), reverse=True)
    want = json.loads(json.dumps(end))
    for batch_id in ids:
        lines = _lines(filesystem, f"{root}/offsets/{batch_id}")
        for line in lines[2:]:
            try:
                if json.loads(line) == want:
                    return _watermark(json.loads(lines[1]))
            except ValueError:
                continue  # "-": a source without offsets in this batch
    raise SparkError(f"checkpoint {checkpoint}: no batch ends at offsets {end}: is it this query's?")
