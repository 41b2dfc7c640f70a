"""SQLite sink: one table per source topic, written together with the offsets in one transaction.

The sink, not Kafka, is the source of truth for where a partition's next reader starts
(``_offsets``), so a consumer that dies between writing and committing to Kafka neither loses nor
repeats records. Each write is fenced: a batch must start at or after the partition's stored next
offset, so a second reader of the same partition fails instead of writing duplicates. The same
database keeps each consumer's persisted state (assignment, position in its metadata partition,
last acknowledged message) and an ownership log (who read which partition when), which lets
tests prove that no partition ever had two concurrent readers.
"""

from __future__ import annotations

import json
import re
import sqlite3
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from streamscale.errors import FencingError

Record = tuple[int, bytes | None, bytes | None, int]  # offset, key, value, timestamp ms


@dataclass
class ConsumerState:
    meta_offset: int | None = None
    last_msg_id: str | None = None
    assignment: list[str] = field(default_factory=list)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS _tables (topic TEXT PRIMARY KEY, name TEXT UNIQUE NOT NULL);
CREATE TABLE IF NOT EXISTS _offsets (topic TEXT, partition INTEGER, next_offset INTEGER NOT NULL,
                                     PRIMARY KEY (topic, partition));
CREATE TABLE IF NOT EXISTS _consumer_state (consumer INTEGER PRIMARY KEY, meta_offset INTEGER,
                                            last_msg_id TEXT, assignment TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS _ownership (consumer INTEGER, topic TEXT, partition INTEGER,
                                       started REAL NOT NULL, stopped REAL);
"""


class SQLiteSink:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit mode; transactions are opened explicitly with BEGIN IMMEDIATE so that
        # concurrent consumer processes serialise on the write lock instead of failing
        self.db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)
        self._names: dict[str, str] = {}

    def close(self) -> None:
        self.db.close()

    # -- tables -----------------------------------------------------------------------------
    def _table(self, topic: str) -> str:
        """The table for a topic (created on first use; names are sanitised and kept unique)."""
        name = self._names.get(topic)
        if name:
            return name
        row = self.db.execute("SELECT name FROM _tables WHERE topic=?", (topic,)).fetchone()
        if row is None:
            base = "t_" + re.sub(r"\W", "_", topic)
            name, n = base, 1
            while self.db.execute("SELECT 1 FROM _tables WHERE name=?", (name,)).fetchone():
                n += 1
                name = f"{base}_{n}"
            self.db.execute("INSERT OR IGNORE INTO _tables VALUES (?, ?)", (topic, name))
            name = self.db.execute("SELECT name FROM _tables WHERE topic=?", (topic,)).fetchone()[0]
        else:
            name = row[0]
        self.db.execute(
            f'CREATE TABLE IF NOT EXISTS "{name}" (partition INTEGER, "offset" INTEGER, '
            "key BLOB, value BLOB, timestamp_ms INTEGER, consumer INTEGER)"
        )
        self._names[topic] = name
        return name

    # -- data -------------------------------------------------------------------------------
    def next_offsets(self, tps: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int]:
        out = {}
        for t, p in tps:
            row = self.db.execute("SELECT next_offset FROM _offsets WHERE topic=? AND partition=?", (t, p)).fetchone()
            if row is not None:
                out[(t, p)] = row[0]
        return out

    def write(self, consumer: int, batches: Mapping[tuple[str, int], list[Record]]) -> dict[tuple[str, int], int]:
        """Insert the records of every partition and advance its offset, all or nothing; returns next offsets."""
        tables = {t: self._table(t) for t, _ in batches}
        nexts: dict[tuple[str, int], int] = {}
        self.db.execute("BEGIN IMMEDIATE")
        try:
            for (t, p), records in batches.items():
                if not records:
                    continue
                row = self.db.execute(
                    "SELECT next_offset FROM _offsets WHERE topic=? AND partition=?", (t, p)
                ).fetchone()
                first = records[0][0]
                if row is not None and first < row[0]:
                    raise FencingError(
                        f"consumer {consumer} would write {t}[{p}] from offset {first}, but offsets "
                        f"up to {row[0]} are already written: another reader owns the partition"
                    )
                self.db.executemany(
                    f'INSERT INTO "{tables[t]}" VALUES (?, ?, ?, ?, ?, ?)',
                    [(p, o, k, v, ts, consumer) for o, k, v, ts in records],
                )
                nexts[(t, p)] = records[-1][0] + 1
                self.db.execute(
                    "INSERT INTO _offsets VALUES (?, ?, ?) ON CONFLICT(topic, partition) "
                    "DO UPDATE SET next_offset=excluded.next_offset",
                    (t, p, nexts[(t, p)]),
                )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return nexts

    def rows(self, topic: str) -> list[tuple[int, int, bytes | None, int]]:
        """(partition, offset, value, consumer) of every stored record of a topic."""
        row = self.db.execute("SELECT name FROM _tables WHERE topic=?", (topic,)).fetchone()
        if row is None:
            return []
        return self.db.execute(f'SELECT partition, "offset", value, consumer FROM "{row[0]}"').fetchall()

    # -- consumer state ---------------------------------------------------------------------
    def load_state(self, consumer: int) -> ConsumerState | None:
        row = self.db.execute(
            "SELECT meta_offset, last_msg_id, assignment FROM _consumer_state WHERE consumer=?", (consumer,)
        ).fetchone()
        return None if row is None else ConsumerState(row[0], row[1], json.loads(row[2]))

    def save_state(
        self, consumer: int, state: ConsumerState, started: Iterable[str] = (), stopped: Iterable[str] = ()
    ) -> None:
        """Persist a consumer's state and log the partitions it started/stopped reading, atomically."""
        now = time.time()
        self.db.execute("BEGIN IMMEDIATE")
        try:
            self.db.execute(
                "INSERT INTO _consumer_state VALUES (?, ?, ?, ?) ON CONFLICT(consumer) DO UPDATE SET "
                "meta_offset=excluded.meta_offset, last_msg_id=excluded.last_msg_id, "
                "assignment=excluded.assignment",
                (consumer, state.meta_offset, state.last_msg_id, json.dumps(sorted(state.assignment))),
            )
            for key in stopped:
                t, p = key.rsplit(":", 1)
                self.db.execute(
                    "UPDATE _ownership SET stopped=? WHERE consumer=? AND topic=? AND partition=? AND stopped IS NULL",
                    (now, consumer, t, int(p)),
                )
            for key in started:
                t, p = key.rsplit(":", 1)
                self.db.execute("INSERT INTO _ownership VALUES (?, ?, ?, ?, NULL)", (consumer, t, int(p), now))
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def states(self) -> dict[int, ConsumerState]:
        return {
            c: ConsumerState(m, i, json.loads(a))
            for c, m, i, a in self.db.execute(
                "SELECT consumer, meta_offset, last_msg_id, assignment FROM _consumer_state"
            )
        }

    def ownership(self) -> list[tuple[int, str, int, float, float | None]]:
        return self.db.execute(
            "SELECT consumer, topic, partition, started, stopped FROM _ownership ORDER BY topic, partition, started"
        ).fetchall()
