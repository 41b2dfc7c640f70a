"""Search strategies against a fake experiment oracle with a known, monotone answer."""

import itertools

import pytest

from streamscale.benchmark.search import CountingOracle, load_capacity, resource_demand
from streamscale.benchmark.verdict import majority_verdict

LOADS = [10_000, 20_000, 30_000, 40_000, 50_000, 60_000]
RESOURCES = list(range(1, 11))


def truth(load, res) -> bool:
    # each resource unit sustains 6,500 records/s: demand = ceil(load / 6500)
    return res * 6_500 >= load


EXPECTED_DEMAND = {10_000: 2, 20_000: 4, 30_000: 5, 40_000: 7, 50_000: 8, 60_000: 10}


@pytest.mark.parametrize("strategy", ["full", "linear", "binary"])
@pytest.mark.parametrize("lower_bound", [False, True])
def test_all_strategies_find_the_same_demand(strategy, lower_bound):
    oracle = CountingOracle(truth)
    assert resource_demand(LOADS, RESOURCES, oracle, strategy, lower_bound) == EXPECTED_DEMAND


def test_lower_bound_runs_fewer_experiments():
    counts = {}
    for strategy, lb in itertools.product(["full", "linear", "binary"], [False, True]):
        oracle = CountingOracle(truth)
        resource_demand(LOADS, RESOURCES, oracle, strategy, lb)
        counts[(strategy, lb)] = len(oracle.calls)
    assert counts[("full", False)] == len(LOADS) * len(RESOURCES) == 60
    # linear without restriction: demand d costs d experiments -> 2+4+5+7+8+10
    assert counts[("linear", False)] == 36
    # with it each load starts at the previous demand: 2 + 3 + 2 + 3 + 2 + 3
    assert counts[("linear", True)] == 15
    assert counts[("full", True)] < counts[("full", False)]
    assert counts[("binary", True)] <= counts[("binary", False)]
    assert counts[("binary", False)] < counts[("linear", False)]


def test_demand_none_when_no_amount_suffices():
    oracle = CountingOracle(lambda load, res: res * 1000 >= load)
    assert resource_demand([5000, 20000, 30000], [1, 2, 5], oracle, "linear", True) == {
        5000: 5,
        20000: None,
        30000: None,
    }


CAP = {r: max([load for load in LOADS if truth(load, r)], default=None) for r in RESOURCES}


@pytest.mark.parametrize("strategy", ["full", "linear", "binary"])
@pytest.mark.parametrize("lower_bound", [False, True])
def test_load_capacity(strategy, lower_bound):
    oracle = CountingOracle(truth)
    assert load_capacity(RESOURCES, LOADS, oracle, strategy, lower_bound) == CAP
    assert CAP[1] is None and CAP[2] == 10_000 and CAP[10] == 60_000


def test_capacity_lower_bound_saves_experiments():
    a, b = CountingOracle(truth), CountingOracle(truth)
    load_capacity(RESOURCES, LOADS, a, "linear", False)
    load_capacity(RESOURCES, LOADS, b, "linear", True)
    assert len(b.calls) < len(a.calls)


def test_majority():
    assert majority_verdict(["pass", "pass"], 3) == "pass"
    assert majority_verdict(["fail", "fail"], 3) == "fail"
    assert majority_verdict(["pass", "fail"], 3) is None  # the third run decides
    assert majority_verdict(["pass"], 1) == "pass"
    assert majority_verdict(["pass", "fail"], 2) == "undecided"  # a tie is not a majority


def test_the_lower_bound_restriction_composes_with_every_strategy():
    # hand-worked: 1 core holds 20,000, 2 cores 40,000, 3 cores 40,000 (loads 10k..50k)
    holds = {1: 20_000, 2: 40_000, 3: 40_000}
    for name in ("full", "linear", "binary"):
        oracle = CountingOracle(lambda load, res: load <= holds[res])
        got = load_capacity([1, 2, 3], [10_000, 20_000, 30_000, 40_000, 50_000], oracle, name, True)
        assert got == {1: 20_000, 2: 40_000, 3: 40_000}, name
        # 2 and 3 cores never ran a load at or below the capacity of fewer cores
        assert all(load > 20_000 for load, res in oracle.calls if res == 2), name
        assert all(load > 40_000 for load, res in oracle.calls if res == 3), name
