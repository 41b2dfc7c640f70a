"""`benchmark check`: the regression rules on hand-made ends, and whole results folders written by
real executions of a job whose cost per record is known (a fake experiment passes a load when the
resources' capacity covers it), compared through the console script as CI would run it."""

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from streamscale.benchmark.execution import Execution
from streamscale.benchmark.gate import Ends, Entry, Folder, compare, point_verdicts, read_folder
from streamscale.errors import ConfigError, ResultsError
from tests.benchmark.helpers import capacity_spec, fake_result

EXE = str(Path(sys.executable).parent / "streamscale")


def folder(entries, load_type="rate", name="f"):
    return Folder(Path(name), load_type, "cores", entries)


def test_a_bracket_wholly_below_the_baseline_is_a_regression_and_the_tolerance_forgives_a_near_one():
    one = Entry("", 1)
    base = folder({one: Ends(50_000, 70_000, {50_000: "pass", 70_000: "fail"})})
    # failed at 45,000, below the baseline's held 50,000
    worse = folder({one: Ends(30_000, 45_000, {30_000: "pass", 45_000: "fail"})})
    cmp = compare(base, worse)
    assert [r.entry for r in cmp.regressions] == [one]
    assert "wholly below" in cmp.regressions[0].reason and "45,000 records/s" in cmp.regressions[0].reason
    # 10 % forgives a failure at 45,000 (the floor is 45,000: at or below it is still a regression)
    assert compare(base, worse, 0.1).regressions != []
    assert compare(base, worse, 0.11).regressions == []
    # overlapping brackets, the failed end above the baseline's held end: no regression
    near = folder({one: Ends(40_000, 60_000, {40_000: "pass", 60_000: "fail"})})
    assert compare(base, near).regressions == []


def test_a_failure_at_a_load_the_baseline_held_is_a_regression():
    one = Entry("", 1)
    # the new bracket is not below (its failed end 80,000 > 50,000), but 50,000 failed where the baseline held
    base = folder({one: Ends(50_000, 70_000, {50_000: "pass", 70_000: "fail"})})
    new = folder({one: Ends(60_000, 80_000, {50_000: "fail", 60_000: "pass", 80_000: "fail"})})
    cmp = compare(base, new)
    assert (
        len(cmp.regressions) == 1 and "failed at 50,000 records/s, which the baseline held" in cmp.regressions[0].reason
    )
    # undecided or invalid runs at that load decide nothing
    for v in ("undecided", "invalid"):
        new.entries[one].points[50_000] = v
        assert compare(base, new).regressions == []


def test_entries_are_configurations_times_resources_and_unshared_ones_are_said():
    base = folder({Entry("a", 1): Ends(10, 20), Entry("a", 2): Ends(20, 40), Entry("b", 1): Ends(10, 20)})
    new = folder({Entry("a", 1): Ends(10, 20), Entry("a", 2): Ends(5, 10), Entry("c", 1): Ends(1, 2)})
    cmp = compare(base, new)
    assert cmp.compared == [Entry("a", 1), Entry("a", 2)]
    assert [r.entry for r in cmp.regressions] == [Entry("a", 2)]
    assert cmp.only_baseline == [Entry("b", 1)] and cmp.only_new == [Entry("c", 1)]
    with pytest.raises(ResultsError, match="share no entry"):
        compare(folder({Entry("b", 1): Ends(1, 2)}), folder({Entry("c", 1): Ends(1, 2)}))
    with pytest.raises(ConfigError, match="not comparable"):
        compare(base, folder(new.entries, load_type="sensors"))


def test_a_baseline_that_held_nothing_cannot_be_regressed_against():
    one = Entry("", 1)
    assert compare(folder({one: Ends(None, 10)}), folder({one: Ends(None, 1)})).regressions == []


def test_a_loads_verdict_is_the_majority_of_its_runs():
    rows = [fake_result(100, 1, rep, passed) for rep, passed in enumerate([True, False, True])]
    rows += [fake_result(200, 1, rep, passed) for rep, passed in enumerate([False, False, True])]
    rows += [fake_result(300, 1, 0, True), fake_result(300, 1, 1, False)]  # no strict majority
    assert point_verdicts(rows) == {Entry("", 1): {100.0: "pass", 200.0: "fail", 300.0: "undecided"}}


def spec(strategy, configs=None, loads=(20_000,)):
    return capacity_spec("gate", strategy, (1, 2), loads, configs)


def execute(out: Path, per_core: float, strategy=None, configs=None, loads=(20_000,)) -> Path:
    """An execution of a job that holds ``per_core`` records/s per core, written as `benchmark run` does."""

    def run(load, res, rep, on_lag=None, config=""):
        r = fake_result(load, res, rep, passed=load <= per_core * res)
        return dataclasses.replace(r, config=config, ran_s=30.0)

    strategy = strategy or {"name": "bracket", "resolution": 0.2, "factor": 2.0, "max_runs": 8}
    Execution(spec(strategy, configs, loads), out, run).run()
    return out


