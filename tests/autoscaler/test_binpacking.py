"""The bin-packing algorithms against hand-worked examples from Landau et al. and invariants."""

import pytest

from streamscale.autoscaler.binpacking import (
    ALGORITHMS,
    CapacityError,
    any_fit_decreasing,
    consumers_used,
    kafka_equal_count,
    modified_any_fit,
    rscore,
)
from streamscale.autoscaler.evaluation import (
    DELTAS,
    cardinal_bin_score,
    expected_rscore,
    measurement_stream,
    pareto_front,
    run_stream,
)


def test_rscore_paper_example():
    # 3 partitions of 100 B/s rebalanced, consumer capacity 100 B/s -> Rscore 3
    speeds = {0: 100.0, 1: 100.0, 2: 100.0, 3: 50.0}
    prev = {0: 0, 1: 1, 2: 2, 3: 3}
    cur = {0: 1, 1: 2, 2: 0, 3: 3}
    assert rscore(speeds, 100.0, prev, cur) == 3.0
    assert rscore(speeds, 100.0, None, cur) == 0.0  # nothing to rebalance in the first iteration


def test_first_iteration_is_plain_decreasing_fit():
    speeds = {0: 60.0, 1: 50.0, 2: 40.0, 3: 30.0, 4: 20.0}
    # FFD by hand: 60 -> c0; 50 -> c1; 40 -> c0 (100); 30 -> c1 (80); 20 -> c1 (100)
    assert any_fit_decreasing(speeds, 100.0, None, "first") == {0: 0, 2: 0, 1: 1, 3: 1, 4: 1}
    # WFD by hand: 60 -> c0; 50 -> c1; 40 -> c1 (most room: 50 vs 40); 30 -> c0 (90); 20 -> c2
    assert any_fit_decreasing(speeds, 100.0, None, "worst") == {0: 0, 1: 1, 2: 1, 3: 0, 4: 2}
    # NFD by hand: 60 -> c0; 50 -> c1; 40 -> c1 (90); 30 -> c2; 20 -> c2
    assert any_fit_decreasing(speeds, 100.0, None, "next") == {0: 0, 1: 1, 2: 1, 3: 2, 4: 2}


def test_h_reopens_the_previous_consumer_when_unused():
    # FFD places 90 first; it fits no open bin, so h(j, k) opens its previous consumer 7, not f(k) = 0
    speeds = {0: 90.0, 1: 80.0}
    prev = {0: 7, 1: 3}
    assert any_fit_decreasing(speeds, 100.0, prev, "first") == {0: 7, 1: 3}
    # when the previous consumer is already used in this iteration, f(k): the lowest unused id
    prev = {0: 5, 1: 5}
    assert any_fit_decreasing(speeds, 100.0, prev, "first") == {0: 5, 1: 0}


def test_modified_worst_fit_keeps_assignments_and_moves_the_small():
    # consumer 0 grew over capacity: MWF keeps its biggest partitions and moves the smallest
    speeds = {0: 50.0, 1: 40.0, 2: 20.0, 3: 10.0}
    prev = {0: 0, 1: 0, 2: 0, 3: 1}
    cur = modified_any_fit(speeds, 100.0, prev, "worst", "cumulative")
    # consumer 0 (120 B/s) is first: no open bin yet -> it is re-created and takes 50, 40 (90);
    # 20 does not fit -> unassigned; consumer 1: 10 fits the open bin 0 (100) -> moves there
    # (moving the smallest first); the unassigned 20 gets a new consumer: the lowest unused, 1
    assert cur == {0: 0, 1: 0, 3: 0, 2: 1}
    assert rscore(speeds, 100.0, prev, cur) == pytest.approx(0.3)


