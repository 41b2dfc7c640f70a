"""The drain probe against a job whose batches cost a known fixed time and a known time per record:
its drains' sizes, its fitted cost and its figure, worked by hand; and an execution that starts each
amount's bracket from its probe, keeps the probe beside the bracket and does not probe again when
resumed."""

import dataclasses
import json
import math
from types import SimpleNamespace

from streamscale.benchmark import drainprobe as dp
from streamscale.benchmark.bracket import FAIL, PASS, UNDECIDED, Settings, bracket_search
from streamscale.benchmark.execution import Execution
from streamscale.benchmark.spec import parse_spec
from tests.benchmark.helpers import drained_job as job
from tests.benchmark.helpers import fake_result, spec_dict


def close(got, want, rel=1e-3) -> bool:
    return len(got) == len(want) and all(math.isclose(g, w, rel_tol=rel) for g, w in zip(got, want, strict=True))


def test_the_cost_of_a_batch_is_fitted_from_batches_of_several_sizes():
    # 1.0 s + 10 us a record: 10,000 records take 1.1 s, 100,000 take 2.0 s
    assert close(dp.batch_cost([(10_000, 1100), (10_000, 1100), (100_000, 2000)]), (1.0, 1e-5))
    # batches of one size (within 1.5x) or a falling line: no fit
    assert dp.batch_cost([(10_000, 1100), (12_000, 1300), (14_000, 1500)]) is None
    assert dp.batch_cost([(10_000, 2000), (40_000, 1000), (40_000, 1000)]) is None


def test_a_job_faster_than_the_guess_is_drained_again_in_larger_batches_until_they_take_seconds():
    # 0.6 s a batch and 10 us a record: a batch of 4 s reads (4 - 0.6) / (4 x 1e-5) = 85,000/s. A guess
    # of 10,000/s sizes 5 batches of 10,000 (1 s at the guess): they take 0.7 s, so the figure so far,
    # 10,000 / 0.7 = 14,286/s, sizes the next drain's batches for 4 s: 57,143 records; they take
    # 1.171 s, under half of 4 s: the line through both sizes (0.6 s + 10 us) gives 85,000/s, and
    # batches of 340,000 records (4.0 s) are drained last
    calls = []
    found = dp.probe(job(0.6, 1e-5, calls=calls), 10_000, resources=1)
    assert close([c[2] for c in calls], [10_000, 57_143, 340_000])
    assert [c[1] for c in calls] == [5 * c[2] for c in calls]
    assert math.isclose(found.rate, 85_000, rel_tol=1e-3)
    assert math.isclose(found.fixed_s, 0.6, abs_tol=2e-3) and math.isclose(found.per_record_us, 10, rel_tol=1e-3)
    assert [d.batches for d in found.drains] == [4, 4, 4]  # the cold first batch of each left out
    assert found.note == ""


def test_a_batch_that_costs_seconds_whatever_its_size_is_drained_until_it_reads_what_the_target_reads():
    # 1.65 s a batch and 5.3 us a record (an executor of a cluster): a batch of 2.7 s reads
    # (2.7 - 1.65) / 5.3e-6 = 198,113 records, 73,375/s. A guess of 20,000/s sizes batches of 20,000
    # (1.756 s): 11,390/s; the next drain's, sized for 2.7 s at that, read 30,751 records in 1.813 s,
    # within 1.5x of 2.7 s in duration but a sixth of the records: by the line through both sizes
    # (fitted to whole milliseconds) a third drain reads batches of 198,051 records (2.7 s), and its
    # rate is the figure, not the 16,961/s of the second
    calls = []
    found = dp.probe(job(1.65, 5.3e-6, calls=calls), 20_000, resources=1, batch_s=2.7)
    assert [c[2] for c in calls] == [20_000, 30_751, 198_051]
    assert math.isclose(found.rate, 73_375, rel_tol=1e-3)


