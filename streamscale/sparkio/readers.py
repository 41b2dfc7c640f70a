"""Worker-side Kafka readers of the source: one consumer per task group, kept across micro-batches.

Why it is built this way (measured with librdkafka 2.x):

* Pausing and resuming a partition costs librdkafka 0.7-1 s before the next record arrives (the
  resume waits out a backoff that started at the pause), and a fresh assignment about as long. A
  reader that is simply left running has the next range already in its queue: 2 ms to the first
  record. So readers are never paused; records prefetched beyond a range stay queued (in librdkafka
  or in this module's per-partition buffers) for the next range, without a seek.
* A Spark task reads one *group* of Kafka partitions (see :func:`group_of`), and a Python worker
  keeps one consumer per group. The broker then sees one fetch request per group and
  ``fetch.wait.max.ms`` per worker, whatever the number of partitions, and idle readers at the
  log end cost it little (the broker holds their fetch until records land or 50 ms pass).
* Spark gives a task to whichever Python worker is free, so a worker's reader may be behind the
  range it is asked for (another worker read the ranges in between). Up to ``SKIP_LIMIT`` records
  are skipped from the queue (cheaper than a seek, which drops the prefetched records); beyond
  that, or backwards, the partition seeks.

Exactness: a range [start, end) yields every record with start <= offset < end exactly once, in
offset order per partition; a read stops on the consumer's position, never on
"offset == end - 1", because transaction markers leave offset gaps.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
import time
import uuid
from bisect import bisect_left
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import KafkaClientError

SKIP_LIMIT = 20_000  # records per partition skipped from the queue rather than seeking
CONSUME_BATCH = 20_000  # records asked of librdkafka per call
IDLE_CLOSE_S = 600.0  # a reader unused this long is closed (its partitions went elsewhere)

Range = tuple[str, int, int, int]  # topic, partition, start, end (exclusive)


def _offset(m) -> int:
    return m.offset()


def group_of(index: int, groups: int) -> int:
    """Group of the index-th (topic, partition) in sorted order: fixed across micro-batches, so a
    worker's reader for a group keeps serving the same partitions."""
    return index % groups


