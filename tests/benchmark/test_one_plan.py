"""One plan per `benchmark run`: the command resolves its spec once and everything downstream (the
execution, its runner, the long runs of --confirm, the notes before it starts, the answer's axes)
runs that plan. Counted where a resolve does its work: the load dimension it builds."""

from pathlib import Path

import pytest
import yaml

import streamscale.benchmark.plan as plan_module
from streamscale.experiment.noise import SpeedLog
from tests.benchmark.helpers import drained_job, fake_result

CAPACITY = 30_000  # records/s the fake runner's job holds


class FakeRunner:
    """An ExperimentRunner whose runs pass below CAPACITY; it keeps the plan it was given."""

    plans: list = []
    made: list = []

    def __init__(self, plan, out_dir, bootstrap, sessions=None, broker_pids=None, replication_factor=None):
        self.plan, self.out_dir, self.bootstrap = plan, out_dir, bootstrap
        self.sessions, self.broker_pids, self.replication_factor = sessions, broker_pids, replication_factor or 1
        self.watch, self.preflown, self.speeds = None, False, SpeedLog()
        FakeRunner.plans.append(plan)
        FakeRunner.made.append(self)

    def __call__(self, load, res, rep, on_lag=None, config=""):
        return fake_result(load, res, rep, passed=load < CAPACITY)

    def drain(self, load, res, config, records, batch):  # a drain probe's run
        return drained_job(0.5, 1 / CAPACITY)(load, records, batch)

    def close(self):
        pass


def _count_resolves(monkeypatch) -> list:
    calls: list = []
    real = plan_module.load_dimension

    def counted(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(plan_module, "load_dimension", counted)
    return calls


def test_benchmark_run_with_confirm_resolves_its_spec_once(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    import streamscale.benchmark.execution as execution
    import streamscale.broker.access as access
    from streamscale.cli.main import root

    spec = {
        "name": "one-plan",
        "benchmark": {"sut": "uc2", "topics": {"partitions": 2}},
        "execution": {
            "metric": "capacity",
            "load": {"type": "rate", "values": [10_000]},
            "resources": {"type": "cores", "values": [1]},
            "strategy": {"name": "bracket", "resolution": 0.25, "confirm_runs": 1},
            "duration_s": 20,
            "warmup_s": 5,
        },
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    calls = _count_resolves(monkeypatch)
    FakeRunner.plans, FakeRunner.made = [], []
    monkeypatch.setattr(execution, "ExperimentRunner", FakeRunner)
    monkeypatch.setattr(access, "ensure_reachable", lambda *a, **k: None)  # no broker is asked
    monkeypatch.setenv("STREAMSCALE_METRICS_PORT", "0")
    out = tmp_path / "res"
    args = ["benchmark", "run", str(tmp_path / "spec.yaml"), "--out", str(out), "-b", "127.0.0.1:9", "--confirm"]
    r = CliRunner().invoke(root, args)
    assert r.exit_code == 0, r.output
    assert len(calls) == 1  # one resolve for the whole run
    search, long = FakeRunner.plans  # the search's runner and the long runs' runner
    # the long runs' machine speed is judged against the whole execution's readings
    assert FakeRunner.made[1].speeds is FakeRunner.made[0].speeds
    assert long.spec.execution.duration_s == 300 and long.load is search.load  # the plan's own, derived
    assert "held ~" in r.output and (out / "report.html").is_file()
    assert Path(out / "summary.json").is_file()


def test_run_sut_with_a_spec_resolves_it_once_into_the_runs_workload(monkeypatch, tmp_path):
    """`run-sut --spec` runs the workload its spec's plan gives: the spec's job, its parameters with
    -p over them, its generators' settings and partitions (the run itself is not started here)."""
    from typer.testing import CliRunner

    import streamscale.broker.access as access
    import streamscale.experiment.sut as sut
    from streamscale.cli.main import root
    from streamscale.errors import ConfigError

    spec = {
        "name": "one-plan",
        "benchmark": {
            "sut": "uc2",
            "params": {"window_s": 10, "lateness_s": 2},
            "topics": {"partitions": 3},
            "loadgen": {"workers": 2, "period_s": 0.5, "distribution": "uniform:0,10"},
        },
        "execution": {"load": {"type": "rate", "values": [1000]}, "resources": {"type": "cores", "values": [1]}},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    calls, ran = _count_resolves(monkeypatch), []

    def fake_run(workload, placement, policy, context):
        ran.append(workload)
        raise ConfigError("stopped before any load")

    monkeypatch.setattr(sut, "run_sut", fake_run)
    monkeypatch.setattr(access, "ensure_reachable", lambda *a, **k: None)  # no broker is asked
    monkeypatch.setenv("STREAMSCALE_METRICS_PORT", "0")
    args = ["run-sut", "--spec", str(tmp_path / "spec.yaml"), "--rate", "4000", "-p", "window_s=5", "-b", "x:9"]
    r = CliRunner().invoke(root, args)
    assert str(r.exception) == "stopped before any load", r.output  # main() makes it its error line
    assert len(calls) == 1
    (w,) = ran
    assert (w.uc, w.rate, w.partitions) == ("uc2", 4000, 3)
    assert w.params == {"window_s": 5, "lateness_s": 2}
    assert (w.gen_workers, w.period_s, w.distribution) == (2, 0.5, "uniform:0,10")
    # the pipeline the command described and checked is the one the run runs, not built again
    assert w.pipeline is not None and w.pipeline.name == "uc2" and w.pipeline.params.window_s == 5
    monkeypatch.setattr(sut, "make_pipeline", lambda *a, **k: pytest.fail("the run built its pipeline again"))
    run = sut.SutRun(w, sut.Placement(), sut.StopPolicy(), sut.Context())
    assert run.pipe is w.pipeline
    r = CliRunner().invoke(root, [*args, "--gen-workers", "1"])
    assert ran[-1].gen_workers == 1  # the option over the spec's


def test_past_the_plan_nothing_reads_the_specs_execution_or_benchmark_sections():
    """The execution, its runner, the probes, the SLOs' looks and the search read the plan (its
    points, its runs, its facts), never the spec's sections: a field read past the plan is a
    second place a new load type, SLO or kind of input would have to be written."""
    import re

    root = Path(plan_module.__file__).parents[1]
    allowed = {root / "benchmark" / "plan.py", root / "benchmark" / "spec.py"}
    reads = re.compile(r"\bspec\.(execution|benchmark)\b")
    found = [
        f"{path.relative_to(root)}:{n}"
        for path in sorted(root.rglob("*.py"))
        if path not in allowed and root / "cli" not in path.parents
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if reads.search(line.split("#", 1)[0])
    ]
    assert found == []
