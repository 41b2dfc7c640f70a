"""Spark's real-time mode as a configuration: its rules on a query's plan checked before any load,
the records decoded without Python, and a real-time run whose every record comes out once, its
latency read at the output topic."""

import json
import textwrap
from pathlib import Path

import pytest

from streamscale.errors import ConfigError
from streamscale.pipelines import make_pipeline
from streamscale.sparkio.io import decode_natively
from tests.pipelines.helpers import read_topic

RT = {"trigger": "real_time:5 seconds", "connector": "spark"}
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jobs" / "readings_kw.py"


def _iso(ms: int) -> str:
    """A timestamp as Spark's to_json writes it (UTC, yyyy-MM-dd'T'HH:mm:ss.SSSXXX)."""
    from datetime import UTC, datetime

    t = datetime.fromtimestamp(ms / 1000, UTC)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def _job(tmp_path, body: str) -> str:
    f = tmp_path / "rtjob.py"
    f.write_text(textwrap.dedent(body))
    return f"{f}:job"


@pytest.mark.spark
@pytest.mark.parametrize(
    "body,words",
    [
        (
            """
            from pyspark.sql import functions as F
            twice = F.udf(lambda x: 2 * x, "double")
            def job(r, params):
                return r.select("identifier", "timestamp", twice("valueInW").alias("w"))
            """,
            r"stateless operators only, and this query has ArrowEvalPython \(a Python UDF\)",
        ),
        (
            """
            def job(r, params):
                return r.groupBy("identifier", "timestamp").count(), "update"
            """,
            r"this query has .*HashAggregate \(an aggregation\).*StateStoreSave \(state\)",
        ),
        (  # a stateful job without the send time: the rule Spark enforces is said first
            """
            def job(r, params):
                return r.groupBy("identifier").count(), "update"
            """,
            r"stateless operators only, and this query has .*HashAggregate",
        ),
        (
            """
            def job(r, params):
                return r.select("identifier", "valueInW")
            """,
            r"keep the column timestamp in the output of job job \(it has identifier, valueInW\)",
        ),
        (
            """
            def job(r, params):
                return r, "complete"
            """,
            "real-time mode runs update output mode, and job job returned complete",
        ),
    ],
)
def test_a_query_real_time_mode_cannot_run_is_refused_before_any_load(broker, spark, topic_factory, tmp_path, body,
                                                                       words):  # fmt: skip
    pipe = make_pipeline(_job(tmp_path, body), RT)
    with pytest.raises(ConfigError, match=f"^trigger real_time:5 seconds: .*{words}"):
        pipe.check(spark, broker.bootstrap, topic_factory(2, "rt-rule"))


@pytest.mark.spark
def test_a_stateless_job_and_uc1_into_kafka_pass_the_rules(broker, spark, topic_factory):
    topic = topic_factory(2, "rt-ok")
    make_pipeline(f"{EXAMPLE}:readings_kw", RT).check(spark, broker.bootstrap, topic)
    make_pipeline("uc1", {**RT, "sink": "kafka"}).check(spark, broker.bootstrap, topic)


@pytest.mark.spark
def test_the_job_on_kafkas_columns_keeps_each_inputs_kafka_timestamp_and_passes_the_rules(broker, spark, topic_factory):
    from datetime import UTC, datetime

    from streamscale.pipelines import jobref
    from streamscale.pipelines.jobsetup import JobSetup

    pipe = make_pipeline(f"{EXAMPLE}:readings_kw_raw", RT, job=JobSetup(decode="raw"))
    assert pipe.send_time_field() == "timestamp"
    pipe.check(spark, broker.bootstrap, topic_factory(2, "rt-raw"))
    readings = [("s_1", 5, 1500.0, 1_700_000_000_123), ("s_2", 6, 49.0, 1_700_000_000_456)]
    rows = [
        (json.dumps({"identifier": i, "timestamp": t, "valueInW": w}).encode(), datetime.fromtimestamp(k / 1000, UTC))
        for i, t, w, k in readings
    ]
    job = jobref.load(f"{EXAMPLE}:readings_kw_raw")
    got = job(spark.createDataFrame(rows, "value binary, timestamp timestamp"), {"high_kw": 0.05})
    out = sorted((json.loads(r.j) for r in got.selectExpr("to_json(struct(*)) AS j").collect()), key=lambda o: o["key"])
    # the rule worked out here; the output's timestamp is the input record's Kafka timestamp, not the field's
    assert [(o["key"], o["timestamp"], o["valueInKW"], o["band"]) for o in out] == [
        ("s_1", _iso(1_700_000_000_123), 1.5, "high"),
        ("s_2", _iso(1_700_000_000_456), 0.049, "normal"),
    ]


@pytest.mark.spark
def test_values_decoded_without_python_count_what_does_not_parse_or_lacks_a_field(spark):
    values = [
        b'{"identifier":"s_1","timestamp":5,"valueInW":1.5}',
        b'{"identifier":"s_2","timestamp":6}',  # a field missing
        b"not json",
        b'{"identifier":"s_3","timestamp":"soon","valueInW":2.0}',  # a field of another type
        b'{"identifier":null,"timestamp":7,"valueInW":2.5}',
    ]
    raw = spark.createDataFrame([(None, v, i) for i, v in enumerate(values)], "key binary, value binary, offset long")
    rows = (
        decode_natively(raw, "identifier STRING, timestamp BIGINT, valueInW DOUBLE").orderBy("kafka_offset").collect()
    )
    assert [(r.identifier, r.timestamp, r.valueInW, r.value_error) for r in rows] == [
        ("s_1", 5, 1.5, None),
        ("s_2", 6, None, "a field is missing or null"),
        (None, None, None, "does not parse"),
        ("s_3", None, 2.0, "does not parse"),
        (None, 7, 2.5, "a field is missing or null"),
    ]


@pytest.mark.spark
def test_a_real_time_run_writes_each_record_once_and_reads_its_latency_at_the_output(broker, spark):
    from streamscale.experiment.sut import Context, StopPolicy, Workload, run_sut

    wl = Workload(f"{EXAMPLE}:readings_kw", {**RT, "high_kw": 0.05}, rate=500, partitions=2)
    names = (f"rt-in-{id(wl)}", f"rt-out-{id(wl)}")
    r = run_sut(wl, policy=StopPolicy(8, drain_s=60), context=Context(broker.bootstrap, spark=spark, topics=names))
    assert r.latency_at == "output" and r.undrained == 0 and r.malformed == 0 and r.output_unreadable == 0
    got = [json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, names[1], 2)]
    assert len(got) == r.generated == r.processed_records > 0
    sent = [json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, names[0], 2)]
    # the job's rule, worked out here from each reading the input topic holds
    want = sorted(
        (
            x["identifier"],
            _iso(x["timestamp"]),
            x["valueInW"] / 1000,
            "high" if x["valueInW"] / 1000 >= 0.05 else "normal",
        )
        for x in sent
    )
    assert sorted((o["identifier"], o["timestamp"], o["valueInKW"], o["band"]) for o in got) == want
    assert all(o["key"] == o["identifier"] for o in got)
    p = r.processing_ms
    assert set(p) == {"p50", "p95", "p99"} and 0 <= p["p50"] <= p["p95"] <= p["p99"]
    traced = sum(n for b in r.batches for _, _, n in (b["processing_latency"] or ()))
    assert traced == pytest.approx(r.generated, rel=0.02)  # a weighted sample standing for each record