class GroupReader:
    """A consumer for one group of partitions, assigned partition by partition as ranges ask."""

    def __init__(self, conn: KafkaConnection, defaults: dict):
        self.consumer = conn.consumer(defaults=defaults)
        self.buffers: dict[tuple[str, int], deque] = {}
        self.expect: dict[tuple[str, int], int] = {}  # next offset the queue continues with; -1 unknown
        self.last_used = time.monotonic()

    # -- positioning ----------------------------------------------------------------------
    def _position(self, tp: tuple[str, int], start: int) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        if tp not in self.buffers:
            self.consumer.incremental_assign([TopicPartition(tp[0], tp[1], start)])
            self.buffers[tp] = deque()
            self.expect[tp] = start
            return
        exp = self.expect[tp]
        if exp == start or (exp >= 0 and 0 < start - exp <= SKIP_LIMIT):
            return  # continue from the queue (records below start are dropped as read)
        self.buffers[tp].clear()
        try:
            self.consumer.seek(TopicPartition(tp[0], tp[1], start))
        except KafkaException:  # not fetching yet: re-assign the partition at the offset
            self.consumer.incremental_unassign([TopicPartition(tp[0], tp[1])])
            self.consumer.incremental_assign([TopicPartition(tp[0], tp[1], start)])
        self.expect[tp] = start

    # -- reading --------------------------------------------------------------------------
    # A partition's buffer is a deque of items in offset order: lists of consecutive data messages
    # as consume() returned them, or an int, the log end an end-of-partition event reported. Whole
    # lists inside a range move on without touching each message.
    def _drain(self, tp, lo: int, hi: int, out: list) -> int:
        """Move the buffered records of [lo, hi) of ``tp`` to ``out``; return the new position."""
        buf = self.buffers[tp]
        while buf and lo < hi:
            item = buf[0]
            if isinstance(item, int):  # end of partition: nothing between lo and the log end
                buf.popleft()
                lo = max(lo, min(item, hi))
                continue
            first, last = item[0].offset(), item[-1].offset()
            if first >= hi:
                return hi  # the gap up to hi holds no data (transaction markers)
            if first >= lo and last < hi:
                buf.popleft()
                out.append((tp, item))
                lo = last + 1
                continue
            i = bisect_left(item, lo, key=_offset) if first < lo else 0
            j = bisect_left(item, hi, key=_offset) if last >= hi else len(item)
            if j > i:
                out.append((tp, item[i:j]))
                lo = item[j - 1].offset() + 1
            if j < len(item):
                buf[0] = item[j:]
                return hi
            buf.popleft()
        return lo

    def _fill(self, msgs, pos, pending, fail_on_data_loss: bool) -> None:
        from confluent_kafka import KafkaError

        runs: dict = {}
        for m in msgs:
            err = m.error()
            if err is None:
                key = (m.topic(), m.partition())
                run = runs.get(key)
                if run is None:
                    runs[key] = [m]
                else:
                    run.append(m)
            elif err.code() == KafkaError._PARTITION_EOF:
                key = (m.topic(), m.partition())
                buf = self.buffers.get(key)
                if buf is not None:
                    if key in runs:
                        buf.append(runs.pop(key))
                    buf.append(m.offset())
            else:
                self._on_error(m, err, pos, pending, fail_on_data_loss)
        for key, run in runs.items():
            buf = self.buffers.get(key)
            if buf is not None:
                buf.append(run)

    def read(self, ranges: Sequence[Range], poll_timeout_s: float, fail_on_data_loss: bool) -> Iterator[list]:
        """Yield lists of ((topic, partition), [messages]) holding exactly the records of ``ranges``
        (one range per partition), in offset order per partition."""
        from confluent_kafka import TopicPartition

        self.last_used = time.monotonic()
        pos: dict[tuple[str, int], int] = {}
        end: dict[tuple[str, int], int] = {}
        for t, p, s, e in ranges:
            if e > s:
                self._position((t, p), s)
                pos[(t, p)], end[(t, p)] = s, e
        pending = set(pos)
        last_progress = time.monotonic()
        try:
            while pending:
                out: list = []
                for tp in list(pending):
                    pos[tp] = self._drain(tp, pos[tp], end[tp], out)
                    if pos[tp] >= end[tp]:
                        pending.discard(tp)
                        self.expect[tp] = end[tp]
                if out:
                    last_progress = time.monotonic()
                    yield out
                if not pending:
                    break
                msgs = self.consumer.consume(num_messages=CONSUME_BATCH, timeout=0.02)
                self._fill(msgs, pos, pending, fail_on_data_loss)
                if not msgs:
                    # Transaction markers are invisible to the application; the consumer's position
                    # still moves past them, so ask it rather than waiting for offset end - 1.
                    for tp, got in zip(
                        sorted(pending), self.consumer.position([TopicPartition(t, p) for t, p in sorted(pending)])
                    ):
                        if not self.buffers[tp] and got.offset >= end[tp]:
                            pending.discard(tp)
                            pos[tp] = self.expect[tp] = end[tp]
                    if pending and time.monotonic() - last_progress > poll_timeout_s:
                        t, p = sorted(pending)[0]
                        raise KafkaClientError(
                            f"no progress reading {t}[{p}] at offset {pos[(t, p)]} (want end {end[(t, p)]}) "
                            f"for {poll_timeout_s:.0f} s: is the broker reachable?"
                        )
        except BaseException:
            for tp in end:  # state unknown after a failure: the next read of these partitions seeks
                self.expect[tp] = -1
            raise

    def _on_error(self, m, err, pos, pending, fail_on_data_loss: bool) -> None:
        from confluent_kafka import KafkaError, TopicPartition

        tp = (m.topic(), m.partition()) if m.topic() else None
        if err.code() == KafkaError._AUTO_OFFSET_RESET and tp in self.buffers:
            if tp not in pending:
                self.expect[tp] = -1  # not read now: seek when it is
                return
            low = self.consumer.get_watermark_offsets(TopicPartition(*tp), timeout=10)[0]
            if fail_on_data_loss or low <= pos[tp]:
                raise KafkaClientError(
                    f"{tp[0]}[{tp[1]}]: offset {pos[tp]} is no longer on the broker (log starts at {low}): "
                    "data loss; set failOnDataLoss=false to skip ahead"
                )
            pos[tp] = low  # records before the log start are gone: skip them, as asked
            self.expect[tp] = -1
            self._position(tp, low)
            return
        where = f"{tp[0]}[{tp[1]}]" if tp else "Kafka"
        raise KafkaClientError(f"reading {where}: {err.str()}")

    def close(self) -> None:
        self.consumer.close()


def reader_conf(conn: KafkaConnection) -> dict:
    """The reader settings of the connection, with the source's own. fetch.wait.max.ms 50: an idle
    reader at the log end asks again that often (librdkafka's 500 ms default left the demo's UC2 on
    one core failing 16,000 records/s that it held at 50 ms; 5 ms cost the broker ~50 % of a CPU
    per idle reader). Defaults: the source's ``kafka.*`` options (the connection's properties)
    override them."""
    return conn.reader_settings(
        f"streamscale-reader-{uuid.uuid4().hex[:12]}",
        **{
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error",
            "fetch.wait.max.ms": 50,
            "max.partition.fetch.bytes": 8 * 1024 * 1024,
            "queued.max.messages.kbytes": 32 * 1024,
        },
    )


