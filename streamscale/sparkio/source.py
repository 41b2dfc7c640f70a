"""The Kafka source: a micro-batch's offset ranges cut into tasks by groups of Kafka partitions
(``maxPartitions``), each task's records read by its worker's reader (:mod:`.readers`) and turned
into Arrow batches, values decoded (:mod:`.formats`) with undecodable ones sent to the dead-letter
topic; batch reads for checks and tools."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition

from streamscale.broker.connection import KafkaConnection, connection_level
from streamscale.errors import ConfigError, KafkaClientError
from streamscale.sparkio import formats, readers
from streamscale.sparkio.offsets import EARLIEST, LATEST, limit_offsets, parse_starting
from streamscale.sparkio.options import SourceConfig
from streamscale.sparkio.producers import produce_all, producer

try:  # Spark >= 4.1
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover
    ReadAllAvailable = ReadMaxRows = None

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        pass


_BATCH_ROWS = 20_000


class KafkaInputPartition(InputPartition):
    """One Spark task: ranges [start, end) of one group of Kafka partitions (see readers.group_of),
    and the micro-batch's late-events watermark when the source was asked for it (``batchWatermarkFrom``)."""

    def __init__(
        self,
        group: tuple,
        ranges: tuple[tuple[str, int, int, int], ...],
        watermark_ms: int | None = None,
        claim: tuple | None = None,
    ):
        super().__init__((group, ranges, watermark_ms))
        self.group, self.ranges, self.watermark_ms = group, ranges, watermark_ms
        # (claims key, batch id, task index, every (group, ranges) of the batch): see readers.claim_group
        self.claim = claim

    def chosen(self, cfg: SourceConfig) -> tuple[tuple, tuple]:
        """The group and ranges this task reads: its own, or the one it claimed."""
        if self.claim is None:
            return self.group, self.ranges
        key, batch, index, choices = self.claim
        scores = [readers.positioned(cfg.bootstrap, cfg.kafka, g, r) for g, r in choices]
        return choices[readers.claim_group(key, batch, index, scores)]


def read_ranges(cfg: SourceConfig, group: tuple, ranges, watermark_ms: int | None = None) -> Iterator[pa.RecordBatch]:
    """Yield Arrow record batches holding exactly the records of ``ranges`` (topic, partition,
    start, end), read by this worker's reader for ``group``; ``watermark_ms`` fills the batch
    watermark column when the source has one."""
    schema = cfg.arrow_schema()
    ranges = [r for r in ranges if r[3] > r[2]]
    if not ranges:
        return
    reader = readers.group_reader(cfg.bootstrap, cfg.kafka, group)
    dlq = producer(cfg.bootstrap, connection_level(cfg.kafka)) if cfg.dead_letter_topic else None
    decode_schema = formats.parse_ddl(cfg.value_schema) if cfg.value_format != "raw" else None
    pending: list = []
    rows = 0
    for runs in reader.read(ranges, cfg.poll_timeout_s, cfg.fail_on_data_loss):
        pending.extend(runs)
        rows += sum(len(msgs) for _, msgs in runs)
        # fewer, larger Arrow batches: each one is a round trip to the JVM
        if rows >= _BATCH_ROWS:
            yield _to_arrow(pending, schema, cfg, decode_schema, dlq, watermark_ms)
            pending, rows = [], 0
    if pending:
        yield _to_arrow(pending, schema, cfg, decode_schema, dlq, watermark_ms)
    if dlq is not None:
        remaining = dlq.flush(60)
        if remaining:
            raise KafkaClientError(f"dead-letter topic: {remaining} records not delivered")


def read_range(cfg: SourceConfig, topic: str, partition: int, start: int, end: int):
    """Yield Arrow record batches holding exactly the records of [start, end) of one partition."""
    return read_ranges(cfg, ((topic, partition),), [(topic, partition, start, end)])


