"""The benchmark scripts end like the CLI: one line and an exit status, never a traceback."""

import ast
import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from streamscale.errors import ConfigError

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from _main import run  # noqa: E402


def _raise(exc):
    def main():
        raise exc

    return main


def test_ctrl_c_is_one_line_and_130(capsys):
    with pytest.raises(SystemExit) as e:
        run(_raise(KeyboardInterrupt()))
    assert e.value.code == 130
    assert capsys.readouterr().err == "interrupted\n"


def test_streamscale_errors_are_one_line_and_their_exit_status(capsys):
    with pytest.raises(SystemExit) as e:
        run(_raise(ConfigError("no such UC")))
    assert e.value.code == ConfigError.exit_code == 2
    assert capsys.readouterr().err == "error: no such UC\n"


def test_other_errors_keep_their_traceback():
    with pytest.raises(ZeroDivisionError):
        run(_raise(ZeroDivisionError()))


def test_sigterm_runs_the_scripts_clean_up_and_ends_with_143(tmp_path):
    # a script whose main holds something to release: SIGTERM must reach its `finally`, as Ctrl-C
    # does (Python's default ends the process on the spot: rc -15, nothing released)
    script = tmp_path / "held.py"
    script.write_text(
        "import sys, threading\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        "from _main import run\n"
        "def main():\n"
        "    try:\n"
        "        print('ready', flush=True)\n"
        "        threading.Event().wait()\n"
        "    finally:\n"
        "        print('released', flush=True)\n"
        "run(main)\n"
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert (proc.returncode, out, err) == (128 + signal.SIGTERM, "released\n", "")


def test_every_script_ends_through_run():
    scripts = [p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_")]
    assert len(scripts) >= 10
    for path in scripts:
        tree = ast.parse(path.read_text())
        mains = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        assert len(mains) == 1, path.name
        calls = [n for n in ast.walk(mains[0]) if isinstance(n, ast.Call)]
        assert [ast.unparse(c) for c in calls] == ["run(main)"], path.name


def test_capacity_searches_brackets_with_the_defaults_and_rechecks_given_points_whole():
    import capacity

    default = capacity.parse_spec(capacity.spec_for("uc3", capacity.parse_args(["--uc", "uc3"]), None)).execution
    assert (default.strategy.name, default.strategy.resolution, default.metric) == ("bracket", 0.15, "capacity")
    assert default.load.values == [10_000, 400_000] and default.resources.values == [1, 2]
    assert default.repetitions == 1 and default.shortest_s is not None  # sequential verdicts
    assert default.slos.processing_latency_p95_ms == "auto" and default.slos.lag_trend_threshold == 0.01
    uc4 = capacity.parse_spec(capacity.spec_for("uc4", capacity.parse_args(["--uc", "uc4"]), None)).execution
    assert uc4.load.type == "sensors" and uc4.strategy.name == "bracket"  # any sensor count
    args = capacity.parse_args(
        ["--uc", "uc3", "--loads", "30000", "65000", "--resources", "1", "--repetitions", "3", "--every-run"]
    )
    ex = capacity.parse_spec(capacity.spec_for("uc3", args, None)).execution
    assert ex.load.values == [30000, 65000] and ex.resources.values == [1]
    assert (ex.repetitions, ex.stop_at_majority, ex.extra_repetitions, ex.shortest_s) == (3, False, 0, None)
    assert (ex.strategy.name, ex.metric) == ("full", "demand")
    replicated = capacity.parse_spec(capacity.spec_for("uc1", capacity.parse_args(["--brokers", "3"]), None))
    assert (replicated.benchmark.topics.replication_factor, replicated.benchmark.topics.min_insync_replicas) == (3, 2)
    assert capacity.parse_spec(capacity.spec_for("uc1", capacity.parse_args([]), None)).replication_factor(False) == 1
    assert capacity.parse_spec(capacity.spec_for("uc1", capacity.parse_args([]), None)).benchmark.loadgen.workers == 1
    two = capacity.parse_spec(capacity.spec_for("uc1", capacity.parse_args(["--generators", "2"]), None))
    assert two.benchmark.loadgen.workers == 2
    with pytest.raises(SystemExit):
        capacity.parse_args(["--generators", "0"])
    # --confirm is the product's confirmation, not a flow of the script's own
    st = capacity.parse_spec(capacity.spec_for("uc2", capacity.parse_args(["--confirm", "--confirm-runs", "2"]), None))
    st = st.execution.strategy
    assert (st.confirm, st.confirm_s, st.confirm_warmup_s, st.confirm_runs) == (True, 300.0, 60.0, 2)
    assert not capacity.parse_spec(capacity.spec_for("uc2", capacity.parse_args([]), None)).execution.strategy.confirm


def test_capacity_loads_need_one_uc(capsys):
    import capacity

    with pytest.raises(SystemExit) as e:
        capacity.parse_args(["--uc", "uc3", "uc4", "--loads", "1"])
    assert e.value.code == 2
    assert "exactly one --uc" in capsys.readouterr().err


def test_capacity_run_lines_show_what_was_measured(capsys):
    import dataclasses

    import capacity

    from tests.benchmark.helpers import fake_result

    undecided = dataclasses.replace(
        fake_result(40_000, 2, 0, passed=False),
        verdict="undecided",
        processing_p95_ms=4096.0,
        ran_s=150.0,
        spark_cpu_pct=140.0,
        latency_p95_ms=float("nan"),
        median_batch_ms=1066.0,
        generator_cpu_pct=12.0,
        machine_cpu_pct=90.0,
        drifted=True,
        drift=0.12,
    )
    windowed = dataclasses.replace(undecided, verdict="pass", latency_p95_ms=4871.0, drifted=False)
    capacity.print_runs([undecided, windowed])
    lines = capsys.readouterr().out.splitlines()
    assert "UNDECIDED" in lines[0] and "processing p95 4,096 ms" in lines[0] and "150 s" in lines[0]
    assert "output p95" not in lines[0] and lines[0].endswith("machine 90 % busy (speed moved 12 %)")
    assert "PASS" in lines[1] and "output p95 4,871 ms" in lines[1] and "Spark 1.4 CPUs" in lines[1]


def test_the_reassignment_benchmark_reaches_its_phases(broker):
    # its low level must fit one consumer and its high level need one per partition, by what the
    # monitor measures (log sizes, with Kafka's batch headers): the controller's algorithm packs
    # the monitor's own figures at the calibrated rates
    import autoscaler_reassign_time as bench

    from streamscale.autoscaler.binpacking import ALGORITHMS, consumers_used

    partitions, cap = 4, 24_000.0
    low, high = bench.calibrated_rates(broker.bootstrap, partitions, 200, cap, seconds=3.0)
    bin_cap = cap * 5 / 6
    for rate, consumers in ((low, 1), (high, partitions)):
        _, speeds = bench.monitor_speeds(broker.bootstrap, partitions, 200, rate, seconds=3.0)
        sizes = {i: min(s, bin_cap) for i, s in enumerate(speeds.values())}
        assert len(sizes) == partitions and all(s > 0 for s in sizes.values())
        assert consumers_used(ALGORITHMS["MWF"](sizes, bin_cap, None)) == consumers, (rate, speeds)


def test_capacity_confirms_each_amounts_ends_with_whole_long_runs(capsys):
    # the script's --confirm is the product's: each end one whole run of 300 s after 60 s (the
    # brackets it decides anew are tests/benchmark/test_confirm.py's, on the same hand-worked cases)
    import capacity

    from streamscale.benchmark.plan import long_execution

    args = capacity.parse_args(["--uc", "uc2", "--confirm"])
    assert (args.confirm, args.confirm_warmup) == (300.0, 60.0)
    spec = capacity.parse_spec(capacity.spec_for("uc2", args, None))
    ex = long_execution(spec).execution
    assert (ex.duration_s, ex.warmup_s, ex.shortest_s, ex.repetitions, ex.extra_repetitions) == (
        300.0,
        60.0,
        None,
        1,
        0,
    )
    assert spec.execution.strategy.name == "bracket" and spec.execution.duration_s == 150  # the search as it was
    with pytest.raises(SystemExit):
        capacity.parse_args(["--uc", "uc2", "--confirm", "30", "--confirm-warmup", "60"])
    assert "--confirm" in capsys.readouterr().err


def _run_dir(root: Path, rows: list[dict], lags: dict) -> None:
    """An execution's results: experiments.csv as the runner writes it, and each run's lag after
    every commit."""
    import csv
    from dataclasses import replace

    from streamscale.benchmark.results import ResultsFile
    from tests.benchmark.helpers import fake_result

    (root / "lag").mkdir(parents=True)
    results = ResultsFile(root)
    for row in rows:
        load, passed = row["load"], row["verdict"] == "pass"
        result = fake_result(load, 1, 0, passed)
        fields = {k: row[k] for k in ("exp_id", "lag_slope", "lag_limit", "verdict")}
        results.append(replace(result, **fields))
    for exp_id, series in lags.items():
        with open(root / "lag" / f"{exp_id}-batches.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "lag_after_commit"])
            w.writerows(series)


def test_lag_resolution_cuts_passed_runs_into_windows_of_each_span(tmp_path, monkeypatch, capsys):
    import lag_resolution

    # one point a second for 300 s; a lag rising 50/s or 150/s (limit 100) with +-100 alternating
    ts = range(300)
    _run_dir(
        tmp_path / "a",
        [
            {"exp_id": "slow", "load": 10_000, "verdict": "pass", "lag_slope": 50, "lag_limit": 100},
            {"exp_id": "fast", "load": 10_000, "verdict": "pass", "lag_slope": 150, "lag_limit": 100},
            # a run that failed is no load the query kept up with: left out
            {"exp_id": "bad", "load": 10_000, "verdict": "fail", "lag_slope": 50, "lag_limit": 100},
        ],
        {
            "slow": [(t, 1000 + 50 * t + (100 if t % 2 else -100)) for t in ts],
            "fast": [(t, 1000 + 150 * t + (100 if t % 2 else -100)) for t in ts],
            "bad": [(t, 0) for t in ts],
        },
    )
    monkeypatch.setattr(sys, "argv", ["lag_resolution.py", str(tmp_path), "--spans", "43", "500"])
    lag_resolution.main()
    out = capsys.readouterr().out
    assert "2 passed runs, loads 10,000-10,000 records/s, warm-up 60 s" in out
    # windows start at 60, 103, 146, 189, 232 (the next would end after the last point, 299 s)
    assert "43 s: 10 windows of 2 runs; the run's trend inside the 95 % interval in 100%" in out
    assert "alone: pass 50%, undecided 0%, fail 50%" in out
    assert "500 s: no window fits after the warm-up" in out


def test_lag_resolution_without_passed_runs_says_so(tmp_path, monkeypatch):
    import lag_resolution

    monkeypatch.setattr(sys, "argv", ["lag_resolution.py", str(tmp_path)])
    with pytest.raises(SystemExit) as e:
        lag_resolution.main()
    assert "no run that passed" in str(e.value.code)


def test_a_scripts_library_log_records_go_to_the_spark_log_not_the_terminal(tmp_path):
    script, log = tmp_path / "logs.py", tmp_path / "spark.log"
    script.write_text(
        "import logging, sys\n"
        f"sys.path.insert(0, {str(BENCHMARKS)!r})\n"
        "from _main import run\n"
        "run(lambda: logging.getLogger('py4j.clientserver').error('Exception while sending command.'))\n"
    )
    env = {**os.environ, "STREAMSCALE_SPARK_LOG": str(log)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert "py4j.clientserver ERROR Exception while sending command." in log.read_text()


def test_answer_truth_counts_an_end_only_when_its_long_runs_agree():
    from answer_truth import end_settled, try_settled

    assert end_settled(["pass", "pass"], "pass") == "holds"
    assert end_settled(["fail", "fail"], "pass") == "wrong"
    assert end_settled(["pass", "undecided"], "pass") == "unsettled"
    assert end_settled(["undecided"], "fail") == "wrong"  # an undecided failed end claims no failure
    assert end_settled([], "fail") == "unrun"
    bracket = {"held": 200_000, "failed": 220_000, "long": {200_000.0: ["pass", "fail"], 220_000.0: ["fail", "fail"]}}
    assert try_settled(bracket) == "unsettled"
    assert try_settled({**bracket, "long": {200_000.0: ["pass"] * 2, 220_000.0: ["fail"] * 2}}) == "holds"
    # the 4-round try whose single long runs came out the other way round: wrong, not unsettled
    assert try_settled({**bracket, "long": {200_000.0: ["fail"], 220_000.0: ["pass"]}}) == "wrong"
    assert try_settled({**bracket, "failed": None}) == "wrong"


def test_answer_truth_runs_a_long_run_again_where_the_machine_moved_and_counts_only_the_second(monkeypatch, capsys):
    import answer_truth

    rows = iter([(0.46, "fail"), (0.05, "pass"), (0.10, "fail"), (0.30, "undecided"), (0.40, "fail")])
    done = []

    def long_runs(args, spec, load, out):
        drift, verdict = next(rows)
        done.append(out.name)
        nan = float("nan")
        return [
            SimpleNamespace(
                load=load,
                verdict=verdict,
                drift=drift,
                lag_slope=nan,
                lag_low=nan,
                lag_high=nan,
                lag_limit=nan,
                processing_p95_ms=nan,
                spark_cpu_pct=nan,
            )
        ]

    monkeypatch.setattr(answer_truth, "_long_runs", long_runs)
    args = SimpleNamespace(max_drift=0.25, long=300.0)
    long = {}
    for k in (1, 2, 3):
        answer_truth._check_end(args, None, 200_000.0, Path(f"long/{k}-200000"), long, f"round {k}")
    # moved 46 %: run again, the second counts; moved 10 %: counts; moved 30 % then 40 %: the second counts
    assert long == {200_000.0: ["pass", "fail", "fail"]}
    assert done == ["1-200000", "1-200000-again", "2-200000", "3-200000", "3-200000-again"]
    assert capsys.readouterr().out.count("not counted: over 25%; run again") == 2
    assert answer_truth.counted(float("nan"), 0.25) and answer_truth.counted(0.25, 0.25)


@pytest.mark.parametrize("name", ["hot_items", "text_udf", "two_hashes"])
def test_the_answer_checks_own_jobs_are_valid_specs_whose_jobs_build(name):
    from streamscale.benchmark.plan import resolve
    from streamscale.benchmark.spec import load_spec

    spec = load_spec(BENCHMARKS / "jobs" / f"{name}.yaml")
    assert spec.name == name and "rounds" not in spec.benchmark.params  # answer_truth runs it once, as it is
    resolve(spec).check()  # its job imports and builds from its records, as `benchmark validate` checks
