"""Output of the windowed pipelines (UC2-UC4), and exact accounting of records dropped as late.

Spark's own late-data metric (``numRowsDroppedByWatermark``) counts rows *after* partial
aggregation: ten late readings of one sensor and window in one task count as one. The dropped-
records SLO needs records, so this writer, run by ``foreachBatch`` on the driver, keeps the latest
``count`` of every open (key, window) and derives, per micro-batch, how many record contributions
the state accepted: ``accepted = sum(new count - previous count)``. With the number of valid input
records of the batch (observed on the input), ``dropped = valid - accepted / contributions``,
exactly.

It also applies the emission policy: ``update`` forwards every changed window (Theodolite's
Kafka Streams behaviour, UC3's early results), ``final`` holds a window until Spark's watermark has
closed it and then emits exactly one record for it (UC4). A window is closed for batch N when its
end <= W_N = (max event time of batches before N) - lateness: the rule Spark's state store uses,
so a window emitted here can never change afterwards. The writer's own state is saved next to the
query's checkpoint after each batch, so a restarted query continues the accounting.
"""

from __future__ import annotations

import json
import os
import pickle
import time
from dataclasses import dataclass, field
from pathlib import Path



@dataclass
class WriterState:
    last_batch: int = -1
    max_event_ms: int | None = None
    counts: dict = field(default_factory=dict)    # (key..., windowStartMs) -> count so far
    pending: dict = field(default_factory=dict)   # final mode: (key..., windowStartMs) -> latest row
    ends: dict = field(default_factory=dict)      # (key..., windowStartMs) -> windowEndMs


@dataclass
class BatchOutput:
    accepted_contributions: int
    output_records: int
    max_latency_ms: float | None
    avg_latency_ms: float | None
    watermark_ms: int | None


class WindowedOutputWriter:
    def __init__(self, bootstrap: str, topic: str, key_cols: list[str], value_cols: list[str],
                 lateness_ms: int, emit_final: bool, state_dir: str, producer_config: dict | None = None):
        self.bootstrap, self.topic = bootstrap, topic
        self.key_cols, self.value_cols = key_cols, value_cols
        self.lateness_ms, self.emit_final = lateness_ms, emit_final
        self.state_path = Path(state_dir) / "streamscale-output-state.pkl"
        self.producer_config = producer_config or {}
        self.state = self._load()
        self.batches: dict[int, BatchOutput] = {}
        self._producer = None

    def _load(self) -> WriterState:
        if self.state_path.exists():
            with open(self.state_path, "rb") as f:
                return pickle.load(f)
        return WriterState()

    def _save(self) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        with open(tmp, "wb") as f:
            pickle.dump(self.state, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, self.state_path)

    def producer(self):
        if self._producer is None:
            from confluent_kafka import Producer

            self._producer = Producer({"bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                                       "linger.ms": 5, **self.producer_config})
        return self._producer

    def watermark(self) -> int | None:
        s = self.state
        return None if s.max_event_ms is None else s.max_event_ms - self.lateness_ms

    def __call__(self, batch_df, batch_id: int) -> None:
        table = batch_df.toArrow()
        cols = {name: table.column(name).to_pylist() for name in table.column_names}
        n = table.num_rows
        s = self.state
        replay = batch_id <= s.last_batch
        watermark = self.watermark()  # W_N: what Spark's state store used for this batch
        accepted = 0
        rows = []
        batch_max = None
        for i in range(n):
            row = {c: cols[c][i] for c in cols}
            k = tuple(row[c] for c in self.key_cols) + (row["windowStartMs"],)
            if not replay:
                accepted += row["count"] - s.counts.get(k, 0)
                s.counts[k] = row["count"]
                s.ends[k] = row["windowEndMs"]
            me = row["max_event_ms"]
            batch_max = me if batch_max is None else max(batch_max, me)
            rows.append((k, row))
        now = int(time.time() * 1000)
        out = []
        if self.emit_final:
            for k, row in rows:
                s.pending[k] = row
            if watermark is not None and not replay:
                closed = [k for k in s.pending if s.ends[k] <= watermark]
                out = [s.pending.pop(k) for k in sorted(closed, key=lambda k: k[-1])]
        else:
            out = [row for _, row in rows]
        latencies = self._produce(out, now)
        if not replay:
            if watermark is not None:  # closed windows can never change again
                for k in [k for k, e in s.ends.items() if e <= watermark and k not in s.pending]:
                    s.counts.pop(k, None)
                    s.ends.pop(k, None)
            if batch_max is not None:
                s.max_event_ms = batch_max if s.max_event_ms is None else max(s.max_event_ms, batch_max)
            s.last_batch = batch_id
            self._save()
        self.batches[batch_id] = BatchOutput(
            accepted_contributions=accepted, output_records=len(out),
            max_latency_ms=max(latencies) if latencies else None,
            avg_latency_ms=sum(latencies) / len(latencies) if latencies else None, watermark_ms=watermark)

    def _produce(self, rows: list[dict], now: int) -> list[int]:
        from streamscale.sparkio.kafka import produce_all

        if not rows:
            return []
        records = []
        for row in rows:
            doc = {c: row[c] for c in self.value_cols}
            doc["emittedAtMs"] = now
            key = ";".join(str(row[c]) for c in self.key_cols).encode()
            records.append((key, json.dumps(doc, separators=(",", ":")).encode(), None, None, None))
        produce_all(self.producer(), self.topic, records, timeout=60)
        return [now - row["max_event_ms"] for row in rows]

    def close(self) -> None:
        if self._producer is not None:
            self._producer.flush(30)
            self._producer = None
