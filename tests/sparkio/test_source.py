"""The Python Kafka source end to end through real streaming queries on the embedded broker."""

import json
import uuid

import pytest
from pyspark.errors import StreamingQueryException

from streamscale.sparkio import readers
from streamscale.sparkio.io import Decoding, read_kafka, read_records
from streamscale.waiting import wait_for
from tests.conftest import produce

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _python_source(spark):
    # these tests name the ``streamscale-kafka`` format themselves: registered here, not by
    # whichever test happened to run first in this worker's session
    from streamscale.sparkio.session import use_python_source

    use_python_source(spark)


def _drain(spark, df, tmp_path, name=None, **trigger):
    """Run a query until everything available is read; return the memory table's rows."""
    name = name or f"q_{uuid.uuid4().hex[:8]}"
    q = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(**(trigger or {"availableNow": True}))
        .start()
    )
    q.awaitTermination(300)
    assert not q.isActive, "query did not finish"
    return spark.table(name).collect(), q


def test_exact_records_and_per_partition_order(spark, broker, topic_factory, tmp_path):
    topic = topic_factory(4)
    records = [(b"key-%d" % i, b"value-%d" % i, i % 4) for i in range(20_003)]
    produce(broker.bootstrap, topic, records)
    rows, q = _drain(spark, read_kafka(spark, broker.bootstrap, topic, "earliest"), tmp_path)
    assert len(rows) == len(records)
    got = {}
    for r in rows:
        assert r["topic"] == topic
        got.setdefault(r["partition"], []).append((r["offset"], bytes(r["key"]), bytes(r["value"])))
    for p in range(4):
        expected = [(k, v) for k, v, part in records if part == p]
        seq = sorted(got[p])
        assert [o for o, _, _ in seq] == list(range(len(expected)))  # offsets 0..n-1, none twice
        assert [(k, v) for _, k, v in seq] == expected  # producer order kept within the partition
    assert sum(s["numInputRows"] for s in [p["sources"][0] for p in q.recentProgress]) == len(records)


def test_tail_records_are_read_despite_short_list_offsets(spark, broker, access, topic_factory, tmp_path):
    # ListOffsets on the embedded broker answers the last batch's base offset + 1;
    # a reader trusting it misses the tail of the partition.
    topic = topic_factory(1)
    n = produce(broker.bootstrap, topic, ((None, b"%d" % i, 0) for i in range(25_005)))
    rows, _ = _drain(spark, read_kafka(spark, broker.bootstrap, topic, "earliest"), tmp_path)
    assert len(rows) == n == 25_005
    assert max(r["offset"] for r in rows) == n - 1


def test_max_offsets_per_trigger_splits_into_batches(spark, broker, topic_factory, tmp_path):
    topic = topic_factory(3)
    produce(broker.bootstrap, topic, ((None, b"x%d" % i, i % 3) for i in range(3000)))
    df = read_kafka(spark, broker.bootstrap, topic, "earliest", max_offsets_per_trigger=700)
    rows, q = _drain(spark, df, tmp_path)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == len(rows) == 3000
    assert max(sizes) <= 700 and len(sizes) >= 5
    assert len({(r["partition"], r["offset"]) for r in rows}) == 3000


def test_transaction_markers_do_not_hang_the_reader(spark, broker, topic_factory, tmp_path):
    # Control records leave offset gaps: the end offset is past the last data record.
    from confluent_kafka import Producer

    topic = topic_factory(1)
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    p.init_transactions(30)
    for batch in range(3):
        p.begin_transaction()
        for i in range(100):
            p.produce(topic, value=b"%d-%d" % (batch, i))
        p.commit_transaction(30)
    df = read_kafka(
        spark,
        broker.bootstrap,
        topic,
        "earliest",
        options={"kafka.isolation.level": "read_committed", "pollTimeoutMs": "30000"},
    )
    rows, _ = _drain(spark, df, tmp_path)
    assert sorted(bytes(r["value"]) for r in rows) == sorted(b"%d-%d" % (b, i) for b in range(3) for i in range(100))


def test_empty_topic_gives_no_rows(spark, broker, topic_factory, tmp_path):
    topic = topic_factory(2)
    rows, _ = _drain(spark, read_kafka(spark, broker.bootstrap, topic, "earliest"), tmp_path)
    assert rows == []


