"""Each record's processing latency read at the output topic: from its input record's Kafka
timestamp (as for a micro-batch) to the output record's own (set when Spark's producer sent it).

This is how a real-time query is measured: its batches span the whole checkpoint interval, so a
record's latency to its batch's commit says nothing of when it was written out. An output record
is traced back to its input by the send-time field it carries (the generator's stamp, which the
job keeps): the input records of one stamp were sent together, and the output record's latency
lies between its timestamp less the latest and less the earliest of their Kafka timestamps.

A background thread consumes both topics. It reads every input record's stamp; of the output
records one poll returns it reads at most :data:`PARSED_PER_POLL`, evenly spread, each standing for
its share of the poll (a weighted sample: all of them up to tens of thousands of records a second).
:meth:`OutputLatency.attach` gives each micro-batch the latencies of the records written out by its
end and after the previous batch's, as ``(low, high, records)`` spans like a micro-batch's own
(streamscale.experiment.processing), so that the percentiles, the trend and the SLO read them
alike.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from datetime import datetime

import numpy as np

from streamscale.broker.connection import KafkaConnection
from streamscale.experiment.slo import batch_end_s

log = logging.getLogger(__name__)

PARSED_PER_POLL = 100
POLL_RECORDS = 1000
CATCH_UP_S = 20.0  # at the stop: at most this long to read the output topic to its end


def send_time_ms(value: bytes | None, pattern: re.Pattern) -> float | None:
    """The send time in a JSON value (epoch ms, or an ISO timestamp as Spark's to_json writes it)."""
    if not value:
        return None
    m = pattern.search(value)
    if m is None:
        return None
    if m.group(2) is not None:
        return float(round(float(m.group(2))))
    try:
        return float(round(datetime.fromisoformat(m.group(1).decode()).timestamp() * 1000))
    except ValueError:
        return None


def field_pattern(field: str) -> re.Pattern:
    return re.compile(rb'"' + re.escape(field.encode()) + rb'"\s*:\s*(?:"([^"]+)"|(-?\d+(?:\.\d+)?))')


class OutputLatency:
    """Reads the output records' latencies in a background thread (see the module's notes)."""

    def __init__(self, bootstrap: KafkaConnection | str, topics: tuple[str, str], field: str, kafka_stamp=False):
        """``topics``: (input, output); ``field``: the output's send-time field; ``kafka_stamp``: it is
        the input record's Kafka timestamp itself (decode raw), so nothing needs tracing."""
        self.bootstrap, self.topics, self.field = KafkaConnection.of(bootstrap), topics, field
        self.kafka_stamp = kafka_stamp
        self._pattern = field_pattern(field)
        self._sent: dict[float, list[float]] = {}  # send stamp -> [earliest, latest] input Kafka timestamp
        self._out: list[tuple[float, float, float]] = []  # (output timestamp, send stamp, weight)
        self.read = 0  # output records consumed
        self.unreadable = 0  # sampled output records without the field (or a time that does not parse)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="output-latency")
        self._consumer = None
        self._error: BaseException | None = None

    def start(self) -> OutputLatency:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        c = self.bootstrap.consumer(
            {"group.id": f"streamscale-latency-{time.time_ns()}", "enable.auto.commit": False},
            defaults={"fetch.wait.max.ms": 50},
        )
        assign = []
        for topic in self.topics[1:] if self.kafka_stamp else self.topics:
            parts = c.list_topics(topic, timeout=30).topics[topic].partitions
            assign += [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(parts)]
        c.assign(assign)
        self._consumer = c
        self._thread.start()
        return self

    def take(self, messages) -> None:
        """One poll's records into the sample."""
        good = [m for m in messages if m.error() is None]
        ins = [m for m in good if m.topic() == self.topics[0]]
        outs = [m for m in good if m.topic() != self.topics[0]]
        # every input record: a stamp left out would leave its outputs untraced
        sent = [(t, float(m.timestamp()[1])) for m in ins if (t := send_time_ms(m.value(), self._pattern))]
        picked = _spread(outs)
        got = [(float(m.timestamp()[1]), send_time_ms(m.value(), self._pattern)) for m in picked]
        weight = len(outs) / len(picked) if picked else 0.0
        with self._lock:
            for t, ts in sent:
                span = self._sent.setdefault(t, [ts, ts])
                span[0], span[1] = min(span[0], ts), max(span[1], ts)
            self.read += len(outs)
            self.unreadable += sum(1 for _, t in got if t is None)
            self._out += [(ts, t, weight) for ts, t in got if t is not None]

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                self.take(self._consumer.consume(POLL_RECORDS, timeout=0.2))
        except Exception as exc:  # noqa: BLE001 - said at the stop, the run's thread raises nothing
            self._error = exc

    def stop(self) -> None:
        """Read what is left up to the topics' ends (at most :data:`CATCH_UP_S`), then close."""
        if self._consumer is None:
            return
        self._stop.set()
        self._thread.join()
        try:
            deadline = time.monotonic() + CATCH_UP_S
            while time.monotonic() < deadline and not self._at_end():
                self.take(self._consumer.consume(POLL_RECORDS, timeout=0.2))
        finally:
            self._consumer.close()
            self._consumer = None
        if self._error is not None:
            log.warning("reading the output topic's latencies stopped early: %s", self._error)

    def _at_end(self) -> bool:
        for tp in self._consumer.assignment():
            low, high = self._consumer.get_watermark_offsets(tp, timeout=10)
            [pos] = self._consumer.position([tp])
            if high > max(low, pos.offset if pos.offset >= 0 else low):
                return False
        return True

    def latencies(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(output timestamp, low, high, weight) of every sampled output record traced to its input."""
        with self._lock:
            if self.kafka_stamp:
                rows = [(ts, ts - t, ts - t, w) for ts, t, w in self._out]
            else:
                sent = self._sent
                rows = [(ts, ts - sent[t][1], ts - sent[t][0], w) for ts, t, w in self._out if t in sent]
        a = np.array(rows, dtype=float).reshape(-1, 4)
        return a[:, 0], np.maximum(a[:, 1], 0), np.maximum(a[:, 2], 0), a[:, 3]

    def attach(self, batches) -> None:
        """Each batch's ``processing_latency`` (and ``processing_max_ms``): the latencies of the
        records written out after the previous batch ended and by its own end."""
        # when each batch ended, epoch ms (a timestamp that does not read: at 0, it takes no record)
        ends = np.array([(batch_end_s(b, 0.0) or 0.0) * 1000 for b in batches], dtype=float)
        if not len(ends):
            return
        out, low, high, weight = self.latencies()
        which = np.searchsorted(ends, out, side="left")
        for i, b in enumerate(batches):
            sel = which == i
            spans = latency_spans(low[sel], high[sel], weight[sel])
            b.processing_latency = spans or None
            b.processing_max_ms = max((h for _, h, _ in spans), default=None)


def _spread(messages: list) -> list:
    """At most :data:`PARSED_PER_POLL` of a poll's records, evenly spread."""
    return messages[:: max(1, len(messages) // PARSED_PER_POLL)] if messages else []


def latency_spans(low: np.ndarray, high: np.ndarray, weight: np.ndarray) -> list[tuple[float, float, float]]:
    """``(low, high, records)`` per pair of bounds in whole milliseconds (each timestamp is whole
    milliseconds: a bound is known within 1 ms)."""
    if not len(low):
        return []
    pairs = np.stack([np.floor(low) - 1, np.ceil(high) + 1], axis=1)
    keys, index = np.unique(pairs, axis=0, return_inverse=True)
    counts = np.bincount(index.ravel(), weights=weight)
    return [(max(0.0, float(lo)), float(hi), float(n)) for (lo, hi), n in zip(keys, counts, strict=True)]