def test_stable_speeds_settle_after_one_repacking():
    # Algorithm 1 moves small partitions into bins with room for a few iterations after the
    # decreasing first one (seen: at most 3); with unchanged speeds it then reaches a fixed point
    stream = measurement_stream(32, 20, delta=0, capacity=100.0, seed=3)
    for name in ("MWF", "MBF", "MWFP", "MBFP"):
        run = run_stream(name, ALGORITHMS[name], stream, 100.0)
        assert run.rscores[5:] == [0.0] * 15
        assert max(run.bins[1:]) <= run.bins[0]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("delta", [5, 25])
def test_capacity_never_exceeded_and_every_partition_once(name, delta):
    C = 100.0
    stream = measurement_stream(40, 60, delta, C, seed=delta)
    run = run_stream(name, ALGORITHMS[name], stream, C)
    for speeds, assign in zip(stream, run.assignments):
        assert sorted(assign) == sorted(speeds)  # every partition exactly once
        load = {}
        for p, c in assign.items():
            load[c] = load.get(c, 0.0) + speeds[p]
        assert max(load.values()) <= C * (1 + 1e-9)
        lower = sum(speeds.values()) / C
        assert consumers_used(assign) >= lower - 1e-9


def test_too_fast_partition_is_refused():
    with pytest.raises(CapacityError):
        any_fit_decreasing({0: 150.0}, 100.0)


def test_kafka_equal_count():
    a = kafka_equal_count({p: 1.0 for p in range(32)}, 20)
    counts = {}
    for c in a.values():
        counts[c] = counts.get(c, 0) + 1
    assert sorted(counts.values()) == [1] * 8 + [2] * 12  # the paper's 20 consumers x 32 partitions


def test_stream_is_seeded_and_bounded():
    a = measurement_stream(8, 50, 25, 100.0, seed=1)
    assert a == measurement_stream(8, 50, 25, 100.0, seed=1)
    assert a != measurement_stream(8, 50, 25, 100.0, seed=2)
    assert all(0 <= s <= 100.0 for m in a for s in m.values())
    steps = [abs(a[k + 1][p] - a[k][p]) for k in range(49) for p in range(8)]
    assert max(steps) <= 25.0 + 1e-9


def test_cbs_erscore_and_pareto():
    stream = measurement_stream(32, 100, 10, 100.0, seed=5)
    runs = {n: run_stream(n, f, stream, 100.0) for n, f in ALGORITHMS.items()}
    cbs = cardinal_bin_score(runs)
    assert min(cbs.values()) >= 0 and any(v < 0.05 for v in cbs.values())
    er = {n: expected_rscore(r) for n, r in runs.items()}
    # the modified algorithms rebalance less than plain first fit decreasing
    assert er["MWF"] < er["FFD"] and er["MBF"] < er["FFD"]
    front = pareto_front({n: (cbs[n], er[n]) for n in runs})
    assert front and set(front) <= set(ALGORITHMS)
    assert pareto_front({"a": (1, 1), "b": (2, 2), "c": (0, 3)}) == ["a", "c"]
    assert DELTAS == (0, 5, 10, 15, 20, 25)


def test_latency_paper_example():
    from streamscale.autoscaler.latency import line_latency

    # a 10 B/s consumer with two 8 B/s partitions: m = 1/10 - 1/16 = 0.0375 s per byte
    assert line_latency(10.0, 16.0, 0, 0.0) == 0.0
    assert line_latency(10.0, 16.0, 1, 0.0) == pytest.approx(0.0375)
    assert line_latency(10.0, 16.0, 2, 0.0) == pytest.approx(0.075)
    # a consumer faster than its load has no latency; a rebalanced queue starts at 5 s
    assert line_latency(10.0, 8.0, 100, 0.0) == 0.0
    assert line_latency(10.0, 8.0, 0, 5.0) == 5.0