def test_missing_topic_is_a_clear_error(spark, broker, access, tmp_path):
    df = read_kafka(spark, broker.bootstrap, "no-such-topic", "earliest")
    with pytest.raises(StreamingQueryException, match="topic 'no-such-topic' does not exist"):
        _drain(spark, df, tmp_path)
    assert not access.topic_exists("no-such-topic")  # and asking did not create it


def test_starting_offsets_latest_and_json(spark, broker, topic_factory, tmp_path):
    topic = topic_factory(2)
    produce(broker.bootstrap, topic, ((None, b"old%d" % i, i % 2) for i in range(10)))
    rows, _ = _drain(spark, read_kafka(spark, broker.bootstrap, topic, "latest"), tmp_path)
    assert rows == []
    spec = json.dumps({topic: {"0": 3, "1": -2}})
    rows, _ = _drain(spark, read_kafka(spark, broker.bootstrap, topic, spec), tmp_path)
    assert sorted((r["partition"], r["offset"]) for r in rows) == [(0, 3), (0, 4)] + [(1, i) for i in range(5)]


def test_bad_options_are_clear_errors(spark, broker, topic_factory, tmp_path):
    topic = topic_factory(1)
    with pytest.raises(Exception, match="startingOffsets must be"):
        _drain(spark, read_kafka(spark, broker.bootstrap, topic, "yesterday"), tmp_path)
    with pytest.raises(Exception, match="maxOffsetsPerTrigger must be a whole number"):
        _ = read_kafka(spark, broker.bootstrap, topic, "earliest", options={"maxOffsetsPerTrigger": "lots"}).schema


def test_restart_from_checkpoint_no_loss_no_duplicates(spark, broker, topic_factory, tmp_path):
    src, out = topic_factory(3), topic_factory(1)
    produce(broker.bootstrap, src, ((None, b"a%d" % i, i % 3) for i in range(5000)))
    ckpt = str(tmp_path / "ckpt")
    from pyspark.sql import functions as F

    def run():
        df = read_kafka(spark, broker.bootstrap, src, "earliest", max_offsets_per_trigger=2000)
        q = (
            df.select(F.col("value"))
            .writeStream.format("streamscale-kafka")
            .option("kafka.bootstrap.servers", broker.bootstrap)
            .option("topic", out)
            .option("checkpointLocation", ckpt)
            .trigger(availableNow=True)
            .start()
        )
        q.awaitTermination(300)
        assert q.exception() is None

    run()
    produce(broker.bootstrap, src, ((None, b"b%d" % i, i % 3) for i in range(3000)))
    run()  # resumes from the checkpointed offsets
    rows, _ = _drain(spark, read_kafka(spark, broker.bootstrap, out, "earliest"), tmp_path)
    values = [bytes(r["value"]) for r in rows]
    expected = {b"a%d" % i for i in range(5000)} | {b"b%d" % i for i in range(3000)}
    assert len(values) == len(expected)  # none twice
    assert set(values) == expected  # none lost


def test_malformed_values_counted_and_dead_lettered(spark, broker, topic_factory, tmp_path):
    topic, dlq = topic_factory(2), topic_factory(1)
    good = [
        json.dumps({"identifier": f"s_{i}", "timestamp": 1000 + i, "valueInW": i / 2}).encode() for i in range(1000)
    ]
    bad = [
        b"not json",
        b'{"identifier": "s_x"}',
        b'{"identifier": 5, "timestamp": 1, "valueInW": 1.0}',
        b"[1, 2]",
        b'{"identifier": "s_y", "timestamp": "noon", "valueInW": 1.0}',
    ]
    records = [(None, v, i % 2) for i, v in enumerate(good)] + [(b"bad", v, 1) for v in bad]
    produce(broker.bootstrap, topic, records)
    df = read_records(spark, broker.bootstrap, topic, Decoding(dead_letter_topic=dlq), starting_offsets="earliest")
    rows, _ = _drain(spark, df, tmp_path)
    ok = [r for r in rows if r["value_error"] is None]
    errors = [r for r in rows if r["value_error"] is not None]
    assert len(ok) == 1000 and len(errors) == len(bad)
    assert sorted((r["identifier"], r["timestamp"], r["valueInW"]) for r in ok) == sorted(
        (f"s_{i}", 1000 + i, i / 2) for i in range(1000)
    )
    dead, _ = _drain(spark, read_kafka(spark, broker.bootstrap, dlq, "earliest"), tmp_path)
    assert sorted(bytes(r["value"]) for r in dead) == sorted(bad)