def test_a_job_slower_than_the_guess_is_drained_again_in_batches_large_enough_to_fit_their_cost():
    # 0.5 s + 150 us a record, guess 20,000/s: the first drain's batches of 20,000 take 3.5 s, 5,714/s
    # (a first drain also warms a fresh JVM: a second one always runs); sized for 4 s at that, the
    # second's would be 22,857 records, too alike to fit a cost, so it reads 1.5 x 20,000 = 30,000 in
    # 5.0 s: the line through both sizes is 0.5 s + 150 us, by which a 4 s batch reads 23,333, and the
    # 30,000 read are more than 1/1.5 of that: near; its rate, 30,000 / 5.0 = 6,000/s
    calls = []
    found = dp.probe(job(0.5, 1.5e-4, calls=calls), 20_000, resources=2, config="big")
    assert [c[2] for c in calls] == [20_000, 30_000]
    assert [c[1] for c in calls] == [100_000, 150_000]
    assert found.rate == 6_000 and found.note == ""
    assert math.isclose(found.fixed_s, 0.5, abs_tol=2e-3) and math.isclose(found.per_record_us, 150, rel_tol=1e-3)
    assert (found.resources, found.config) == (2, "big")


def test_an_executor_whose_batches_cost_nearly_the_same_at_two_alike_sizes_is_drained_until_a_cost_fits():
    # 1.65 s a batch and 20 us a record (an executor: most of a batch is its fixed cost), guess
    # 16,000/s: batches of 16,000 take 1.97 s, 8,122/s; sized for 2.7 s at that, the second drain's
    # would be 21,929, within 1.5x of 16,000 and near 2.7 s by duration (2.09 s): rated so, 10,500/s.
    # They read 1.5 x 16,000 = 24,000 instead (2.13 s): the line through both sizes (1.65 s + 20 us)
    # says a 2.7 s batch reads 52,500 records, more than 1.5 x 24,000, so a third drain reads that:
    # 52,500 / 2.7 = 19,444/s
    calls = []
    found = dp.probe(job(1.65, 2e-5, calls=calls), 16_000, resources=1, batch_s=2.7)
    assert [c[2] for c in calls] == [16_000, 24_000, 52_500]
    assert math.isclose(found.rate, 19_444, rel_tol=2e-3)


def test_a_windowed_jobs_drains_span_its_window_period_and_lateness_in_event_time():
    # batches of 2.5 s at 1,000 records/s: 2,500 records; 15 s of event time (a 10 s period and 5 s of
    # lateness) at 1,000 records/s is 15,000 records: six batches and the first
    assert dp.sizing(1_000, 2.5, 15.0) == (17_500, 2_500)
    assert dp.sizing(1_000, 2.5) == (12_500, 2_500)  # without windows: the first and RATED_BATCHES more
    calls = []
    dp.probe(job(0.5, 1e-4, calls=calls), 5_000, resources=1, batch_s=2.5, event_s=15.0)
    # the first drain too (it warms the JVM's closing of windows): 5,000-record batches (1 s at the
    # guess), 15 s of event time at 5,000/s in 15 whole batches and the first
    assert calls[0][1:] == (80_000, 5_000)


def test_a_job_that_caps_its_batches_is_rated_at_its_cap():
    # 0.5 s + 10 us a record, batches of at most 20,000 records (its max_offsets_per_trigger): the
    # first drain's 10,000-record batches take 0.6 s; the second asks for 66,668 and gets 20,000,
    # which take 0.7 s: 20,000 / 0.7 = 28,571/s, what the job reads at its cap, not the 87,500/s a
    # 4 s batch would read by the fitted line; no third drain
    calls = []
    found = dp.probe(job(0.5, 1e-5, calls=calls, cap=20_000), 10_000, resources=1)
    assert len(calls) == 2 and calls[1][2] > 60_000
    # (the backlog's last batch, 13,340 records, is rated too: at least half the largest)
    assert math.isclose(found.rate, 28_571, rel_tol=0.02) and "at most 20,000 records a batch" in found.note
    assert math.isclose(found.fixed_s, 0.5, abs_tol=2e-3)