_LOCK = threading.Lock()
_READERS: dict[tuple, GroupReader] = {}


def group_reader(bootstrap: str, kafka: tuple[tuple[str, str], ...], group: tuple) -> GroupReader:
    """The worker's reader for a group (created once; unused readers are closed after a while)."""
    key = (bootstrap, kafka, group)
    now = time.monotonic()
    with _LOCK:
        for k in [k for k, r in _READERS.items() if k != key and now - r.last_used > IDLE_CLOSE_S]:
            _close(_READERS.pop(k))
        r = _READERS.get(key)
        if r is None:
            conn = KafkaConnection(bootstrap, kafka)  # kafka.* options of Spark, checked by the source
            r = _READERS[key] = GroupReader(conn, reader_conf(conn))
        return r


def _close(r: GroupReader) -> None:
    try:
        r.close()
    except Exception:  # noqa: BLE001 - closing at shutdown; nothing to report to
        pass


def close_readers() -> None:
    with _LOCK:
        for r in _READERS.values():
            _close(r)
        _READERS.clear()


# -- claims: which group a task reads, when every executor is on this machine --------------------
# Spark hands a task to whichever Python worker is idle first, so with fixed groups about half the
# tasks land in a worker whose reader did not read the group's previous range and must skip or seek
# (0.25-0.45 s instead of ~0.2 s for a 100k batch). With claims, a micro-batch's tasks
# share its list of groups and each task takes the free group its worker is positioned for. The
# claims of a batch are kept in a file under an exclusive lock, so a retried task reads the group its
# first attempt claimed and every group is read by exactly one task. The file is visible only on one
# machine: the source enables this for local masters (option claimGroups) and nowhere else.


def positioned(bootstrap: str, kafka: tuple, group: tuple, ranges: Sequence[Range]) -> int:
    """How many of ``ranges`` this worker's reader for ``group`` continues without skip or seek."""
    with _LOCK:
        r = _READERS.get((bootstrap, kafka, group))
    if r is None:
        return 0
    return sum(1 for t, p, s, _e in ranges if r.expect.get((t, p)) == s)


CLAIMS_KEEP_S = 6 * 3600.0  # claims of a query not touched this long are removed (its query is gone)


def claims_dir() -> Path:
    """In the Spark application's own files directory (the same for the driver and every Python
    worker of a local master, removed by Spark with the application), else the temp directory."""
    root = None
    try:
        from pyspark.core.files import SparkFiles

        if SparkFiles._is_running_on_worker:
            root = SparkFiles._root_directory
        elif SparkFiles._sc is not None:
            root = SparkFiles.getRootDirectory()
    except Exception:  # noqa: BLE001 - no Spark here (tests, tools): the temp directory
        root = None
    return Path(root or tempfile.gettempdir()) / "streamscale-claims"


def claims_path(key: str) -> Path:
    return claims_dir() / f"{key}.json"


def claim_group(key: str, batch: str, index: int, scores: Sequence[int]) -> int:
    """The choice (index into the batch's groups) that task ``index`` of micro-batch ``batch`` reads:
    the one it claimed before (a retry), else the free one with the best score (ties: its own)."""
    import fcntl

    path = claims_path(key)
    d = path.parent
    d.mkdir(parents=True, exist_ok=True)
    # One lock for every query's claims (held for microseconds): state files can then be removed
    # safely, which a lock file per query would not allow.
    with open(d / "lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        try:
            state = json.loads(path.read_text())
        except (OSError, ValueError):
            state = {}
            _sweep(d)  # a query's first batch: remove what queries that are gone left behind
        if state.get("batch") != batch:  # batches run one after another: only the current one is kept
            state = {"batch": batch, "claims": {}}
        claims: dict[str, int] = state["claims"]
        if str(index) in claims:
            return claims[str(index)]
        taken = set(claims.values())
        # a batch has as many tasks as groups, each task claims once: a new index always finds one free
        free = [i for i in range(len(scores)) if i not in taken]
        best = max(free, key=lambda i: (scores[i], i == index, -i))
        claims[str(index)] = best
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, path)
        return best


def _sweep(d: Path) -> None:
    # Spark ends a query's planner process without always calling the reader's stop().
    cutoff = time.time() - CLAIMS_KEEP_S
    for f in d.glob("*.json"):
        try:
            if f.stat().st_mtime < cutoff:
                f.unlink()
        except OSError:
            pass
