"""The answer of an execution (one sentence, demand per load, capacity per resource), the units of
its axes, the metric plot's fit, and the brackets of a capacity search."""

import pytest

from streamscale.benchmark.answer import answer, assumed_capacities
from streamscale.benchmark.plots import fit_label, plot_metric
from streamscale.benchmark.report import answer_section
from streamscale.benchmark.search import CountingOracle, load_capacity
from streamscale.benchmark.units import Axes, approx


def test_demand_answers_in_one_sentence_with_capacity_derived():
    a = answer({8000.0: 1, 24000.0: 2}, "demand", Axes(), "uc1", 2)
    assert (
        a["sentence"] == "UC1 needs 1 core up to ~8,000 records/s and 2 cores up to ~24,000 records/s on this machine"
    )
    assert [(r["resources"], r["rate"]) for r in a["capacity"]] == [(1, 8000.0), (2, 24000.0)]
    assert [(r["rate"], r["resources"]) for r in a["demand"]] == [(8000.0, 1), (24000.0, 2)]


def test_a_load_no_tested_amount_held_is_said():
    a = answer({8000.0: 1, 12000.0: 1, 50000.0: None}, "demand", Axes(), "uc1", 2)
    assert a["sentence"] == (
        "UC1 needs 1 core up to ~12,000 records/s; ~50,000 records/s needs more than 2 cores on this machine"
    )
    assert a["capacity"] == [{"resources": 1, "load": 12000.0, "rate": 12000.0, "assumed": False}]
    assert (
        answer({1000.0: None}, "demand", Axes(), "uc2", 4)["sentence"]
        == "UC2 met its SLOs at none of the tested points; ~1,000 records/s needs more than 4 cores on this machine"
    )


def test_a_load_whose_runs_did_not_fail_is_not_said_to_need_more():
    from types import SimpleNamespace as Run

    def runs(*points):  # (load, resources, verdict) -> experiment rows
        return [Run(load=x, resources=n, verdict=v) for x, n, v in points]

    demand = {83000.0: 1, 91000.0: None, 100000.0: None}
    # 91k undecided on the one core tested, 100k failed there
    rows = runs((83000, 1, "pass"), (91000, 1, "undecided"), (100000, 1, "fail"))
    assert answer(demand, "demand", Axes(), "uc4", 1, rows=rows)["sentence"] == (
        "UC4 needs 1 core up to ~83,000 records/s; ~91,000 records/s stayed undecided on 1 core and "
        "~100,000 records/s needs more than 1 core on this machine"
    )
    # nothing failed: nothing needs more; a generator that fell short (invalid) is no failure either
    rows = runs((83000, 1, "pass"), (91000, 1, "undecided"), (100000, 1, "invalid"))
    assert answer(demand, "demand", Axes(), "uc4", 1, rows=rows)["sentence"] == (
        "UC4 needs 1 core up to ~83,000 records/s; ~91,000 records/s stayed undecided on 1 core on this machine"
    )
    rows = runs((83000, 1, "pass"), (91000, 1, "invalid"), (100000, 1, "fail"))
    assert answer(demand, "demand", Axes(), "uc4", 1, rows=rows)["sentence"] == (
        "UC4 needs 1 core up to ~83,000 records/s; ~91,000 records/s was not delivered (the generator fell "
        "short) and ~100,000 records/s needs more than 1 core on this machine"
    )
    # repetitions: two of three failed at the most resources is a failure; one of two is not
    rows = runs((91000, 2, "fail"), (91000, 2, "fail"), (91000, 2, "pass"), (91000, 1, "fail"))
    assert answer({91000.0: None}, "demand", Axes(), "uc4", 2, rows=rows)["sentence"].endswith(
        "~91,000 records/s needs more than 2 cores on this machine"
    )
    rows = runs((91000, 2, "fail"), (91000, 2, "undecided"))
    assert answer({91000.0: None}, "demand", Axes(), "uc4", 2, rows=rows)["sentence"].endswith(
        "~91,000 records/s stayed undecided on 2 cores on this machine"
    )
    # another configuration's runs say nothing of this one's
    rows = [Run(load=91000, resources=2, verdict="undecided", config="other")]
    assert answer({91000.0: None}, "demand", Axes(), "uc4", 2, rows=rows, config="mine")["sentence"].endswith(
        "needs more than 2 cores on this machine"
    )


