import uuid

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

from streamscale.sparkio.io import read_kafka
from tests.conftest import produce

pytestmark = pytest.mark.spark


@pytest.fixture(autouse=True)
def _python_source(spark):
    # these tests name the ``streamscale-kafka`` format themselves: registered here, not by
    # whichever test happened to run first in this worker's session
    from streamscale.sparkio.session import use_python_source

    use_python_source(spark)


def _read_all(spark, bootstrap, topic, tmp_path):
    name = f"r_{uuid.uuid4().hex[:8]}"
    q = (
        read_kafka(spark, bootstrap, topic, "earliest")
        .writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    return spark.table(name).collect()


def test_stream_sink_writes_keys_values_exactly(spark, broker, topic_factory, tmp_path):
    src, out = topic_factory(2), topic_factory(3)
    produce(broker.bootstrap, src, ((b"k%d" % (i % 7), b"v%d" % i, i % 2) for i in range(4000)))
    df = read_kafka(spark, broker.bootstrap, src, "earliest").select(
        "key", F.concat(F.lit(b"out-"), F.col("value")).alias("value")
    )
    q = (
        df.writeStream.format("streamscale-kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", out)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(300)
    assert q.exception() is None
    rows = _read_all(spark, broker.bootstrap, out, tmp_path)
    assert sorted((bytes(r["key"]), bytes(r["value"])) for r in rows) == sorted(
        (b"k%d" % (i % 7), b"out-v%d" % i) for i in range(4000)
    )
    # same key -> same partition (the producer's partitioner), so per-key order is kept
    parts = {}
    for r in rows:
        parts.setdefault(bytes(r["key"]), set()).add(r["partition"])
    assert all(len(p) == 1 for p in parts.values())


def test_batch_writer_and_string_columns(spark, broker, topic_factory, tmp_path):
    out = topic_factory(1)
    spark.createDataFrame([("a", "1"), ("b", "2")], "key STRING, value STRING").write.format(
        "streamscale-kafka"
    ).option("kafka.bootstrap.servers", broker.bootstrap).option("topic", out).mode("append").save()
    rows = _read_all(spark, broker.bootstrap, out, tmp_path)
    assert sorted((bytes(r["key"]), bytes(r["value"])) for r in rows) == [(b"a", b"1"), (b"b", b"2")]


def test_write_failure_fails_the_query(spark, broker, topic_factory, tmp_path):
    src, out = topic_factory(1), topic_factory(1)
    produce(broker.bootstrap, src, ((None, b"x" * 5000, 0) for _ in range(10)))
    df = read_kafka(spark, broker.bootstrap, src, "earliest").select("value")
    # records larger than the producer allows cannot be delivered: the query must fail, not drop them
    q = (
        df.writeStream.format("streamscale-kafka")
        .option("kafka.bootstrap.servers", broker.bootstrap)
        .option("topic", out)
        .option("kafka.message.max.bytes", "2000")
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(StreamingQueryException, match="(?i)too large|MSG_SIZE"):
        q.awaitTermination(300)


def test_sink_without_value_column_is_rejected(spark, broker, topic_factory, tmp_path):
    out = topic_factory(1)
    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.createDataFrame([("a",)], "key STRING").write.format("streamscale-kafka").option(
            "kafka.bootstrap.servers", broker.bootstrap
        ).option("topic", out).mode("append").save()


def test_batch_write_of_a_micro_batch_exact_and_failing_loudly(spark, broker, topic_factory, tmp_path):
    # write_kafka_batch, what foreachBatch outputs use: every row of a multi-partition DataFrame
    # once, keys routed by the producer's partitioner, a delivery failure an error, not a loss
    from streamscale.sparkio.io import write_kafka_batch

    out = topic_factory(3)
    df = (
        spark.range(5000)
        .repartition(4)
        .select(
            (F.col("id") % 11).cast("string").alias("key"),
            F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"),
        )
    )
    write_kafka_batch(df, broker.bootstrap, out)
    write_kafka_batch(df.limit(0), broker.bootstrap, out)
    rows = _read_all(spark, broker.bootstrap, out, tmp_path)
    assert sorted((bytes(r["key"]), bytes(r["value"])) for r in rows) == sorted(
        (b"%d" % (i % 11), b"v%d" % i) for i in range(5000)
    )
    parts: dict = {}
    for r in rows:
        parts.setdefault(bytes(r["key"]), set()).add(r["partition"])
    assert all(len(p) == 1 for p in parts.values())

    big = spark.range(3).select(F.lit("x" * 5000).alias("value"))
    with pytest.raises(Exception, match="(?i)too large|MSG_SIZE"):
        write_kafka_batch(big, broker.bootstrap, out, options={"kafka.message.max.bytes": "2000"})
    with pytest.raises(Exception, match="needs a 'value' column"):
        write_kafka_batch(spark.range(3), broker.bootstrap, out)
    assert len(_read_all(spark, broker.bootstrap, out, tmp_path)) == 5000  # nothing more arrived


def test_the_python_connector_reads_and_writes_from_another_thread(spark, broker, topic_factory, tmp_path):
    # Spark looks a Python data source up in the calling JVM thread's active session; a Python
    # thread of its own gets a JVM thread with none
    import threading

    from streamscale.sparkio.io import WriteQuery, write_kafka

    src, out = topic_factory(1), topic_factory(1)
    produce(broker.bootstrap, src, ((None, b"v%d" % i, 0) for i in range(100)))
    outcome: dict = {}

    def work():
        try:
            df = read_kafka(spark, broker.bootstrap, src, "earliest", impl="python").select("value")
            q = write_kafka(
                df, broker.bootstrap, out, WriteQuery(str(tmp_path / "ck"), {"availableNow": True}), "python"
            )
            q.awaitTermination(300)
            outcome["error"] = q.exception()
        except Exception as e:  # noqa: BLE001 - handed to the test's thread
            outcome["error"] = e

    t = threading.Thread(target=work)
    t.start()
    t.join(300)
    assert not t.is_alive() and outcome["error"] is None
    rows = _read_all(spark, broker.bootstrap, out, tmp_path)
    assert sorted(bytes(r["value"]) for r in rows) == sorted(b"v%d" % i for i in range(100))
