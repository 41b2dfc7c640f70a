import pytest

from streamscale.broker import TopicNotFound
from streamscale.waiting import wait_for
from tests.conftest import produce


def test_end_offsets_exact_after_batched_idempotent_production(broker, access, topic_factory):
    topic = topic_factory(1)
    n = produce(broker.bootstrap, topic, ((b"k", b"v%d" % i, 0) for i in range(25_005)))
    assert access.end_offsets(topic) == {0: n}


def test_end_offsets_exact_on_many_partitions(broker, access, topic_factory):
    topic = topic_factory(5)
    counts = {p: 1000 * p + 7 for p in range(5)}
    produce(broker.bootstrap, topic, ((None, b"x", p) for p, c in counts.items() for _ in range(c)))
    assert access.end_offsets(topic) == counts
    assert access.start_offsets(topic) == {p: 0 for p in range(5)}


def test_start_offsets_follow_deleted_records(broker, access, topic_factory):
    # the log start moves when records are deleted (retention, DeleteRecords): a query from
    # "earliest" must start there, not at 0
    from confluent_kafka import TopicPartition

    topic = topic_factory(2)
    produce(broker.bootstrap, topic, ((None, b"x", i % 2) for i in range(200)))
    for fut in access.admin.delete_records([TopicPartition(topic, 0, 40)]).values():
        fut.result()
    assert access.start_offsets(topic) == {0: 40, 1: 0}
    assert access.end_offsets(topic) == {0: 100, 1: 100}


def test_end_offsets_count_transaction_markers(broker, access, topic_factory):
    from confluent_kafka import Producer

    topic = topic_factory(1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"%d" % i)
    p.commit_transaction(30)
    # 10 records + 1 commit marker; the coordinator writes the marker after the commit returns
    wait_for(lambda: access.end_offsets(topic) == {0: 11}, 30, "the commit marker")
    assert access.end_offsets(topic, "read_committed") == {0: 11}


def test_asking_about_a_topic_never_creates_it(access):
    assert not access.topic_exists("never-created")
    with pytest.raises(TopicNotFound, match="never-created"):
        access.end_offsets("never-created")
    assert "never-created" not in access.topics()


def test_create_delete(access):
    access.create_topic("cd-topic", 3)
    assert access.topics()["cd-topic"] == 3
    access.create_topic("cd-topic", 3, exist_ok=True)
    with pytest.raises(Exception, match="already exists"):
        access.create_topic("cd-topic", 3)
    access.delete_topics(["cd-topic"])
    assert not access.topic_exists("cd-topic")
    with pytest.raises(TopicNotFound):
        access.delete_topics(["cd-topic"], missing_ok=False)


def test_committed_offsets_and_lag(broker, access, topic_factory):
    topic = topic_factory(2)
    produce(broker.bootstrap, topic, ((None, b"x", i % 2) for i in range(100)))
    assert access.committed_offsets("g-lag", topic) == {}
    access.commit_offsets("g-lag", topic, {0: 20, 1: 50})
    assert access.committed_offsets("g-lag", topic) == {0: 20, 1: 50}
    assert access.lag("g-lag", topic) == {0: 30, 1: 0}


def test_partitions_can_be_added(access, topic_factory):
    topic = topic_factory(1)
    access.create_partitions(topic, 3)
    assert access.topics()[topic] == 3
    assert access.end_offsets(topic) == {0: 0, 1: 0, 2: 0}


@pytest.mark.parametrize("name", ["", "bad topic", "a/b", "x" * 250, ".", "..", "ü"])
def test_invalid_topic_names_are_refused_before_the_broker(name):
    from streamscale.broker.access import check_topic_name
    from streamscale.errors import ConfigError

    with pytest.raises(ConfigError, match="not a valid Kafka topic name"):
        check_topic_name(name)
    assert check_topic_name("ok.name_-9" + "x" * 238) == "ok.name_-9" + "x" * 238  # 249 characters