def test_capacity_answer_names_the_fewest_resources_per_capacity():
    a = answer({1: 8000.0, 2: 24000.0, 3: 24000.0, 4: None}, "capacity", Axes(), "uc3")
    assert (
        a["sentence"] == "UC3 needs 1 core up to ~8,000 records/s and 2 cores up to ~24,000 records/s on this machine"
    )
    assert [(r["rate"], r["resources"]) for r in a["demand"]] == [(8000.0, 1), (24000.0, 2)]


@pytest.mark.parametrize(
    "two_hold, lower_bound, capacity, assumed",
    [
        (20, True, {1: 20.0, 2: 20.0}, {2}),  # every load above 1 core's capacity failed on 2: 20 not run on 2
        (30, True, {1: 20.0, 2: 30.0}, set()),
        (20, False, {1: 20.0, 2: 20.0}, set()),  # without the lower bound 2 cores ran 20 themselves
    ],
)
def test_a_capacity_taken_over_from_fewer_amounts_is_marked_not_run(two_hold, lower_bound, capacity, assumed, tmp_path):
    oracle = CountingOracle(lambda load, res: load <= (20 if res == 1 else two_hold))
    metric = load_capacity([1, 2], [10.0, 20.0, 30.0], oracle, "linear", lower_bound)
    assert metric == capacity
    assert assumed_capacities(metric, oracle.calls) == assumed
    a = answer(metric, "capacity", Axes(), "uc3", 2, assumed_capacities(metric, oracle.calls))
    assert [(r["resources"], r["assumed"]) for r in a["capacity"]] == [(1, False), (2, bool(assumed))]
    opening = "".join(answer_section({"answer": a}))
    assert opening.count("not run: assumed from fewer resources") == len(assumed)
    assert plot_metric(metric, "capacity", Axes(), tmp_path / "c.png", assumed=assumed).stat().st_size > 5000


def test_load_units_follow_the_load_type_and_period():
    assert Axes.of_types("sensors", period_s=0.5).rate(1000) == 2000.0  # 1,000 sensors every 0.5 s
    assert Axes.of_types("nested_groups", children=4).rate(3) == 64.0
    assert Axes.of_types("window_s").rate(300) == 300.0 and Axes.of_types("window_s").load_label == "window size (s)"
    assert Axes.of_types("sensors").load_label == "load (records/s)"
    assert Axes.of_types(resource_type="executors").resources(2) == "2 executors" and Axes().resources(1) == "1 core"
    a = answer({2.0: 1, 3.0: 2}, "demand", Axes.of_types("nested_groups", period_s=1.0, children=4), "uc4", 2)
    assert a["sentence"] == "UC4 needs 1 core up to ~16 records/s and 2 cores up to ~64 records/s on this machine"


@pytest.mark.parametrize(
    "x,text", [(12345.6, "12,300"), (8.734, "8.73"), (987654, "988,000"), (0.01234, "0.0123"), (100, "100"), (0, "0")]
)
def test_figures_in_sentences_have_three_significant_digits(x, text):
    assert approx(x) == text


def test_a_fit_is_drawn_only_where_it_means_something():
    axes = Axes()
    assert fit_label([1000, 2000], [1, 2], "demand", axes) is None  # two points: any line fits
    assert fit_label([1000, 2000, 3000], [1, 1, 1], "demand", axes) is None  # flat: nothing to say
    b, a, text = fit_label([10_000, 20_000, 30_000], [1, 2, 3], "demand", axes)
    assert text == "linear fit: one core per 10,000 records/s" and a == pytest.approx(0, abs=1e-9)


def test_metric_plots_render_with_missing_points(tmp_path):
    p = plot_metric({1000.0: 1, 2000.0: 2, 4000.0: None}, "demand", Axes(), tmp_path / "demand.png")
    q = plot_metric({1: 1000.0, 2: None}, "capacity", Axes(), tmp_path / "capacity.png")
    assert p.stat().st_size > 5000 and q.stat().st_size > 5000


def _row(load, res, verdict, spark_cpu_pct=float("nan"), drifted=False):
    import dataclasses

    from .test_execution import fake_result

    r = fake_result(load, res, 0, passed=verdict == "pass")
    return dataclasses.replace(r, verdict=verdict, spark_cpu_pct=spark_cpu_pct, drifted=drifted)


