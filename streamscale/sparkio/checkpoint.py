"""What a streaming query's checkpoint says about a micro-batch: its event-time watermarks.

Spark writes ``<checkpoint>/offsets/<batch id>`` before it runs the batch: a version line, the
batch metadata and one line of offsets per source. A replayed batch reads the same file, so
anything derived from it is the same after a restart.

A stateful operator uses two watermarks in batch N (Spark 3.5+, ``IncrementalExecution`` with the
``WatermarkPropagator``): state is evicted (and append-mode windows emitted) with batch N's own
``batchWatermarkMs``, while input rows are dropped as late with the *previous* batch's,
``batchWatermarkMs`` of ``offsets/<N-1>`` (``MicroBatchExecution.runBatch`` reads it from the log,
so it is the same after a restart; 0 when there is no such entry, as for batch 0).

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


def late_events_watermark_ms(checkpoint: str, batch_id: int) -> int:
    """The watermark below which Spark drops the input rows of batch ``batch_id`` as late:
    ``batchWatermarkMs`` of the batch before it, 0 when the log has no entry for that one."""
    if batch_id <= 0:
        return 0
    filesystem, root = _fs(checkpoint)
    try:
        lines = _lines(filesystem, f"{root}/offsets/{batch_id - 1}")
    except FileNotFoundError:
        return 0
    except OSError as e:
        if _missing(filesystem, f"{root}/offsets/{batch_id - 1}"):
            return 0
        raise SparkError(f"checkpoint {checkpoint}: cannot read offsets of batch {batch_id - 1} ({e})") from None
    return _watermark(json.loads(lines[1]))


def initial_offsets(checkpoint: str) -> dict:
    """The offsets the query's (one) source started its first batch at, as Spark's Kafka source
    wrote them to ``sources/0/0`` (a version line, then one JSON object); {} when absent."""
    filesystem, root = _fs(checkpoint)
    try:
        lines = _lines(filesystem, f"{root}/sources/0/0")
    except OSError:  # FileNotFoundError included: no such log (another source, a new checkpoint)
        return {}
    for line in reversed(lines):
        try:
            parsed = json.loads(line.strip().lstrip("\x00"))
        except ValueError:
            continue
        if isinstance(parsed, dict):
            return parsed
    return {}


def _missing(filesystem, path: str) -> bool:
    from pyarrow import fs

    return filesystem.get_file_info(path).type == fs.FileType.NotFound


def late_watermark_for_offsets(checkpoint: str, end: dict) -> int:
    """The late-events watermark of the batch whose offsets are ``end`` (see the module notes)."""
    return late_events_watermark_ms(checkpoint, batch_for_offsets(checkpoint, end))


def batch_for_offsets(checkpoint: str, end: dict) -> int:
    """The id of the newest batch whose offsets for one source are ``end``.

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
                    return batch_id
            except ValueError:
                continue  # "-": a source without offsets in this batch
    raise SparkError(f"checkpoint {checkpoint}: no batch ends at offsets {end}: is it this query's?")
