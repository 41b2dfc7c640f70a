"""Executions end to end: the resume logic with a fake experiment, and a real run on a standalone
cluster (the real local run on 1 and 2 cores is the demo's: tests/test_demo.py)."""

import csv
import re
from pathlib import Path

import pytest

from streamscale.benchmark.execution import Execution, run_execution
from streamscale.benchmark.spec import parse_spec
from streamscale.errors import ConfigError
from streamscale.experiment.cpus import process_tree
from streamscale.processes import running
from tests.benchmark.helpers import fake_result, spec_dict
from tests.conftest import shortfall


def test_a_latency_slo_needs_windows():
    with pytest.raises(ConfigError, match="latency_p95_ms"):
        parse_spec(spec_dict(slos={"latency_p95_ms": 5000}))  # uc1
    d = spec_dict(slos={"latency_p95_ms": 5000})
    d["benchmark"] = {"sut": "uc2", "topics": {"partitions": 4}}
    assert parse_spec(d).execution.slos.latency_p95_ms == 5000


def test_a_run_failed_by_its_latency_alone_says_so(tmp_path, capsys):
    import dataclasses

    d = spec_dict(
        load={"type": "sensors", "values": [1000]},
        resources={"type": "cores", "values": [1]},
        repetitions=1,
        slos={"latency_p95_ms": 5000},
    )
    d["benchmark"] = {"sut": "uc3", "topics": {"partitions": 4}}

    def slow_output(load, res, rep, on_lag=None):  # a flat lag, a p95 latency over the limit
        r = fake_result(load, res, rep, passed=False)
        return dataclasses.replace(r, latency_p95_ms=5792.6, latency_slo=False)

    Execution(parse_spec(d), tmp_path, slow_output).run()
    line = next(x for x in capsys.readouterr().out.splitlines() if "FAIL" in x)
    assert "output p95 latency 5,793 ms (limit 5,000)" in line

    # no window emitted after the warm-up: no p95, and with a latency SLO a failure that says why
    def no_output(load, res, rep, on_lag=None):
        r = fake_result(load, res, rep, passed=False)
        return dataclasses.replace(r, latency_p95_ms=float("nan"), latency_slo=False)

    Execution(parse_spec(d), tmp_path / "none", no_output).run()
    line = next(x for x in capsys.readouterr().out.splitlines() if "FAIL" in x)
    assert "no output row after the warm-up" in line and "nan" not in line
    # without a latency SLO it decides nothing: not said (the demo's short UC2 runs emit no window)
    del d["execution"]["slos"]
    Execution(parse_spec(d), tmp_path / "none-no-slo", no_output).run()
    out = capsys.readouterr().out
    assert "FAIL" in out and "latency" not in out and "no output row" not in out
    # UC1 writes no windows: nothing about latency on its lines
    Execution(parse_spec(spec_dict(repetitions=1)), tmp_path / "uc1", lambda *a, **k: fake_result(*a[:3], True)).run()
    assert "latency" not in capsys.readouterr().out


def test_an_end_run_again_says_so_and_is_recalled_on_resume(tmp_path, capsys):
    d = spec_dict(load={"type": "sensors", "values": [1000]}, resources={"type": "cores", "values": [1]})
    ran = []

    def runner(load, res, rep, on_lag=None):
        ran.append(rep)
        return fake_result(load, res, rep, passed=rep == 0)

    ex = Execution(parse_spec(d), tmp_path, runner)
    assert ex.verdict(1000, 1) == "pass" and ex.confirm(1000, 1) == "fail"
    out = capsys.readouterr().out
    assert "(repetition 1/1)" in out and "(run again)" in out and "/101" not in out
    # resumed: both runs recalled, none run again
    again = Execution(parse_spec(d), tmp_path, runner)
    assert again.verdict(1000, 1) == "pass" and again.confirm(1000, 1) == "fail" and len(ran) == 2
    assert "run again" not in capsys.readouterr().out


