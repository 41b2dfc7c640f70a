"""A running pipeline: its Spark queries, and the metrics the benchmark needs from their progress
(rows, batch times, late and malformed records, output latency), batch by batch; and the temporary
checkpoints runs leave behind, removed when they stop."""

from __future__ import annotations

import atexit
import logging
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from streamscale.errors import SparkError, WaitTimeout
from streamscale.pipelines.progress import CREATED_BIN_MS, commit_ms, processing_latencies, source_offsets
from streamscale.processes import remove_at_exit

log = logging.getLogger(__name__)

_EXCHANGE = re.compile(r"(?<![A-Za-z])(Exchange|ShuffleExchange)\s")


def count_shuffles(plan: str) -> int:
    """Shuffle stages in a physical plan: Exchange nodes that are not broadcasts."""
    return len(_EXCHANGE.findall(plan))


def _as_dict(row) -> dict:
    if row is None:
        return {}
    return row.asDict() if hasattr(row, "asDict") else dict(row)


@dataclass
class BatchMetrics:
    batch_id: int
    timestamp: str
    input_rows: int
    input_rate: float
    processed_rate: float
    batch_ms: int
    end_offsets: dict
    dropped_late: int
    malformed: int
    output_records: int | None
    max_latency_ms: float | None
    avg_latency_ms: float | None
    dropped_contributions: int = 0  # window contributions dropped (UC3: up to 3 per record)
    unregistered: int = 0  # UC4: readings of sensors not in the registry (not late)
    late_counted: bool = True  # False: no late accounting (Spark's builtin Kafka source)
    latency_cdf: list | None = None  # output rows at or below each latency edge (pipelines.output)
    # (low, high, records): latencies from their Kafka timestamp to the batch's commit
    processing_latency: list | None = None
    processing_max_ms: float | None = None  # the batch's longest such latency


_TEMP_CHECKPOINTS: set[str] = set()  # checkpoints temporary_checkpoint made, removed when their run stops
# Removed when their run stopped; until its Spark session stops, the state-store maintenance thread
# may still write a snapshot into one (the demo's test found state/0/0/.11.snapshot.crc left behind)
_REMOVED_CHECKPOINTS: set[str] = set()


def temporary_checkpoint(prefix: str, where: str | None = None) -> str:
    """A checkpoint directory of streamscale's own (in ``where``, default the temporary folder),
    removed when the run that uses it stops (and at exit at the latest)."""
    path = tempfile.mkdtemp(prefix=prefix, dir=where)
    _TEMP_CHECKPOINTS.add(path)
    remove_at_exit(path)
    return path


def local_folder(root: str) -> str | None:
    """The folder a checkpoint root names on this machine's file system (a path, ``file:/p`` or
    ``file:///p``); None for any other Hadoop URI (``hdfs://``, ``s3a://``)."""
    parts = urlsplit(root)
    if parts.scheme == "file":
        return parts.path
    return root if not parts.scheme else None


def run_checkpoint(prefix: str, root: str) -> str:
    """A run's checkpoint under ``root``: a folder (or ``file:`` URI) gets a temporary one of
    streamscale's own, removed when the run stops; any other Hadoop URI (``hdfs://``, ``s3a://``)
    a fresh path under it, which Spark creates and which stays (streamscale reaches no file system
    but the driver's)."""
    local = local_folder(root)
    if local is not None:
        os.makedirs(local, exist_ok=True)
        return temporary_checkpoint(prefix, local)
    return f"{root.rstrip('/')}/{prefix}{uuid.uuid4().hex[:12]}"


