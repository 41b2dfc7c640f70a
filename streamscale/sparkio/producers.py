"""Producers of the Kafka sink and of the dead-letter topic, cached per Python worker (a worker
serves many tasks, so a producer outlives a batch), and :func:`produce_all`, which returns only when
every record was acknowledged and raises on any loss."""

from __future__ import annotations

import threading

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ConfigError, KafkaClientError

_LOCK = threading.Lock()
_PRODUCERS: dict[tuple, object] = {}


def producer(bootstrap: str, extra: tuple[tuple[str, str], ...]):
    """The worker's producer for a cluster; ``extra``: the sink's ``kafka.*`` options, which
    override the defaults here (idempotence and acks=all are what the sink promises)."""
    key = (bootstrap, extra)
    with _LOCK:
        p = _PRODUCERS.get(key)
        if p is None:
            defaults = {
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "batch.num.messages": 10000,
                "queue.buffering.max.kbytes": 512 * 1024,
                "allow.auto.create.topics": False,
            }
            p = _PRODUCERS[key] = KafkaConnection(bootstrap, extra).producer(defaults=defaults)
        return p


class _Delivery:
    """Counts delivery reports; the first failure is kept to be raised."""

    def __init__(self):
        self.ok = 0
        self.failed = 0
        self.first_error: str | None = None

    def __call__(self, err, msg):
        if err is None:
            self.ok += 1
        else:
            self.failed += 1
            if self.first_error is None:
                self.first_error = f"{err.str()} (topic {msg.topic()})"


def produce_all(producer, topic_default: str | None, rows, timeout: float = 120.0) -> int:
    """Produce (key, value, topic, partition, headers) tuples; return the count or raise on any loss."""
    report = _Delivery()
    sent = 0
    for key, value, topic, partition, headers in rows:
        topic = topic or topic_default
        if topic is None:
            raise ConfigError("the Kafka sink needs option 'topic' or a 'topic' column")
        kwargs = {"key": key, "value": value, "on_delivery": report}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                producer.produce(topic, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        sent += 1
        if sent % 10000 == 0:
            producer.poll(0)
    remaining = producer.flush(timeout)
    if remaining:
        raise KafkaClientError(f"Kafka sink: {remaining} records not delivered within {timeout:.0f} s")
    if report.failed:
        raise KafkaClientError(f"Kafka sink: {report.failed} of {sent} records failed: {report.first_error}")
    if report.ok != sent:
        raise KafkaClientError(f"Kafka sink: {sent} produced but {report.ok} acknowledged")
    return sent


def close_producers() -> None:
    with _LOCK:
        for p in _PRODUCERS.values():
            p.flush(10)
        _PRODUCERS.clear()