def test_ends_the_time_budget_left_unchecked_still_say_that_their_deciding_runs_drifted():
    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.bracket import Bracket

    b = Bracket(2, 80_000.0, 99_000.0, verdicts={80_000.0: "pass", 99_000.0: "fail"}).as_dict()
    b["ends_unchecked"] = "the time budget held no runs of them"
    rows = [_row(80_000, 2, "pass", 140.0, drifted=True), _row(99_000, 2, "fail", 140.0, drifted=True)]
    assert bracket_answer([b], Axes(), "uc2", rows)["sentence"].endswith(
        "held ~80,000 records/s and failed ~99,000 records/s (its ends not run under the SLOs: the time budget "
        "held no runs of them; 2 deciding runs on a drifting machine)"
    )
    rows = [_row(80_000, 2, "pass", 140.0), _row(99_000, 2, "fail", 140.0)]  # no drift: nothing more said
    assert bracket_answer([b], Axes(), "uc2", rows)["sentence"].endswith("held no runs of them)")
    b["confirmed"] = {
        "80000": "pass",
        "99000": "fail",
    }  # ends run again after the drift: said, not hidden by the budget's words
    assert bracket_answer([b], Axes(), "uc2", rows)["sentence"].endswith(
        "(its ends not run under the SLOs: the time budget held no runs of them; run again after a drift)"
    )


def test_what_is_said_after_a_bracket_is_one_parenthesis_however_much_there_is():
    """An undecided load between the ends, the time budget's end and the ends left unchecked after
    drifting runs: one parenthesis after the bracket, its parts apart by semicolons, not a
    parenthesis each (a demo's sentence stacked three of them)."""
    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.bracket import Bracket

    verdicts = {47_000.0: "pass", 58_000.0: "undecided", 72_000.0: "fail"}
    b = Bracket(1, 47_000.0, 72_000.0, out_of_time=True, verdicts=verdicts).as_dict()
    b["ends_unchecked"] = "the time budget held no runs of them"
    rows = [_row(47_000, 1, "pass", 90.0, drifted=True), _row(58_000, 1, "undecided", 90.0)]
    rows.append(_row(72_000, 1, "fail", 90.0))
    assert bracket_answer([b], Axes(), "uc2", rows)["sentence"] == (
        "UC2 on this machine: 1 core (Spark used 0.9 CPUs) held ~47,000 records/s and failed ~72,000 records/s "
        "(undecided at ~58,000 records/s; the time budget ended the search 53% apart; its ends not run under the "
        "SLOs: the time budget held no runs of them; 1 deciding run on a drifting machine)"
    )
    higher = Bracket(2, 66_000.0, None, out_of_time=True, verdicts={66_000.0: "pass"}).as_dict()
    higher["ends_unchecked"] = "the time budget held no runs of them"
    said = bracket_answer([higher], Axes(), "uc2", [_row(66_000, 2, "pass", 140.0, drifted=True)])["sentence"]
    assert said.endswith(
        "held ~66,000 records/s, higher untested (the time budget ended the search; its ends not run under the "
        "SLOs: the time budget held no runs of them; 1 deciding run on a drifting machine)"
    )


def test_a_bracket_answer_says_both_ends_and_what_spark_had(tmp_path):
    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.bracket import Bracket
    from streamscale.benchmark.plots import plot_brackets

    one = Bracket(1, 30_000.0, 33_000.0, verdicts={30_000.0: "pass", 33_000.0: "fail"})
    two = Bracket(2, 39_000.0, 43_000.0, failed_undecided=True, verdicts={39_000.0: "pass", 43_000.0: "undecided"})
    rows = [
        _row(30_000, 1, "pass", 95.0),
        _row(33_000, 1, "fail", 101.0, drifted=True),
        _row(39_000, 2, "pass", 130.0),
        _row(43_000, 2, "undecided", 150.0),
    ]
    a = bracket_answer([one.as_dict(), two.as_dict()], Axes(), "uc2", rows)
    assert a["sentence"] == (
        "UC2 on this machine: 1 core (Spark used 1.0 CPUs) held ~30,000 records/s and failed ~33,000 records/s "
        "(1 deciding run on a drifting machine); 2 cores (Spark used 1.4 CPUs) held ~39,000 records/s and stayed "
        "undecided at ~43,000 records/s"
    )
    assert [(b["held_rate"], b["failed_rate"], b["failed_undecided"]) for b in a["brackets"]] == [
        (30_000.0, 33_000.0, False),
        (39_000.0, 43_000.0, True),
    ]
    assert a["capacity"] == [
        {"resources": 1, "load": 30_000.0, "rate": 30_000.0, "assumed": False},
        {"resources": 2, "load": 39_000.0, "rate": 39_000.0, "assumed": False},
    ]
    opening = "".join(answer_section({"answer": a}))
    assert "held ~30,000" in opening and "43,000" in opening and "undecided" in opening
    assert plot_brackets(a["brackets"], Axes(), tmp_path / "capacity.png").stat().st_size > 5000