def test_a_probe_is_written_and_read_back_whole(tmp_path):
    found = dp.probe(job(0.6, 1 / 150_000), 10_000, resources=1)
    again = dp.Probe.from_dict(json.loads(json.dumps(found.as_dict())))
    assert again == found


def test_a_probed_amount_starts_half_a_step_under_its_probe_in_steps_within_the_resolution_and_assumes_nothing():
    # 1 core holds 30,000, 2 cores 52,000; the probes say 28,000 and 61,000; resolution 15 %: steps of
    # 1 + 0.95 x 0.15 = 1.1425 up, the first half a step (sqrt 1.1425 = 1.0689) under the probe
    calls = []

    def verdict(load, res):
        calls.append((load, res))
        return PASS if load <= {1: 30_000, 2: 52_000}[res] else FAIL

    one, two = bracket_search([1, 2], verdict, 5_000, Settings(resolution=0.15), probe={1: 28_000, 2: 61_000}.get)
    # 1 core: 26k (26,195) passes, 30k (29,705) passes, 34k (34,275) fails: 34/30 = 1.133, within 15 %
    assert [c[0] for c in calls if c[1] == 1] == [26_000, 30_000, 34_000]
    assert (one.held, one.failed) == (30_000, 34_000)
    # 2 cores: 57k (57,068) fails; downwards two steps at once (1.1425^2 = 1.305): 44k (43,668) passes,
    # its end run on 2 cores (none assumed from 1 core's 30k); the middle, 50k (50,080), passes:
    # 57/50 = 1.14
    assert [c[0] for c in calls if c[1] == 2] == [57_000, 44_000, 50_000]
    assert (two.held, two.failed, two.held_assumed) == (50_000, 57_000, False)


def bracket_spec():
    """A capacity search of one rate value, one run a point, bracketed to 15 % from each probe."""
    return parse_spec(
        spec_dict(
            load={"type": "rate", "values": [1000]},
            metric="capacity",
            repetitions=1,
            strategy={"name": "bracket", "resolution": 0.15},
        )
    )


def test_a_first_load_undecided_near_the_capacity_steps_down_once_and_one_over_it_or_failed_twice():
    # UC2's demo on a slow machine: its probe said 35,800 on 1 core, resolution 25 %: steps of
    # 1 + 0.95 x 0.25 = 1.2375, the first half a step under the probe, 32k (32,182). Undecided
    # there with its lag's trend under the limit (the capacity lies near it, ~30,000): one step
    # down, 26k (25,857), which holds, and 32k is stepped past upwards to 40k (39,600), which
    # fails. Two steps (1.2375^2 = 1.531) would have run 21k (20,893) first, 52 % under it.
    calls = []

    def verdict(load, res):
        calls.append(load)
        return PASS if load <= 27_000 else UNDECIDED if load <= 35_000 else FAIL

    def search(verdict, leans=None):
        calls.clear()
        (one,) = bracket_search([1], verdict, 5_000, Settings(0.25, leans=leans), probe={1: 35_800}.get)
        return one

    one = search(verdict, leans=lambda x, r: False)
    assert calls == [32_000, 26_000, 40_000]
    assert (one.held, one.failed, one.failed_undecided) == (26_000, 40_000, False)
    assert search(verdict).held == 26_000 and calls[:2] == [32_000, 26_000]  # no leaning known: near
    # undecided while its lag grew faster than the limit (likely over the capacity), or failed
    # there (the probe overrated the job): two steps down at once, 21k, then up again
    one = search(verdict, leans=lambda x, r: x == 32_000)
    assert calls[:3] == [32_000, 21_000, 26_000] and (one.held, one.failed) == (26_000, 40_000)
    one = search(lambda x, r: FAIL if x == 32_000 else verdict(x, r))
    assert calls[:2] == [21_000, 26_000] and (one.held, one.failed) == (26_000, 32_000)