def test_an_undecided_lag_verdict_adds_repetitions_and_says_so(tmp_path):
    import dataclasses

    def once_with(extra):  # one point, one repetition, up to ``extra`` more while undecided
        point = {"load": {"type": "sensors", "values": [1000]}, "resources": {"type": "cores", "values": [1]}}
        return parse_spec(spec_dict(**point, repetitions=1, extra_repetitions=extra))

    spec = once_with(2)
    ran = []

    def undecided_then_pass(load, res, rep, on_lag=None):
        ran.append(rep)
        r = fake_result(load, res, rep, passed=rep == 2)
        undecided = rep < 2
        return dataclasses.replace(
            r, lag_verdict="undecided" if undecided else "pass", verdict="undecided" if undecided else "pass"
        )

    summary = Execution(spec, tmp_path, undecided_then_pass).run()
    assert ran == [0, 1, 2]  # two added runs; the third decided
    assert summary["results"] == [{"load": 1000.0, "resources": 1}]
    rows = list(csv.DictReader(open(tmp_path / "experiments.csv")))
    assert [r["lag_verdict"] for r in rows] == ["undecided", "undecided", "pass"]
    # with no runs to add, the point stays undecided: it holds nothing, and is said so
    ran.clear()
    spec0 = once_with(0)
    summary = Execution(spec0, tmp_path / "none", undecided_then_pass).run()
    assert ran == [0]
    assert summary["results"] == [{"load": 1000.0, "resources": None}] and summary["undecided_experiments"] == 1


def test_majority_stops_repetitions_early_unless_all_are_asked_for(tmp_path):
    one_point = {"load": {"type": "sensors", "values": [1000]}, "resources": {"type": "cores", "values": [1]}}
    ran = []

    def passes(load, res, rep, on_lag=None):
        ran.append(rep)
        return fake_result(load, res, rep, passed=rep != 2)  # pass, pass, fail

    summary = Execution(parse_spec(spec_dict(**one_point, repetitions=3)), tmp_path / "early", passes).run()
    assert ran == [0, 1] and summary["results"] == [{"load": 1000.0, "resources": 1}]  # 2 of 3 decide
    ran.clear()
    spec = parse_spec(spec_dict(**one_point, repetitions=3, stop_at_majority=False))
    summary = Execution(spec, tmp_path / "all", passes).run()
    assert ran == [0, 1, 2] and summary["results"] == [{"load": 1000.0, "resources": 1}]  # still 2 of 3


def test_a_capacity_no_experiment_ran_is_said_so(tmp_path):
    # 1 core holds 2,000/s, 2 cores fail 3,000/s: the lower-bound search never runs 2,000 on 2
    spec = parse_spec(
        spec_dict(
            load={"type": "sensors", "values": [1000, 2000, 3000]},
            metric="capacity",
            repetitions=1,
            strategy={"name": "linear", "lower_bound": True},
        )
    )
    ran = []

    def passes(load, res, rep, on_lag=None):
        ran.append((load, res))
        return fake_result(load, res, rep, passed=load <= 2000)

    summary = Execution(spec, tmp_path, passes).run()
    assert (2000.0, 2) not in ran and summary["results"] == [
        {"resources": 1, "load": 2000.0},
        {"resources": 2, "load": 2000.0},
    ]
    assert [(r["resources"], r["assumed"]) for r in summary["answer"]["capacity"]] == [(1, False), (2, True)]
    assert (tmp_path / "capacity.png").stat().st_size > 5000


def test_interrupted_execution_resumes(tmp_path):
    spec = parse_spec(spec_dict(strategy={"name": "linear", "lower_bound": True}, repetitions=3))
    ran = []

    def flaky(load, res, rep, on_lag=None):
        if len(ran) == 3:
            raise KeyboardInterrupt  # the user stops the execution
        ran.append((load, res, rep))
        return fake_result(load, res, rep, passed=res * 1500 >= load)

    with pytest.raises(KeyboardInterrupt):
        Execution(spec, tmp_path, flaky).run()
    assert len(ran) == 3
    done_before = list(ran)
    ex = Execution(
        spec, tmp_path, lambda *a, **k: (ran.append(a[:3]), fake_result(*a[:3], passed=a[1] * 1500 >= a[0]))[1]
    )
    summary = ex.run()
    assert ex.resumed >= 2 and all(r not in ran[3:] for r in done_before)  # nothing ran twice
    assert summary["results"] == [{"load": 1000.0, "resources": 1}, {"load": 2000.0, "resources": 2}]
    rows = list(csv.DictReader(open(tmp_path / "experiments.csv")))
    assert len({(r["load"], r["resources"], r["repetition"]) for r in rows}) == len(rows)


def test_results_dir_of_another_spec_is_refused(tmp_path):
    Execution(parse_spec(spec_dict()), tmp_path, lambda *a, **k: None)
    with pytest.raises(ConfigError, match="different spec"):
        Execution(parse_spec(spec_dict(duration_s=99)), tmp_path, lambda *a, **k: None)