def test_more_resources_that_held_less_than_fewer_did_are_said_to():
    """A demo on a busy machine: 1 core held 45,000 records/s; 2 cores failed 58,000 and held
    39,000. The sentence says 2 cores held less than 1 core, beside the bracket, rather than leave
    a scaling answer that reads as if a core more slowed the job; another configuration's amounts
    and an end taken over from fewer resources are not compared."""
    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.bracket import Bracket

    one = Bracket(1, 45_000.0, None, verdicts={45_000.0: "pass"}).as_dict()
    two = Bracket(2, 39_000.0, 58_000.0, verdicts={39_000.0: "pass", 58_000.0: "fail"}).as_dict()
    rows = [_row(45_000, 1, "pass", 90.0), _row(39_000, 2, "pass", 140.0), _row(58_000, 2, "fail", 140.0)]
    a = bracket_answer([one, two], Axes(), "uc2", rows)
    assert a["sentence"].endswith(
        "2 cores (Spark used 1.4 CPUs) held ~39,000 records/s and failed ~58,000 records/s "
        "(less than 1 core held, ~45,000 records/s)"
    )
    assert [b["fewer_held_more"] for b in a["brackets"]] == [None, {"resources": 1, "held": 45_000.0}]
    # 2 cores that held more: nothing said
    more = Bracket(2, 52_000.0, 58_000.0, verdicts={52_000.0: "pass", 58_000.0: "fail"}).as_dict()
    assert "less than" not in bracket_answer([one, more], Axes(), "uc2", rows)["sentence"]
    # fewer resources of another configuration are not compared
    other = {**one, "config": "a"}
    assert "less than" not in bracket_answer([other, {**two, "config": "b"}], Axes(), "uc2", rows)["sentence"]


def test_a_bracket_search_runs_through_the_execution(tmp_path):
    """The spec's bracket strategy: verdicts from the runs, both ends in the summary, its files."""
    import csv
    import json

    from streamscale.benchmark.execution import Execution
    from streamscale.benchmark.spec import parse_spec

    from .test_execution import spec_dict

    spec = parse_spec(
        spec_dict(
            load={"type": "sensors", "values": [20_000]},
            metric="capacity",
            strategy={"name": "bracket", "resolution": 0.15},
        )
    )
    ran = []

    def run(load, res, rep, on_lag=None):
        ran.append((load, res))
        return _row(load, res, "pass" if load <= {1: 30_000, 2: 42_426}[res] else "fail", 100.0 * res)

    summary = Execution(spec, tmp_path, run).run()
    # the hand-worked example of tests/benchmark/test_bracket.py, run for real through the execution
    assert ran[:5] == [(20_000, 1), (40_000, 1), (28_000, 1), (33_000, 1), (30_000, 1)]
    assert ran[5:] == [(33_000, 2), (66_000, 2), (47_000, 2), (39_000, 2), (43_000, 2)]
    brackets = summary["answer"]["brackets"]
    assert [(b["held"], b["failed"]) for b in brackets] == [(30_000, 33_000), (39_000, 43_000)]
    assert summary["answer"]["sentence"].startswith("UC1 on this machine: 1 core (Spark used 1.0 CPUs) held ~30,000")
    rows = list(csv.DictReader(open(tmp_path / "summary.csv")))
    assert [(r["resources"], r["held"], r["failed"]) for r in rows] == [
        ("1", "30000.0", "33000.0"),
        ("2", "39000.0", "43000.0"),
    ]
    assert json.loads((tmp_path / "summary.json").read_text())["answer"]["brackets"][1]["runs"] == 5
    assert (tmp_path / "capacity.png").stat().st_size > 5000


