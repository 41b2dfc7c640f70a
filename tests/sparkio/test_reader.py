"""read_range without Spark: cached per-partition readers continue, seek back and forth, stop on gaps."""

import pytest

from streamscale.sparkio import kafka
from streamscale.sparkio.kafka import SourceConfig, read_range
from tests.conftest import produce


@pytest.fixture(autouse=True)
def _close_readers():
    # readers created in this process must be gone before the session deletes their topics
    yield
    kafka._close_clients()


def offsets(cfg, topic, start, end):
    return [o for rb in read_range(cfg, topic, 0, start, end) for o in rb.column("offset").to_pylist()]


def test_ranges_in_any_order_are_exact(broker, topic_factory):
    topic = topic_factory(1)
    produce(broker.bootstrap, topic, ((None, b"%d" % i, 0) for i in range(3000)))
    cfg = SourceConfig.from_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic})
    for start, end in [(0, 100), (100, 1200), (1200, 1201), (50, 80), (2000, 3000), (1201, 2000), (0, 3000)]:
        assert offsets(cfg, topic, start, end) == list(range(start, end))


def test_ranges_ending_on_transaction_markers(broker, topic_factory):
    from confluent_kafka import Producer

    topic = topic_factory(1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    for _ in range(3):  # offsets 0-9 data, 10 marker, 11-20 data, 21 marker, 22-31 data, 32 marker
        p.begin_transaction()
        for i in range(10):
            p.produce(topic, value=b"%d" % i, partition=0)
        p.commit_transaction(30)
    cfg = SourceConfig.from_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                                     "kafka.isolation.level": "read_committed", "pollTimeoutMs": "20000"})
    assert offsets(cfg, topic, 0, 11) == list(range(10))
    assert offsets(cfg, topic, 11, 22) == list(range(11, 21))
    assert offsets(cfg, topic, 22, 33) == list(range(22, 32))  # ends on the marker: must not hang


def test_missing_records_are_an_error_not_a_hang(broker, topic_factory):
    topic = topic_factory(1)
    produce(broker.bootstrap, topic, ((None, b"x", 0) for _ in range(10)))
    cfg = SourceConfig.from_options({"kafka.bootstrap.servers": broker.bootstrap, "subscribe": topic,
                                     "pollTimeoutMs": "2000"})
    with pytest.raises(Exception, match="no progress|out of range|no longer"):
        offsets(cfg, topic, 5, 20)  # the end is beyond the log
