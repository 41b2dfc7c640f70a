"""Configurations as a dimension: the search runs per named configuration, each with its own
Spark settings and parameters, and the answer, the files and the report keep them apart."""

import dataclasses
import json
from pathlib import Path

import pytest

from streamscale.benchmark.execution import Execution
from streamscale.benchmark.plan import resolve
from streamscale.benchmark.results import read_results
from streamscale.benchmark.spec import parse_spec
from streamscale.errors import ConfigError
from tests.benchmark.helpers import fake_result

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "jobs"
STORE = "spark.sql.streaming.stateStore.providerClass"
ROCKS = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"


def spec(strategy=None, configs=None, metric="capacity", loads=(1000, 2000, 4000, 8000), resources=(1, 2)):
    return parse_spec(
        {
            "name": "cfg",
            "benchmark": {
                "sut": "totals.py:totals",
                "records": {"key": "k", "fields": {"k": {"type": "string", "gen": "keys:10"}}},
            },
            "execution": {
                "load": {"type": "rate", "values": list(loads)},
                "resources": {"type": "cores", "values": list(resources)},
                "metric": metric,
                "strategy": strategy or {"name": "bracket", "resolution": 0.3},
                "configs": configs
                if configs is not None
                else {"hdfs": {}, "rocksdb": {STORE: ROCKS, "maxOffsetsPerTrigger": 500}},
            },
        },
        "test",
        EXAMPLES,
    )  # fmt: skip


def capacities(load, res, rep, on_lag=None, config=""):
    # hdfs holds 3,000 records/s per core, rocksdb 1,500
    held = {"hdfs": 3000, "rocksdb": 1500}[config] * res
    r = fake_result(load, res, rep, passed=load <= held)
    return dataclasses.replace(
        r, config=config, exp_id=f"{config}_{r.exp_id}", verdict="pass" if load <= held else "fail"
    )


def test_each_configuration_gets_its_own_settings():
    s = spec()
    plan = resolve(s)
    hdfs, rocks = plan.point(1000, 1, "hdfs"), plan.point(1000, 1, "rocksdb")
    assert "spark.sql.streaming.stateStore.providerClass" not in hdfs.spark_conf
    assert rocks.spark_conf["spark.sql.streaming.stateStore.providerClass"] == ROCKS
    assert rocks.params["max_offsets_per_trigger"] == 500 and "max_offsets_per_trigger" not in hdfs.params
    assert rocks.rate == 1000 and rocks.load_rate == 1000


def test_the_bracket_search_runs_per_configuration(tmp_path):
    summary = Execution(spec(), tmp_path, capacities).run()
    ends = {(b["config"], b["resources"]): (b["held"], b["failed"]) for b in summary["answer"]["brackets"]}
    for (config, res), (held, failed) in ends.items():
        truth = {"hdfs": 3000, "rocksdb": 1500}[config] * res
        assert held <= truth < failed and failed / held <= 1.3 + 1e-9
    assert set(ends) == {("hdfs", 1), ("hdfs", 2), ("rocksdb", 1), ("rocksdb", 2)}
    assert [c["config"] for c in summary["answer"]["capacity"]] == ["hdfs", "hdfs", "rocksdb", "rocksdb"]
    sentence = summary["answer"]["sentence"]
    assert sentence.startswith("totals on this machine: with hdfs: 1 core") and "; with rocksdb: 1 core" in sentence
    rows = read_results(tmp_path)
    assert {r.config for r in rows} == {"hdfs", "rocksdb"} and len({r.exp_id for r in rows}) == len(rows)
    assert json.loads((tmp_path / "summary.json").read_text())["configs"]["rocksdb"]["maxOffsetsPerTrigger"] == 500
    assert (tmp_path / "capacity.png").stat().st_size > 0
    from streamscale.benchmark.report import write_report

    page = write_report(tmp_path).read_text()
    assert "configuration" in page and "rocksdb" in page

    # resumed: the same experiments, none run again, the same answer
    again = Execution(spec(), tmp_path, lambda *a, **k: pytest.fail("ran again"))
    assert again.run()["answer"] == summary["answer"] and again.resumed == len(rows)


