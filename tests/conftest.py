"""Shared fixtures: one embedded broker and one SparkSession per test session (both torn down
even when tests fail), and a fresh topic per test."""

from __future__ import annotations

import os
import uuid

import pytest

from streamscale.broker import BrokerAccess, EmbeddedBroker


@pytest.fixture(scope="session")
def broker(tmp_path_factory):
    external = os.environ.get("STREAMSCALE_TEST_BOOTSTRAP")
    if external:  # run the suite against an external cluster

        class _External:
            bootstrap = external

        yield _External()
        return
    with EmbeddedBroker(log_dir=tmp_path_factory.mktemp("broker-logs")) as b:
        yield b


@pytest.fixture(scope="session")
def access(broker):
    a = BrokerAccess(broker.bootstrap)
    yield a
    a.close()


@pytest.fixture(scope="session")
def _created_topics(access):
    created: list[str] = []
    yield created
    # Deleted only at the end, after the Spark workers (set up later, so torn down earlier) are
    # gone: a librdkafka client that still knows a deleted topic crashes (see broker.access).
    access.delete_topics(created)


@pytest.fixture
def topic_factory(access, _created_topics):
    def make(partitions: int = 1, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        access.create_topic(name, partitions)
        _created_topics.append(name)
        return name

    return make


@pytest.fixture(scope="session")
def spark(_created_topics):
    from streamscale.sparkio.session import build_session

    session = build_session("local[2]", "streamscale-tests", shuffle_partitions=2)
    yield session
    session.stop()


def produce(bootstrap: str, topic: str, records, transactional: bool = False, **conf):
    """Produce (key, value, partition) tuples with an idempotent batching producer; return count."""
    from confluent_kafka import Producer

    cfg = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "linger.ms": 20,
        "batch.num.messages": 5000,
        **conf,
    }
    errors: list = []
    p = Producer(cfg)
    n = 0
    for key, value, partition in records:
        kwargs = {"key": key, "value": value, "on_delivery": lambda e, m: errors.append(e) if e else None}
        if partition is not None:
            kwargs["partition"] = partition
        while True:
            try:
                p.produce(topic, **kwargs)
                break
            except BufferError:
                p.poll(0.05)
        n += 1
    assert p.flush(60) == 0
    assert not errors, errors[:3]
    return n