def test_creating_no_topics_is_a_no_op(access):
    # a second autoscaler run with nothing new to create must neither fail nor touch the topics
    before = access.topics()
    assert access.create_topics({}) is None
    assert access.topics() == before


def test_read_committed_reads_skip_aborted_transactions_at_the_broker(broker, access, topic_factory):
    # Kafka filters the records of aborted transactions out of read_committed fetches (the fetch
    # response lists them): a consumer sees the committed records only, in order
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    topic = topic_factory(1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    expected = []
    for t in range(4):
        p.begin_transaction()
        values = [b"t%d-%d" % (t, i) for i in range(25)]
        for v in values:
            p.produce(topic, value=v)
        p.flush(30)  # in the log before the abort (an abort purges what is still queued locally)
        if t % 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
            expected += values
    # 100 records and 4 markers (written by the coordinator after each commit or abort returns);
    # then the last stable offset is the end (no transaction open)
    wait_for(lambda: access.end_offsets(topic, "read_committed") == {0: 104}, 30, "the last marker")
    assert access.end_offsets(topic) == {0: 104}
    c = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": f"rc-{topic}",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
            "enable.auto.commit": False,
        }
    )
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        while True:
            m = c.poll(10)
            assert m is not None, "no end of partition within 10 s"
            if m.error() is not None:
                assert m.error().code() == KafkaError._PARTITION_EOF
                break
            got.append(m.value())
    finally:
        c.close()
    assert got == expected


def test_producing_to_a_missing_topic_is_an_error_not_a_new_topic(broker, access):
    # the embedded broker never creates a topic on a metadata request or a produce
    from confluent_kafka import KafkaError, Producer

    errors = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
    p.produce("typo-topic-never-created", value=b"x", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT, KafkaError._UNKNOWN_TOPIC)
    assert not access.topic_exists("typo-topic-never-created")


class _AnswersOnceWith:
    """The admin client, but the first ListOffsets answers ``code`` for partition 0, as a broker
    does for a moment right after a topic is created."""

    def __init__(self, admin, code: int):
        self.admin, self.code, self.calls = admin, code, 0

    def list_offsets(self, req, **kw):
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        self.calls += 1
        res = self.admin.list_offsets(req, **kw)
        if self.calls == 1:
            failed = Future()
            failed.set_exception(KafkaException(KafkaError(self.code)))
            res = {tp: (failed if tp.partition == 0 else f) for tp, f in res.items()}
        return res

    def __getattr__(self, name):
        return getattr(self.admin, name)


@pytest.mark.parametrize(
    "code", ["UNKNOWN_LEADER_EPOCH", "FENCED_LEADER_EPOCH", "NOT_LEADER_FOR_PARTITION", "OFFSET_NOT_AVAILABLE"]
)
def test_offsets_asked_again_while_a_new_partitions_leader_settles(broker, access, topic_factory, code):
    from confluent_kafka import KafkaError

    topic = topic_factory(3)
    produce(broker.bootstrap, topic, [(b"k", b"v", p) for p in (0, 0, 1)])
    real = access.admin
    access.admin = _AnswersOnceWith(real, getattr(KafkaError, code))
    try:
        assert access.end_offsets(topic) == {0: 2, 1: 1, 2: 0}
        assert access.admin.calls == 2
    finally:
        access.admin = real


def test_offsets_error_that_is_not_transient_is_one_clear_error(access, topic_factory):
    from confluent_kafka import KafkaError

    from streamscale.errors import KafkaClientError

    topic = topic_factory(1)
    real = access.admin
    access.admin = _AnswersOnceWith(real, KafkaError.TOPIC_AUTHORIZATION_FAILED)
    try:
        with pytest.raises(KafkaClientError, match=f"offsets of '{topic}'"):
            access.end_offsets(topic)
        assert access.admin.calls == 1
    finally:
        access.admin = real