def test_the_spark_connector_is_sparks_own_kafka_format(spark, broker, topic_factory, tmp_path, monkeypatch):
    # make install puts spark-sql-kafka-0-10 on every session's classpath: the switch hands over to
    # Spark's format("kafka") (its progress names Spark's KafkaV2 source, not our data source), which
    # reads every record; an unknown connector is one clear error
    from streamscale.sparkio.io import read_records
    from streamscale.sparkio.session import spark_kafka_jars

    assert any(j.name.startswith("spark-sql-kafka-0-10_") for j in spark_kafka_jars())
    topic = topic_factory(2)
    produce(
        broker.bootstrap,
        topic,
        ((None, b'{"identifier": "s_%d", "timestamp": %d, "valueInW": 1.5}' % (i, i), i % 2) for i in range(500)),
    )
    monkeypatch.setenv("STREAMSCALE_KAFKA_IMPL", "spark")
    df = read_records(spark, broker.bootstrap, topic, starting_offsets="earliest")
    q = (
        df.writeStream.format("memory")
        .queryName("spark_connector_read")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(120)
    assert q.lastProgress["sources"][0]["description"].startswith("KafkaV2")  # Spark's own source
    rows = spark.sql("SELECT identifier, timestamp FROM spark_connector_read").collect()
    assert sorted((r["identifier"], r["timestamp"]) for r in rows) == sorted((f"s_{i}", i) for i in range(500))
    monkeypatch.setenv("STREAMSCALE_KAFKA_IMPL", "carrier-pigeon")
    with pytest.raises(Exception, match="must be one of"):
        read_kafka(spark, broker.bootstrap, topic)


def test_dozens_of_small_batches_across_markers_and_a_restart_each_record_once(
    spark, broker, access, topic_factory, tmp_path
):
    # maxOffsetsPerTrigger far below the partition sizes: dozens of bounded ranges, every one
    # continuing where a (possibly other) Python worker's reader stopped; transaction markers and
    # aborted records on the way; the query stopped mid-way and restarted from its checkpoint.
    import pyarrow.parquet as pq

    from tests.sparkio.helpers import reference_read, transactional_log

    topic = topic_factory(4)
    committed = transactional_log(broker.bootstrap, topic, 4, txns=16, seed=11)
    reference = reference_read(broker.bootstrap, topic, 4, access.end_offsets(topic, "read_committed"))
    assert all(set(committed[q]) <= set(reference[q]) for q in range(4))
    total = sum(len(v) for v in reference.values())
    out, ckpt = tmp_path / "out", str(tmp_path / "ckpt")

    def start(**trigger):
        df = read_kafka(
            spark,
            broker.bootstrap,
            topic,
            "earliest",
            max_offsets_per_trigger=10,
            options={"kafka.isolation.level": "read_committed"},
        ).select("partition", "offset")
        return (
            df.writeStream.format("parquet")
            .option("path", str(out))
            .option("checkpointLocation", ckpt)
            .trigger(**trigger)
            .start()
        )

    q = start(processingTime="0 seconds")
    try:
        wait_for(
            lambda: q.lastProgress is not None and q.lastProgress["batchId"] >= 12,
            300,
            "12 micro-batches of the first run",
        )
        # on a local master the tasks claim their groups (readers.claim_group): that path is the one tested
        assert list(readers.claims_dir().glob("*.json"))
    finally:
        q.stop()
    q = start(availableNow=True)
    q.awaitTermination(600)
    assert not q.isActive
    table = pq.read_table(str(out)).to_pandas()
    batches = q.lastProgress["batchId"] + 1
    assert batches >= 30, f"only {batches} micro-batches"
    got = {p: sorted(g["offset"].tolist()) for p, g in table.groupby("partition")}
    assert sum(len(v) for v in got.values()) == total  # none twice
    assert got == {p: v for p, v in reference.items() if v}