def test_results_keep_no_credentials_and_a_changed_password_is_the_same_spec(tmp_path):
    import yaml

    def spec(password: str, client: str = "bench"):
        d = spec_dict()
        d["kafka"] = {"properties": {"sasl.password": password, "client.id": client, "ssl.key.password": "k3y"}}
        return parse_spec(d)

    Execution(spec("hunter2"), tmp_path, lambda *a, **k: None)
    saved = (tmp_path / "spec.yaml").read_text()
    assert "hunter2" not in saved and "k3y" not in saved
    props = yaml.safe_load(saved)["kafka"]["properties"]
    assert props == {"sasl.password": "****", "client.id": "bench", "ssl.key.password": "****"}
    Execution(spec("rotated"), tmp_path, lambda *a, **k: None)  # resumes: credentials are not the spec
    with pytest.raises(ConfigError, match="different spec"):
        Execution(spec("hunter2", client="other"), tmp_path, lambda *a, **k: None)


def test_results_of_an_older_streamscale_resume(tmp_path):
    # spec.yaml written before the kafka: section and stop_at_majority existed: the fields it lacks
    # take their defaults, so the same spec resumes instead of being called a different one
    import yaml

    spec = parse_spec(spec_dict())
    Execution(spec, tmp_path, lambda *a, **k: None)
    old = yaml.safe_load((tmp_path / "spec.yaml").read_text())
    del old["kafka"], old["execution"]["stop_at_majority"]
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(old, sort_keys=False))
    Execution(spec, tmp_path, lambda *a, **k: None)
    assert "stop_at_majority" in (tmp_path / "spec.yaml").read_text()
    (tmp_path / "spec.yaml").write_text("execution: [not, a, spec]\n")
    with pytest.raises(ConfigError, match="different spec"):
        Execution(spec, tmp_path, lambda *a, **k: None)


@pytest.mark.spark
def test_multi_executor_run_on_standalone_cluster(tmp_path, broker):
    from streamscale.hosts.spark import StandaloneCluster

    with StandaloneCluster(workers=2, cores_per_worker=1, memory_per_worker="1g", log_dir=tmp_path / "cluster") as c:
        spec = parse_spec(
            spec_dict(
                load={"type": "sensors", "values": [1000]},
                resources={"type": "executors", "values": [2]},
                master=c.master_url,
                executor_memory="512m",
                duration_s=16,
                max_duration_s=16,
                warmup_s=6,
                extra_repetitions=0,
            )
        )
        summary = run_execution(spec, tmp_path / "res", broker.bootstrap)
        [row] = list(csv.DictReader(open(tmp_path / "res" / "experiments.csv")))
        # how many records the executors get through in 16 s is the machine's speed (a saturated
        # CI machine managed 5,394 of 22,000); what must hold is that the run was judged, its
        # executors processed records, and it ran on 2 of them
        assert row["valid"] == "True" or shortfall(row)  # invalid: the load fell short
        assert int(row["processed_records"]) > 0
        assert summary["results"][0]["load"] == 1000 and summary["experiments_run"] == 1
        # the executors as Spark listed them when the load ended: two, each of one core, on a worker
        assert re.fullmatch(r"\d+@127\.0\.0\.1 \(1 core\); \d+@127\.0\.0\.1 \(1 core\)", row["executors"]), row
        apps = (tmp_path / "cluster" / "master.log").read_text()
        assert "Registered app" in apps and apps.count("Launching executor") >= 2
        # the daemons map the driver's class-data archive (pyspark's classpath is theirs too)
        assert "Unable to use shared archive" not in apps
        assert "-XX:SharedArchiveFile=" in open(f"/proc/{c.procs[0].pid}/cmdline").read()
        # and so do the executors (the worker writes each one's command line atop its stderr)
        executors = list((tmp_path / "cluster" / "work").glob("app-*/*/stderr"))
        assert len(executors) >= 2
        for log in executors:
            text = log.read_text(errors="replace")
            assert "-XX:SharedArchiveFile=" in text and "Unable to use shared archive" not in text
        daemons = list(c.procs)
        started = {pid for p in daemons for pid in process_tree(p.pid)}  # master, workers, executors
        assert len(daemons) == 3 and len(started) >= 3
    # stop() empties c.procs: what it started is checked by the processes kept above
    assert all(p.poll() is not None for p in daemons)
    assert not [pid for pid in started if running(pid)]