def test_an_execution_steps_down_from_an_undecided_first_load_as_far_as_its_lag_leaned(tmp_path):
    # 1 core's probe says 31,000 (as above): the search starts at 29,000, in steps of 1.1425 (two:
    # 1.305). Undecided there, its lag growing by 500/s against a limit of 1,087 (3.75 % of it): one
    # step down, 25,000 (25,383); growing by 5,000/s: two, 22,000 (22,217)
    spec = bracket_spec()
    per_core = job(0.6, 1 / 40_000)
    for slope, second in ((500.0, 25_000), (5_000.0, 22_000)):
        runs = []

        def run(load, res, rep, on_lag=None, slope=slope, runs=runs):
            runs.append(load)
            r = fake_result(load, res, rep, passed=load <= 20_000)
            if load != 29_000:
                return r
            return dataclasses.replace(r, verdict="undecided", lag_slope=slope, lag_limit=1_087.0)

        drain = lambda load, res, config, records, batch: per_core(load, records, batch)  # noqa: E731
        Execution(spec, tmp_path / f"{slope:g}", run, drain=drain).run()
        assert runs[:2] == [29_000, second]


def test_an_exact_probe_is_bracketed_by_the_first_two_runs():
    # the probe says 40,000 and the job holds exactly that: 37k (37,415) passes, 42k (42,272) fails
    calls = []

    def verdict(load, res):
        calls.append(load)
        return PASS if load <= 40_000 else FAIL

    (one,) = bracket_search([1], verdict, 5_000, Settings(resolution=0.15), probe={1: 40_000}.get)
    assert calls == [37_000, 42_000] and (one.held, one.failed) == (37_000, 42_000)


def test_an_execution_starts_each_amount_from_its_probe_and_keeps_it_beside_the_bracket(tmp_path, capsys):
    spec = bracket_spec()
    drains, runs = [], []
    # the processing-latency limit of 8 s: batches of 8/3 s read (8/3 - 0.6) x 40,000 / (8/3) = 31,000/s
    per_core = job(0.6, 1 / 40_000)

    def drain(load, res, config, records, batch):
        drains.append((load, res))
        return job(0.6, 1 / (40_000 * res))(load, records, batch) if res > 1 else per_core(load, records, batch)

    def run(load, res, rep, on_lag=None):
        runs.append((load, res))
        return fake_result(load, res, rep, passed=load <= 30_000 * res)

    summary = Execution(spec, tmp_path, run, drain=drain).run()
    # 1 core's search starts half a step (1.0689) under its probe's 31,000: 29,000. 2 cores' probe
    # sizes its first drain from 1 core's figure, doubled (62,000/s), for batches of 2.67 s (its
    # target, as a later drain's: the guess is informed): 165,333 records take 0.6 + 165,333 / 80,000
    # = 2.67 s, and 2.67 s batches read (2.67 - 0.6) x 80,000 / 2.67 = 62,000/s; its search starts at
    # 58,000 (58,004)
    assert runs[0] == (29_000, 1) and [r for r in runs if r[1] == 2][0] == (58_000, 2)
    probes = json.loads((tmp_path / "probes.json").read_text())
    assert [(p["resources"], round(p["records_per_s"], -2)) for p in probes] == [(1, 31_000), (2, 62_000)]
    assert round(probes[1]["drains"][0]["batch_records"], -3) == 165_000
    rows = summary["answer"]["brackets"]
    assert [b["probe_rate"] for b in rows] == [p["records_per_s"] for p in probes]
    assert json.dumps(summary["probes"]) == json.dumps(probes)  # NaN where no cost was fitted
    assert "probe: 1 core: ~31,000 records/s in batches of 2.7 s" in capsys.readouterr().out
    # resumed: neither the probes nor the runs again
    before = len(drains)
    Execution(spec, tmp_path, run, drain=drain).run()
    assert len(drains) == before


