"""The reliability tester's sending side: N uniquely numbered messages under one producer's delivery
settings (acks, idempotence, transactions), each acknowledgment and each error recorded with its
time, so that a trial can say which records Kafka promised and when the producer saw the fault.

Each message value starts with a 16-digit id (the paper's "header in the message value"); the id is
also sent as Kafka header ``trak-id``.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter

import numpy as np
from confluent_kafka import KafkaException, Producer

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import KafkaClientError
from streamscale.observe import prometheus
from streamscale.reliability.spec import SEMANTICS_PRODUCERS, ProducerSettings

ID_DIGITS = 16
BIN_S = 0.05  # acknowledgments are counted per 50 ms of the trial: the resolution of stalls
STATS_INTERVAL_MS = 250


def make_value(i: int, size: int) -> bytes:
    return f"{i:0{ID_DIGITS}d}".encode().ljust(size, b".")


def settings_of(producer: ProducerSettings | str) -> ProducerSettings:
    if isinstance(producer, str):
        return SEMANTICS_PRODUCERS[producer]
    return producer


def producer_conf(s: ProducerSettings) -> dict:
    """librdkafka settings of a producer's delivery settings."""
    if s.acks == 0:
        # the producer never waits for the broker and never retries
        return {"acks": 0, "retries": 0, "enable.idempotence": False}
    if s.idempotence:
        # sequence numbers: a retried batch is written once
        return {"acks": "all", "enable.idempotence": True}
    # acknowledged (by the leader, or all in-sync replicas), retried on failure, no sequence
    # numbers: duplicates possible
    return {
        "acks": s.acks,
        "retries": 2_147_483_647,
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 5,
    }


