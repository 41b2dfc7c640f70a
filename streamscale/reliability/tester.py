"""The reliability tester: send N uniquely numbered messages under one producer's delivery settings
while a fault is injected, receive them all afterwards, and count loss and duplicates (Wu, Shang and Wolter, §V,
:mod:`.receiver`), and, beside them, what Kafka promised: the records the producer was told were
written and that never arrived (*acknowledged loss*).

Faults act only while sending, as in the paper; receiving happens afterwards over a clean link
(a cluster's nodes all up again), so what it counts is what the brokers really hold.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from streamscale.broker.access import BrokerAccess
from streamscale.errors import BrokerError, KafkaClientError, WaitTimeout
from streamscale.observe import prometheus
from streamscale.reliability.receiver import account, receive
from streamscale.reliability.sender import ID_DIGITS, Sender, make_value, settings_of
from streamscale.reliability.spec import BrokerRestart, ClusterFault, ProducerSettings, ProxyFault
from streamscale.reliability.testbeds import Testbed

__all__ = ["ID_DIGITS", "Trial", "TrialResult", "account", "make_value", "receive", "run_trial"]

log = logging.getLogger("streamscale.reliability")


@dataclass
class TrialResult:
    semantics: str  # the producer's delivery settings, by name (at-least-once, acks=1, ...)
    size: int
    fault: str
    repetition: int
    N: int
    fault_kind: str = "none"
    delay_ms: float = 0.0
    loss_pct: float = 0.0  # proxy: reset_pct; netem: packet loss
    acks: str = "all"
    idempotence: bool = False
    transactions: bool = False
    replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_election: bool = False
    acked: int = 0
    M: int = 0
    distinct: int = 0
    lost: int = 0
    duplicated: int = 0
    alpha: float = 0.0
    beta: float = 0.0
    acked_but_lost: int = 0  # acknowledged loss: what Kafka's guarantees are about
    unacked_lost: int = 0  # lost, but the producer was never told they were written
    trial_s: float = 0.0  # the whole trial: topic made, sending, fault, recovery, receiving
    send_s: float = 0.0
    receive_s: float = 0.0
    send_rate: float = 0.0
    accounted_rate: float = 0.0
    producer_errors: str = ""
    error_window_s: float = 0.0  # first to last error the producer saw
    stall_s: float = 0.0  # longest stretch without an acknowledgment from the fault on
    recovery_s: float = 0.0  # from the fault's first step to the end of that stretch
    leader_changes: int = 0
    min_isr_seen: int | None = None
    timeline: str = ""
    aborted_transactions: int = 0
    proxy_resets: int = 0
    resets_response: int = 0  # of which cut a broker's answer: the request was written, never answered
    transmitted: int = 0  # records the producer transmitted, retries included (librdkafka's txmsgs)
    mean_batch_bytes: int = 0  # the mean size of the batches (produce request payloads) it sent them in
    mean_batch_records: int = 0
    broker_restarted: bool = False
    fault_injected: bool = True  # False: a step of the fault did not happen (see note)
    received: bool = True  # False: the receiver failed (see note); α and β unknown, not counted
    note: str = ""
    extra: dict = field(default_factory=dict, repr=False)

    def row(self) -> dict:
        d = asdict(self)
        d.pop("extra")
        return d


@dataclass(frozen=True)
class Trial:
    """What one trial sends and under which fault: ``n`` records of ``size`` bytes by a producer
    with the delivery settings ``semantics`` (a name of :data:`~streamscale.reliability.spec.SEMANTICS`
    or a :class:`~streamscale.reliability.spec.ProducerSettings`), to a topic of ``partitions``,
    ``replication_factor`` replicas, ``min_insync_replicas`` and unclean leader election as
    ``unclean_election`` says."""

    semantics: str | ProducerSettings
    n: int
    size: int
    fault: object
    partitions: int = 1
    rate: float = 0.0
    repetition: int = 0
    txn_messages: int = 1000
    send_timeout_s: float = 300
    receive_timeout_s: float = 60
    replication_factor: int = 1
    min_insync_replicas: int = 1
    unclean_election: bool = False

    def topic_config(self) -> dict[str, str]:
        config = {"min.insync.replicas": str(self.min_insync_replicas)}
        if self.unclean_election:
            config["unclean.leader.election.enable"] = "true"
        return config


def run_trial(testbed: Testbed, trial: Trial) -> TrialResult:
    """One trial on ``testbed``: the records sent while the fault acts, then received over a clean
    link and accounted."""
    t_trial = time.monotonic()
    settings = settings_of(trial.semantics)
    topic = f"trak-{uuid.uuid4().hex[:10]}"
    access = BrokerAccess(testbed.connection)
    access.create_topic(topic, trial.partitions, trial.replication_factor, trial.topic_config())
    testbed.settle(topic)
    result = _result_of(trial, settings)
    sender = Sender(
        testbed.connection, topic, settings, trial.n, trial.size, trial.rate, trial.txn_messages, trial.send_timeout_s
    )
    resets_before, response_resets_before = testbed.proxy_resets(), testbed.proxy_response_resets()
    _send_under_fault(testbed, trial, result, sender, topic)
    result.proxy_resets = testbed.proxy_resets() - resets_before
    result.resets_response = testbed.proxy_response_resets() - response_resets_before
    for k, v in sender.requests().items():
        setattr(result, k, v)
    ids = _receive(testbed, trial, result, topic, settings)
    access.delete_topics([topic])  # after every client of the topic is closed
    access.close()
    if ids is None:
        result.acked = int(sender.acked.sum())
        result.alpha = result.beta = float("nan")
    else:
        account_trial(result, sender, ids, trial.n)
        if result.broker_restarted:
            result.note = "broker restarted mid-run (stopped and started again on its storage)"
    result.trial_s = time.monotonic() - t_trial
    return result


def _result_of(trial: Trial, settings: ProducerSettings) -> TrialResult:
    fault = trial.fault
    return TrialResult(
        settings.label(),
        trial.size,
        fault.label(),
        trial.repetition,
        trial.n,
        fault_kind=fault.kind,
        delay_ms=float(getattr(fault, "delay_ms", 0.0)),
        loss_pct=float(getattr(fault, "reset_pct", getattr(fault, "loss_pct", 0.0))),
        acks=str(settings.acks),
        idempotence=settings.idempotence,
        transactions=settings.transactions,
        replication_factor=trial.replication_factor,
        min_insync_replicas=trial.min_insync_replicas,
        unclean_election=trial.unclean_election,
    )


def _scheduled(testbed: Testbed, trial: Trial, result: TrialResult, topic: str) -> list[tuple[float, Callable]]:
    """The fault's timed actions, in time order: a proxy's cut and its end, a broker's restart."""
    fault = trial.fault
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
                a.create_topic(topic, trial.partitions, exist_ok=True)

        events.append((fault.at_s, restart))
    return sorted(events, key=lambda e: e[0])