def test_a_second_demo_replaces_the_first_ones_results(tmp_path):
    """Each demo's loads come from its own probe, so its spec differs from the last one's: without
    the replacement the execution refuses the directory (a second `make demo` failed that way)."""
    from streamscale.benchmark.execution import Execution
    from streamscale.benchmark.spec import parse_spec
    from streamscale.demo import replace_previous_demo
    from streamscale.errors import ConfigError

    from .test_execution import fake_result, spec_dict

    def demo_spec(loads, name="demo-uc2-scaling"):
        return parse_spec({**spec_dict(load={"type": "sensors", "values": loads}, repetitions=1), "name": name})

    def held(load, res, rep, on_lag=None):
        return fake_result(load, res, rep, True)

    out = tmp_path / "uc2-scaling"
    Execution(demo_spec([60_000, 70_000]), out, held).run()
    with pytest.raises(ConfigError, match="different spec"):
        Execution(demo_spec([50_000, 60_000]), out, held).run()
    replace_previous_demo(out)
    Execution(demo_spec([50_000, 60_000]), out, held).run()
    assert (out / "experiments.csv").read_text().count("\n") == 1 + 4  # only the second run's points
    # a directory that holds something else is left for the execution to refuse
    other = tmp_path / "mine"
    Execution(demo_spec([1000], name="my-benchmark"), other, held).run()
    replace_previous_demo(other)
    assert (other / "spec.yaml").is_file()
    replace_previous_demo(tmp_path / "nothing-here")  # no directory: nothing to do


def test_the_held_ends_table_has_sparks_cpu_seconds_per_million_records_with_the_runs_range():
    import dataclasses

    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.bracket import Bracket

    one = Bracket(1, 30_000.0, 33_000.0, verdicts={30_000.0: "pass", 33_000.0: "fail"})
    rows = [
        dataclasses.replace(_row(30_000, 1, "pass", 95.0), cpu_s_per_million=12.0),
        dataclasses.replace(_row(30_000, 1, "pass", 95.0), cpu_s_per_million=14.0),
        dataclasses.replace(_row(33_000, 1, "fail", 99.0), cpu_s_per_million=40.0),  # not the held end
    ]
    [b] = bracket_answer([one.as_dict()], Axes(), "uc2", rows)["brackets"]
    assert (b["cpu_s_per_million"], b["cpu_s_per_million_range"]) == (13.0, [12.0, 14.0])
    # a figure of the table, not of the sentence: on a confined core it follows 1 / the load held
    sentence = bracket_answer([one.as_dict()], Axes(), "uc2", rows)["sentence"]
    assert sentence.endswith("failed ~33,000 records/s") and "CPU-s" not in sentence
    from streamscale.benchmark.report import per_million

    assert per_million(b) == "13 (12–14)"


def test_an_amount_whose_every_run_was_invalid_is_said_so_in_the_answer_report_and_plot(tmp_path):
    # a busy machine: 1 core stayed undecided at the first load, the generator fell short of the
    # first load on 2 cores, and the time was up: no end on 2 cores at all
    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.bracket import Bracket
    from streamscale.benchmark.plots import plot_brackets

    one = Bracket(1, None, 16_000.0, failed_undecided=True, out_of_time=True, verdicts={16_000.0: "undecided"})
    two = Bracket(
        2,
        ceiling="the load generator could not produce 16,000 records/s here",
        out_of_time=True,
        verdicts={16_000.0: "invalid"},
    )
    rows = [_row(16_000, 1, "undecided", 60.0), _row(16_000, 2, "invalid", 40.0)]
    a = bracket_answer([one.as_dict(), two.as_dict()], Axes(), "uc2", rows)
    assert a["sentence"] == (
        "UC2 on this machine: 1 core (Spark used 0.6 CPUs) held none of the loads tried before the time budget "
        "ended the search (down to ~16,000 records/s); 2 cores could not be judged at any load tried before the "
        "time budget ended the search (the load generator could not produce 16,000 records/s here)"
    )
    assert [c["load"] for c in a["capacity"]] == [None, None]
    assert "could not be judged" in "".join(answer_section({"answer": a}))
    # an undecided load below the failed end was tried too: "down to" names the lowest tried
    low = Bracket(1, None, 1_400.0, failed_undecided=True, verdicts={1_200.0: "undecided", 1_400.0: "undecided"})
    assert bracket_answer([low.as_dict()], Axes(), "job", [])["sentence"].endswith(
        "held none of the loads tried (down to ~1,200 records/s)"
    )
    assert plot_brackets(a["brackets"], Axes(), tmp_path / "capacity.png").stat().st_size > 5000