def test_resume_after_a_torn_last_row(tmp_path):
    # a run killed while writing a row: the partial row is dropped (that experiment runs again),
    # the file is repaired, and the rows after the resume are whole
    spec = parse_spec(spec_dict(repetitions=1))
    ex = Execution(spec, tmp_path, lambda *a, **k: fake_result(*a[:3], passed=True))
    ex.results.append(fake_result(1000.0, 1, 0, True))
    ex.results.append(fake_result(2000.0, 1, 0, True))
    path = tmp_path / "experiments.csv"
    text = path.read_text()
    path.write_text(text[: len(text) - 25])  # cut inside the last row
    ran = []
    ex = Execution(spec, tmp_path, lambda *a, **k: (ran.append(a[:3]), fake_result(*a[:3], passed=True))[1])
    assert set(ex.done) == {(1000.0, 1, 0, "")}  # "": no configuration named
    ex.run()
    assert (2000.0, 1, 0) in ran and (1000.0, 1, 0) not in ran
    rows = list(csv.DictReader(open(path)))
    assert all(None not in r and None not in r.values() for r in rows)
    assert len({(r["load"], r["resources"], r["repetition"]) for r in rows}) == len(rows)


def test_a_run_whose_lag_samples_failed_is_not_judged():
    # the lag sampler goes on past a failed sample (the trend interpolates across it); a run that
    # lost more than 5 % of its samples would be judged on part of its length, so it is invalid
    from streamscale.benchmark.verdict import run_validity

    assert run_validity(True, 0, 150) == (True, "")
    assert run_validity(True, 7, 150) == (True, "")  # 7 of 150 s: interpolated
    assert run_validity(True, 8, 150) == (False, "8 lag samples of 150 s failed: experiment invalid")
    assert run_validity(False, 0, 60) == (False, "generator fell short of its target rate: experiment invalid")


def test_the_runner_keeps_spark_sessions_only_where_the_spec_says_so():
    from streamscale.benchmark.experiment_runner import ExperimentRunner
    from streamscale.experiment.sessions import SparkSessions

    fresh = ExperimentRunner(parse_spec(spec_dict()), Path("."), "127.0.0.1:9092")
    kept = ExperimentRunner(parse_spec(spec_dict(reuse_spark=True)), Path("."), "127.0.0.1:9092")
    assert not fresh.sessions.keep and kept.sessions.keep
    # the caller's sessions (the demo's, holding the probe's session) are the caller's to close
    theirs = SparkSessions(keep=True)
    closed = []
    theirs.close = lambda: closed.append("theirs")
    ExperimentRunner(parse_spec(spec_dict()), Path("."), "127.0.0.1:9092", theirs).close()
    assert closed == []
    kept.sessions.close = lambda: closed.append("own")
    kept.close()
    assert closed == ["own"]


def test_a_run_whose_spark_jvm_died_fails_with_why(monkeypatch):
    # an overloaded query's batches can outgrow the driver's heap: that load was not held, and the
    # execution goes on (the next experiment starts a new JVM)
    from streamscale.benchmark import experiment_runner as er
    from streamscale.errors import SparkDied

    def died(*_a, **_k):
        raise SparkDied("Spark's JVM ran out of memory (java.lang.OutOfMemoryError in /tmp/x.log)")

    runner = er.ExperimentRunner(parse_spec(spec_dict()), Path("."), "127.0.0.1:9092")
    monkeypatch.setattr(runner, "_run_sut", died)
    monkeypatch.setattr("streamscale.experiment.noise.machine_speed", lambda: 1e7)
    r = runner(2000, 1, 0)
    assert (r.verdict, r.passed, r.valid, r.load, r.resources) == ("fail", False, True, 2000, 1)
    assert r.note == "Spark's JVM ran out of memory (java.lang.OutOfMemoryError in /tmp/x.log)"
    assert r.exp_id == er.exp_id(2000, 1, 0)
    from streamscale.benchmark.runline import run_line

    assert run_line(r).startswith("  [red]FAIL[/] Spark's JVM ran out of memory (java.lang.OutOfMemoryError in ")


def test_a_time_budget_plans_runs_by_what_runs_here_took_beyond_their_load(tmp_path, monkeypatch):
    import dataclasses
    import time

    import streamscale.benchmark.bracket as br

    clock = [0.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])
    seen = {}
    search = br.bracket_search

    def spy(*args, **kwargs):
        seen["cost"] = kwargs["budget"].run_cost_s
        seen["before"] = kwargs["budget"].run_cost_s()
        return search(*args, **kwargs)

    monkeypatch.setattr(br, "bracket_search", spy)
    extra = iter([3.0, 7.5, 2.0, 2.0, 2.0, 2.0, 2.0, 2.0])

    def run(load, res, rep, on_lag=None):
        clock[0] += 30.0 + next(extra)  # 30 s of load and what it took beyond that
        return dataclasses.replace(fake_result(load, res, rep, passed=load <= 1500 * res), ran_s=30.0)

    strategy = {"name": "bracket", "resolution": 0.2, "factor": 2.0, "max_runs": 3, "time_budget_s": 600}
    spec = parse_spec(spec_dict(duration_s=30, strategy=strategy, metric="capacity"))
    ex = Execution(spec, tmp_path, run)
    ex.run()
    assert seen["before"] == 30.0 + br.RUN_OVERHEAD_S  # nothing measured yet: the default
    assert ex.overheads[:3] == [3.0, 7.5, 2.0] and seen["cost"]() == 30.0 + 7.5  # the most a run took

    # a load's verdict takes each of its repetitions
    clock[0] = 0.0
    spec = parse_spec(spec_dict(duration_s=30, strategy=strategy, metric="capacity", repetitions=3))
    extra = iter([3.0] * 30)
    ex = Execution(spec, tmp_path / "three", run)
    ex.run()
    assert seen["before"] == 3 * (30.0 + br.RUN_OVERHEAD_S) and seen["cost"]() == 3 * 33.0


