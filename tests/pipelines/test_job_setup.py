"""A job fed Spark's own Kafka columns, writing to a sink of its own (a file format, its own
foreachBatch), with modules shipped beside it: outputs checked exactly against what was produced;
and the setups that cannot run refused in one line before any load."""

import json
import textwrap
import zipfile

import pandas as pd
import pytest
from confluent_kafka import Producer

from streamscale.benchmark.spec import parse_spec
from streamscale.errors import ConfigError
from streamscale.pipelines import make_pipeline
from streamscale.pipelines.jobsetup import JobSetup
from tests.pipelines.helpers import read_topic

READING = "identifier STRING, timestamp LONG, valueInW DOUBLE"


def _file(tmp_path, name: str, body: str) -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return str(p)


def _readings(n: int) -> list[tuple[bytes, bytes, int]]:
    return [
        (
            f"s_{i}".encode(),
            json.dumps({"identifier": f"s_{i}", "timestamp": 1000 + i, "valueInW": i / 2}).encode(),
            i % 2,
        )
        for i in range(n)
    ]


def _drain(pipe, spark, bootstrap: str, topics: tuple[str, str], tmp_path):
    """The job's run over what the input topic holds, to its end, without an error."""
    run = pipe.start(spark, bootstrap, *topics, str(tmp_path / "ck"), available_now=True)
    run.await_available(120)
    assert run.exception() is None
    return run


def _produce_with_headers(bootstrap: str, topic: str, records) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i, (key, value, part) in enumerate(records):
        p.produce(topic, value, key, partition=part, headers=[("seq", str(i).encode()), ("kind", b"reading")])
    assert p.flush(30) == 0


@pytest.mark.spark
def test_a_raw_job_gets_spark_s_kafka_columns_and_decodes_them_itself(broker, spark, topic_factory, tmp_path):
    job = _file(
        tmp_path,
        "rawjob.py",
        """
        from pyspark.sql import functions as F

        def job(kafka, params):
            body = F.from_json(F.col("value").cast("string"), "identifier STRING, timestamp LONG, valueInW DOUBLE")
            seq = F.filter(F.col("headers"), lambda h: h["key"] == "seq")[0]["value"].cast("string")
            return kafka.select(
                F.col("key").cast("string").alias("key"),
                body["valueInW"].alias("w"),
                F.col("topic"),
                F.col("partition"),
                F.col("offset"),
                seq.alias("seq"),
                F.size("headers").alias("headers"),
            )
        """,
    )
    pipe = make_pipeline(f"{job}:job", job=JobSetup(decode="raw"))
    tin, tout = topic_factory(2, "raw-in"), topic_factory(2, "raw-out")
    sent = _readings(60)
    _produce_with_headers(broker.bootstrap, tin, sent)
    run = _drain(pipe, spark, broker.bootstrap, (tin, tout), tmp_path)
    assert sum(b.input_rows for b in run.batches) == 60 and sum(b.malformed for b in run.batches) == 0
    got = sorted(
        (d["key"], d["w"], d["topic"], d["partition"], d["seq"], d["headers"])
        for _, _, _, v in read_topic(broker.bootstrap, tout, 2)
        for d in [json.loads(v)]
    )
    expected = sorted((f"s_{i}", i / 2, tin, i % 2, str(i), 2) for i in range(60))
    assert got == expected
    # offsets as the broker gave them: each partition's from 0, in the order sent
    offsets = {}
    for _, _, _, v in read_topic(broker.bootstrap, tout, 2):
        d = json.loads(v)
        offsets.setdefault(d["partition"], set()).add(d["offset"])
    assert offsets == {0: set(range(30)), 1: set(range(30))}


@pytest.mark.spark
def test_a_job_writes_parquet_into_the_run_s_folder_exactly(broker, spark, topic_factory, tmp_path):
    job = _file(
        tmp_path,
        "pq.py",
        """
        from pyspark.sql import functions as F

        def job(readings, params):
            return readings.where(F.col("valueInW") >= 10).select("identifier", "valueInW")
        """,
    )
    out = tmp_path / "run"
    setup = JobSetup(sink_format="parquet", output_dir=str(out))
    pipe = make_pipeline(f"{job}:job", job=setup)
    tin = topic_factory(2, "pq-in")
    _produce_with_headers(broker.bootstrap, tin, _readings(80))
    _drain(pipe, spark, broker.bootstrap, (tin, "unused"), tmp_path)
    [folder] = [p for p in out.iterdir() if p.is_dir()]
    files = [f for f in folder.glob("*.parquet")]
    assert files
    got = pd.concat([pd.read_parquet(f) for f in files])
    expected = sorted((f"s_{i}", i / 2) for i in range(80) if i / 2 >= 10)
    assert sorted(zip(got["identifier"], got["valueInW"])) == expected