def test_a_linear_search_per_configuration(tmp_path):
    summary = Execution(spec({"name": "linear", "lower_bound": True}), tmp_path, capacities).run()
    caps = {(c["config"], c["resources"]): c["load"] for c in summary["answer"]["capacity"]}
    assert caps == {("hdfs", 1): 2000, ("hdfs", 2): 4000, ("rocksdb", 1): 1000, ("rocksdb", 2): 2000}
    assert {r["config"] for r in summary["results"]} == {"hdfs", "rocksdb"}


def test_a_bad_configuration_is_named():
    with pytest.raises(ConfigError, match="execution.configs.fast"):
        spec(configs={"fast": {"trigger_interval_s": "soon"}})
    with pytest.raises(ConfigError, match="configuration name"):
        spec(configs={"a b": {}})


def test_a_configuration_may_run_another_version_of_the_job(monkeypatch, tmp_path):
    s = spec(configs={"v1": {}, "v2": {"sut": "enrich.py:enrich"}})
    plan = resolve(s)
    assert plan.point(1000, 1, "v1").sut == str(EXAMPLES / "totals.py") + ":totals"
    assert plan.point(1000, 1, "v2").sut == str(EXAMPLES / "enrich.py") + ":enrich"  # relative to the spec
    assert s.config("v2") == ({}, {})  # the sut is neither a setting nor a parameter

    # each configuration's experiment runs its own version
    from streamscale.benchmark.experiment_runner import ExperimentRunner

    ran = []

    class Stop(Exception):
        pass

    def fake_run_sut(workload, placement, policy, context):
        ran.append(workload.uc)
        preflights.append([(name, pipe.ref) for name, pipe, _ in context.preflight])
        raise Stop

    preflights: list = []

    monkeypatch.setattr("streamscale.experiment.sut.run_sut", fake_run_sut)
    runner = ExperimentRunner(s, tmp_path, "127.0.0.1:1")
    for name in ("v1", "v2"):
        with pytest.raises(Stop):
            runner._run_sut(plan.point(1000, 1, name), None)
    assert ran == [str(EXAMPLES / "totals.py") + ":totals", str(EXAMPLES / "enrich.py") + ":enrich"]
    # the first run checks the other configuration's job in its session before its load; later ones do not
    assert preflights == [[("v2", str(EXAMPLES / "enrich.py") + ":enrich")], []]


@pytest.mark.parametrize(
    "sut,words",
    [
        ("nope.py:job", r"execution.configs.v2: job file .*nope.py does not exist"),
        ("uc9", "configuration v2: sut 'uc9': use uc1, uc2, uc3, uc4"),
    ],
)
def test_a_configuration_s_sut_that_is_none_is_one_line(sut, words):
    with pytest.raises(ConfigError, match=words):
        spec(configs={"v1": {}, "v2": {"sut": sut}})


def test_each_configuration_gets_its_share_of_the_time_budget(tmp_path, monkeypatch):
    # runs of 60 s on a fake clock, every load held (the search climbs by 1.5 up to 64 x 100): a run is
    # planned at 300 s (max_duration_s) and 10 s beyond. Of 900 s for two configurations, the
    # first has 450: runs at 0, 60 and 120 s (the next would end at 490 s); the second the rest,
    # 720 s from 180 s: runs from 180 s to 540 s, seven. Sharing one deadline, the first ran ten
    # and the second one.
    import streamscale.benchmark.bracket as bracket
    import streamscale.benchmark.execution as execution

    clock, ran = [0.0], []
    for module in (execution, bracket):
        monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])

    def run(load, res, rep, on_lag=None, config=""):
        ran.append(config)
        clock[0] += 60
        return dataclasses.replace(fake_result(load, res, rep, passed=True), config=config)

    budget = {"name": "bracket", "resolution": 0.3, "factor": 1.5, "time_budget_s": 900, "probe": False}
    s = spec(budget, {"hdfs": {}, "rocksdb": {STORE: ROCKS}}, loads=(100,), resources=(1,))  # up to 6,400/s
    Execution(s, tmp_path, run).run()
    assert (ran.count("hdfs"), ran.count("rocksdb")) == (3, 7)