def test_every_experiment_says_which_of_at_most_how_many_it_is_and_the_time(tmp_path, capsys, monkeypatch):
    import time

    clock = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: clock[0])

    def run(load, res, rep, on_lag=None):
        clock[0] += 65.0
        return fake_result(load, res, rep, passed=True)

    # full search: 2 loads x 2 amounts x 2 repetitions
    Execution(parse_spec(spec_dict(repetitions=2, stop_at_majority=False)), tmp_path / "full", run).run()
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("experiment ")]
    assert len(lines) == 8
    assert lines[0].endswith("[1 of at most 8, 0 s elapsed]") and lines[-1].endswith(
        "[8 of at most 8, 7 min 35 s elapsed]"
    )
    # a bracket with a time budget: at most max_runs points and two ends again per amount; the budget's rest
    strategy = {"name": "bracket", "max_runs": 3, "time_budget_s": 600}
    ex = Execution(parse_spec(spec_dict(repetitions=1, strategy=strategy, metric="capacity")), tmp_path / "b", run)
    assert ex.most_experiments() == 2 * (3 + 2)
    confirmed = {**strategy, "confirm": True, "confirm_runs": 4}
    spec = parse_spec(spec_dict(repetitions=1, strategy=confirmed, metric="capacity"))
    assert Execution(spec, tmp_path / "c", run).most_experiments() == 2 * (3 + 2 + 2 + 4)  # and the long runs
    # under the SLOs (a search at a looser lag threshold), each run that decides an end may run again
    # once, and each end past a load where runs disagreed
    under = {**strategy, "search_lag_threshold": 0.05, "confirm_runs": 4}
    spec = parse_spec(spec_dict(repetitions=1, strategy=under, metric="capacity"))
    assert Execution(spec, tmp_path / "d", run, slo_experiment=run).most_experiments() == 2 * (3 + 2 + 2 * (2 + 4 + 2))
    ex.run()
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("experiment ")]
    assert lines[0].endswith("[1 of at most 10, 0 s elapsed, 10 min 00 s of the time budget left]")
    assert lines[1].endswith("[2 of at most 10, 1 min 05 s elapsed, 8 min 55 s of the time budget left]")


def test_a_run_a_time_budget_ends_sooner_plans_its_looks_up_to_there_and_is_judged_at_what_they_left(monkeypatch):
    # 40 s runs that may go on to 300 s; the time budget leaves this one 120 s: its load stops
    # there, its looks are planned up to there, and a verdict there takes the error they left
    # (97.5 % less what they spent), not one look's 99.99 %
    from streamscale.benchmark import experiment_runner as er

    clock = [1000.0]
    monkeypatch.setattr(er.time, "monotonic", lambda: clock[0])
    spec = parse_spec(spec_dict(duration_s=40, warmup_s=10, max_duration_s=300))
    runner = er.ExperimentRunner(spec, Path("."), "127.0.0.1:9092")
    monkeypatch.setattr(runner, "_sut", lambda point, params, policy, on_lag: policy)
    point = runner.plan.point(2000, 1)
    assert runner._run_sut(point, None).longest_s == runner.looks.longest_s == 300  # no budget: its longest
    runner.until = 1120.0
    policy = runner._run_sut(point, None)
    assert policy.longest_s == runner.looks.longest_s == 120
    runner.looks.taken = runner.looks.planned
    assert runner._confidence(120.0) == pytest.approx(1 - 0.05 * 0.75)
    assert runner._confidence(60.0) == pytest.approx(1 - 0.05 * 0.25 / runner.looks.planned)  # a look's
    runner.until = 1010.0  # never shorter than duration_s
    assert runner._run_sut(point, None).longest_s == 40
