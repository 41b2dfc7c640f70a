"""The results model: experiments.csv written and read typed in one place (streamscale.benchmark.results)."""

import math

import pytest

from streamscale.benchmark.results import (
    COLUMNS,
    ExperimentResult,
    ResultsFile,
    exp_id,
    read_results,
)
from streamscale.errors import ResultsError


def result(load: float, res: int, rep: int, passed: bool, **kw) -> ExperimentResult:
    base = dict(
        exp_id=exp_id(load, res, rep),
        load=load,
        resources=res,
        repetition=rep,
        target_rate=load,
        generator_rate=load - 0.5,
        generator_reached_target=True,
        valid=True,
        lag_slope=-12.25,
        lag_limit=load * 0.01,
        lag_slo=passed,
        dropped=3,
        dropped_fraction=0.0001,
        dropped_slo=True,
        passed=passed,
        final_lag=7,
        processed_records=123_456,
        sampler_cpu_pct=0.25,
        wall_s=31.5,
    )
    return ExperimentResult(**{**base, **kw})


def test_rows_come_back_typed_and_equal(tmp_path):
    f = ResultsFile(tmp_path)
    written = [
        result(1000.0, 1, 0, True, note='a "quoted", comma'),
        result(2000.0, 2, 1, False, latency_slo=False, median_batch_ms=812.5, generator_cpu_pct=23.4),
    ]
    for r in written:
        f.append(r)
    rows = read_results(tmp_path)
    assert [r.passed for r in rows] == [True, False] and rows[1].latency_slo is False
    assert isinstance(rows[0].resources, int) and isinstance(rows[0].load, float)
    assert rows[0].note == 'a "quoted", comma' and rows[1].key == (2000.0, 2, 1, "")
    assert math.isnan(rows[0].lag_low)  # defaults survive the round trip
    assert rows[1].median_batch_ms == 812.5 and rows[1].generator_cpu_pct == 23.4

    def same(x, y):
        return x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y))

    for a, b in zip(written, rows):
        assert all(same(v, getattr(b, k)) for k, v in vars(a).items()), (a, b)
    assert (tmp_path / "experiments.csv").read_text().splitlines()[0] == ",".join(COLUMNS)


def test_a_torn_last_line_is_not_a_row_and_load_repairs_the_file(tmp_path):
    f = ResultsFile(tmp_path)
    f.append(result(1000.0, 1, 0, True))
    f.append(result(2000.0, 1, 0, True))
    text = f.path.read_text()
    f.path.write_text(text[:-30])
    assert [r.load for r in read_results(tmp_path)] == [1000.0]  # reading alone does not touch the file
    assert not f.path.read_text().endswith("\n")
    rows, repaired = f.load()
    assert repaired and [r.load for r in rows] == [1000.0] and f.path.read_text().endswith("\n")
    f.append(result(3000.0, 1, 0, False))
    assert [r.load for r in read_results(tmp_path)] == [1000.0, 3000.0]


@pytest.mark.parametrize(
    "damage, named",
    [
        (lambda t: t.replace(",True,True,", ",yes,True,", 1), "generator_reached_target"),
        (lambda t: t.replace("load,", "lode,", 1), "lode"),
        (lambda t: t.rstrip("\n") + ",extra\n", "wrong number of fields"),
    ],
)
def test_a_damaged_row_is_one_error_naming_the_problem(tmp_path, damage, named):
    f = ResultsFile(tmp_path)
    f.append(result(1000.0, 1, 0, True))
    f.path.write_text(damage(f.path.read_text()))
    with pytest.raises(ResultsError, match=named):
        read_results(tmp_path)


def test_no_file_no_rows(tmp_path):
    assert read_results(tmp_path) == [] and ResultsFile(tmp_path).load() == ([], False)


def test_a_file_of_an_older_streamscale_takes_new_rows(tmp_path):
    # experiments.csv written before median_batch_ms and generator_cpu_pct existed: resuming
    # reads its rows (new columns at their defaults) and appends under a header that matches
    old_columns = [c for c in COLUMNS if c not in ("median_batch_ms", "generator_cpu_pct")]
    f = ResultsFile(tmp_path)
    f.append(result(1000.0, 1, 0, True))
    lines = f.path.read_text().splitlines()
    keep = [COLUMNS.index(c) for c in old_columns]
    f.path.write_text("\n".join(",".join(line.split(",")[i] for i in keep) for line in lines) + "\n")
    rows, repaired = f.load()
    assert [r.load for r in rows] == [1000.0] and not repaired and math.isnan(rows[0].median_batch_ms)
    f.append(result(2000.0, 1, 0, False, median_batch_ms=950.0))
    back = read_results(tmp_path)
    assert [(r.load, r.passed) for r in back] == [(1000.0, True), (2000.0, False)]
    assert back[1].median_batch_ms == 950.0


def test_a_run_failed_without_output_is_one_a_latency_slo_failed_with_no_p95():
    from types import SimpleNamespace

    from streamscale.benchmark.results import failed_without_output

    nan = float("nan")
    assert failed_without_output(SimpleNamespace(latency_p95_ms=nan, latency_slo=False))
    assert failed_without_output(SimpleNamespace(latency_p95_ms=None, latency_slo=False))
    assert not failed_without_output(SimpleNamespace(latency_p95_ms=nan, latency_slo=True))  # no SLO failed
    assert not failed_without_output(SimpleNamespace(latency_p95_ms=4871.0, latency_slo=False))  # too slow
    assert not failed_without_output(SimpleNamespace(latency_p95_ms=nan))  # rows from before the SLO


def test_results_of_another_broker_are_said_so_in_one_line(tmp_path):
    import json

    from streamscale.benchmark.setting import broker_change_note

    now = {"broker": "embedded Apache Kafka 4.1.1 (KRaft, one node) at 127.0.0.1:4242"}
    assert broker_change_note(tmp_path, now) is None  # nothing there yet
    (tmp_path / "environment.json").write_text(json.dumps({"broker": "embedded Tansu (memory only) at 127.0.0.1:1"}))
    note = broker_change_note(tmp_path, now)
    assert note is not None and "\n" not in note
    assert "embedded Tansu (memory only)" in note and "embedded Apache Kafka 4.1.1" in note
    (tmp_path / "environment.json").write_text(
        json.dumps({"broker": "embedded Apache Kafka 4.1.1 (KRaft, one node) at 127.0.0.1:9"})
    )
    assert broker_change_note(tmp_path, now) is None  # another port, the same broker
    (tmp_path / "environment.json").write_text("{not json")
    assert broker_change_note(tmp_path, now) is None  # unreadable: not a crash


def test_results_of_the_older_stopping_rule_are_not_resumed(tmp_path):
    from streamscale.benchmark.execution import Execution
    from streamscale.benchmark.spec import parse_spec
    from streamscale.errors import ConfigError
    from tests.benchmark.helpers import fake_result, spec_dict

    spec = parse_spec(spec_dict())
    Execution(spec, tmp_path, lambda load, res, rep, on_lag=None: fake_result(load, res, rep, True)).run()
    path = tmp_path / "experiments.csv"
    lines = path.read_text().splitlines()
    at = COLUMNS.index("stop_rule")  # the file as an older streamscale wrote it: no such column
    old = [",".join(c for i, c in enumerate(line.split(",")) if i != at) for line in lines]
    path.write_text("\n".join(old) + "\n")
    with pytest.raises(ConfigError, match="judged when a run undecided at duration_s ended there.*not resumed"):
        Execution(spec, tmp_path, lambda *a, **k: None)