def test_a_real_time_configuration_is_not_probed_and_searches_from_the_load_given(tmp_path, capsys):
    from tests.benchmark.helpers import capacity_spec

    rt = {"trigger": "real_time:5 seconds", "connector": "spark", "sink": "kafka"}
    strategy = {"name": "bracket", "resolution": 0.25}
    spec = capacity_spec("rt", strategy, resources=(4,), configs={"batches": {}, "rt": rt})
    drained, runs = [], []

    def drain(load, res, config, records, batch):
        drained.append(config)
        return job(0.5, 1 / 40_000)(load, records, batch)

    def run(load, res, rep, on_lag=None, config=""):
        runs.append((config, load))
        return fake_result(load, res, rep, passed=load <= 30_000)

    summary = Execution(spec, tmp_path, run, drain=drain).run()
    assert set(drained) == {"batches"}
    assert [load for c, load in runs if c == "rt"][0] == 20_000  # the spec's first load
    rt_probe = next(p for p in summary["probes"] if p["config"] == "rt")
    assert rt_probe["records_per_s"] is None and rt_probe["drains"] == []
    said = " ".join(capsys.readouterr().out.split())
    assert "probe: 4 cores: no figure (real-time mode reads no backlog in batches)" in said, said


def test_a_line_read_far_beyond_its_batches_gives_at_most_twice_the_best_rate_measured():
    # batches of 10,000 take 1.00 s and of 20,000 1.01 s: the line (0.99 s + 1 us a record) reads
    # (2.5 - 0.99) / 2.5e-6 = 604,000/s at 2.5 s, thirty times what any batch read; the figure is
    # twice the best drain's 20,000 / 1.01 = 19,802/s
    def drain(n, ms):
        return dp.Drain(1, 0.0, 5 * n, n, 4 * n, n / (ms / 1000), 4, ms / 1000, 0, 5.0, 9.0, ((n, ms),) * 4)

    rate, (fixed, per_record) = dp.figure([drain(10_000, 1_000), drain(20_000, 1_010)], batch_s=2.5)
    assert math.isclose(fixed, 0.99, abs_tol=1e-9) and math.isclose(per_record, 1e-6, rel_tol=1e-6)
    assert math.isclose(rate, 2 * 20_000 / 1.01)


def test_the_next_drain_is_sized_from_the_line_as_it_reads_so_that_it_measures_there():
    # 0.99 s + 1 us a record, guess 10,000/s: 10,000-record batches take 1.0 s; the next drain's,
    # sized for 2.67 s at 10,000/s (26,700), take 1.02 s; the line through both reads 629,000/s at
    # 2.67 s, and the third drain's batches are sized from that, as large as a backlog may be
    # (3,000,000 records in 5 batches: 600,000, 1.59 s), not from twice the best rate measured
    calls = []
    found = dp.probe(job(0.99, 1e-6, calls=calls), 10_000, resources=1, batch_s=8 / 3)
    assert [c[2] for c in calls][:3] == [10_000, 26_666, 600_000] and len(calls) == 3
    assert math.isclose(found.rate, (8 / 3 - 0.99) / (8 / 3 * 1e-6), rel_tol=0.01)


def test_a_first_drain_capped_by_the_job_is_drained_again_warm():
    # batches of at most 20,000 records from the first drain on, whose 8 batches (150,000 records
    # asked for in 30,000s) warm a fresh JVM (its first batch 5 s slower): a second drain at the cap
    # gives the figure, 20,000 / 0.7 s = 28,571/s
    calls = []
    found = dp.probe(job(0.5, 1e-5, calls=calls, cap=20_000), 30_000, resources=1)
    assert len(calls) == 2 and math.isclose(found.rate, 28_571, rel_tol=0.02)  # (its tail batch rated too)