def test_demand_and_capacity_answers_carry_the_latency_percentiles_of_the_runs_that_held():
    from types import SimpleNamespace as Run

    def run(load, res, verdict, p50, config=""):
        return Run(load=load, resources=res, verdict=verdict, config=config, latency_at="commit",
                   processing_p50_ms=p50, processing_p95_ms=2 * p50, processing_p99_ms=3 * p50)  # fmt: skip

    rows = [run(8000, 1, "pass", 100), run(8000, 1, "pass", 300), run(8000, 1, "fail", 9000),
            run(24000, 2, "pass", 500), run(24000, 1, "fail", 7000), run(8000, 1, "pass", 1, "other")]  # fmt: skip
    a = answer({8000.0: 1, 24000.0: 2}, "demand", Axes(), "uc1", 2, rows=rows)
    # the median of the passed runs' at the load and amount that held (not the failed, not another config's)
    assert [r["processing_ms"] for r in a["demand"]] == [
        {"p50": 200, "p95": 400, "p99": 600},  # the median of 100 and 300
        {"p50": 500, "p95": 1000, "p99": 1500},
    ]
    assert [r["processing_ms"]["p99"] for r in a["capacity"]] == [600, 1500]
    html = "".join(answer_section({"answer": a}))
    assert "processing p50 / p95 / p99" in html


def test_an_answer_on_executors_says_which_hosts_ran_them_and_their_cores():
    import dataclasses

    from streamscale.benchmark.answer import bracket_answer
    from streamscale.benchmark.units import Executors, RateLoad
    from tests.benchmark.helpers import fake_result

    def ran(load, res, passed, executors):
        return dataclasses.replace(fake_result(load, res, 0, passed), executors=executors)

    rows = [
        ran(20_000, 1, True, "0@10.9.8.12 (1 core)"),
        ran(30_000, 1, False, "0@10.9.8.12 (1 core)"),
        ran(30_000, 2, True, "1@10.9.8.13 (1 core); 0@10.9.8.12 (1 core)"),
    ]
    brackets = [
        {"resources": 1, "held": 20_000, "failed": 30_000, "held_assumed": False, "failed_undecided": False},
        {"resources": 2, "held": 30_000, "failed": None, "held_assumed": False, "failed_undecided": False},
    ]
    axes = Axes(RateLoad(), Executors(master="spark://10.9.8.11:7077"))
    sentence = bracket_answer(brackets, axes, "uc1", rows)["sentence"]
    assert "1 executor (on 10.9.8.12, 1 core each) held" in sentence
    assert "2 executors (on 10.9.8.12 and 10.9.8.13, 1 core each) held" in sentence


def test_the_sentence_names_every_load_between_the_ends_left_undecided_by_any_run():
    # a 1-round hashes search: 180,000 undecided in the search, then under the SLOs 180,000, 210,000
    # and 240,000 stayed undecided for 300 s each before 280,000 failed
    from streamscale.benchmark.answer import bracket_answer

    b = {
        "resources": 1,
        "held": 160_000.0,
        "failed": 280_000.0,
        "held_assumed": False,
        "failed_undecided": False,
        "verdicts": {"140000": "pass", "160000": "pass", "180000": "undecided"},
        "slo_runs": {
            "160000": "pass",
            "180000": "undecided",
            "210000": "undecided",
            "240000": "undecided",
            "280000": "fail",
        },
    }
    sentence = bracket_answer([b], Axes(), "uc2")["sentence"]
    assert sentence.endswith(
        "held ~160,000 records/s and failed ~280,000 records/s "
        "(undecided from ~180,000 records/s to ~240,000 records/s)"
    )
    # without runs of their own, the search's verdicts alone name the undecided loads
    alone = {k: v for k, v in b.items() if k != "slo_runs"}
    assert bracket_answer([alone], Axes(), "uc2")["sentence"].endswith("(undecided at ~180,000 records/s)")