def settle_jobs(queries, timeout: float = 30.0) -> None:
    """Cancel what the stopped queries still run, and wait (up to ``timeout``) until it ended.

    A query stopped while it submits a batch's job misses that job ("Failed to cancel job group
    ... Cannot find active jobs"): its tasks run on, reading topics that the caller may delete
    next. A Kafka read of a deleted topic then retries for a minute, holding a task slot, and on
    one core the next query's first batch waited behind it for the whole of an experiment."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if not queries or sc is None:
        return
    try:
        groups = [str(q.runId) for q in queries]
        for g in groups:
            sc.cancelJobGroup(g)
        tracker = sc.statusTracker()

        def running() -> bool:
            for g in groups:
                for j in tracker.getJobIdsForGroup(g):
                    info = tracker.getJobInfo(j)
                    if info is not None and info.status == "RUNNING":
                        return True
            return False

        deadline = time.monotonic() + timeout
        while running() and time.monotonic() < deadline:
            time.sleep(0.1)  # polling the scheduler's state, not waiting blindly
    except Exception as exc:  # noqa: BLE001 - a context stopping meanwhile has nothing left running
        log.debug("could not settle the stopped queries' jobs: %s", exc)


def remove_checkpoint(path: str) -> None:
    """Remove a temporary checkpoint now, and again in :func:`remove_stopped_checkpoints`."""
    shutil.rmtree(path, ignore_errors=True)
    _REMOVED_CHECKPOINTS.add(path)


def remove_stopped_checkpoints() -> None:
    """Remove again what late writers put into the temporary checkpoints of stopped runs: call
    after the Spark session stopped (its maintenance thread is gone then); also at exit."""
    for path in list(_REMOVED_CHECKPOINTS):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            _REMOVED_CHECKPOINTS.discard(path)


atexit.register(remove_stopped_checkpoints)


@dataclass
class PipelineRun:
    """A started pipeline: its Spark queries and metrics collected from their progress."""

    name: str
    queries: list
    main_query: object
    checkpoint: str = ""
    writer: object | None = None
    connector: str = ""  # the Kafka connector the run reads (and writes) with: python or spark
    # (BrokerAccess, group): each finished batch's end offsets are committed to the group, so a lag
    # sampler sees the query's progress (Spark's connector commits nothing of its own; ours does)
    commit_to: tuple | None = None
    # late records of a run on Spark's connector: a callable counting them from the batches'
    # ranges (streamscale.pipelines.replay), called when the run ends
    replay: object | None = None
    # a user's job: its dropped records are the rows Spark's stateful operators dropped as behind
    # the watermark (numRowsDroppedByWatermark), Spark's own count, not streamscale's accounting
    state_drops: bool = False
    batches: list[BatchMetrics] = field(default_factory=list)
    _seen: set = field(default_factory=set)
    _to_replay: list = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def poll(self) -> list[BatchMetrics]:
        """New batches since the last poll (also kept in ``batches``)."""
        new = []
        with self._lock:
            for p in self.main_query.recentProgress:
                if p["batchId"] in self._seen:
                    continue
                self._seen.add(p["batchId"])
                m = self._metrics(p)
                self.batches.append(m)
                new.append(m)
        if new and self.commit_to is not None:
            self._commit(new[-1].end_offsets)
        return new

    def _commit(self, end_offsets: dict) -> None:
        access, group = self.commit_to
        for topic, parts in (end_offsets or {}).items():
            if isinstance(parts, dict) and parts:
                access.commit_offsets(group, topic, {int(p): int(o) for p, o in parts.items()})

    def _metrics(self, p: dict) -> BatchMetrics:
        from streamscale.pipelines.accounting import ACCOUNTING_OBSERVATION
        from streamscale.pipelines.output import OUTPUT_OBSERVATION, batch_output, streamed_written_ms

        obs = p.get("observedMetrics") or {}
        # one observation per input topic ("input", or "input.NAME" of several): their counts add up
        inputs = [_as_dict(v) for k, v in obs.items() if k == "input" or k.startswith("input.")]
        late = _as_dict(obs.get(ACCOUNTING_OBSERVATION))
        out = self.writer.batches.pop(p["batchId"], None) if self.writer is not None else None
        if out is None and obs.get(OUTPUT_OBSERVATION) is not None:  # rows streamed into the sink
            out = batch_output(_as_dict(obs[OUTPUT_OBSERVATION]), streamed_written_ms(p))
        replayed = None
        if self.replay is not None:
            from streamscale.pipelines.replay import batch_range

            replayed = batch_range(p, self.checkpoint)
            if replayed is not None:
                self._to_replay.append(replayed)
        batch_ms = int(p.get("durationMs", {}).get("triggerExecution", 0))
        spans, longest = None, None
        for inp in inputs:  # each input's records from their own Kafka timestamps
            got, high = processing_latencies(inp.get("created_bins"), commit_ms(p), CREATED_BIN_MS)
            if got is not None:
                spans, longest = (spans or []) + got, max(high, longest if longest is not None else high)
        return BatchMetrics(
            batch_id=p["batchId"],
            timestamp=p["timestamp"],
            input_rows=p.get("numInputRows", 0),
            input_rate=float(p.get("inputRowsPerSecond") or 0.0),
            processed_rate=float(p.get("processedRowsPerSecond") or 0.0),
            batch_ms=batch_ms,
            end_offsets=source_offsets(p.get("sources") or []),
            dropped_late=(
                sum(int(op.get("numRowsDroppedByWatermark") or 0) for op in p.get("stateOperators") or [])
                if self.state_drops
                else int(late.get("dropped_records") or 0)
            ),
            malformed=sum(int(inp.get("malformed") or 0) for inp in inputs),
            output_records=out.output_records if out else None,
            max_latency_ms=out.max_latency_ms if out else None,
            avg_latency_ms=out.avg_latency_ms if out else None,
            dropped_contributions=int(late.get("dropped_contributions") or 0),
            unregistered=int(late.get("unregistered") or 0),
            late_counted=(
                replayed is None
                if self.replay is not None
                else (self.writer is None or bool(late) or not p.get("numInputRows"))
            ),
            latency_cdf=out.latency_cdf if out else None,
            processing_latency=spans,
            processing_max_ms=longest,
        )

    def count_late(self) -> None:
        """Count the late records of the batches that await a replay (Spark's connector)."""
        pending, self._to_replay = self._to_replay, []
        if not pending:
            return
        try:
            counted = self.replay(pending)
        except Exception as exc:  # noqa: BLE001 - the run's results stand; its late records stay "not counted"
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # not a JVM stack trace
            log.warning("late records of %s not counted: the replay failed: %s", self.name, first[:300])
            return
        for b in self.batches:
            c = counted.get(b.batch_id)
            if c is not None and not b.late_counted:
                b.dropped_late = c["dropped_records"]
                b.dropped_contributions = c["dropped_contributions"]
                b.unregistered = c["unregistered"]
                b.late_counted = True

    def totals(self) -> dict:
        self.poll()
        return {
            "batches": len(self.batches),
            "input_rows": sum(b.input_rows for b in self.batches),
            "dropped_late": sum(b.dropped_late for b in self.batches),
            "dropped_contributions": sum(b.dropped_contributions for b in self.batches),
            "unregistered": sum(b.unregistered for b in self.batches),
            "malformed": sum(b.malformed for b in self.batches),
            "late_counted": all(b.late_counted for b in self.batches),
            "connector": self.connector,
        }

    def shuffle_stages(self) -> int:
        return count_shuffles(self.physical_plan())

    def physical_plan(self) -> str:
        # what StreamingQuery.explain() prints, as a string; known once a batch has run
        plan = self.main_query._jsq.explainInternal(False)
        if "No physical plan" in plan:
            raise SparkError("no batch has run yet: the physical plan is known after the first")
        return plan

    def exception(self):
        for q in self.queries:
            if q.exception() is not None:
                return q.exception()
        return None

    def await_available(self, timeout: float = 600) -> None:
        """For availableNow runs: wait until every query finished, raise if one failed."""
        deadline = time.monotonic() + timeout
        for q in self.queries:
            q.awaitTermination(max(1.0, deadline - time.monotonic()))
            if q.isActive:
                raise WaitTimeout(f"{self.name}: query still running after {timeout} s")
        self.poll()
        self.count_late()
        if self.writer is not None:
            self.writer.close()

    def stop(self) -> None:
        for q in self.queries:
            try:
                q.stop()
            except Exception:  # noqa: BLE001 - stopping a failed query
                pass
        settle_jobs(self.queries)
        self.poll()
        if self._to_replay and self.exception() is None:
            self.count_late()
        if self.writer is not None:
            self.writer.close()
        if self.commit_to is not None:
            self.commit_to[0].close()
            self.commit_to = None
        if self.checkpoint in _TEMP_CHECKPOINTS:  # ours, not the user's: nothing left in $TMPDIR
            _TEMP_CHECKPOINTS.discard(self.checkpoint)
            remove_checkpoint(self.checkpoint)