def check(*args):
    """The console script's entry point in this process, as `streamscale benchmark check ARGS` runs it."""
    import contextlib
    import io

    from streamscale.cli.main import app

    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["streamscale", "--metrics-port", "-1", "benchmark", "check", *map(str, args)]
    code = 0
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            app()
    except SystemExit as exc:
        code = exc.code or 0
    finally:
        sys.argv = argv
    return subprocess.CompletedProcess(sys.argv, code, out.getvalue(), err.getvalue())


def test_the_console_script_gives_the_gates_exit_codes(tmp_path):
    good = execute(tmp_path / "good", 60_000)
    env = {**os.environ, "STREAMSCALE_METRICS_PORT": "-1"}
    cmd = [EXE, "benchmark", "check", str(good), "--baseline", str(good)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
    assert (p.returncode, p.stdout.strip()) == (0, f"no capacity fell: 2 entries compared with {good}")
    p = subprocess.run(
        [*cmd[:3], str(tmp_path / "none"), *cmd[4:]], capture_output=True, text=True, env=env, timeout=60
    )
    assert (p.returncode, p.stderr.strip()) == (2, f"error: {tmp_path / 'none'}: no such results folder")


def test_a_job_ten_times_as_expensive_fails_the_gate_and_the_cheaper_one_passes(tmp_path):
    cheap = execute(tmp_path / "cheap", 60_000)
    dear = execute(tmp_path / "dear", 6_000)
    p = check(dear, "--baseline", cheap, "--junit", tmp_path / "gate.xml")
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout.splitlines()
    assert [x.split(":")[1].strip() for x in lines if x.startswith("regression:")] == ["1 core", "2 cores"]
    assert "2 of 2 entries lost capacity" in p.stdout
    suite = ElementTree.parse(tmp_path / "gate.xml").getroot()
    assert (suite.get("tests"), suite.get("failures")) == ("2", "2")
    assert len(suite.findall("testcase/failure")) == 2
    # the other way round, and against itself: no capacity fell
    for new, base in ((cheap, dear), (cheap, cheap), (dear, dear)):
        p = check(new, "--baseline", base, "--junit", tmp_path / "ok.xml")
        assert p.returncode == 0, p.stdout + p.stderr
        assert "no capacity fell: 2 entries compared" in p.stdout
        assert ElementTree.parse(tmp_path / "ok.xml").getroot().get("failures") == "0"


def test_the_ends_are_the_brackets_the_answer_gave(tmp_path):
    got = read_folder(execute(tmp_path / "r", 60_000)).entries
    for res in (1, 2):
        ends = got[Entry("", res)]
        assert ends.held <= 60_000 * res < ends.failed <= 1.2 * 60_000 * res * 1.02  # within the resolution


def test_a_full_search_with_configurations_is_compared_per_configuration(tmp_path):
    full, loads = {"name": "full", "lower_bound": False}, (10_000, 20_000, 40_000)
    configs = {"small": {"spark.sql.shuffle.partitions": 2}, "large": {}}
    base = execute(tmp_path / "base", 25_000, full, configs, loads)
    new = execute(tmp_path / "new", 15_000, full, configs, loads)
    entries = read_folder(base).entries
    assert set(entries) == {Entry(c, r) for c in configs for r in (1, 2)}
    # 1 core holds 25,000: 10,000 and 20,000 pass, 40,000 fails; 2 cores (50,000) pass all three
    assert (entries[Entry("small", 1)].held, entries[Entry("small", 1)].failed) == (20_000, 40_000)
    assert (entries[Entry("large", 2)].held, entries[Entry("large", 2)].failed) == (40_000, None)
    p = check(new, "--baseline", base)
    assert p.returncode == 1, p.stdout + p.stderr
    # 15,000 a core: 1 core fails 20,000 and 2 cores 40,000, the loads the baseline held
    regressions = [x for x in p.stdout.splitlines() if x.startswith("regression: ")]
    assert len(regressions) == 4
    assert "regression: small, 1 core: held 10,000 records/s, failed 20,000 records/s: wholly below" in p.stdout


def test_an_empty_or_missing_folder_is_one_line_and_exit_2(tmp_path):
    good = execute(tmp_path / "good", 60_000)
    (tmp_path / "empty").mkdir()
    for new, base in ((tmp_path / "empty", good), (good, tmp_path / "empty"), (good, tmp_path / "nowhere")):
        p = check(new, "--baseline", base)
        assert p.returncode == 2, p.stdout + p.stderr
        assert p.stderr.count("\n") == 1 and p.stderr.startswith("error: ") and "Traceback" not in p.stderr