def test_latency_model_kafka_vs_bin_packing():
    from streamscale.autoscaler.latency import CAPACITY_RATIO, latency_samples

    cbar = 100.0
    stream = measurement_stream(8, 10, 0, cbar * CAPACITY_RATIO, seed=2)
    bp = run_stream("MWF", ALGORITHMS["MWF"], stream, cbar * CAPACITY_RATIO).assignments
    # stable speeds, capacity respected: after the settling iterations no latency at all
    assert max(latency_samples(stream[4:], bp[4:], cbar)) == 0.0
    one = [kafka_equal_count(s, 1) for s in stream]  # one consumer for all: overloaded, latency grows
    lat = latency_samples(stream, one, cbar)
    assert lat[-1] > lat[len(lat) // 2] > 0


def test_evaluate_writes_tables_and_figures(tmp_path):
    from streamscale.autoscaler.figures import evaluate

    r = evaluate(tmp_path, partitions=12, measurements=30, latency_measurements=10)
    for name in [
        "algorithms_by_delta.csv",
        "latency_summary.csv",
        "latency_table.txt",
        "fig05_latency_hist_mwf_vs_kd.png",
        "fig06_avg_consumers.png",
        "fig07_samples_latency_gt0.png",
        "fig08_latency_boxplot.png",
        "fig09_cbs_baselines.png",
        "fig10_cbs_modified.png",
        "fig11_rscore_per_delta.png",
        "fig12_pareto_fronts.png",
    ]:
        assert (tmp_path / name).stat().st_size > 100, name
    assert set(r["fronts"]) == set(DELTAS)
    kd1 = next(x for x in r["latency"] if x["algorithm"] == "kd_1")
    assert kd1["avg_consumers"] == 1 and kd1["samples_latency_gt0"] > 0


def _naive_choose_open(self, size):
    """The definition, by scanning every open bin: the reference for the indexed choice."""
    limit = self.capacity * (1 + 1e-12)
    if self.fit == "next":
        last = self.order[-1] if self.order else None
        return last if last is not None and self.load[last] + size <= limit else None
    fitting = [c for c in self.order if self.load[c] + size <= limit]  # opening order
    if not fitting:
        return None
    if self.fit == "first":
        return min(fitting)  # left-most: the lowest index
    rooms = [self.capacity - self.load[c] - size for c in fitting]
    best = max(rooms) if self.fit == "worst" else min(rooms)
    return fitting[rooms.index(best)]  # ties: the earliest opened


@pytest.mark.parametrize("name", ["FFD", "BFD", "WFD", "MWF", "MBF", "MWFP", "MBFP"])
def test_indexed_bin_choice_equals_the_scan_ties_included(name, monkeypatch):
    from streamscale.autoscaler import binpacking

    # coarse speeds (multiples of C/8) make equal loads, hence ties, frequent
    streams = [measurement_stream(60, 40, d, 100.0, seed=s) for d, s in ((5, 1), (25, 2))]
    streams.append(
        [{p: round(v / 12.5) * 12.5 for p, v in m.items()} for m in measurement_stream(60, 40, 15, 100.0, seed=3)]
    )

    def run(stream):
        prev, out = None, []
        for speeds in stream:
            prev = ALGORITHMS[name](speeds, 100.0, prev)
            out.append(prev)
        return out

    fast = [run(s) for s in streams]
    monkeypatch.setattr(binpacking._Bins, "choose_open", _naive_choose_open)
    assert fast == [run(s) for s in streams]


def test_first_fit_takes_the_left_most_bin_not_the_first_opened():
    # §II-B: bins are indexed left to right and FFD puts an item in the left-most bin that fits.
    # h(j, k) opens consumer 3 (p0's previous) before consumer 0 (p1's previous); p2 fits both:
    # the left-most is 0, the first opened is 3.
    speeds = {0: 60.0, 1: 50.0, 2: 30.0}
    prev = {0: 3, 1: 0, 2: 5}
    assert any_fit_decreasing(speeds, 100.0, prev, "first") == {0: 3, 1: 0, 2: 0}


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0])
def test_non_finite_and_negative_speeds_are_refused(bad):
    for algo in ALGORITHMS.values():
        with pytest.raises(ValueError, match="speed"):
            algo({0: 10.0, 1: bad}, 100.0, None)
