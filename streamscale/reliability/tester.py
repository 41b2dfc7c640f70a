"""The reliability tester: send N uniquely numbered messages under a delivery semantics while a
fault is injected, receive them all afterwards, and count loss and duplicates (seed 003 §V):

    L = N - M',  D = M - M',  alpha = L / N,  beta = D / N

where M is the number of messages received and M' the number of distinct ids among them. Each
message value starts with a 16-digit id (the paper's "header in the message value"); the id is also
sent as Kafka header ``trak-id``. Faults act only while sending, as in the paper; receiving happens
afterwards over a clean link, so what it counts is what the broker really holds.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, Producer, TopicPartition

from streamscale.broker.access import BrokerAccess
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import KafkaClientError, WaitTimeout
from streamscale.observe import prometheus
from streamscale.reliability.spec import BrokerRestart, ProxyFault
from streamscale.reliability.testbeds import Testbed
from streamscale.waiting import wait_for

log = logging.getLogger("streamscale.reliability")

ID_DIGITS = 16

PRODUCER_CONF = {
    # the producer never waits for the broker and never retries
    "at-most-once": {"acks": 0, "retries": 0, "enable.idempotence": False},
    # acknowledged by all in-sync replicas, retried on failure, no sequence numbers: duplicates possible
    "at-least-once": {
        "acks": "all",
        "retries": 2_147_483_647,
        "enable.idempotence": False,
        "max.in.flight.requests.per.connection": 5,
    },
    # idempotent producer (sequence numbers) inside transactions; the receiver reads committed only
    "exactly-once": {"acks": "all", "enable.idempotence": True},
}


@dataclass
class TrialResult:
    semantics: str
    size: int
    fault: str
    repetition: int
    N: int
    fault_kind: str = "none"
    delay_ms: float = 0.0
    loss_pct: float = 0.0  # proxy: reset_pct; netem: packet loss
    acked: int = 0
    M: int = 0
    distinct: int = 0
    lost: int = 0
    duplicated: int = 0
    alpha: float = 0.0
    beta: float = 0.0
    acked_but_lost: int = 0
    send_s: float = 0.0
    receive_s: float = 0.0
    send_rate: float = 0.0
    accounted_rate: float = 0.0
    producer_errors: str = ""
    aborted_transactions: int = 0
    proxy_resets: int = 0
    broker_restarted: bool = False
    note: str = ""
    extra: dict = field(default_factory=dict, repr=False)

    def row(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        return d


def account(ids: np.ndarray, n: int) -> tuple[int, int, int, int]:
    """(M, M', L, D) from the received ids; ids outside [0, N) are not messages of this trial."""
    valid = ids[(ids >= 0) & (ids < n)]
    m = int(valid.size)
    distinct = int(np.count_nonzero(np.bincount(valid, minlength=n))) if m else 0
    return m, distinct, n - distinct, m - distinct


def make_value(i: int, size: int) -> bytes:
    return f"{i:0{ID_DIGITS}d}".encode().ljust(size, b".")


# -- sending and receiving ---------------------------------------------------------------------


class _Sender:
    def __init__(
        self,
        connection: KafkaConnection,
        topic: str,
        semantics: str,
        n: int,
        size: int,
        rate: float,
        txn_messages: int,
        timeout_s: float,
    ):
        self.connection, self.topic, self.semantics = connection, topic, semantics
        self.n, self.size, self.rate, self.txn_messages = n, size, rate, txn_messages
        self.timeout_s = timeout_s
        self.acked = np.zeros(n, dtype=bool)
        self.errors: Counter = Counter()
        self.aborted = 0

    def _producer(self) -> Producer:
        conf = {
            "linger.ms": 5,
            "batch.num.messages": 10_000,
            "queue.buffering.max.messages": 500_000,
            "message.timeout.ms": int(self.timeout_s * 1000),
            "socket.timeout.ms": 10_000,
            "reconnect.backoff.max.ms": 500,
            **PRODUCER_CONF[self.semantics],
        }
        if self.semantics == "exactly-once":
            conf["transactional.id"] = f"trak-{uuid.uuid4().hex[:10]}"
            conf["transaction.timeout.ms"] = max(60_000, int(self.timeout_s * 1000))
        return self.connection.producer(conf)

    def _on_delivery(self, err, msg) -> None:
        if err is None:
            if self.semantics != "exactly-once":  # there only a committed transaction counts
                self.acked[int(msg.value()[:ID_DIGITS])] = True
        else:
            self.errors[err.name()] += 1

    def _produce(self, p: Producer, i: int) -> None:
        if i % 10_000 == 0:
            prometheus.rel_sent.labels(self.semantics).inc(min(10_000, self.n - i))
        value = make_value(i, self.size)
        while True:
            try:
                p.produce(self.topic, value, headers=[("trak-id", i.to_bytes(8, "big"))], on_delivery=self._on_delivery)
                return
            except BufferError:
                p.poll(0.01)

    def _pace(self, i: int, t0: float) -> None:
        if self.rate > 0 and i % 100 == 0:
            ahead = t0 + i / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)

    def _send(self, p: Producer, start: int, end: int, t0: float) -> None:
        for i in range(start, end):
            self._pace(i, t0)
            self._produce(p, i)
            if i % 1000 == 0:
                p.poll(0)

    def _transactional_session(self) -> Producer:
        p = self._producer()
        p.init_transactions(self.timeout_s)
        return p

    def run(self) -> None:
        t0 = time.monotonic()
        if self.semantics != "exactly-once":
            p = self._producer()
            self._send(p, 0, self.n, t0)
            remaining = p.flush(self.timeout_s + 30)
            if remaining:
                self.errors["undelivered at end"] += remaining
            return
        self._run_transactions(t0)

    def _run_transactions(self, t0: float) -> None:
        p = self._transactional_session()
        start = 0
        deadline = time.monotonic() + 10 * self.timeout_s
        while start < self.n:
            end = min(start + self.txn_messages, self.n)
            try:
                p.begin_transaction()
                self._send(p, start, end, t0)
                self._commit(p)
                self.acked[start:end] = True
                start = end
            except KafkaException as exc:
                err = exc.args[0]
                self.errors[err.name()] += 1
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

    def _commit(self, p: Producer) -> None:
        while True:
            try:
                p.commit_transaction(self.timeout_s)
                return
            except KafkaException as exc:
                if exc.args[0].retriable():  # commit outcome unknown: retrying commit is safe
                    self.errors[exc.args[0].name()] += 1
                    continue
                raise


