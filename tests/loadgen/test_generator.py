import json
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

from streamscale.errors import ConfigError, StreamscaleError
from streamscale.loadgen import GeneratorConfig, LoadGenerator, SensorRegistry, generate
from streamscale.loadgen.generator import LoadGenerators
from streamscale.loadgen.registry import REGISTRY_KEY


def _consume_all(bootstrap, topic, partitions, n):
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out = []
    deadline = time.monotonic() + 30
    try:
        while len(out) < n:
            assert time.monotonic() < deadline, f"only {len(out)} of {n} records arrived"
            out += [m for m in c.consume(10000, 0.2) if m.error() is None]
    finally:
        c.close()
    return out


def test_finite_mode_exact_records_one_per_sensor_and_period(broker, topic_factory):
    topic = topic_factory(4)
    cfg = GeneratorConfig(
        broker.bootstrap,
        topic=topic,
        sensors=50,
        period_s=0.1,
        workers=2,
        records=500,
        throttle=False,
        start_time_ms=1_000_000,
    )
    res = generate(cfg)
    assert (res.sent, res.delivered, res.failed) == (500, 500, 0)
    msgs = _consume_all(broker.bootstrap, topic, 4, 500)
    assert len(msgs) == 500
    by_sensor = {}
    for m in msgs:
        doc = json.loads(m.value())
        assert m.key().decode() == doc["identifier"]
        by_sensor.setdefault(doc["identifier"], []).append(doc["timestamp"])
    assert sorted(by_sensor) == sorted(f"s_{i}" for i in range(50))
    for ts in by_sensor.values():
        ts.sort()
        assert len(ts) == 10  # 500 records / 50 sensors
        assert {b - a for a, b in zip(ts, ts[1:])} == {100}  # exactly one record per 100 ms period


def test_rate_control_reaches_target_and_reports_each_second(broker, topic_factory):
    topic = topic_factory(2)
    seconds = []
    cfg = GeneratorConfig(broker.bootstrap, topic=topic, sensors=5000, workers=1, duration_s=3)
    res = LoadGenerator(cfg, on_second=seconds.append).run()
    # exactly rate x duration; a machine too busy to keep up sends less and says so
    assert res.delivered == 15000 or (res.delivered < 15000 and not res.reached_target)
    assert len(seconds) >= 2 and all(s["target_rate"] == 5000 for s in seconds)
    # Rate control never sends ahead of the schedule (rate x elapsed, plus what the worker may
    # send between the sample's clock reading and its counter reading). How far it falls behind
    # on a machine that is busy elsewhere is the shortfall's business, not this test's.
    assert all(s["sent"] <= 5000 * s["elapsed_s"] + 0.1 * 5000 for s in seconds)
    assert all(s["sent"] == s["delivered"] + s["in_flight"] + s["failed"] for s in seconds)
    assert 0 <= res.max_in_flight <= res.sent
    assert 0 < res.cpu_s < 3  # its share of the machine: measured, and less than a core at 5,000/s


def test_a_rate_far_below_the_machines_is_reached(broker, topic_factory):
    # whether 5,000 records/s are kept up with depends on the machine; 100/s on one worker does not
    topic = topic_factory(1)
    res = generate(GeneratorConfig(broker.bootstrap, topic=topic, sensors=100, workers=1, duration_s=3))
    assert res.delivered == 300 and res.failed == 0
    assert res.reached_target


def test_finish_lets_each_generator_send_its_whole_schedule_and_stop_does_not(broker, access, topic_factory):
    # A run asks for its generators' end when its own load window closes, which opens a moment after
    # their schedule began: finish waits out the schedule, stop ends it at once.
    first, second, cut = topic_factory(1), topic_factory(1), topic_factory(1)
    gens = LoadGenerators([
        ("a", GeneratorConfig(broker.bootstrap, topic=first, sensors=100, workers=1, duration_s=1.5)),
        ("b", GeneratorConfig(broker.bootstrap, topic=second, sensors=40, workers=1, duration_s=1.5)),
    ]).start()  # fmt: skip
    res = gens.finish()
    assert (res.sent, res.failed) == (210, 0)
    assert [sum(access.end_offsets(t).values()) for t in (first, second)] == [150, 60]
    early = LoadGenerator(GeneratorConfig(broker.bootstrap, topic=cut, sensors=100, workers=1, duration_s=1.5))
    assert early.start().stop().sent < 150  # stopped before its schedule even began


