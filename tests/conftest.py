"""Shared fixtures: one embedded broker and one SparkSession per test session (both torn down
even when tests fail), and a fresh topic per test."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid

import pytest

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.broker.kafka_server import names_collector

# Every JVM the tests start (brokers, clusters, the Spark sessions of the commands under test) runs
# with the C1 compiler alone, through the java launcher's JDK_JAVA_OPTIONS, inherited by each child.
# No test JVM lives long enough for C2's code to pay back its compiling, and the suite is CPU-bound
# on 2 cores: the CLI-jobs, cluster and secured-broker tests took 318 CPU-s with C1 alone against
# 473 with Java's default compilers (2 CPUs, 2026-12-02); the late-rule and windowed
# tests' shared session 222 against 308 (2026-11-26). streamscale itself, outside the tests,
# keeps the defaults.
_C1_ONLY = "-XX:TieredStopAtLevel=1"
if _C1_ONLY not in os.environ.get("JDK_JAVA_OPTIONS", ""):
    os.environ["JDK_JAVA_OPTIONS"] = f"{os.environ.get('JDK_JAVA_OPTIONS', '')} {_C1_ONLY}".strip()
# ...and with the serial collector, unless JDK_JAVA_OPTIONS names one (the brokers then leave their
# G1 out): in JVMs this short-lived on 2 cores it costs less CPU than G1. The late-rule and
# windowed tests took 105-108 CPU-s with it against 112-117 with G1, a broker's start and stop
# 2.2-2.4 against 2.3-2.9 CPU-s (each alternated, 2026-12-04).
if not names_collector(os.environ["JDK_JAVA_OPTIONS"]):
    os.environ["JDK_JAVA_OPTIONS"] += " -XX:+UseSerialGC"

# ...and keeps its temporary files (Spark's block managers and artifact folders) in one folder of the
# test run's own, removed when the run ends: a JVM that a test stops hard runs no shutdown hook and
# would leave its folders in /tmp. Made once, by the first process (xdist's workers inherit it).
_JVM_TMP = "STREAMSCALE_TEST_JVM_TMPDIR"
if _JVM_TMP not in os.environ:
    os.environ[_JVM_TMP] = tempfile.mkdtemp(prefix="streamscale-test-jvm-")
    os.environ["JDK_JAVA_OPTIONS"] += f" -Djava.io.tmpdir={os.environ[_JVM_TMP]}"


def pytest_unconfigure(config):
    if not hasattr(config, "workerinput"):  # the run itself (not a worker), every worker ended
        shutil.rmtree(os.environ[_JVM_TMP], ignore_errors=True)


# The longest tests (a minute or more each on 2 CPUs), run first: with several workers (`make test`)
# they then overlap with the short ones instead of ending the run alone.
LONGEST_FIRST = (
    "tests/test_demo.py::",
    "tests/benchmark/test_execution.py::test_multi_executor_run_on_standalone_cluster",
    "tests/reliability/test_reliability.py::test_pipeline_killed_and_restarted_loses_nothing",
    "tests/cli/test_cli.py::test_sigkilled_",
    "tests/pipelines/test_late_rule.py::",
    "tests/pipelines/test_doc_examples.py::",
    "tests/broker/test_embedded.py::test_a_kept_data_dir",
    "tests/pipelines/test_dead_letters.py::",
    "tests/cli/test_cli.py::test_a_property_given_once",
)


def shortfall(row: dict) -> bool:
    """Whether an experiments.csv row's load fell short on a slow or busy machine: its generator
    below its target, or its records reaching the input topic below 99 % of it (what makes a run
    invalid rather than judged)."""
    delivered, target = float(row["delivered_rate"]), float(row["target_rate"])
    return row["generator_reached_target"] == "False" or delivered < 0.99 * target


def pytest_collection_modifyitems(items):
    rank = {prefix: i for i, prefix in enumerate(LONGEST_FIRST)}

    def key(item):
        for prefix, i in rank.items():
            if item.nodeid.startswith(prefix):
                return i
        return len(rank)

    items.sort(key=key)  # stable: the rest keep their order


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
        _PRODUCERS.clear()  # before the broker goes: no reconnect noise from a cached producer


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
    # gone: no reader of a topic outlives it.
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


# One producer per (bootstrap, config) for the session: a new idempotent librdkafka producer waits
# 500 ms for its producer id (its first attempt runs before any broker connection is up), which
# was half a second per call, 50 s of a hypothesis test that produces per example.
_PRODUCERS: dict = {}


def produce(bootstrap: str, topic: str, records, timestamp: int | None = None, **conf):
    """Produce (key, value, partition) tuples with an idempotent batching producer; return count.
    ``timestamp``: every record's Kafka timestamp (ms), else the time it is produced."""
    from confluent_kafka import Producer

    cfg = {
        "bootstrap.servers": bootstrap,
        "enable.idempotence": True,
        "linger.ms": 20,
        "batch.num.messages": 5000,
        **conf,
    }
    cached = tuple(sorted(cfg.items()))
    p = _PRODUCERS.get(cached)
    if p is None:  # not `or`: a Producer with an empty queue is falsy (len() = messages queued)
        p = _PRODUCERS[cached] = Producer(cfg)
    errors: list = []
    n = 0
    for key, value, partition in records:
        kwargs = {"key": key, "value": value, "on_delivery": lambda e, m: errors.append(e) if e else None}
        if partition is not None:
            kwargs["partition"] = partition
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
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
