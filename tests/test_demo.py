"""`streamscale demo` as a newcomer runs it: the capacity of 1 and 2 cores as brackets, said in one
sentence, a report whose answer and pictures render in a headless browser, and nothing alarming
on the terminal."""

import csv
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamscale.demo import SUT
from tests.conftest import shortfall
from tests.observe.conftest import ARTIFACTS, chromium_if_any, render, skip_rendering  # noqa: F401 - a fixture

pytestmark = pytest.mark.spark

EXE = str(Path(sys.executable).parent / "streamscale")


def test_demo_finds_a_rising_demand_and_its_report_renders(tmp_path, chromium_if_any):  # noqa: F811
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    out = tmp_path / "out"
    env = {
        **os.environ,
        "STREAMSCALE_STATE_DIR": str(tmp_path),
        "STREAMSCALE_BOOTSTRAP_SERVERS": "",
        "STREAMSCALE_SPARK_LOG": str(tmp_path / "spark.log"),
        "STREAMSCALE_KAFKA_LOG": str(tmp_path / "kafka.log"),  # not in TMPDIR, whatever this process set
        "TMPDIR": str(tmp),
        "COLUMNS": "200",
    }
    env.pop("STREAMSCALE_SPARK_LOG_LEVEL", None)
    r = subprocess.run(
        # the smallest budget: the same probe, search and verdicts, shorter runs, fewer halvings
        [EXE, "demo", "--out", str(out), "--budget", "90"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    both = r.stdout + r.stderr
    assert "Traceback" not in both and " ERROR " not in both and " WARN " not in both
    assert not re.search(r"^\s+at [a-z]+\.[\w.$]+\(", both, re.M)  # a Java stack frame
    assert not list(tmp.glob("streamscale-*"))  # no checkpoint or other directory of ours left behind

    d = out / f"{SUT}-scaling"
    summary = json.loads((d / "summary.json").read_text())
    rows = list(csv.DictReader(open(d / "experiments.csv")))
    # the closing paragraph: the answer, the verdicts that decided it, the report's path - last
    tail = r.stdout.strip().splitlines()
    assert tail[-1] == f"report: {d / 'report.html'}"
    assert any(line.startswith(summary["answer"]["sentence"]) for line in tail[-3 - len(rows) :])
    # runs this short: the answer says a long run may decide an end otherwise, and what runs longer
    assert tail[-2].strip().startswith("(ends from runs of at most ") and "--budget 600" in tail[-2]
    for row in rows:
        # a run is invalid only when its load fell short (a slow or busy machine), and is then
        # said to be, never judged
        if row["verdict"] == "invalid":
            assert row["valid"] == "False" and shortfall(row), row
        else:
            assert row["valid"] == "True" and row["verdict"] in ("pass", "fail", "undecided"), row
        # every run reports its records' processing latency, and was as long as its verdict needed
        assert float(row["processing_p95_ms"]) > 0 and float(row["processing_limit_ms"]) == 8_000, row
        # and each batch's own p95, from which the latency's trend was fitted, is written beside its lag
        # (an overloaded run in a cold session may finish only two batches: seen on a busy machine)
        per_batch = list(csv.DictReader(open(d / "lag" / f"{row['exp_id']}-latency.csv")))
        assert per_batch and all(float(b["processing_p95_ms"]) > 0 for b in per_batch), row
        assert 15 <= float(row["ran_s"]) <= 41, row
        assert float(row["sampler_cpu_pct"]) < 5.0  # harness overhead: under 5 % of one core
        assert float(row["speed_before"]) > 0 and float(row["spark_cpu_pct"]) > 0, row
    # one Spark session per run of equal core counts, the probe's (one core) the first experiments'
    cores = [1] + [int(x["resources"]) for x in rows]
    assert summary["spark_sessions"] == 1 + sum(a != b for a, b in zip(cores, cores[1:])), rows
    # the answer: a bracket per core count, its ends exactly what the experiments decided
    one, two = summary["answer"]["brackets"]
    assert (one["resources"], two["resources"]) == (1, 2)
    verdicts = {(float(x["load"]), int(x["resources"])): x["verdict"] for x in rows}
    for b in (one, two):
        if b["confirmed"]:  # ends run again after a drift: each of them was run twice
            runs = [(float(x["load"]), int(x["resources"])) for x in rows]
            assert all(runs.count((float(load), b["resources"])) >= 2 for load in b["confirmed"]), rows
            continue
        ran = {load: v for (load, res), v in verdicts.items() if res == b["resources"]}
        held = [load for load, v in ran.items() if v == "pass"]
        failed = [load for load, v in ran.items() if v == "fail"]
        # a load that stayed undecided is the upper end only where none above the held end failed
        undecided = [load for load, v in ran.items() if v == "undecided" and (not held or load > max(held))]
        if held:
            assert b["held"] == max(held) and not b["held_assumed"]
        if failed:
            assert b["failed"] == min(failed) and not b["failed_undecided"]
        elif undecided:
            assert b["failed"] == min(undecided) and b["failed_undecided"]
        elif any(v == "invalid" for v in ran.values()):
            # a load the generator fell short of is no failure: the search's ceiling, said so
            assert b["failed"] is None and "could not produce" in b["ceiling"], b
    # one core holds the probe's load or a lower one; on a machine too busy for the demo's time
    # budget (the whole test suite beside it) the search may end first, and the answer says so
    ended = one["out_of_time"] and "before the time budget ended" in summary["answer"]["sentence"]
    # or the generator fell short of every load one core was given there, and the answer says so
    unjudged = all(v == "invalid" for (_, res), v in verdicts.items() if res == 1)
    unjudged = unjudged and "1 core could not be judged" in summary["answer"]["sentence"]
    assert one["held"] is not None or ended or unjudged, rows
    one_core = "1 core could not be judged" if unjudged else "1 core (Spark used "
    assert summary["answer"]["sentence"].startswith(f"{SUT.upper()} on this machine: {one_core}")
    judged = [r for r in rows if int(r["resources"]) == 2 and r["verdict"] != "invalid"]
    # a 2-core run the generator fell short of (the machine busy with the suite) judged nothing
    assert ("2 cores (Spark used " if judged else "2 cores could not be judged") in summary["answer"]["sentence"]

    assert summary["connector"] == "spark"  # the default: Spark's own Kafka connector
    assert "Kafka connector: spark" in (d / "report.html").read_text()
    skip_rendering(chromium_if_any)  # the verdicts above are checked with or without a browser
    dom = render(chromium_if_any, (d / "report.html").as_uri(), screenshot=ARTIFACTS / "demo-report.png")
    body = re.search(r"<body[^>]*>", dom).group(0)
    loaded = int(re.search(r'data-images-loaded="(\d+)"', body).group(1))
    total = int(re.search(r'data-images-total="(\d+)"', body).group(1))
    assert total == 1 + len(rows) and loaded == total  # the capacity plot and every lag plot decoded
    table = re.search(r'<table class="brackets">(.*?)</table>', dom, re.S).group(1)
    cells = [re.findall(r"<td>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", table, re.S)]
    assert [c[0] for c in cells if c] == ["1", "2"], cells  # one bracket per core count


def test_the_demo_fits_its_runs_to_its_budget():
    from streamscale.demo import DURATION_S, MIN_DURATION_S, demo_spec, run_seconds

    # the search's budget is shared by two core counts; a run costs 10 s beyond its own seconds
    assert run_seconds(None) == DURATION_S == 30 and run_seconds(195) == 30
    assert run_seconds(60) == 20 and run_seconds(70) == 25 and run_seconds(80) == 30 == run_seconds(90)
    assert run_seconds(20) == MIN_DURATION_S == 15  # never shorter than the shortest judged run
    # a budget that holds two runs per core count of LONGEST_S (125 s) runs those
    assert run_seconds(400) == 30 and run_seconds(540) == 125 == run_seconds(2_000)
    assert demo_spec(30_000, {}, 60)["execution"]["duration_s"] == 20


def test_the_demo_judges_its_search_as_a_benchmark_does_unless_its_runs_are_long():
    from streamscale.benchmark.plan import resolve
    from streamscale.benchmark.spec import parse_spec
    from streamscale.demo import demo_spec

    # 4 minutes: the search's runs at a quarter of the 25 % resolution, the ends under the SLO (1 %)
    # where the budget holds both; 10 minutes: runs of 125 s, judged by the SLO itself
    short, long = (resolve(parse_spec(demo_spec(30_000, {}, b))) for b in (228, 578))
    assert short.search().spec.execution.slos.lag_trend_threshold == 0.0625 and short.ends_rejudged
    assert long.search().spec.execution.slos.lag_trend_threshold == 0.01 and not long.ends_rejudged


def test_the_source_demo_is_one_run_of_the_python_source_and_says_its_batches(monkeypatch, tmp_path):
    """`demo --source` runs UC1 through streamscale's Python source as any run is run (SutRun, here
    faked), at its sensors' rate, and rates the batches after the first from what the run saw."""
    from types import SimpleNamespace

    import streamscale.experiment.sut as sut
    from streamscale.demo import SourceDemo, run_source_demo

    given = []

    def fake_run(workload, placement, policy, context):
        given.append((workload, placement, policy))
        batches = [
            {"batch_id": i, "input_rows": rows, "input_rate": 0, "processed_rate": 0, "batch_ms": ms}
            for i, (rows, ms) in enumerate([(0, 400), (3000, 1000), (6000, 500), (9000, 1000)])
        ]
        for b in batches:  # each printed as it ends
            context.on_batch(b)
        return SimpleNamespace(
            target_rate=9000.0, generated=18_000, generator_rate=8990.0, processed_records=18_000, batches=batches
        )

    monkeypatch.setattr(sut, "run_sut", fake_run)
    said = run_source_demo(SourceDemo(seconds=5, sensors=9000, master="local[1]", partitions=2), tmp_path)
    ((w, placement, policy),) = given
    assert (w.uc, w.params["connector"], w.sensors, w.partitions) == ("uc1", "python", 9000, 2)
    assert placement.master == "local[1]" and policy.duration_s == 5 and policy.drain_s > 0
    assert said == {"processed_rate": 18_000 / 2.5, "generated": 18_000, "read": 18_000}  # after batch 0
    rows = list(csv.DictReader(open(tmp_path / "demo-batches.csv")))
    assert [int(r["input_rows"]) for r in rows] == [0, 3000, 6000, 9000]
    assert (tmp_path / "demo-rates.png").stat().st_size > 0
