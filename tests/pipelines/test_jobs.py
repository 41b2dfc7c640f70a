"""Users' own jobs: the three examples run under load (described records, the generator, Spark's
connector, the output topic drained), each output checked exactly against a computation in plain
Python over what the input topic holds; Spark's own late count; and broken jobs refused in one line."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

from streamscale.benchmark.spec import load_spec
from streamscale.errors import ConfigError
from streamscale.experiment.sut import Context, StopPolicy, Workload, run_sut
from streamscale.pipelines import make_pipeline
from tests.conftest import produce
from tests.pipelines.helpers import read_topic

pytestmark = pytest.mark.spark

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jobs"


def run_example(name, broker, spark, topic_factory, params=None, rate=3000, seconds=6):
    spec = load_spec(EXAMPLES / f"{name}.yaml")
    tin, tout = topic_factory(4, f"{name}-in"), topic_factory(4, f"{name}-out")
    r = run_sut(
        Workload(
            spec.benchmark.sut, {**spec.benchmark.params, **(params or {})}, rate=rate, records=spec.benchmark.records
        ),
        policy=StopPolicy(seconds, drain_s=180),
        context=Context(bootstrap=broker.bootstrap, spark=spark, topics=(tin, tout)),
    )
    assert r.undrained == 0 and r.malformed == 0
    inputs = [(p, o, k, json.loads(v)) for p, o, k, v in read_topic(broker.bootstrap, tin, 4)]
    outputs = [(p, o, k, json.loads(v)) for p, o, k, v in read_topic(broker.bootstrap, tout, 4)]
    assert len(inputs) == r.generated == r.processed_records > rate * seconds * 0.8
    return r, inputs, outputs


def ms(text: str) -> int:
    return int(pd.Timestamp(text).value // 1_000_000)


def test_enrich_joins_every_order_with_its_product(broker, spark, topic_factory):
    _, inputs, outputs = run_example("enrich", broker, spark, topic_factory)
    expected = sorted(
        (str(d["order"]), d["order"], f"product-{d['product']}", d["quantity"], d["quantity"] * (d["product"] % 10 + 1))
        for _, _, _, d in inputs
        if d["product"] < 50  # the table holds products 0-49
    )
    got = sorted((d["key"], d["order"], d["name"], d["quantity"], d["total"]) for _, _, _, d in outputs)
    assert got == expected
    assert any(d["product"] >= 50 for _, _, _, d in inputs)  # some orders had no product to join
    assert all(k.decode() == d["key"] for _, _, k, d in outputs)  # the key column is the Kafka key


def test_dedup_keeps_the_first_of_each_event(broker, spark, topic_factory):
    # a delay longer than the run: no state expires and no event is late, so each id once
    _, inputs, outputs = run_example("dedup", broker, spark, topic_factory, params={"delay_s": 3600})
    first = {}
    for _, _, _, d in sorted(inputs, key=lambda m: (m[0], m[1])):  # an id's records share a partition
        first.setdefault(d["event"], d)
    assert len(first) < len(inputs)  # there were duplicates to drop
    got = {d["event"]: d for _, _, _, d in outputs}
    assert len(got) == len(outputs) == len(first)
    assert {e: (d["user"], ms(d["at"])) for e, d in got.items()} == {e: (d["user"], d["at"]) for e, d in first.items()}


def test_running_totals_end_at_each_users_sums(broker, spark, topic_factory):
    # at most 4,000 records a batch: several batches whatever the machine's speed (on a slow one,
    # the first batch after the query's start could otherwise take the whole load, once per user)
    r, inputs, outputs = run_example("totals", broker, spark, topic_factory, {"max_offsets_per_trigger": 4000})
    df = pd.DataFrame([d for _, _, _, d in inputs])
    ref = df.groupby("user").agg(payments=("cents", "size"), cents=("cents", "sum"), last_at=("at", "max"))
    last = {}
    for _, _, _, d in sorted(outputs, key=lambda m: (m[0], m[1])):  # update mode: the latest per key
        last[d["key"]] = (d["payments"], d["cents"], ms(d["last_at"]))
    assert last == {u: (int(x.payments), int(x.cents), int(x.last_at)) for u, x in ref.iterrows()}
    assert len(outputs) > len(last)  # a user's totals were updated batch after batch
    assert r.dropped_late == 0


def test_milestones_of_transform_with_state_are_each_sensor_s_every_nth_reading(broker, spark, topic_factory):
    from collections import Counter

    spec = load_spec(EXAMPLES / "milestones.yaml")
    key = "spark.sql.streaming.stateStore.providerClass"
    before = spark.conf.get(key)
    spark.conf.set(key, spec.config("rocksdb")[0][key])  # its configuration's state store, on the tests' session
    try:
        _, inputs, outputs = run_example("milestones", broker, spark, topic_factory, params={"every": 2}, rate=500)
    finally:
        spark.conf.set(key, before)
    seen = Counter(d["identifier"] for _, _, _, d in inputs)
    expected = sorted((k, n) for k, total in seen.items() for n in range(2, total + 1, 2))
    assert expected and sorted((d["identifier"], d["readings"]) for _, _, _, d in outputs) == expected
    assert all(k.decode() == d["identifier"] for _, _, k, d in outputs)


def test_large_orders_land_in_parquet_exactly(broker, spark, topic_factory, tmp_path):
    # the example's own sink: Spark's parquet files in the run's folder, no output topic
    spec = load_spec(EXAMPLES / "large_orders.yaml")
    tin = topic_factory(4, "large-in")
    r = run_sut(
        Workload(
            spec.benchmark.sut,
            spec.benchmark.params,
            rate=3000,
            records=spec.benchmark.records,
            job=spec.benchmark.job_setup(str(tmp_path / "sink")),
        ),
        policy=StopPolicy(6, drain_s=180),
        context=Context(bootstrap=broker.bootstrap, spark=spark, topics=(tin, topic_factory(1, "large-unused"))),
    )
    assert r.undrained == 0 and r.malformed == 0
    inputs = [json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, tin, 4)]
    assert len(inputs) == r.generated == r.processed_records > 3000 * 6 * 0.8
    [folder] = list((tmp_path / "sink").iterdir())
    got = pd.concat([pd.read_parquet(f) for f in folder.glob("*.parquet")])
    expected = sorted(
        (d["order"], d["product"], d["quantity"], d["quantity"] * (d["product"] % 10 + 1), d["at"])
        for d in inputs
        if d["quantity"] >= 4
    )
    at = pd.to_datetime(got["at"], utc=True)
    stamps = ((at - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)).tolist()
    assert sorted(zip(got["order"], got["product"], got["quantity"], got["value"], stamps)) == expected
    assert 0 < len(expected) < len(inputs)


def test_records_behind_the_watermark_are_counted_by_spark(broker, spark, topic_factory, tmp_path):
    job = tmp_path / "windows.py"
    job.write_text(
        textwrap.dedent(
            """
            from pyspark.sql import functions as F

            def per_minute(readings, params):
                w = readings.withWatermark("timestamp", "0 seconds").groupBy(
                    F.window("timestamp", "1 minute"), "identifier").count()
                return w.select(F.col("identifier").alias("key"), "count")
            """
        )
    )
    pipe = make_pipeline(f"{job}:per_minute", {"connector": "spark"})
    tin, tout = topic_factory(2, "wm-in"), topic_factory(2, "wm-out")
    t0 = 1_700_000_040_000

    def reading(i, ts):
        return (f"s_{i}".encode(), json.dumps({"identifier": f"s_{i}", "timestamp": ts, "valueInW": 1.0}).encode(), 0)

    produce(broker.bootstrap, tin, [reading(i, t0 + 60_000 + i) for i in range(20)])
    checkpoint = str(tmp_path / "ckpt")
    first = pipe.start(spark, broker.bootstrap, tin, tout, checkpoint, available_now=True)
    first.await_available(120)
    # five sensors a minute behind the watermark (the newest time above, less 0 s): each dropped
    produce(broker.bootstrap, tin, [reading(100 + i, t0 + i) for i in range(5)])
    second = pipe.start(spark, broker.bootstrap, tin, tout, checkpoint, available_now=True)
    second.await_available(120)
    assert sum(b.dropped_late for b in first.batches) == 0
    assert sum(b.dropped_late for b in second.batches) == 5


def job_file(tmp_path, body: str, name="job.py") -> str:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return str(p)


@pytest.mark.parametrize(
    "body,words",
    [
        (
            "def job(records, params):\n    raise ValueError('no such column: pricee')\n",
            "raised while being built: ValueError: no such column: pricee",
        ),  # fmt: skip
        ("def job(records, params):\n    return 42\n", "returned int, not a DataFrame"),
        ("def job(records, params):\n    return records.sparkSession.range(3)\n", "returned a batch DataFrame"),
        ("def job(records, params):\n    return records, 'sideways'\n", "mode one of append, update, complete"),
        ("def job(records, params):\n    return records.select('nope')\n", "raised while being built: "),
    ],
)
def test_a_broken_job_is_one_line(broker, spark, topic_factory, tmp_path, body, words):
    pipe = make_pipeline(f"{job_file(tmp_path, body)}:job")
    with pytest.raises(ConfigError, match=words) as err:
        pipe.check(spark, broker.bootstrap, topic_factory(1, "broken"))
    assert "\n" not in str(err.value)


def test_a_job_that_cannot_be_found_says_why(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        make_pipeline(f"{tmp_path}/none.py:job")
    path = job_file(tmp_path, "def helper():\n    pass\n\ndef other(r, p):\n    return r\n")
    with pytest.raises(ConfigError, match=r"has no function 'job' \(it defines: helper, other\)"):
        make_pipeline(f"{path}:job")
    bad = job_file(tmp_path, "import os\n\nx = 1 / 0\n", "bad.py")
    with pytest.raises(ConfigError, match=r"failed to import \(line 3\): ZeroDivisionError"):
        make_pipeline(f"{bad}:job")
    with pytest.raises(ConfigError, match="cannot be imported"):
        make_pipeline("no_such_package_here.jobs:job")


def test_a_job_into_noop_counts_what_it_read_and_what_was_malformed(broker, spark, topic_factory, tmp_path):
    from streamscale.loadgen.recordspec import records_spec

    fields = {"k": {"type": "string", "gen": "keys:5"}, "v": {"type": "long", "gen": "sequence"}}
    records = records_spec({"key": "k", "encoding": "csv", "fields": fields}, "test")
    job = job_file(tmp_path, "def job(records, params):\n    return records.where(records.v % 2 == 0)\n")
    pipe = make_pipeline(f"{job}:job", {"sink": "noop"}, records=records)
    tin = topic_factory(2, "noop-in")
    good = [(b"k", b"k-%d,%d" % (i % 5, i), i % 2) for i in range(1000)]
    bad = [(b"k", b"k-1,not-a-number", 0), (b"k", b"only-one-field", 1), (b"k", b"k-2,12,extra", 0)]
    produce(broker.bootstrap, tin, good + bad)
    run = pipe.start(spark, broker.bootstrap, tin, "unused", str(tmp_path / "ck"), available_now=True)
    run.await_available(120)
    assert sum(b.input_rows for b in run.batches) == 1003
    assert sum(b.malformed for b in run.batches) == 3
    assert "noop" in run.main_query.lastProgress["sink"]["description"].lower()


def run_on_readings(sut, sensors, column, broker, spark, topic_factory, tmp_path):
    """One reading (1 W) of each sensor into a 2-partition topic, the job run over them to their
    end -> sorted (key, the output's ``column``) of its output topic."""
    tin, tout = topic_factory(2, "readings-in"), topic_factory(2, "readings-out")
    readings = [
        (s.encode(), json.dumps({"identifier": s, "timestamp": 1000 + i, "valueInW": 1.0}).encode(), i % 2)
        for i, s in enumerate(sensors)
    ]
    produce(broker.bootstrap, tin, readings)
    run = make_pipeline(sut).start(spark, broker.bootstrap, tin, tout, str(tmp_path / "ck"), available_now=True)
    run.await_available(120)
    assert run.exception() is None
    return sorted((k.decode(), json.loads(v)[column]) for _, _, k, v in read_topic(broker.bootstrap, tout, 2))


def test_a_jobs_python_udf_runs_on_spark_s_workers(broker, spark, topic_factory, tmp_path):
    # the job's module exists in the driver only: its UDF reaches Spark's Python workers by value
    job = job_file(
        tmp_path,
        """
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType

        def shout(text):
            return text.upper() + "!"

        def job(readings, params):
            loud = F.udf(shout, StringType())
            return readings.select(F.col("identifier").alias("key"), loud(F.col("identifier")).alias("loud"))
        """,
        "udfjob.py",
    )
    got = run_on_readings(f"{job}:job", [f"s_{i}" for i in range(50)], "loud", broker, spark, topic_factory, tmp_path)
    assert got == sorted((f"s_{i}", f"S_{i}!") for i in range(50))


# A job as users write one for their own scripts, which make their session first: UDFs at the top of
# the file whose types are DDL strings, which PySpark parses in a running session only.
DDL_UDFS = """
import pandas as pd
from pyspark.sql import functions as F
from pyspark.sql.functions import pandas_udf, udf


@udf("string")
def shout(text):
    return text.upper() + "!"


@pandas_udf("long")
def digits(text: pd.Series) -> pd.Series:
    return text.str.count(r"[0-9]")


def job(readings, params):
    key = F.col("identifier")
    return readings.select(key.alias("key"), shout(key).alias("loud"), digits(key).alias("n"))
"""


# ...and one that makes its session at its top, as a script does
SCRIPT_JOB = """
from pyspark.sql import SparkSession, functions as F

spark = SparkSession.builder.appName("mine").getOrCreate()


def job(readings, params):
    sizes = spark.createDataFrame([(f"s_{i}", i) for i in range(3)], "identifier string, i long")
    return readings.join(sizes, "identifier").select(F.col("identifier").alias("key"), "i")
"""


def test_a_job_file_whose_udfs_need_a_session_to_import_is_checked_without_one_and_imported_in_the_run(tmp_path):
    # no Spark session in a process of its own: the spec is valid, the function is looked for in
    # the file's source (a missing one named in one line), and an error of the file's own is one line
    job = job_file(tmp_path, DDL_UDFS, "ddljob.py")
    spec = tmp_path / "spec.yaml"
    exe = str(Path(sys.executable).parent / "streamscale")

    def validate(sut):
        body = {
            "name": "ddl",
            "benchmark": {"sut": sut},
            "execution": {"load": {"values": [1000]}, "resources": {"values": [1]}},
        }
        spec.write_text(json.dumps(body))
        return subprocess.run([exe, "benchmark", "validate", str(spec)], capture_output=True, text=True, timeout=120)

    r = validate(f"{job}:job")
    assert r.returncode == 0 and r.stdout.startswith("valid: "), r.stdout + r.stderr
    r = validate(f"{job}:nope")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "has no function 'nope' (it defines: digits, job, shout)" in r.stderr
    # a column at the top of the file, which PySpark builds in a running session only
    columns = job_file(
        tmp_path,
        "from pyspark.sql import functions as F\n\nKEY = F.col('identifier')\n\n"
        "def job(readings, params):\n    return readings.select(KEY.alias('key'))\n",
        "coljob.py",
    )
    r = validate(f"{columns}:job")
    assert r.returncode == 0 and r.stdout.startswith("valid: "), r.stdout + r.stderr
    # a file that makes its own session at its top: checking it starts none (the run's would then
    # not be the one asked for), it is imported in the run's
    script = job_file(tmp_path, SCRIPT_JOB, "scriptjob.py")
    look = (
        "from pyspark import SparkContext; from streamscale.pipelines import jobref; "
        f"fn = jobref.load({script + ':job'!r}); print(type(fn).__name__, SparkContext._active_spark_context)"
    )
    r = subprocess.run([sys.executable, "-c", look], capture_output=True, text=True, timeout=120)
    assert r.stdout.split() == ["Deferred", "None"], r.stdout + r.stderr
    broken = job_file(tmp_path, "import os\n\nx = 1 / 0\n" + DDL_UDFS, "brokenddl.py")
    r = validate(f"{broken}:job")
    assert r.returncode == 2 and "failed to import (line 3): ZeroDivisionError" in r.stderr, r.stderr


def test_a_deferred_job_is_imported_when_first_called_and_its_udfs_run_on_the_workers(
    broker, spark, topic_factory, tmp_path
):
    from streamscale.pipelines import jobref

    job = f"{job_file(tmp_path, DDL_UDFS, 'ddlrun.py')}:job"
    deferred = jobref.Deferred(job)
    frame = spark.createDataFrame([(f"s_{i}",) for i in range(30)], "identifier string")
    got = sorted(tuple(r) for r in deferred(frame, {}).collect())
    assert got == sorted((f"s_{i}", f"S_{i}!", len(str(i))) for i in range(30))
    # the file that makes its session at its top gets the run's
    script = jobref.Deferred(f"{job_file(tmp_path, SCRIPT_JOB, 'scriptrun.py')}:job")
    assert sorted(tuple(r) for r in script(frame, {}).collect()) == [("s_0", 0), ("s_1", 1), ("s_2", 2)]
    # and the same file as a job's: run under load, every reading's output exact
    got = run_on_readings(job, [f"t{i}" for i in range(40)], "n", broker, spark, topic_factory, tmp_path)
    assert got == sorted((f"t{i}", len(str(i))) for i in range(40))


def test_a_helper_module_beside_the_job_imports_and_its_udf_runs_on_the_workers(broker, spark, topic_factory, tmp_path):
    # the job imports a module of its own folder, as when its user runs it there; the helper's UDF
    # reaches Spark's Python workers, whose path holds neither folder
    helper = f"helpers_{tmp_path.name.replace('-', '_')}"
    job_file(tmp_path, "def whisper(text):\n    return text.lower() + '...'\n", f"{helper}.py")
    job = job_file(
        tmp_path,
        f"""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StringType

        import {helper}

        def job(readings, params):
            soft = F.udf({helper}.whisper, StringType())
            return readings.select(F.col("identifier").alias("key"), soft(F.col("identifier")).alias("soft"))
        """,
        "helperjob.py",
    )
    got = run_on_readings(f"{job}:job", [f"S_{i}" for i in range(40)], "soft", broker, spark, topic_factory, tmp_path)
    assert got == sorted((f"S_{i}", f"s_{i}...") for i in range(40))