def test_a_time_budget_keeps_each_later_amount_its_probe_and_a_run(monkeypatch):
    # 400 s for two amounts, runs of 40 s, probes of 50 s, every load held (an amount never finishes):
    # 1 core (its share ends at 200 s) goes on while a run leaves 2 cores a probe and a run (ends by
    # 400 - 90 = 310 s): runs from 50 to 290 s; 2 cores then probes (290-340 s) and runs (340-380 s)
    import streamscale.benchmark.bracket as br

    clock, starts = [0.0], []
    monkeypatch.setattr(br.time, "monotonic", lambda: clock[0])

    def probe(res):
        clock[0] += 50
        return 1_000

    def verdict(load, res):
        starts.append((clock[0], res))
        clock[0] += 40
        return PASS

    budget = br.Budget(deadline=400, run_cost_s=40)
    bracket_search([1, 2], verdict, 1_000, Settings(resolution=0.15, max_runs=50), budget=budget, probe=probe)
    assert [t for t, r in starts if r == 1] == [50, 90, 130, 170, 210, 250]
    assert [t for t, r in starts if r == 2] == [340]


def test_a_cap_a_few_percent_under_the_batch_asked_for_is_a_cap():
    # asked for 104,096 records a batch, the job read 100,000 (its max_offsets_per_trigger)
    d = dp.Drain(2, 0.0, 520_480, 104_096, 520_480, 70_000.0, 4, 1.4, 0, 9.0, 12.0, ((100_000, 1_400),) * 4)
    assert dp.capped(d) and not dp.capped(dataclasses.replace(d, batch_records=100_000))


def test_a_first_drain_of_many_batches_is_rated_by_its_warm_second_half_and_may_be_the_only_one():
    # a windowed job capped at 20,000 records a batch, its first drain 480,000 records (15 s of event
    # time at the guess, 30,000/s, in batches asked for of 30,000, and one more): 24 batches of
    # 20,000; the first 12 warm the JVM and are not rated, the last 12 (0.7 s each) give 28,571/s,
    # at the cap: no second drain
    calls = []
    found = dp.probe(job(0.5, 1e-5, calls=calls, cap=20_000), 30_000, resources=1, event_s=15.0)
    assert len(calls) == 1 and found.drains[0].warm and found.drains[0].batches == 12
    assert math.isclose(found.rate, 20_000 / 0.7, rel_tol=1e-3)


@dataclasses.dataclass
class _Drained:
    rated_from: int | None = None


class _Sessions:
    """A session keeper that would start a session and records where it was confined."""

    keep, kept, cpus = True, True, None

    def __init__(self):
        self.confined: list = []

    def would_start(self, master, conf=None, cpus=None):
        return True

    def confine(self, cpus):
        self.confined.append(cpus)
        self.cpus = cpus


def _warmed(tmp_path, sut: str, params: dict, closes_at: int | None) -> tuple:
    """(where the drain was confined, the batch its rate counts from, the CPUs it started on) of a
    fresh one-core drain of 12 batches of 100,000 records whose windows first close at batch
    ``closes_at`` (1-based; None: never)."""
    from streamscale.benchmark.experiment_runner import ExperimentRunner
    from streamscale.benchmark.plan import resolve

    d = spec_dict(load={"type": "rate", "values": [50_000]}, resources={"type": "cores", "values": [1]})
    d["benchmark"] = {**d["benchmark"], "sut": sut, "params": params}
    sessions, started = _Sessions(), []
    runner = ExperimentRunner(resolve(parse_spec(d)), tmp_path, "127.0.0.1:9", sessions=sessions)

    def sut_run(point, params, policy, on_lag, on_batch=None):
        started.append(point.cpus)
        for i in range(1, 13):
            closed = closes_at is not None and i >= closes_at
            on_batch({"batch_id": i, "input_rows": 100_000, "output_records": 500 if closed else 0})
        return _Drained()

    runner._sut = sut_run
    result = runner.drain(50_000, 1, "", 1_200_000, 100_000)
    return sessions.confined, result.rated_from, started


