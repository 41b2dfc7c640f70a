"""The answer of an execution (one sentence, demand per load, capacity per resource), the units of
its axes, the metric plot's fit, and the demo's choice of loads from its probe."""

import pytest

from streamscale.benchmark.answer import answer, assumed_capacities
from streamscale.benchmark.plots import fit_label, plot_metric
from streamscale.benchmark.report import _answer
from streamscale.benchmark.search import CountingOracle, load_capacity
from streamscale.benchmark.units import Axes, approx
from streamscale.demo import choose_loads, step_search


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
    opening = "".join(_answer({"answer": a}))
    assert opening.count("not run: assumed from fewer resources") == len(assumed)
    assert plot_metric(metric, "capacity", Axes(), tmp_path / "c.png", assumed=assumed).stat().st_size > 5000


def test_load_units_follow_the_load_type_and_period():
    assert Axes("sensors", period_s=0.5).rate(1000) == 2000.0  # 1,000 sensors every 0.5 s
    assert Axes("nested_groups", children=4).rate(3) == 64.0
    assert Axes("window_s").rate(300) == 300.0 and Axes("window_s").load_label == "window size (s)"
    assert Axes("sensors").load_label == "load (records/s)"
    assert Axes(resource_type="executors").resources(2) == "2 executors" and Axes().resources(1) == "1 core"
    a = answer({2.0: 1, 3.0: 2}, "demand", Axes("nested_groups", period_s=1.0, children=4), "uc4", 2)
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


def test_demo_loads_lie_within_and_beyond_one_core():
    assert choose_loads(20_000) == [10_000, 23_000, 28_000, 34_000, 42_000, 52_000]
    assert choose_loads(12_345) == [6_200, 14_000, 17_000, 21_000, 26_000, 32_000]  # two significant digits


@pytest.mark.parametrize(
    "one_core_holds, two_hold, tried, metric",
    [
        (21_000, 60_000, [(20000, 1), (23000, 1), (23000, 2)], {20000: 1, 23000: 2}),  # the step, then stop
        (
            26_000,
            60_000,
            [(20000, 1), (23000, 1), (28000, 1), (28000, 2)],
            {20000: 1, 23000: 1, 28000: 2},
        ),
        (15_000, 60_000, [(20000, 1), (10000, 1), (20000, 2)], {10000: 1, 20000: 2}),  # the reserve below
        (
            15_000,
            18_000,
            [(20000, 1), (10000, 1), (20000, 2), (14000, 1)],
            {10000: 1, 14000: 1, 20000: None},
        ),  # two fail too: the middle, held by one
        (
            12_000,
            18_000,
            [(20000, 1), (10000, 1), (20000, 2), (14000, 1), (14000, 2)],
            {10000: 1, 14000: 2, 20000: None},
        ),  # the middle needs two
        (
            21_000,
            22_000,
            [(20000, 1), (23000, 1), (23000, 2), (21000, 1)],
            {20000: 1, 21000: 1, 23000: None},
        ),
        (
            5_000,
            60_000,
            [(20000, 1), (10000, 1), (10000, 2), (20000, 2)],
            {10000: 2, 20000: 2},
        ),  # one core holds nothing tried: no middle to look for
        (40_000, 60_000, [(20000, 1), (23000, 1), (28000, 1)], {20000: 1, 23000: 1, 28000: 1}),  # no step
    ],
)
def test_demo_search_climbs_on_one_core_until_it_fails_then_tries_two(one_core_holds, two_hold, tried, metric):
    calls = []

    def passes(load, cores):
        calls.append((load, cores))
        return load <= (one_core_holds if cores == 1 else two_hold)

    assert step_search([23_000, 10_000, 28_000, 20_000], passes) == metric  # in any order
    assert calls == tried


def test_demo_ladder_finds_the_step_when_the_probe_underrated_one_core():
    # the probe read 36,000 records/s where one core held 62,000 (a fresh-clone run): the ladder
    # climbs past 1.7x until one core fails, then tries two
    loads = choose_loads(36_000)
    calls = []

    def passes(load, cores):
        calls.append((load, cores))
        return load <= (65_000 if cores == 1 else 120_000)

    assert step_search(loads, passes) == {41_000: 1, 50_000: 1, 61_000: 1, 76_000: 2}
    assert calls == [(41_000, 1), (50_000, 1), (61_000, 1), (76_000, 1), (76_000, 2)]


def test_the_demo_runs_an_undecided_two_core_run_again_and_no_one_core_run(tmp_path):
    """One run per point, but a two-core run that failed with a lag interval straddling the limit
    runs once more: a two-core run failed by chance turned a fresh-clone demo's step into "needs
    more than 2 cores". An undecided pass stands; one-core runs are not repeated (most of the
    demo's runs)."""
    import dataclasses

    from streamscale.benchmark.execution import Execution
    from streamscale.benchmark.spec import parse_spec
    from streamscale.demo import two_cores_decided

    from .test_execution import fake_result, spec_dict

    loads = [10_000, 20_000, 28_000]
    spec = parse_spec(
        spec_dict(
            load={"type": "sensors", "values": loads},
            repetitions=1,
            extra_repetitions=0,
            strategy={"name": "linear", "lower_bound": True},
        )
    )
    ran = []

    def run(load, res, rep, on_lag=None):  # every first run undecided, narrowly failing
        ran.append((load, res, rep))
        passed = rep > 0 or (res == 1 and load < 28_000)
        r = fake_result(load, res, rep, passed=passed)
        return dataclasses.replace(r, lag_verdict="undecided" if rep == 0 else "pass")

    summary = Execution(spec, tmp_path, run).run(search=lambda p: step_search(loads, two_cores_decided(p)))
    # 20,000 and 28,000 on one core: one run each, their own verdicts standing (pass, fail);
    # 28,000 on two: undecided and failed, run again, passed
    assert ran == [(20_000, 1, 0), (28_000, 1, 0), (28_000, 2, 0), (28_000, 2, 1)]
    assert summary["results"] == [{"load": 20_000.0, "resources": 1}, {"load": 28_000.0, "resources": 2}]
    # an undecided pass on two cores stands: no run added
    ran.clear()

    def run_passing(load, res, rep, on_lag=None):
        ran.append((load, res, rep))
        r = fake_result(load, res, rep, passed=res == 2 or load < 28_000)
        return dataclasses.replace(r, lag_verdict="undecided")

    summary = Execution(spec, tmp_path / "pass", run_passing).run(
        search=lambda p: step_search(loads, two_cores_decided(p))
    )
    assert ran == [(20_000, 1, 0), (28_000, 1, 0), (28_000, 2, 0)]
    assert summary["results"] == [{"load": 20_000.0, "resources": 1}, {"load": 28_000.0, "resources": 2}]
    # without it (the demo as it was), the step's chance failure left no step
    ran.clear()
    summary = Execution(spec, tmp_path / "plain", run).run(search=lambda p: step_search(loads, p))
    assert ran == [(20_000, 1, 0), (28_000, 1, 0), (28_000, 2, 0), (24_000, 1, 0)]
    assert {r["resources"] for r in summary["results"]} == {1, None}


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