def test_shortfall_is_reported(broker, topic_factory):
    topic = topic_factory(1)
    cfg = GeneratorConfig(broker.bootstrap, topic=topic, sensors=1000, period_s=0.0001, workers=1, duration_s=2.5)
    res = generate(cfg)
    assert not res.reached_target
    assert res.achieved_rate < 0.95 * cfg.target_rate
    assert res.sent == res.delivered + res.failed  # what it did send is all accounted for
    assert res.cpu_s > 0  # measured; how busy a worker that cannot keep up is depends on the machine


def test_missing_topic_and_bad_config(broker):
    with pytest.raises(StreamscaleError, match="does not exist"):
        generate(GeneratorConfig(broker.bootstrap, topic="missing-topic", records=1))
    for kw in [{"sensors": 0}, {"period_s": 0}, {"encoding": "xml"}, {"distribution": "weird"}]:
        with pytest.raises(ConfigError):
            GeneratorConfig(broker.bootstrap, **kw)


def test_registry_published_to_topic(broker, access):
    reg = SensorRegistry.build(2, 4)
    topic = "configuration-test"
    reg.publish(broker.bootstrap, topic)
    try:
        [m] = _consume_all(broker.bootstrap, topic, 1, 1)
        assert m.key() == REGISTRY_KEY
        assert SensorRegistry.load(m.value().decode()).ancestors() == reg.ancestors()
    finally:
        access.delete_topics([topic])


def test_producer_batches_are_long_and_a_users_config_wins():
    """Batches of up to 200 ms keep the generator's and the broker's cost per record low beside
    the Spark job under test. A user's producer_config still wins."""
    from streamscale.broker.connection import KafkaConnection
    from streamscale.loadgen.config import PRODUCER_DEFAULTS

    conn = KafkaConnection.of("127.0.0.1:9")
    assert int(conn.config({}, defaults=PRODUCER_DEFAULTS)["linger.ms"]) >= 100
    assert conn.config({"linger.ms": 5}, defaults=PRODUCER_DEFAULTS)["linger.ms"] == 5
    # a batch may hold what 200 ms bring at 50,000 records/s per partition
    assert PRODUCER_DEFAULTS["batch.num.messages"] >= 50_000 * int(PRODUCER_DEFAULTS["linger.ms"]) / 1000


def test_delivery_kept_up_is_the_trend_of_records_in_flight():
    from streamscale.loadgen.config import delivery_kept_up

    t = [float(i) for i in range(20)]
    # acknowledgements in 200 ms steps around a steady ~1,000 in flight at 5,000/s: kept up
    steps = [1000 + (600 if i % 3 == 0 else -400 if i % 3 == 1 else 0) for i in range(20)]
    assert delivery_kept_up(t, steps, 5000)
    # acknowledged at 94 % of the rate sent: the backlog grows 300/s, more than 5 % of 5,000
    assert not delivery_kept_up(t, [1000 + 300 * i for i in range(20)], 5000)
    assert delivery_kept_up(t, [1000 + 200 * i for i in range(20)], 5000)  # 96 %: within the tolerance
    # the broker stops acknowledging altogether
    assert not delivery_kept_up(t, [5000 * i for i in range(20)], 5000)
    # too few samples to tell a trend from the steps: judged on the rate sent alone
    assert delivery_kept_up(t[:5], [5000 * i for i in range(5)], 5000)


@pytest.mark.parametrize("distribution,encoding", [("normal:50,20", "json"), ("uniform:0,100", "csv")])
def test_bulk_records_are_the_per_record_ones(broker, topic_factory, distribution, encoding):
    # the same values, keys, event times and partitions; each sensor's records in the same order
    # (two workers' records interleave differently from run to run within a partition)
    got, order = {}, {}
    for bulk in (True, False):
        topic = topic_factory(3, f"bulk-{bulk}")
        cfg = GeneratorConfig(
            broker.bootstrap,
            topic=topic,
            sensors=1_000,
            workers=2,
            records=25_000,
            throttle=False,
            start_time_ms=1_700_000_000_000,
            distribution=distribution,
            encoding=encoding,
            bulk=bulk,
        )
        res = generate(cfg)
        assert (res.sent, res.delivered, res.failed) == (25_000, 25_000, 0)
        msgs = _consume_all(broker.bootstrap, topic, 3, 25_000)
        got[bulk] = sorted((m.partition(), m.key(), m.value()) for m in msgs)
        by_sensor: dict = {}
        for m in sorted(msgs, key=lambda m: (m.partition(), m.offset())):
            by_sensor.setdefault(m.key(), []).append(m.value())
        order[bulk] = by_sensor
    assert got[True] == got[False] and len(got[True]) == 25_000
    assert order[True] == order[False]
    assert len({p for p, *_ in got[True]}) == 3


