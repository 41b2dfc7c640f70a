"""The benchmark scripts end like the CLI: one line and an exit status, never a traceback."""

import ast
import sys
from pathlib import Path

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


def test_every_script_ends_through_run():
    scripts = [p for p in BENCHMARKS.glob("*.py") if not p.name.startswith("_")]
    assert len(scripts) >= 10
    for path in scripts:
        tree = ast.parse(path.read_text())
        mains = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        assert len(mains) == 1, path.name
        calls = [n for n in ast.walk(mains[0]) if isinstance(n, ast.Call)]
        assert [ast.unparse(c) for c in calls] == ["run(main)"], path.name


def test_capacity_every_run_rechecks_given_points_whole():
    import capacity

    spec = capacity.parse_spec(
        capacity.spec_for(
            "uc3",
            capacity.parse_args(["--uc", "uc3", "--loads", "30000", "65000", "--resources", "1", "--every-run"]),
            None,
        )
    )
    ex = spec.execution
    assert ex.load.values == [30000, 65000] and ex.resources.values == [1]
    assert (ex.repetitions, ex.stop_at_majority, ex.extra_repetitions) == (3, False, 0)
    assert (ex.strategy.name, ex.metric) == ("full", "demand")
    # the default stays the search of the docs' rounds
    default = capacity.parse_spec(capacity.spec_for("uc3", capacity.parse_args(["--uc", "uc3"]), None)).execution
    assert default.load.values[-1] == 120_000 and default.resources.values == [1, 2]
    assert (default.strategy.name, default.metric, default.stop_at_majority) == ("binary", "capacity", True)


def test_capacity_loads_need_one_uc(capsys):
    import capacity

    with pytest.raises(SystemExit) as e:
        capacity.parse_args(["--uc", "uc3", "uc4", "--loads", "1"])
    assert e.value.code == 2
    assert "exactly one --uc" in capsys.readouterr().err


def test_capacity_latency_slo_for_windowed_ucs_only(capsys):
    import capacity

    ex = capacity.parse_spec(
        capacity.spec_for("uc3", capacity.parse_args(["--uc", "uc3", "--latency-ms", "5000"]), None)
    ).execution
    assert ex.slos.latency_p95_ms == 5000
    plain = capacity.parse_spec(capacity.spec_for("uc3", capacity.parse_args(["--uc", "uc3"]), None)).execution
    assert plain.slos.latency_p95_ms is None
    with pytest.raises(SystemExit):
        capacity.parse_args(["--uc", "uc1", "uc3", "--latency-ms", "5000"])
    assert "UC1 writes no windows" in capsys.readouterr().err


def test_capacity_run_lines_show_latency_where_measured_and_invalid_runs(capsys):
    # UC1 writes no windows: its lines read "latency p95 nan ms"; and a run whose generator missed
    # its target was listed like a valid one
    from types import SimpleNamespace

    import capacity

    def run(load, latency, valid):
        return SimpleNamespace(
            load=load, resources=2, passed=False, lag_slope=1852.4, lag_low=482.0, lag_high=3222.9,
            lag_limit=3000.0, median_batch_ms=1066.0, latency_p95_ms=latency, generator_rate=238569.0,
            target_rate=load, generator_cpu_pct=64.0, machine_cpu_pct=98.0, valid=valid,
        )  # fmt: skip

    capacity.print_runs([run(300_000, float("nan"), False), run(300_000, None, True), run(40_000, 4871.0, True)])
    lines = capsys.readouterr().out.splitlines()
    assert "latency" not in lines[0] and "latency" not in lines[1]
    assert lines[0].endswith("machine 98 % busy INVALID") and lines[1].endswith("machine 98 % busy")
    assert "latency p95 4,871 ms, generator" in lines[2]
    # a run a latency SLO failed because no window row came out after the warm-up says so
    silent = run(40_000, float("nan"), True)
    silent.latency_slo = False
    capacity.print_runs([silent])
    line = capsys.readouterr().out
    assert "no output row after the warm-up (latency SLO), generator" in line and "nan" not in line


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
