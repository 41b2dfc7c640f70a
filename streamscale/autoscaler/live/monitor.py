"""The monitor (Landau et al., §V-A): each partition's write speed in bytes/s over a sliding window.

As in the paper, the size of each partition's log is read with DescribeLogDirs (the bytes the
brokers hold: records with their batch headers) every sample. Where the cluster refuses that call
(it needs DESCRIBE on the cluster) or the client cannot pass the connection's security settings,
the monitor says so once in its log and estimates the size instead: end offset x mean key+value
size, the mean measured on the partition's newest records. Every sample is queued with its time;
samples older than the window leave the front of the queue, and the speed is
(newest - oldest) / (time between them), as in the paper.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import deque

from confluent_kafka import KafkaError, Producer, TopicPartition

from streamscale.autoscaler.live.protocol import LiveConfig, encode, parse_tp, tp_key
from streamscale.broker.access import BrokerAccess
from streamscale.broker.log_dirs import LogDirSizes, LogDirsUnavailable

log = logging.getLogger("streamscale.autoscaler.monitor")


class WriteSpeedMonitor:
    def __init__(
        self, cfg: LiveConfig, sample_records: int = 50, size_refresh_secs: float = 10.0, log_dirs: bool = True
    ):
        self.cfg = cfg
        self.access = BrokerAccess(cfg.connection)
        # "log-dirs": samples hold log sizes in bytes; "estimate": end offsets (x record_size)
        self.log_dirs: LogDirSizes | None = LogDirSizes(cfg.connection) if log_dirs else None
        self.size_source = "log-dirs" if log_dirs else "estimate"
        self._partitions: dict[str, list[int]] = {}  # each topic's partitions, asked once
        self.samples: deque[tuple[float, dict[str, int]]] = deque()
        self.record_size: dict[str, float] = {}
        self._size_at: dict[str, tuple[float, int]] = {}  # when, at which end offset, sizes were measured
        self.sample_records = sample_records
        self.size_refresh_secs = size_refresh_secs
        self.producer: Producer | None = None
        self.published = 0

    def end_offsets(self) -> dict[str, int]:
        ends = {}
        for topic in self.cfg.topics:
            for p, o in self.access.end_offsets(topic).items():
                ends[tp_key(topic, p)] = o
        return ends

    def log_sizes(self) -> dict[str, int] | None:
        """Every partition's log size in bytes, or None once the cluster has refused to say."""
        if self.log_dirs is None:
            return None
        try:
            if set(self._partitions) != set(self.cfg.topics):
                self._partitions = {t: self.access.partitions(t) for t in self.cfg.topics}
            sizes = self.log_dirs.sizes(self._partitions)
        except LogDirsUnavailable as exc:
            log.warning("per-partition log sizes unavailable (%s): estimated from offsets and record sizes", exc)
            self.log_dirs.close()
            self.log_dirs, self.size_source = None, "estimate"
            self.samples.clear()  # sizes and offsets do not mix in one window
            return None
        return {tp_key(t, p): size for (t, p), size in sizes.items()}

    def sample(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        sizes = self.log_sizes()
        if sizes is None:
            ends = self.end_offsets()
            self.samples.append((now, ends))
            self._refresh_sizes(now, ends)
        else:
            self.samples.append((now, sizes))
        while len(self.samples) > 2 and self.samples[1][0] <= now - self.cfg.window_secs:
            self.samples.popleft()

    def _refresh_sizes(self, now: float, ends: dict[str, int]) -> None:
        stale = [
            k
            for k, end in ends.items()
            if end > 0
            and (
                k not in self._size_at
                or (now - self._size_at[k][0] >= self.size_refresh_secs and end > self._size_at[k][1])
            )
        ]
        if not stale:
            return
        starts = {}
        for topic in {k.rsplit(":", 1)[0] for k in stale}:
            for p, o in self.access.start_offsets(topic).items():
                starts[tp_key(topic, p)] = o
        sizes = self._mean_sizes({k: (max(ends[k] - self.sample_records, starts.get(k, 0)), ends[k]) for k in stale})
        for k, size in sizes.items():
            self.record_size[k] = size
            self._size_at[k] = (now, ends[k])

    def _mean_sizes(self, ranges: dict[str, tuple[int, int]]) -> dict[str, float]:
        """Mean key+value bytes of the records in [lo, hi) of each partition."""
        conn = self.cfg.connection
        c = conn.consumer(
            conn.reader_settings(f"streamscale-monitor-{uuid.uuid4().hex[:6]}", **{"enable.partition.eof": True})
        )
        totals: dict[str, list[int]] = {k: [0, 0] for k in ranges}
        pending = {k for k, (lo, hi) in ranges.items() if hi > lo}
        try:
            c.assign([TopicPartition(*parse_tp(k), lo) for k, (lo, hi) in ranges.items() if k in pending])
            deadline = time.monotonic() + 10
            while pending and time.monotonic() < deadline:
                for m in c.consume(500, timeout=0.2):
                    k = tp_key(m.topic(), m.partition())
                    if m.error() is not None:
                        if m.error().code() == KafkaError._PARTITION_EOF:
                            pending.discard(k)
                        continue
                    if k in pending and m.offset() < ranges[k][1]:
                        totals[k][0] += len(m.key() or b"") + len(m.value() or b"")
                        totals[k][1] += 1
                    if m.offset() >= ranges[k][1] - 1:
                        pending.discard(k)
        finally:
            c.close()
        return {k: total / n for k, (total, n) in totals.items() if n}

    def speeds(self) -> dict[str, float]:
        """bytes/s per partition between the oldest and newest sample in the window."""
        if len(self.samples) < 2:
            return {}
        (t0, first), (t1, last) = self.samples[0], self.samples[-1]
        if t1 <= t0:
            return {}
        # a log's size can also fall (retention deleted a segment): no write speed below 0
        if self.size_source == "log-dirs":
            return {k: max(0, last[k] - first.get(k, 0)) / (t1 - t0) for k in last}
        return {k: max(0, last[k] - first.get(k, 0)) / (t1 - t0) * self.record_size.get(k, 0.0) for k in last}

    def publish(self) -> dict:
        speeds = self.speeds()
        span = self.samples[-1][0] - self.samples[0][0] if len(self.samples) > 1 else 0.0
        msg = {"t": time.time(), "window_secs": span, "speeds": speeds, "seq": self.published}
        if self.producer is None:
            self.producer = self.cfg.connection.producer({"linger.ms": 0})
        self.producer.produce(self.cfg.speed_topic, encode(msg), partition=0)
        self.producer.flush(10)
        self.published += 1
        return msg

    def run(self, stop: threading.Event) -> None:
        next_publish = time.monotonic() + min(self.cfg.publish_interval_secs, self.cfg.window_secs)
        while not stop.is_set():
            tick = time.monotonic()
            try:
                self.sample()
                if tick >= next_publish:
                    msg = self.publish()
                    next_publish = tick + self.cfg.publish_interval_secs
                    log.info(
                        "published %d partition speeds, total %.0f B/s", len(msg["speeds"]), sum(msg["speeds"].values())
                    )
            except Exception as exc:  # noqa: BLE001 - a broker hiccup must not stop monitoring
                log.warning("monitor sample failed: %s", exc)
            stop.wait(max(0.0, self.cfg.sample_interval_secs - (time.monotonic() - tick)))

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(5)
        if self.log_dirs is not None:
            self.log_dirs.close()
        self.access.close()
