"""The report speaks like the console: numbers formatted for a person, the experiments table down
to the columns a reader compares, the rest linked in experiments.csv."""

import dataclasses
import re

from streamscale.benchmark.execution import Execution
from streamscale.benchmark.report import write_report
from streamscale.benchmark.spec import parse_spec
from tests.benchmark.helpers import fake_result, spec_dict

# a figure as written: digits with thousands separators and a decimal part
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


def significant(text: str) -> int:
    digits = text.replace(",", "").replace("-", "").replace(".", "").lstrip("0")
    return len(digits.rstrip("0")) if "." not in text else len(digits)


def raw_figures(load, res, rep, on_lag=None):
    r = fake_result(load, res, rep, passed=load <= 1000)
    return dataclasses.replace(
        r,
        lag_slope=-896.495123,
        lag_low=-1997.7345,
        lag_high=1170.4321,
        lag_limit=load * 0.01,
        processing_p95_ms=5792.618751480198,
        processing_p50_ms=844.2,
        processing_limit_ms=8000.0,
        median_batch_ms=1468.3333,
        ran_s=20.27,
        drift=0.13333,
        verdict="pass" if load <= 1000 else "fail",
    )


def test_every_figure_in_the_tables_has_at_most_four_significant_digits(tmp_path):
    spec = parse_spec(spec_dict(strategy={"name": "bracket", "resolution": 0.3}, metric="capacity"))
    Execution(spec, tmp_path, raw_figures).run()
    page = write_report(tmp_path).read_text()
    tables = re.findall(r'<table class="(?:brackets|metric|experiments)">.*?</table>', page, re.S)
    assert len(tables) == 3
    for table in tables:
        for cell in re.findall(r"<td>(.*?)</td>", table):
            for figure in NUMBER.findall(cell):
                assert significant(figure) <= 4, (figure, cell)
    experiments = tables[2]
    assert "5.79 s (limit 8 s)" in experiments and "-896/s" in experiments and "1.47 s" in experiments
    assert "13%" in experiments and "20.3 s" in experiments
    headers = re.findall(r"<th>(.*?)</th>", experiments)
    assert headers == [
        "load (records/s)", "resources", "verdict", "lag trend", "processing p95", "median batch", "run",
        "machine drift",
    ]  # fmt: skip
    assert '<a href="experiments.csv">experiments.csv</a>' in page
    assert re.search(r"<td>\d+%</td>", tables[1])  # the bracket's width as a percentage


def test_an_undecided_run_is_called_undecided_and_a_one_point_report_shows_no_raw_figure(tmp_path):
    def undecided(load, res, rep, on_lag=None):
        r = raw_figures(load, res, rep)
        note = "lag interval at 96.25 %, [-2,778, 1,474], still straddles the limit after 30 s; the machine moved"
        return dataclasses.replace(
            r, verdict="undecided", lag_verdict="undecided", lag_slo=False, passed=False, note=note
        )

    spec = parse_spec(spec_dict(load={"type": "sensors", "values": [2000]}, resources={"type": "cores", "values": [1]}))
    Execution(spec, tmp_path, undecided).run()
    page = write_report(tmp_path).read_text()
    paragraph = re.search(r"<p>lag trend .*?</p>", page).group(0)
    assert "lag SLO undecided" in paragraph and "violated" not in paragraph
    # in the note's words, which name the interval judged (the one beside it is the 95 % one)
    assert "undecided (lag interval at 96.25 %, [-2,778, 1,474], still straddles the limit after 30 s)" in paragraph
    assert "2000.0" not in page.split("<h2>Spec</h2>")[0]  # every figure for a person, the spec as written