@pytest.mark.timeout(120)
def test_described_records_unthrottled_at_a_rate_above_a_chunk_a_step(broker, topic_factory):
    # 1,000,000 records/s scheduled: a 50 ms step holds more than a chunk; unthrottled, the
    # generator must send chunk after chunk rather than wait for a step to fill
    from streamscale.loadgen.recordspec import records_spec

    topic = topic_factory(2)
    spec = records_spec({"key": "k", "fields": {"k": {"type": "long", "gen": "sequence"}}}, "test")
    cfg = GeneratorConfig(
        broker.bootstrap, topic=topic, sensors=1_000_000, records=30_000, throttle=False, records_spec=spec
    )
    res = generate(cfg)
    assert (res.sent, res.delivered, res.failed) == (30_000, 30_000, 0)
    msgs = _consume_all(broker.bootstrap, topic, 2, 30_000)
    assert sorted(int(m.key()) for m in msgs) == list(range(30_000))
    assert all(json.loads(m.value())["k"] == int(m.key()) for m in msgs)


def test_described_records_land_where_librdkafkas_partitioner_puts_their_keys(broker, topic_factory):
    # the generator places keyed records itself (one hand-over per partition): each key must land
    # where a producer that leaves the choice to librdkafka puts it
    from confluent_kafka import Producer

    from streamscale.loadgen.recordspec import records_spec

    topic, probe = topic_factory(4), topic_factory(4)
    spec = records_spec({"key": "k", "fields": {"k": {"type": "string", "gen": "keys:40"}}}, "test")
    res = generate(GeneratorConfig(broker.bootstrap, topic=topic, sensors=2000, records=4000, records_spec=spec))
    assert res.delivered == 4000
    placed = {}
    p = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        key = f"key-{i}".encode()
        p.produce(probe, b"x", key, on_delivery=lambda err, m: placed.__setitem__(m.key(), m.partition()))
    p.flush(30)
    got = {}
    for m in _consume_all(broker.bootstrap, topic, 4, 4000):
        got.setdefault(m.key(), set()).add(m.partition())
    assert {k: v.pop() for k, v in got.items() if len(v) == 1} == placed and len(got) == 40


def test_a_worker_that_fails_is_reported_in_one_line_and_seen_gone(broker, topic_factory, capfd):
    # a producer setting librdkafka refuses: each worker fails as it starts its producer
    gen = LoadGenerator(
        GeneratorConfig(
            broker.bootstrap,
            topic=topic_factory(1),
            sensors=1000,
            workers=2,
            producer_config={"linger.ms": "soon"},
        )
    ).start()
    res = gen.wait(60)  # ends by itself: every worker is gone
    assert res.delivered == 0 and not res.reached_target
    assert res.first_error.startswith("load generator worker ")
    assert "Invalid value for configuration property" in res.first_error
    assert gen.worker_failure() == res.first_error
    assert "Traceback" not in capfd.readouterr().err


def test_each_record_is_stamped_with_the_instant_it_is_sent(broker, topic_factory):
    # The schedule starts once the workers can send: its records' event timestamps are when they
    # were handed to the producer (their Kafka timestamp), not a head start earlier. A fixed 1 s
    # head start stamped every record ~1 s before it left, and a worker whose imports took longer
    # (1-4 s on a busy machine) sent its first seconds at once and fell short in a short run.
    topic = topic_factory(1)
    res = generate(GeneratorConfig(broker.bootstrap, topic=topic, sensors=200, workers=2, duration_s=2))
    assert (res.sent, res.delivered) == (400, 400)
    gaps = [
        m.timestamp()[1] - json.loads(m.value())["timestamp"] for m in _consume_all(broker.bootstrap, topic, 1, 400)
    ]
    assert min(gaps) >= -1  # never sent ahead of its schedule (stamps are whole ms)
    assert sorted(gaps)[len(gaps) // 2] < 500, sorted(gaps)[:: len(gaps) // 10]
