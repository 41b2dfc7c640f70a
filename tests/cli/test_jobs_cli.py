"""`run-sut` and `benchmark validate` with a user's job, as a user types them: bad input is one
line and exit code 2, in seconds; a job that breaks while being built says so in its own words."""

import re
import time
from pathlib import Path

import pytest

from tests.cli.helpers import run

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jobs"
RECORDS = "key: k\nfields:\n  k: {type: string, gen: 'keys:10'}\n  v: {type: double, gen: 'uniform:0,1'}\n"


def one_line_error(p, *words):
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [x for x in p.stderr.strip().splitlines() if x.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr + p.stdout
    for w in words:
        assert w in lines[0], lines[0]


def run_spec_job(state, broker, spec: str, prefix: str, rate: str, seconds: str):
    """`run-sut --spec` of an example's job into topics named after ``prefix``; it must succeed."""
    p = run(
        "run-sut", "--spec", str(EXAMPLES / spec), "--rate", rate, "-d", seconds, "--topic-prefix", prefix,
        "-b", broker.bootstrap, env={**state, "STREAMSCALE_METRICS_PORT": "-1"}, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    return p


@pytest.mark.parametrize(
    "job,records,words",
    [
        ("missing.py:job", RECORDS, ["job file", "missing.py does not exist"]),
        ("job.py:nope", RECORDS, ["has no function 'nope'", "it defines: job"]),
        ("job.py:job", "fields:\n  k: {type: text, gen: sequence}\n", ["fields.k.type"]),
        ("job.py:job", "fields:\n  k: {type: long, gen: 'pareto:3'}\n", ["field 'k'", "unknown generator 'pareto:3'"]),
        ("job.py:job", "replay: sample.jsonl\n", ["sample.jsonl: line 2 is not valid JSON"]),
    ],
)
def test_bad_input_is_one_line_in_seconds(state, tmp_path, job, records, words):  # noqa: F811
    (tmp_path / "job.py").write_text("def job(records, params):\n    return records\n")
    (tmp_path / "records.yaml").write_text(records)
    (tmp_path / "sample.jsonl").write_text('{"a": 1}\n{"a": \n')
    t0 = time.monotonic()
    p = run("run-sut", str(tmp_path / job), "--records", str(tmp_path / "records.yaml"), "--rate", "100", env=state)
    one_line_error(p, *words)
    assert time.monotonic() - t0 < 20


@pytest.mark.spark
def test_a_job_raising_while_built_is_its_own_message(state, broker, tmp_path):  # noqa: F811
    (tmp_path / "job.py").write_text(
        "def job(records, params):\n    raise KeyError(f\"no column {params['col']!r} in the records\")\n"
    )
    p = run(
        "run-sut", f"{tmp_path}/job.py:job", "--rate", "100", "-d", "5", "-p", "col=price", "-b", broker.bootstrap,
        env={**state, "STREAMSCALE_METRICS_PORT": "-1"}, timeout=180,
    )  # fmt: skip
    one_line_error(p, "job job raised while being built", "KeyError", "no column 'price' in the records")


def test_benchmark_validate_names_the_job_and_its_records(state):  # noqa: F811
    p = run("benchmark", "validate", str(EXAMPLES / "totals.yaml"), env=state)
    assert p.returncode == 0, p.stderr
    assert "totals.py:totals" in p.stdout and "configurations searched in turn: default, rocksdb" in p.stdout
    assert re.search(r"load \d+: [\d,]+ records/s", p.stdout)


@pytest.mark.spark
def test_run_sut_runs_a_spec_s_job_into_topics_it_keeps(state, broker, tmp_path):  # noqa: F811
    from streamscale.broker import BrokerAccess
    from tests.pipelines.helpers import read_topic

    prefix = f"spec-{tmp_path.name[-12:]}"
    p = run_spec_job(state, broker, "enrich.yaml", prefix, "1000", "4")
    assert f"topics kept: input {prefix}.input, output {prefix}.output" in p.stdout
    with BrokerAccess(broker.bootstrap) as a:
        assert a.topic_exists(f"{prefix}.input") and a.topic_exists(f"{prefix}.output")
    # the spec's job, its params and records: every order of a product the table holds (0-49), once
    import json

    orders = [json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, f"{prefix}.input", 4)]
    out = [json.loads(v) for _, _, _, v in read_topic(broker.bootstrap, f"{prefix}.output", 4)]
    assert sorted(d["order"] for d in out) == sorted(d["order"] for d in orders if d["product"] < 50)
    assert len(orders) > 2000


@pytest.mark.parametrize(
    "args,words",
    [
        (["uc1", "--spec", "SPEC", "--rate", "10"], ["--spec names the job and its records"]),
        (["--spec", "SPEC"], ["give --rate N"]),
        ([], ["name the SUT", "or give --spec FILE"]),
        (["uc1", "--topic-prefix", "p", "--input-topic", "x"], ["--topic-prefix names both topics"]),
    ],
)
def test_run_sut_with_a_spec_refuses_what_it_cannot_mean(state, args, words):  # noqa: F811
    spec = str(EXAMPLES / "enrich.yaml")
    p = run("run-sut", *[spec if a == "SPEC" else a for a in args], env=state)
    one_line_error(p, *words)


def test_capture_and_replay_from_the_command_line(state, broker, tmp_path):  # noqa: F811
    from confluent_kafka import Producer

    from tests.pipelines.helpers import read_topic

    src, dst = f"cap-src-{tmp_path.name[-10:]}", f"cap-dst-{tmp_path.name[-10:]}"
    p = run("topic", "create", src, "--partitions", "1", "-b", broker.bootstrap, env=state)
    assert p.returncode == 0, p.stderr
    prod = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(40):
        prod.produce(src, b"\x00raw-%d" % i, b"k%d" % (i % 4), headers=[("n", b"%d" % i)])
    assert prod.flush(30) == 0
    sample = tmp_path / "s.parquet"
    p = run("capture", src, "-b", broker.bootstrap, "--count", "30", "--out", str(sample), env=state)
    assert p.returncode == 0 and f"captured 30 records of {src}" in p.stdout, p.stdout + p.stderr
    p = run(
        "generate", "--replay", str(sample), "--rate", "500", "-n", "60", "--topic", dst, "--create-topic", "1",
        "-b", broker.bootstrap, env=state,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    got = sorted(v for _, _, _, v in read_topic(broker.bootstrap, dst, 1))
    assert got == sorted([b"\x00raw-%d" % i for i in range(30)] * 2)


@pytest.mark.parametrize(
    "args,words",
    [
        (["capture", "no-such-topic-here"], ["capture: topic 'no-such-topic-here' does not exist"]),
        (["generate", "--replay", "SAMPLE"], ["--replay FILE and --rate N go together"]),
        (["generate", "--replay", "NOVALUE", "--rate", "10"], ["its rows have no value column"]),
    ],
)
def test_capture_and_replay_refuse_in_one_line(state, broker, tmp_path, args, words):  # noqa: F811
    import pandas as pd

    pd.DataFrame({"value": [b"x"]}).to_parquet(tmp_path / "ok.parquet")
    pd.DataFrame({"key": [b"x"]}).to_parquet(tmp_path / "novalue.parquet")
    files = {"SAMPLE": str(tmp_path / "ok.parquet"), "NOVALUE": str(tmp_path / "novalue.parquet")}
    p = run(*[files.get(a, a) for a in args], "-b", broker.bootstrap, env=state)
    one_line_error(p, *words)


def test_benchmark_validate_shows_the_configurations_triggers(state):  # noqa: F811
    p = run("benchmark", "validate", str(EXAMPLES / "readings_kw.yaml"), env=state)
    assert p.returncode == 0, p.stderr
    assert "real_time:5 seconds" in p.stdout and "processing_time:1 second" in p.stdout


def _rt_spec(tmp_path, sut: str, cores: int, partitions: int, trigger="real_time:5 seconds") -> Path:
    spec = tmp_path / "rt.yaml"
    spec.write_text(
        f"name: rt\nbenchmark:\n  sut: {sut}\n  params: {{connector: spark{', sink: kafka' if sut == 'uc1' else ''}}}\n"
        f"  topics: {{partitions: {partitions}}}\n"
        "execution:\n  load: {type: rate, values: [1000]}\n"
        f"  resources: {{type: cores, values: [{cores}]}}\n"
        f"  configs:\n    mb: {{trigger: 'processing_time:1 second'}}\n    rt: {{trigger: '{trigger}'}}\n"
    )
    return spec


@pytest.mark.parametrize(
    "sut,cores,partitions,trigger,words",
    [
        ("uc2", 2, 2, "real_time:5 seconds", ["execution.configs.rt: trigger real_time:5 seconds", "stateless"]),
        ("uc1", 1, 2, "real_time:5 seconds", ["execution.configs.rt", "1 slot(s) for 2 partitions"]),
        ("uc1", 2, 2, "real_time:1 second", ["execution.configs.rt", "minBatchDuration (5 s)"]),
        ("uc1", 2, 2, "available_now", ["execution.configs.rt", "available_now stops at the input's end"]),
        ("uc1", 2, 2, "sometimes", ["execution.configs.rt", "use processing_time:DURATION"]),
    ],
)
def test_a_trigger_that_cannot_run_is_one_line_before_any_load(state, tmp_path, sut, cores, partitions, trigger,
                                                                words):  # noqa: F811 # fmt: skip
    p = run("benchmark", "validate", str(_rt_spec(tmp_path, sut, cores, partitions, trigger)), env=state)
    one_line_error(p, *words)


def test_run_sut_refuses_a_trigger_it_cannot_read(state):  # noqa: F811
    p = run("run-sut", "uc1", "--trigger", "real_time", "--rate", "100", env=state)
    one_line_error(p, "real_time needs a duration")


def test_run_sut_refuses_real_time_mode_with_fewer_slots_than_partitions_before_any_load(state):  # noqa: F811
    args = ("run-sut", "uc1", "-p", "sink=kafka", "--trigger", "real_time:5 seconds", "--master", "local[1]")
    p = run(*args, "--partitions", "2", "--rate", "100", env=state)
    one_line_error(p, "1 slot(s) for 2 partitions")
    assert "Source:" not in p.stdout  # refused before the job is described and any broker started


INPUTS = """name: two
benchmark:
  sut: {job}
  inputs:
    imp: {{share: 0.8, records: {{fields: {{id: {{type: string, gen: sequence}}}}}}}}
    click: {{share: {share}, records: {{fields: {{id: {{type: string, gen: "{gen}"}}}}}}}}
{extra}execution:
  load: {{type: rate, values: [100]}}
  resources: {{type: cores, values: [1]}}
"""


@pytest.mark.parametrize(
    "share,gen,extra,words",
    [
        (0.3, "ref:imp.id,5", "", ["inputs: the shares split the load and sum to 1, not 0.8 + 0.3 = 1.1"]),
        (0.2, "ref:views.id,5", "", ["inputs.click.records.fields.id: ref:views.id names no input"]),
        (-0.2, "ref:imp.id,5", "", ["inputs.click.share", "positive fraction"]),
        (0.2, "ref:imp.id,5", "  records: {fields: {x: {type: long, gen: sequence}}}\n", ["records", "not both"]),
    ],
)
def test_bad_inputs_are_one_line_before_any_load(state, tmp_path, share, gen, extra, words):  # noqa: F811
    (tmp_path / "job.py").write_text("def job(inputs, params):\n    return inputs['click']\n")
    spec = tmp_path / "two.yaml"
    spec.write_text(INPUTS.format(job=f"{tmp_path}/job.py:job", share=share, gen=gen, extra=extra))
    one_line_error(run("benchmark", "validate", str(spec), env=state), *words)


@pytest.mark.spark
def test_run_sut_runs_a_jobs_several_inputs_into_topics_named_after_the_prefix(state, broker, tmp_path):  # noqa: F811
    from streamscale.broker import BrokerAccess

    p = run("benchmark", "validate", str(EXAMPLES / "attribution.yaml"), env=state)
    assert "load 10000: 10,000 records/s (impressions 8,000, clicks 2,000)" in p.stdout, p.stdout
    prefix = f"two-{tmp_path.name[-12:]}"
    p = run_spec_job(state, broker, "attribution.yaml", prefix, "500", "3")
    assert f"topics kept: input {prefix}.impressions,{prefix}.clicks, output {prefix}.output" in p.stdout
    assert "attribution({impressions, clicks}, params)" in p.stdout
    with BrokerAccess(broker.bootstrap) as a:
        assert all(a.topic_exists(f"{prefix}.{t}") for t in ("impressions", "clicks", "output"))
        assert not a.topic_exists(prefix)
        assert sum(a.end_offsets(f"{prefix}.clicks").values()) == 300