def test_a_fresh_one_core_drain_warms_on_every_cpu_and_is_rated_once_confined(tmp_path):
    window = {"window_s": 5, "emit": "final"}
    # windowed: confined once half its batches are done and its windows closed once, rated after
    assert _warmed(tmp_path, "uc2", window, closes_at=7) == ([1], 8, [None])
    assert _warmed(tmp_path, "uc2", window, closes_at=2) == ([1], 6, [None])  # half of 12, less the one running
    assert _warmed(tmp_path, "uc2", window, closes_at=None) == ([1], 10, [None])  # at the latest 3/4
    assert _warmed(tmp_path, "uc1", {"sink": "none"}, closes_at=None) == ([1], 6, [None])  # no windows
    # drain_of counts from there: the batches before it (5 s each, on every CPU while the JVM warmed) are left out
    batches = [{"input_rows": 100_000, "batch_ms": 5000 if i < 7 else 2000} for i in range(12)]
    run = {"batches": batches, "processed_records": 1_200_000, "undrained": 0, "ran_s": 39, "wall_s": 45}
    assert dp.drain_of(SimpleNamespace(**run, rated_from=7), 1, 50_000, 1_200_000, 100_000).rate == 50_000
    assert dp.drain_of(SimpleNamespace(**run, rated_from=None), 1, 50_000, 1_200_000, 100_000).rate < 50_000


def warming_job(fixed_s: float, warm_s: float, per_record_s: float, calls: list):
    """A drain of a job whose batch of n records takes fixed_s + warm_s / k + n * per_record_s in its
    k-th drain: a JVM that warms from drain to drain, so that larger batches take no longer."""

    def run_drain(guess, records, batch):
        calls.append((guess, records, batch))
        sizes = [batch] * (records // batch) + ([records % batch] if records % batch else [])
        ms = [round((fixed_s + warm_s / len(calls) + n * per_record_s) * 1000) for n in sizes]
        batches = [{"input_rows": n, "batch_ms": t} for n, t in zip(sizes, ms, strict=True)]
        return SimpleNamespace(
            batches=batches, processed_records=records, undrained=0, ran_s=sum(ms) / 1000, wall_s=9.0, rated_from=None
        )

    return run_drain


def test_batches_that_grew_and_took_no_longer_are_grown_until_they_read_what_a_run_does():
    # 1.5 s a batch, 0.7 s / k more in the k-th drain (a warming JVM), 2 us a record; target 2.7 s,
    # guess 2,000/s. Drain 1: batches of 2,000 (1 s at the guess) take 2.204 s; drain 2: 1.5 x 2,000
    # = 3,000 (sized at 907/s they would be 2,449, too alike), 1.856 s: within 1/1.5 of 2.7 s by
    # duration, but the line through both sizes falls, so that says nothing of a batch of 2.7 s.
    # With the cold first drain in that line, drain 3 grows by (2.7 / 1.856)^2 = 2.116: 6,349
    # records (1.746 s); the line through the warm drains 2-3 falls too: four times, 25,396
    # (1.726 s), and again, 101,584 (1.843 s): 55,119/s; the line through drains 2-5 rises, beyond
    # twice that at 2.7 s: 110,238/s. Where a duration near the target ended the probe, it read
    # 1,616/s after drain 2
    calls = []
    found = dp.probe(warming_job(1.5, 0.7, 2e-6, calls), 2_000, resources=1, batch_s=2.7)
    assert [c[2] for c in calls] == [2_000, 3_000, 6_349, 25_396, 101_584]
    assert math.isclose(found.rate, 2 * 101_584 / 1.843, rel_tol=1e-4) and found.note == ""
    # a line that never rose (no cost a record): the best rate measured, said so
    calls.clear()
    found = dp.probe(warming_job(1.5, 0.7, 0.0, calls), 2_000, resources=1, batch_s=2.7)
    assert [c[2] for c in calls] == [2_000, 3_000, 6_391, 25_564, 102_256]
    assert found.rate == round(102_256 / 1.64) and "took no longer" in found.note