def _to_arrow(
    runs, schema: pa.Schema, cfg: SourceConfig, decode_schema, dlq, watermark_ms: int | None = None
) -> pa.RecordBatch:
    """Runs of one partition's messages -> one Arrow batch (topic and partition from the runs)."""
    msgs = [m for _, run in runs for m in run] if len(runs) > 1 else runs[0][1]
    lengths = [len(run) for _, run in runs]
    values = [m.value() for m in msgs]
    ts = np.array([m.timestamp() for m in msgs], dtype=np.int64).reshape(-1, 2)
    cols: list[pa.Array] = []
    if cfg.include_raw:
        cols += [pa.array([m.key() for m in msgs], pa.binary()), pa.array(values, pa.binary())]
    cols += [
        pa.DictionaryArray.from_arrays(
            np.repeat(np.arange(len(runs), dtype=np.int32), lengths), pa.array([t for (t, _), _ in runs], pa.string())
        ).cast(pa.string()),
        pa.array(np.repeat(np.array([p for (_, p), _ in runs], dtype=np.int32), lengths)),
        pa.array([m.offset() for m in msgs], pa.int64()),
        pa.array(ts[:, 1] * 1000, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array(ts[:, 0].astype(np.int32)),
    ]
    if decode_schema is not None:
        decoded, errors = formats.decode(values, cfg.value_format, decode_schema)
        cols += decoded
        cols.append(pa.array(errors, pa.string()))
        if dlq is not None and any(e is not None for e in errors):
            _send_dead_letters(dlq, cfg.dead_letter_topic, msgs, errors)
    if cfg.watermark_from:
        cols.append(pa.array(np.full(len(msgs), 0 if watermark_ms is None else watermark_ms, dtype=np.int64)))
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def _send_dead_letters(dlq, dlq_topic: str, msgs, errors) -> None:
    rows = []
    for m, e in zip(msgs, errors):
        if e is not None:
            headers = [
                ("error", e.encode()),
                ("source.topic", m.topic().encode()),
                ("source.partition", str(m.partition()).encode()),
                ("source.offset", str(m.offset()).encode()),
            ]
            rows.append((m.key(), m.value(), dlq_topic, None, headers))
    produce_all(dlq, dlq_topic, rows)


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options):
        self.cfg = SourceConfig.from_options(options)
        self._access = None
        self._target: dict | None = None
        self._reported: dict | None = None  # end offsets read by the last latestOffset
        self._claims = uuid.uuid4().hex if self.cfg.claim_groups else None

    def __getstate__(self):  # the admin client stays on the driver side
        state = dict(self.__dict__)
        state["_access"] = None
        return state

    @property
    def access(self):
        if self._access is None:
            from streamscale.broker.access import BrokerAccess

            # Only connection settings apply to the admin side; consumer settings would be warned about.
            self._access = BrokerAccess(KafkaConnection(self.cfg.bootstrap, connection_level(self.cfg.kafka)))
        return self._access

    def _isolation(self) -> str:
        return dict(self.cfg.kafka).get("isolation.level", "read_uncommitted")

    def _ends(self) -> dict:
        return {
            t: {str(p): o for p, o in self.access.end_offsets(t, self._isolation()).items()} for t in self.cfg.topics
        }

    def _starts(self) -> dict:
        return {t: {str(p): o for p, o in self.access.start_offsets(t).items()} for t in self.cfg.topics}

    def initialOffset(self) -> dict:
        spec = parse_starting(self.cfg.starting, self.cfg.topics)
        if spec == "earliest":
            return self._starts()
        ends = self._ends()
        if spec == "latest":
            return ends
        starts = self._starts()
        out = {}
        for t in self.cfg.topics:
            out[t] = {}
            for p, e in ends[t].items():
                o = int(spec.get(t, {}).get(p, LATEST))
                out[t][p] = starts[t][p] if o == EARLIEST else e if o == LATEST else o
        return out

    def getDefaultReadLimit(self):
        if self.cfg.max_offsets_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.cfg.max_offsets_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._ends()

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        if self._target is not None:
            ends = self._target
        else:
            ends = self._reported = self._ends()
        start = start or {}
        # Partitions that appeared since `start` are read from their beginning.
        full = {t: {p: max(e, start.get(t, {}).get(p, 0)) for p, e in ends[t].items()} for t in ends}
        for t, parts in start.items():
            for p, o in parts.items():
                full.setdefault(t, {}).setdefault(p, o)
        max_rows = getattr(limit, "max_rows", None)
        if max_rows is None and limit is None and self.cfg.max_offsets_per_trigger:
            max_rows = self.cfg.max_offsets_per_trigger
        if max_rows:
            return limit_offsets(start, full, max_rows)
        return full

    def reportLatestOffset(self):
        # Spark asks right after latestOffset, for the progress report only: the end offsets that
        # call read are that answer (another read costs ~50-100 ms of every micro-batch)
        if self._reported is not None:
            reported, self._reported = self._reported, None
            return reported
        try:
            return self._ends()
        except Exception:  # noqa: BLE001 - only for the progress report
            return None

    def partitions(self, start: dict, end: dict):
        """One task per group of Kafka partitions; groups are fixed (index mod maxPartitions), so a
        worker's reader for a group keeps its prefetched records for the group's next ranges."""
        tps = sorted(((t, int(p)) for t in end for p in end[t]), key=lambda tp: (tp[0], tp[1]))
        groups = min(self.cfg.max_partitions, len(tps)) or 1
        ranges: dict[int, list] = {}
        for i, (t, p) in enumerate(tps):
            s, e = int(start.get(t, {}).get(str(p), 0)), int(end[t][str(p)])
            if e > s:
                ranges.setdefault(readers.group_of(i, groups), []).append((t, p, s, e))
        watermark = None
        if ranges and self.cfg.watermark_from:
            from streamscale.sparkio.checkpoint import late_watermark_for_offsets

            watermark = late_watermark_for_offsets(self.cfg.watermark_from, end)
        choices = tuple(((self.cfg.topics, groups, g), tuple(r)) for g, r in sorted(ranges.items()))
        if self._claims is None or len(choices) < 2:
            return [KafkaInputPartition(g, r, watermark) for g, r in choices]
        batch = hashlib.sha1(repr(choices).encode()).hexdigest()
        return [
            KafkaInputPartition(g, r, watermark, (self._claims, batch, i, choices)) for i, (g, r) in enumerate(choices)
        ]

    def read(self, partition: KafkaInputPartition):
        group, ranges = partition.chosen(self.cfg)
        return read_ranges(self.cfg, group, ranges, partition.watermark_ms)

    def commit(self, end: dict) -> None:
        if self.cfg.commit_group:
            for t, parts in end.items():
                self.access.commit_offsets(self.cfg.commit_group, t, {int(p): int(o) for p, o in parts.items()})

    def stop(self) -> None:
        if self._access is not None:
            self._access.close()
            self._access = None


class KafkaBatchReader(DataSourceReader):
    """Batch read of [startingOffsets, endingOffsets) for checks and tools."""

    def __init__(self, options):
        self.stream = KafkaStreamReader({"startingOffsets": "earliest", **dict(options)})
        ending = {k.lower(): v for k, v in options.items()}.get("endingoffsets", "latest")
        if ending.strip().lower() != "latest":
            raise ConfigError("batch reads support endingOffsets=latest only")

    def partitions(self):
        start = self.stream.initialOffset()
        end = self.stream.latestOffset(start, ReadAllAvailable() if ReadAllAvailable else None)
        self.stream.stop()
        return self.stream.partitions(start, end)

    def read(self, partition):
        return self.stream.read(partition)