def _send_under_fault(testbed: Testbed, trial: Trial, result: TrialResult, sender: Sender, topic: str) -> None:
    """Send every record in a worker thread while this (main) thread runs the fault's timeline: a
    broker restart must happen in the main thread (see EmbeddedBroker._spawn)."""
    events = _scheduled(testbed, trial, result, topic)
    steps = testbed.cluster_fault(trial.fault, topic) if isinstance(trial.fault, ClusterFault) else None
    watch = None
    failure: list[BaseException] = []

    def send() -> None:
        try:
            sender.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            failure.append(exc)

    try:
        testbed.apply(trial.fault)
        worker = threading.Thread(target=send, name="trak-sender", daemon=True)
        t0 = time.monotonic()
        if steps is not None:
            watch = testbed.leader_watch(topic, t0)
        while events and events[0][0] <= 0:  # a step at 0 s is in effect before the first record is sent
            events.pop(0)[1]()
        worker.start()
        for at, action in events:
            wait = t0 + at - time.monotonic()
            if wait > 0:
                worker.join(wait)
            action()  # scheduled faults happen even when sending already finished (cut ends, restarts)
        if steps is not None:
            steps.run(t0, worker)
        worker.join()
        result.send_s = time.monotonic() - t0
        if failure:
            raise failure[0]
    finally:
        if watch is not None:
            watch.stop()
        testbed.clear()
    if steps is not None:
        _fault_timeline(result, sender, steps, watch)
        _resettle(testbed, topic)


def _resettle(testbed: Testbed, topic: str) -> None:
    try:
        # a healed or restarted node rejoins with the metadata it had when it went: the receiver
        # reads once every replica is in sync again, what the cluster holds, not a stale view
        testbed.settle(topic)
    except BrokerError as exc:
        log.warning("the replicas of %s were not in sync again before receiving: %s", topic, exc)


def _receive(testbed: Testbed, trial: Trial, result: TrialResult, topic: str, settings: ProducerSettings):
    """The ids the topic holds, or None when the receiver failed: the trial failed then, not the
    campaign, and its loss is unknown and said to be."""
    t1 = time.monotonic()
    isolation = "read_committed" if settings.transactions else "read_uncommitted"
    try:
        return receive(testbed.connection, topic, isolation, trial.receive_timeout_s)
    except (WaitTimeout, KafkaClientError) as exc:
        result.received = False
        result.note = f"receiver failed: {exc}"
        return None
    finally:
        result.receive_s = time.monotonic() - t1


def account_trial(result: TrialResult, sender: Sender, ids: np.ndarray, n: int) -> None:
    result.M, result.distinct, result.lost, result.duplicated = account(ids, n)
    result.alpha, result.beta = result.lost / n, result.duplicated / n
    prometheus.rel_received.labels(result.semantics).inc(result.M)
    prometheus.rel_lost.labels(result.semantics).inc(result.lost)
    prometheus.rel_duplicated.labels(result.semantics).inc(result.duplicated)
    result.acked = int(sender.acked.sum())
    received = np.zeros(n, dtype=bool)
    received[ids[(ids >= 0) & (ids < n)]] = True
    result.acked_but_lost = int((sender.acked & ~received).sum())
    result.unacked_lost = result.lost - result.acked_but_lost
    result.send_rate = n / result.send_s if result.send_s else 0.0
    result.accounted_rate = n / (result.send_s + result.receive_s)
    result.producer_errors = ", ".join(f"{k}:{v}" for k, v in sorted(sender.errors.items()))
    result.error_window_s = sender.error_window_s()
    result.aborted_transactions = sender.aborted


def _fault_timeline(result: TrialResult, sender: Sender, steps, watch) -> None:
    """The cluster fault's steps and the leader changes seen, in time order, and how long the
    producer went without an acknowledgment from the first step on."""
    events = list(steps.timeline)
    if watch is not None:
        events += [(t, f"partition {p} leader {old} -> {new}") for t, p, old, new in watch.changes]
        result.leader_changes = len(watch.changes)
        result.min_isr_seen = watch.min_isr
    result.timeline = "; ".join(f"{t:.2f} s {text}" for t, text in sorted(events))
    if steps.not_done:
        # not a trial of this fault: its figures must not count as what the fault lost
        result.fault_injected = False
        result.note = "; ".join(filter(None, [result.note, "fault not injected: " + ", ".join(steps.not_done)]))
    if steps.first_step_s is not None:
        start, length = sender.stall(steps.first_step_s)
        result.stall_s = length
        result.recovery_s = (start + length - steps.first_step_s) if length else 0.0
