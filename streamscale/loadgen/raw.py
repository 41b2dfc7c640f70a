"""A sample of a real topic, byte for byte: :func:`capture` keeps each record's key, value bytes,
headers and timestamp in a Parquet file; :class:`RawSample` replays them (``records: {replay:
FILE, raw: true}``, ``streamscale generate --replay FILE``) at the load's rate, cycling, with the
Kafka timestamp the send time. ``key_copies: K`` appends ``#1`` ... ``#K-1`` to the raw keys, record i
carrying copy i mod K, as for described fields.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from streamscale.errors import ConfigError

COLUMNS = ("key", "value", "headers", "timestamp", "partition", "offset")


def _bytes(v) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, bytes):
        return v
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, float) and v != v:  # pandas' missing value
        return None
    return bytes(v)


def _headers(v) -> list[tuple[str, bytes]] | None:
    if v is None or (isinstance(v, float) and v != v) or len(v) == 0:
        return None
    return [(str(h["key"]), _bytes(h["value"]) or b"") for h in v]


@dataclass
class RawSample:
    path: Path
    keys: list[bytes | None]
    values: list[bytes]
    headers: list[list[tuple[str, bytes]] | None]

    @classmethod
    def read(cls, path: Path) -> RawSample:
        """A capture (or any Parquet file with a ``value`` column, ``key`` and ``headers`` optional)."""
        import pyarrow.parquet as pq

        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"replay file {path} does not exist")
        if path.suffix.lower() != ".parquet":
            raise ConfigError(f"replay file {path}: a raw sample is a Parquet file (streamscale capture writes one)")
        try:
            table = pq.read_table(path)
        except Exception as exc:  # noqa: BLE001 - pyarrow's reasons: one line
            raise ConfigError(f"replay file {path} is not Parquet: {str(exc).splitlines()[0]}") from None
        names = table.column_names
        if "value" not in names:
            raise ConfigError(
                f"replay file {path}: its rows have no value column (it has {', '.join(names) or 'none'}); "
                "a raw sample holds key, value, headers (streamscale capture)"
            )
        if table.num_rows == 0:
            raise ConfigError(f"replay file {path} holds no records")
        values = [_bytes(v) for v in table.column("value").to_pylist()]
        if any(v is None for v in values):
            values = [v if v is not None else b"" for v in values]  # a tombstone's null value, sent empty
        keys = [_bytes(k) for k in table.column("key").to_pylist()] if "key" in names else [None] * len(values)
        heads = [_headers(h) for h in table.column("headers").to_pylist()] if "headers" in names else []
        return cls(path, keys, values, heads or [None] * len(values))

    @property
    def has_headers(self) -> bool:
        return any(h for h in self.headers)

    def maker(self, worker: int, workers: int, copies: int) -> RawMaker:
        return RawMaker(self, worker, workers, copies)


class RawMaker:
    """Keys, values (and :attr:`headers`, the last chunk's) of a worker's records k0 .. k1-1."""

    def __init__(self, sample: RawSample, worker: int, workers: int, copies: int):
        if copies > 1 and all(k is None for k in sample.keys):
            raise ConfigError(f"replay file {sample.path}: key_copies copies the key space: its records have no key")
        self.sample, self.worker, self.workers, self.copies = sample, worker, workers, copies
        self.headers: list | None = None
        self.keyed = any(k is not None for k in sample.keys)

    def place(self, partitions: int) -> None:
        return None  # raw keys are partitioned as they come (crc32 of each)

    def make(self, k0: int, k1: int, send_ms: np.ndarray) -> tuple[list[bytes] | None, list[bytes]]:
        s, copies = self.sample, self.copies
        seq = np.arange(k0, k1, dtype=np.int64) * self.workers + self.worker
        rows = ((seq // copies) % len(s.values)).tolist()
        values = [s.values[r] for r in rows]
        self.headers = [s.headers[r] for r in rows] if s.has_headers else None
        if not self.keyed:
            return None, values
        if copies == 1:
            return [s.keys[r] for r in rows], values  # a record captured without a key is sent without one
        cl = (seq % copies).tolist()
        keys = [s.keys[r] for r in rows]
        return [k + b"#%d" % c if c and k is not None else k for k, c in zip(keys, cl)], values


def capture(connection, topic: str, count: int, out: Path, timeout_s: float = 60.0) -> int:
    """The first ``count`` records of ``topic`` (from each partition's start, in offset order per
    partition) into the Parquet file ``out``: key, value, headers, timestamp, partition, offset.
    Returns the records kept (fewer when the topic holds fewer)."""
    from streamscale.broker.access import BrokerAccess

    with BrokerAccess(connection) as access:
        if not access.topic_exists(topic):
            access.check_allowed(topic, "read")  # hidden by the ACLs, or missing
            raise ConfigError(f"capture: topic '{topic}' does not exist on {access.bootstrap}")
        access.check_allowed(topic, "read")
        ends = access.end_offsets(topic)
    rows = _consume(connection, topic, ends, count, timeout_s)
    _write(rows, out)
    return len(rows)


def _consume(connection, topic: str, ends: dict, count: int, timeout_s: float) -> list[dict]:
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    from streamscale.broker.connection import KafkaConnection

    c = KafkaConnection.of(connection).consumer(
        {"group.id": f"streamscale-capture-{uuid.uuid4().hex[:8]}", "enable.auto.commit": False}
    )
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        rows: list[dict] = []
        open_parts = {p for p, e in ends.items() if e > 0}
        deadline = time.monotonic() + timeout_s
        while open_parts and len(rows) < count and time.monotonic() < deadline:
            for m in c.consume(min(10_000, count - len(rows)), 1.0):
                if m.error():
                    _refuse(topic, m.error())
                    continue
                rows.append(_row(m))
                if m.offset() + 1 >= ends[m.partition()]:
                    open_parts.discard(m.partition())
        return rows[:count]
    finally:
        c.close()


def _refuse(topic: str, err) -> None:
    from confluent_kafka import KafkaError

    if err.code() in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED):
        raise ConfigError(f"capture: reading '{topic}' is denied: {err.str()}")
    if err.code() != KafkaError._PARTITION_EOF:
        raise ConfigError(f"capture: reading '{topic}' failed: {err.str()}")


def _row(m) -> dict:
    _, ts = m.timestamp()
    heads = m.headers() or []
    return {
        "key": m.key(),
        "value": m.value(),
        "headers": [{"key": k, "value": v} for k, v in heads],
        "timestamp": ts,
        "partition": m.partition(),
        "offset": m.offset(),
    }


def _write(rows: list[dict], out: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
            ("timestamp", pa.int64()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
        ]
    )
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), out)