class Sender:
    """Sends ids 0..n-1 to ``topic``; :attr:`acked` says which the producer was told were written
    (with transactions: which a committed transaction holds)."""

    def __init__(
        self,
        connection: KafkaConnection,
        topic: str,
        producer: ProducerSettings | str,
        n: int,
        size: int,
        rate: float,
        txn_messages: int,
        timeout_s: float,
    ):
        self.connection, self.topic, self.settings = connection, topic, settings_of(producer)
        self.label = self.settings.label()
        self.n, self.size, self.rate, self.txn_messages = n, size, rate, txn_messages
        self.timeout_s = timeout_s
        self.acked = np.zeros(n, dtype=bool)
        self.errors: Counter = Counter()
        self.error_times: list[float] = []  # seconds after t0 of every error the producer saw
        self.ack_bins: Counter = Counter()  # acknowledgments per BIN_S of the trial
        self.aborted = 0
        self.t0 = time.monotonic()
        self.transactional_id = f"trak-{uuid.uuid4().hex[:10]}"
        self.sent_s: float | None = None  # when the last record was handed to the producer
        self._stats: dict[str, dict] = {}  # librdkafka's latest statistics, per producer instance
        self._batches: list[tuple[float, float, int]] = []  # (mean bytes, mean records, batches) per report

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _error(self, name: str) -> None:
        self.errors[name] += 1
        self.error_times.append(self._now())

    def _producer(self) -> Producer:
        conf = {
            "linger.ms": 5,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 500_000,
            "message.timeout.ms": int(self.timeout_s * 1000),
            "socket.timeout.ms": 10_000,
            "reconnect.backoff.max.ms": 500,
            # a lost connection, a broker down: what the producer saw while retrying
            "error_cb": lambda err: self._error(err.name()),
            # librdkafka's counters of requests, retries and bytes sent: what decides whether a
            # producer's batches get through a link that resets (Sender.requests)
            "statistics.interval.ms": STATS_INTERVAL_MS,
            "stats_cb": self._on_stats,
            **producer_conf(self.settings),
        }
        if self.settings.transactions:
            # one id for the whole run: a session started again after a fatal error fences the
            # one before and aborts its open transaction at once, instead of leaving it to hold the
            # partitions' last stable offset until transaction.timeout.ms
            conf["transactional.id"] = self.transactional_id
            conf["transaction.timeout.ms"] = max(60_000, int(self.timeout_s * 1000))
        return self.connection.producer(conf)

    def _on_stats(self, text: str) -> None:
        import json

        try:
            doc = json.loads(text)
        except ValueError:
            return
        self._stats[str(doc.get("name"))] = doc
        for t in (doc.get("topics") or {}).values():
            size, count = t.get("batchsize") or {}, t.get("batchcnt") or {}
            if size.get("cnt"):  # the batches of this report's window
                self._batches.append((float(size.get("avg", 0)), float(count.get("avg", 0)), int(size["cnt"])))

    def requests(self) -> dict:
        """What the producers sent, from librdkafka's instance counters (its per-broker ones start
        again with every new connection): records transmitted, retries included, and the mean
        size of the batches they went in (bytes and records), weighted over the trial."""
        transmitted = sum(int(doc.get("txmsgs", 0)) for doc in self._stats.values())
        n = sum(c for _, _, c in self._batches)
        return {
            "transmitted": transmitted,
            "mean_batch_bytes": round(sum(b * c for b, _, c in self._batches) / n) if n else 0,
            "mean_batch_records": round(sum(r * c for _, r, c in self._batches) / n) if n else 0,
        }

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.ack_bins[int(self._now() / BIN_S)] += 1
            if not self.settings.transactions:  # there only a committed transaction counts
                self.acked[int(msg.value()[:ID_DIGITS])] = True
        else:
            self._error(err.name())

    def _produce(self, p: Producer, i: int) -> None:
        if i % 10_000 == 0:
            prometheus.rel_sent.labels(self.label).inc(min(10_000, self.n - i))
        value = make_value(i, self.size)
        while True:
            try:
                p.produce(self.topic, value, headers=[("trak-id", i.to_bytes(8, "big"))], on_delivery=self._on_delivery)
                return
            except BufferError:
                p.poll(0.01)

    def _pace(self, p: Producer, i: int) -> None:
        if self.rate > 0 and i % 100 == 0:
            due = self.t0 + i / self.rate
            while (ahead := due - time.monotonic()) > 0:
                p.poll(ahead)  # waiting serves acknowledgments, timed as they come

    def _send(self, p: Producer, start: int, end: int) -> None:
        for i in range(start, end):
            self._pace(p, i)
            self._produce(p, i)
            if i % 200 == 0:  # acknowledgments are timed when served: often enough for 50 ms bins
                p.poll(0)

    def _transactional_session(self) -> Producer:
        p = self._producer()
        p.init_transactions(self.timeout_s)
        return p

    def run(self) -> None:
        self.t0 = time.monotonic()
        if not self.settings.transactions:
            p = self._producer()
            self._send(p, 0, self.n)
            self.sent_s = self._now()
            deadline = time.monotonic() + self.timeout_s + 30
            while len(p) and time.monotonic() < deadline:
                p.poll(BIN_S)  # not flush(): acknowledgments are timed as they come
            remaining = p.flush(0)
            if remaining:
                self.errors["undelivered at end"] += remaining
            p.poll(STATS_INTERVAL_MS / 1000 * 1.5)  # a last report of its counters
            return
        p = self._run_transactions()
        self.sent_s = self._now()
        p.poll(STATS_INTERVAL_MS / 1000 * 1.5)  # a last report of its counters

    def _run_transactions(self) -> Producer:
        p = self._transactional_session()
        start = 0
        deadline = time.monotonic() + 10 * self.timeout_s
        while start < self.n:
            end = min(start + self.txn_messages, self.n)
            try:
                p.begin_transaction()
                self._send(p, start, end)
                self._commit(p)
                self.acked[start:end] = True
                start = end
            except KafkaException as exc:
                err = exc.args[0]
                self._error(err.name())
                if time.monotonic() > deadline:
                    raise KafkaClientError(f"exactly-once sending made no progress: {err.str()}") from exc
                if err.fatal():  # e.g. fenced after a broker restart: a new producer session
                    p = self._transactional_session()
                else:
                    try:
                        p.abort_transaction(self.timeout_s)
                    except KafkaException:
                        p = self._transactional_session()
                self.aborted += 1  # the aborted transaction's messages are sent again in a new one
        return p

    def _commit(self, p: Producer) -> None:
        while True:
            try:
                p.commit_transaction(self.timeout_s)
                return
            except KafkaException as exc:
                if exc.args[0].retriable():  # commit outcome unknown: retrying commit is safe
                    self._error(exc.args[0].name())
                    continue
                raise

    # -- what the producer saw ---------------------------------------------------------------
    def error_window_s(self) -> float:
        """From the first error the producer saw to the last (0: none)."""
        return (max(self.error_times) - min(self.error_times)) if self.error_times else 0.0

    def stall(self, after_s: float) -> tuple[float, float]:
        """(start, length) in seconds of the longest stretch without an acknowledgment that began
        at or after ``after_s`` while records were still being sent or awaited; (after_s, 0) if
        acknowledgments never paused."""
        if not self.ack_bins:
            return after_s, 0.0
        best_len, best_start, run_start = 0, int(after_s / BIN_S), None
        for b in range(int(after_s / BIN_S), max(self.ack_bins) + 1):
            if self.ack_bins.get(b, 0):
                run_start = None
                continue
            run_start = b if run_start is None else run_start
            if b - run_start + 1 > best_len:
                best_len, best_start = b - run_start + 1, run_start
        return best_start * BIN_S, best_len * BIN_S