def receive(bootstrap: KafkaConnection | str, topic: str, isolation: str, timeout_s: float) -> np.ndarray:
    """Every id in the topic (read from the start up to the end offsets, at ``isolation``)."""
    conn = KafkaConnection.of(bootstrap)
    with BrokerAccess(conn) as access:
        if isolation == "read_committed":
            # the coordinator writes a transaction's markers after its commit (or abort) returned:
            # the last stable offset reaches the log end once every transaction is decided
            wait_for(
                lambda: access.end_offsets(topic, isolation) == access.end_offsets(topic),
                timeout_s,
                f"every transaction in {topic} to be decided",
            )
        ends = access.end_offsets(topic, isolation)
    c = conn.consumer(
        conn.reader_settings(
            f"trak-{uuid.uuid4().hex[:8]}", **{"isolation.level": isolation, "enable.partition.eof": True}
        )
    )
    ids: list[int] = []
    pending = {p for p, e in ends.items() if e > 0}
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise WaitTimeout(
                    f"receiver did not reach the end of {topic} partitions {sorted(pending)} within {timeout_s} s"
                )
            eofs = False
            for m in c.consume(num_messages=10_000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eofs = True
                        continue
                    raise KafkaClientError(f"receiving {topic}: {err.str()}")
                v = m.value()
                try:
                    ids.append(int(v[:ID_DIGITS]))
                except (TypeError, ValueError):
                    ids.append(-1)
            if eofs or not ids:
                positions = c.position([TopicPartition(topic, p) for p in pending])
                pending -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
    finally:
        c.close()
    return np.asarray(ids, dtype=np.int64)


def run_trial(
    testbed: Testbed,
    semantics: str,
    n: int,
    size: int,
    fault,
    partitions: int = 1,
    rate: float = 0.0,
    repetition: int = 0,
    txn_messages: int = 1000,
    send_timeout_s: float = 300,
    receive_timeout_s: float = 60,
) -> TrialResult:
    topic = f"trak-{uuid.uuid4().hex[:10]}"
    access = BrokerAccess(testbed.connection)
    access.create_topic(topic, partitions)
    result = TrialResult(
        semantics,
        size,
        fault.label(),
        repetition,
        n,
        fault_kind=fault.kind,
        delay_ms=float(getattr(fault, "delay_ms", 0.0)),
        loss_pct=float(getattr(fault, "reset_pct", getattr(fault, "loss_pct", 0.0))),
    )
    sender = _Sender(testbed.connection, topic, semantics, n, size, rate, txn_messages, send_timeout_s)
    resets_before = testbed.proxy_resets()
    # the fault timeline runs in this (main) thread and the sender in a worker thread: a broker
    # restart must happen in the main thread (see EmbeddedBroker._spawn)
    events: list[tuple[float, Callable[[], None]]] = []
    if isinstance(fault, ProxyFault) and fault.cut:
        events += [
            (fault.cut.at_s, lambda: testbed.set_cut(True)),
            (fault.cut.at_s + fault.cut.for_s, lambda: testbed.set_cut(False)),
        ]
    if isinstance(fault, BrokerRestart):

        def restart() -> None:
            testbed.restart_broker()
            result.broker_restarted = True
            with BrokerAccess(testbed.connection) as a:
                a.create_topic(topic, partitions, exist_ok=True)

        events.append((fault.at_s, restart))
    failure: list[BaseException] = []

    def send() -> None:
        try:
            sender.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            failure.append(exc)

    try:
        testbed.apply(fault)
        t0 = time.monotonic()
        worker = threading.Thread(target=send, name="trak-sender", daemon=True)
        worker.start()
        for at, action in sorted(events, key=lambda e: e[0]):
            wait = t0 + at - time.monotonic()
            if wait > 0:
                worker.join(wait)
            action()  # scheduled faults happen even when sending already finished (cut ends, restarts)
        worker.join()
        result.send_s = time.monotonic() - t0
        if failure:
            raise failure[0]
    finally:
        testbed.clear()
    result.proxy_resets = testbed.proxy_resets() - resets_before
    t1 = time.monotonic()
    isolation = "read_committed" if semantics == "exactly-once" else "read_uncommitted"
    ids = receive(testbed.connection, topic, isolation, receive_timeout_s)
    result.receive_s = time.monotonic() - t1
    access.delete_topics([topic])  # after every client of the topic is closed
    access.close()
    result.M, result.distinct, result.lost, result.duplicated = account(ids, n)
    result.alpha, result.beta = result.lost / n, result.duplicated / n
    prometheus.rel_received.labels(semantics).inc(result.M)
    prometheus.rel_lost.labels(semantics).inc(result.lost)
    prometheus.rel_duplicated.labels(semantics).inc(result.duplicated)
    result.acked = int(sender.acked.sum())
    received = np.zeros(n, dtype=bool)
    valid = ids[(ids >= 0) & (ids < n)]
    received[valid] = True
    result.acked_but_lost = int((sender.acked & ~received).sum())
    result.send_rate = n / result.send_s if result.send_s else 0.0
    result.accounted_rate = n / (result.send_s + result.receive_s)
    result.producer_errors = ", ".join(f"{k}:{v}" for k, v in sorted(sender.errors.items()))
    result.aborted_transactions = sender.aborted
    if result.broker_restarted:
        result.note = "broker restarted mid-run (stopped and started again on its storage)"
    return result
