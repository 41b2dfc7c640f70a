"""The Python examples of docs/pipelines.md run as written, on topics of our own, in this process:
their ``build_session`` gets the test session's SparkSession (Spark's getOrCreate), and their
closing ``spark.stop()`` is left out so that it stays for the other tests (a fresh interpreter
and JVM per example cost ~25 s each)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.pipelines.helpers import T0, read_topic, send

pytestmark = pytest.mark.spark
PAGE = Path(__file__).resolve().parents[2] / "docs" / "pipelines.md"


def page_example(after: str) -> str:
    text = PAGE.read_text()
    part = text[text.index(after) :]
    return re.search(r"```python\n(.*?)```", part, re.S).group(1)


def run_example(after: str, replacements: dict, spark, capsys) -> str:
    """Run the example after ``after`` with names replaced, in this process -> its stdout."""
    code = page_example(after)
    for old, new in replacements.items():
        code = code.replace(old, new)
    assert code.rstrip().endswith("spark.stop()")
    code = code.rstrip()[: -len("spark.stop()")]
    capsys.readouterr()
    exec(compile(code, f"docs/pipelines.md: {after}", "exec"), {"__name__": "__doc_example__"})
    return capsys.readouterr().out


def test_the_readme_python_example_runs_on_a_users_topics(spark, broker, topic_factory, tmp_path, capsys):
    src, out = topic_factory(2), topic_factory(2)
    readings = [(f"s_{i % 3}", T0 + i * 1000, 0.5 * i) for i in range(150)]  # 150 s of 3 sensors
    send(broker.bootstrap, src, readings, 2)
    replacements = {"127.0.0.1:9092": broker.bootstrap, "my-readings": src, "my-stats": out}
    replacements["/tmp/uc2-checkpoint"] = str(tmp_path / "ck")
    stdout = run_example("A use case on your own topics:", replacements, spark, capsys)
    assert "'dropped_late': 0" in stdout
    docs = [json.loads(v) for *_, v in read_topic(broker.bootstrap, out, 2)]
    # emit=final and finish(): every 60 s window of every sensor once, all final, nothing lost
    assert sorted((d["identifier"], d["windowStartMs"]) for d in docs) == sorted(
        {(i, t - t % 60_000) for i, t, _ in readings}
    )
    assert all(d["final"] for d in docs) and sum(d["count"] for d in docs) == len(readings)


def test_the_own_pipeline_example_runs_on_a_users_topics(spark, broker, topic_factory, tmp_path, capsys):
    src, out = topic_factory(2), topic_factory(1)
    readings = [(f"s_{i % 3}", T0 + i * 1000, float(i % 100)) for i in range(300)]
    send(broker.bootstrap, src, readings, 2)
    # the output topic's name first: the input's is a prefix of it
    replacements = {"127.0.0.1:9092": broker.bootstrap, "my-high-readings": out, "my-readings": src}
    replacements["/tmp/high-checkpoint"] = str(tmp_path / "ck")
    run_example("Your own pipeline:", replacements, spark, capsys)
    got = sorted(
        (d["identifier"], d["timestamp"], d["valueInW"])
        for d in (json.loads(v) for *_, v in read_topic(broker.bootstrap, out, 1))
    )
    assert got == sorted(r for r in readings if r[2] > 50)