@pytest.mark.spark
def test_a_jobs_own_foreach_batch_gets_every_batch(broker, spark, topic_factory, tmp_path):
    seen = tmp_path / "seen.jsonl"
    sink = _file(
        tmp_path,
        "mysink.py",
        f"""
        import json

        def write(batch, batch_id):
            rows = [r.asDict() for r in batch.collect()]
            with open({str(seen)!r}, "a") as f:
                for r in rows:
                    f.write(json.dumps({{"batch": batch_id, **r}}) + "\\n")
        """,
    )
    job = _file(tmp_path, "fb.py", "def job(readings, params):\n    return readings.select('identifier')\n")
    pipe = make_pipeline(f"{job}:job", job=JobSetup(foreach_batch=f"{sink}:write"))
    tin = topic_factory(2, "fb-in")
    _produce_with_headers(broker.bootstrap, tin, _readings(50))
    _drain(pipe, spark, broker.bootstrap, (tin, "unused"), tmp_path)
    rows = [json.loads(line) for line in seen.read_text().splitlines()]
    assert sorted(r["identifier"] for r in rows) == sorted(f"s_{i}" for i in range(50))


@pytest.mark.spark
def test_a_py_files_archive_is_on_the_path_and_its_udf_runs_on_the_workers(broker, spark, topic_factory, tmp_path):
    name = f"zipped_{tmp_path.name.replace('-', '_')}"
    archive = tmp_path / "deps" / "deps.zip"
    archive.parent.mkdir()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr(f"{name}/__init__.py", "def twice(x):\n    return 2 * x\n")
    job = _file(
        tmp_path,
        "zjob.py",
        f"""
        from pyspark.sql import functions as F
        from pyspark.sql.types import DoubleType

        import {name}

        def job(readings, params):
            double = F.udf({name}.twice, DoubleType())
            return readings.select(F.col("identifier").alias("key"), double(F.col("valueInW")).alias("w2"))
        """,
    )
    pipe = make_pipeline(f"{job}:job", job=JobSetup(py_files=(str(archive),)))
    tin, tout = topic_factory(2, "zip-in"), topic_factory(2, "zip-out")
    _produce_with_headers(broker.bootstrap, tin, _readings(30))
    _drain(pipe, spark, broker.bootstrap, (tin, tout), tmp_path)
    got = sorted((k.decode(), json.loads(v)["w2"]) for _, _, k, v in read_topic(broker.bootstrap, tout, 2))
    assert got == sorted((f"s_{i}", float(i)) for i in range(30))


@pytest.mark.spark
def test_a_sink_format_this_spark_lacks_is_refused_before_any_load(broker, spark, tmp_path):
    job = _file(tmp_path, "nf.py", "def job(readings, params):\n    return readings\n")
    pipe = make_pipeline(f"{job}:job", job=JobSetup(sink_format="no-such-format"))
    with pytest.raises(ConfigError, match=r"sink.format: 'no-such-format' is not a data source this Spark has"):
        pipe.check(spark, broker.bootstrap, "unused-topic")
    for fmt in ("parquet", "json", "csv", "console", "noop", "kafka"):  # what this Spark has
        make_pipeline(f"{job}:job", job=JobSetup(sink_format=fmt)).check(spark, broker.bootstrap, "unused-topic")


def _spec(tmp_path, benchmark: dict) -> dict:
    job = _file(tmp_path, "j.py", "def job(readings, params):\n    return readings\n")
    return {
        "name": "setup",
        "benchmark": {"sut": f"{job}:job", **benchmark},
        "execution": {"load": {"type": "sensors", "values": [100]}, "resources": {"type": "cores", "values": [1]}},
    }


@pytest.mark.parametrize(
    "benchmark,words",
    [
        ({"decode": "bytes"}, "decode"),
        ({"sink": {}}, r"give a format \(with its options\) or foreach_batch"),
        ({"sink": {"format": "parquet", "foreach_batch": "x.py:f"}}, "foreach_batch"),
        ({"sink": {"foreach_batch": "nowhere.py:write"}}, "nowhere.py does not exist"),
        ({"sink": {"foreach_batch": "j.py:write"}}, "has no function 'write'"),
        ({"py_files": ["missing.zip"]}, r"missing.zip: no such .py, .zip or .egg file"),
        ({"sink": {"format": "parquet"}, "params": {"sink": "noop"}}, "keep one"),
    ],
)
def test_a_setup_that_cannot_run_is_one_line(tmp_path, benchmark, words):
    with pytest.raises(ConfigError, match=words):
        parse_spec(_spec(tmp_path, benchmark), folder=tmp_path)


def test_a_task_sample_takes_no_job_setup(tmp_path):
    spec = _spec(tmp_path, {"decode": "raw"})
    spec["benchmark"]["sut"] = "uc1"
    with pytest.raises(ConfigError, match="uc1 is a task sample: decode, sink and py_files are for your own job"):
        parse_spec(spec, folder=tmp_path)
    with pytest.raises(ConfigError, match="task sample"):
        make_pipeline("uc2", job=JobSetup(decode="raw"))
