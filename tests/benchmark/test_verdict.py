"""A run's verdict from its figures: the load delivered to the input topic, and a processing
latency that keeps growing."""

from __future__ import annotations

import math

import pytest

from streamscale.benchmark.plan import resolve
from streamscale.benchmark.verdict import delivered_rate, latency_growing, run_validity
from streamscale.experiment.lagsampler import LagSample
from streamscale.experiment.slo import fit


def _samples(rate: float, seconds: int = 30, jitter=(0, 37, -52, 11, 0, -8)):
    # the topic's end offsets once a second, as the sampler reads them (a hand-over's jitter)
    return [
        LagSample(t_s=float(t), lag=0, end_total=int(rate * t) + jitter[t % len(jitter)], committed_total=0)
        for t in range(seconds + 1)
    ]


def test_the_rate_credited_is_the_rate_records_reached_the_topic():
    samples = _samples(10_000)
    # over the fitted span only (from 10 s): the end offsets' least-squares slope
    ts = [s.t_s for s in samples if s.t_s >= 10]
    ends = [s.end_total for s in samples if s.t_s >= 10]
    assert delivered_rate(samples, 10.0, fallback=-1) == pytest.approx(fit(ts, ends).slope)
    assert delivered_rate(samples, 10.0, fallback=-1) == pytest.approx(10_000, rel=0.002)
    assert delivered_rate(samples[:2], 0.0, fallback=123.0) == 123.0  # too few readings: the generator's


def test_a_run_given_less_than_99_percent_of_its_load_is_not_judged():
    ok, why = run_validity(True, 0, 60, delivered=9_850, target=10_000)
    assert not ok
    assert why == "records reached the input topic at 9,850/s, below 99% of the target 10,000/s: experiment invalid"
    assert run_validity(True, 0, 60, delivered=9_901, target=10_000) == (True, "")
    # the generator's own account still counts, and a run without offsets is judged as before
    assert run_validity(False, 0, 60, delivered=10_000, target=10_000)[0] is False
    assert run_validity(True, 0, 60) == (True, "")
    # a generator that failed says why, before what its shortfall was
    failed = "load generator worker 0 failed: ValueError: sleep length must be non-negative"
    assert run_validity(False, 0, 60, 0.0, 10_000, failed) == (False, f"{failed}: experiment invalid")


def test_a_latency_that_keeps_growing_fails_one_that_wobbles_does_not():
    t = [float(x) for x in range(10, 40)]
    growing = fit(t, [2_000 + 80 * (x - 10) + (150 if int(x) % 2 else -150) for x in t], "batches")
    assert latency_growing(growing, 30.0)  # 80 ms per s: 2.4 s more over the span
    slight = fit(t, [2_000 + 20 * (x - 10) + (150 if int(x) % 2 else -150) for x in t], "batches")
    assert slight.low > 0 and not latency_growing(slight, 30.0)  # 0.6 s over the span: tolerated
    flat = fit(t, [2_000 + (300 if int(x) % 3 == 0 else 0) for x in t], "batches")
    assert not latency_growing(flat, 30.0)
    assert not latency_growing(None, 30.0)


def test_a_windowed_run_is_first_looked_at_once_two_window_periods_are_fitted():
    from streamscale.benchmark.outcome import first_look_s
    from streamscale.benchmark.spec import parse_spec

    def first(sut: str, params: dict) -> float:
        spec = parse_spec(
            {
                "name": "looks",
                "benchmark": {"sut": sut, "params": params},
                "execution": {
                    "load": {"type": "sensors", "values": [1000]},
                    "resources": {"values": [1]},
                    "duration_s": 60,
                    "warmup_s": 10,
                },
            }
        )
        return first_look_s(resolve(spec).runs, resolve(spec).point(1000, 1))

    # min_duration_s auto: 10 + (60 - 10) / 4 = 22.5 s
    assert first("uc1", {}) == 22.5
    assert first("uc2", {"window_s": 10}) == 30.0  # 10 s warm-up + two 10 s windows
    assert first("uc2", {"window_s": 30}) == 22.5  # two periods do not fit a 60 s run: as min_duration_s says


# The latency buckets' edges are 2^(k/4) ms; 8,192 ms is 2^13, the edge below it 2^12.75.
BELOW_8S, AT_8S, ABOVE_8S = 2**12.5, 2**13, 2**13.25  # 5,793, 8,192, 9,742 ms


def test_a_latency_limit_inside_its_percentiles_bucket_is_neither_held_nor_failed():
    from streamscale.benchmark.verdict import (
        bounds_verdict,
        bucket_floor_ms,
        percentile_verdict,
        worst,
    )

    assert bucket_floor_ms(AT_8S) == pytest.approx(6888.6, abs=0.1)
    assert percentile_verdict(2**12.75, 8000.0) == "pass"  # the true p95 is at most 6,889 ms
    assert percentile_verdict(AT_8S, 8000.0) == "undecided"  # somewhere in (6,889, 8,192]: 8 s inside
    assert percentile_verdict(ABOVE_8S, 8000.0) == "fail"  # above 8,192 ms surely
    assert percentile_verdict(AT_8S, AT_8S) == "pass" and percentile_verdict(ABOVE_8S, AT_8S) == "fail"
    assert percentile_verdict(None, 8000.0) == "fail" and percentile_verdict(float("inf"), 8000.0) == "fail"
    assert percentile_verdict(None, None) == "pass"  # no such SLO
    # a processing p95 known to lie in (low, high]: undecided only while the limit lies between
    assert bounds_verdict((7_950.0, 8_000.0), 8000.0) == "pass"
    assert bounds_verdict((7_960.0, 8_010.0), 8000.0) == "undecided"
    assert bounds_verdict((8_000.0, 8_050.0), 8000.0) == "fail"  # above 8,000 surely
    assert bounds_verdict(None, 8000.0) == "fail" and bounds_verdict(None, None) == "pass"
    assert worst("pass", "undecided") == "undecided" and worst("undecided", "fail") == "fail"
    from streamscale.benchmark.slos import judge
    from tests.benchmark.helpers import NO_RUN, Fixed

    def combined(valid: str, lag: str, dropped: str, latency: str) -> str:
        slos = [Fixed("validity", valid), Fixed("lag_trend", lag), Fixed("dropped", dropped), Fixed("p95", latency)]
        return judge(NO_RUN, slos).verdict

    assert combined("pass", "pass", "pass", "undecided") == "undecided"
    assert combined("pass", "fail", "pass", "undecided") == "fail"
    assert combined("pass", "undecided", "fail", "pass") == "fail"  # the dropped records failed
    assert combined("invalid", "pass", "pass", "fail") == "invalid"


def _looking(spec, point):
    """The looks a run of ``point`` is judged by as it goes."""
    from streamscale.benchmark.outcome import first_look_s, looking
    from streamscale.experiment.sequential import Looks
    from streamscale.experiment.sut import CHECK_EVERY_S

    runs = resolve(spec).runs
    return looking(runs, point, Looks(runs.duration_s, first_look_s(runs, point), CHECK_EVERY_S))


def test_a_look_at_a_held_lag_goes_on_while_the_p95_bounds_hold_the_limit():
    from datetime import UTC, datetime

    from streamscale.benchmark.spec import parse_spec
    from streamscale.experiment.lagsampler import LagSample

    spec = parse_spec(
        {
            "name": "looks",
            "benchmark": {"sut": "uc1", "params": {}},
            "execution": {"load": {"type": "sensors", "values": [1000]}, "resources": {"values": [1]}},
        }
    )
    decided = _looking(spec, resolve(spec).point(1000, 1))  # a limit of 10 records/s
    t0 = 1_700_000_000.0
    lag = [LagSample(t_s=float(t), lag=500 + (t % 3), end_total=1000 * t, committed_total=0) for t in range(300)]

    def batches(high_ms: float):  # every record's latency in (high - 50, high] ms
        return [
            {
                "timestamp": datetime.fromtimestamp(t0 + t, UTC).isoformat(),
                "batch_ms": 1000,
                "input_rows": 1000,
                "processing_latency": [(high_ms - 50, high_ms, 1000)],
            }
            for t in range(100, 300, 2)
        ]

    assert decided(lag, batches(8_000), t0, None)  # the lag held and so did the latency
    assert not decided(lag, batches(8_030), t0, None)  # the lag held; 8 s lies in (7,980, 8,030]
    assert decided(lag, batches(8_050), t0, None)  # surely above: a failure, decided


def _judge_synthetic(
    tmp_path,
    monkeypatch,
    run,
    load: float,
    seconds: float,
    speeds=(1000.0, 1000.0, 1000.0),
    latency=(0.0, 1.0),
    sut="uc1",
    dropped=0,
):
    """UC1's plan at ``load`` for ``seconds`` (5 s warm-up, looks from 15 s), its looks, and the
    verdict on ``run`` (lag samples, batches, t0 of a synthetic run; every record's processing
    latency in ``latency``'s (low, high] ms), the machine's speed at the execution's start, before
    and after the run being ``speeds``."""
    from types import SimpleNamespace

    from streamscale.benchmark.outcome import Speeds, judged
    from streamscale.benchmark.spec import parse_spec
    from streamscale.experiment.lagsampler import LagSample

    spec = parse_spec(
        {
            "name": "synthetic",
            "benchmark": {"sut": sut, "params": {}},
            "execution": {
                "load": {"type": "sensors", "values": [load]},
                "resources": {"values": [1]},
                "duration_s": seconds,
                "warmup_s": 5,
                "min_duration_s": 15,
            },
        }
    )
    point = resolve(spec).point(load, 1)
    samples, batches, t0 = run
    lag = [LagSample(x.t_s, x.lag, x.end_total, x.committed_total) for x in samples]
    for b in batches:
        low_high = latency(b) if callable(latency) else latency
        b["processing_latency"] = [(*low_high, b["input_rows"])]
    r = SimpleNamespace(
        lag=lag, batches=batches, t0_wall=t0, input_topic="in", ran_s=float(seconds), generator_rate=load,
        target_rate=load, generator_reached_target=True, generator_error=None, lag_samples_missed=0,
        dropped_late=dropped, generated=int(load * seconds), final_lag=0,
        processed_records=sum(b["input_rows"] for b in batches),
        spark_cpu_pct=100.0, sampler_cpu_s=0.1, wall_s=float(seconds), generator_cpu_s=1.0, machine_cpu_pct=90.0,
        broker_cpu_pct=20.0, steal_pct=0.0,
    )  # fmt: skip
    res, _ = judged(resolve(spec).runs, point, 1, r, Speeds(*speeds))
    return _looking(spec, point), point, lag, batches, t0, res


def test_a_run_whose_backlog_never_drains_goes_on_and_fails_said_so(tmp_path, monkeypatch):
    # one slow batch as the run starts, its backlog drained all through the run: the lag after each
    # commit falls ~2,900/s against a limit of 670; no look stops it (it is catching up), and at its
    # end no steady state was seen: a fail, and its verdict says why
    from tests.experiment.helpers import slow_batch_run

    decided, point, lag, batches, t0, res = _judge_synthetic(tmp_path, monkeypatch, slow_batch_run(), 67_000, 31)
    assert point.rate == 67_000  # a look's limit: 670
    assert not any(decided(lag[: t + 1], batches, t0, "in") for t in range(15, 31, 2))
    assert (res.verdict, res.lag_verdict, res.lag_limit) == ("fail", "fail", pytest.approx(670, rel=0.01))
    assert res.lag_high < -res.lag_limit
    assert res.note.startswith("the backlog never drained: the lag still fell 2,")
    assert res.note.endswith(" when the run ended after 31 s (no steady state seen; a longer run may see one)")


def test_falling_behind_by_less_than_the_machine_slowed_down_is_not_a_failure():
    from streamscale.benchmark.verdict import allow_for_slowdown
    from streamscale.experiment.noise import slowdown

    assert slowdown(1000.0, 1000.0, 820.0) == pytest.approx(0.18)  # slower after the run
    assert slowdown(1000.0, 900.0, 1100.0) == pytest.approx(0.10)  # its slowest reading
    assert slowdown(1000.0, 1050.0, 1130.0) == 0.0 and math.isnan(slowdown(0.0, 1.0, 1.0))
    # 6,144 of 76,000 records/s piled up (8 %) while the machine ran 18 % slower: not a failure
    lag, growth_fails, note = allow_for_slowdown("fail", True, 6_144.0, 76_000.0, 0.18)
    assert (lag, growth_fails) == ("undecided", False)
    assert (
        note
        == "falling behind not judged: the machine ran 18% slower than its mean speed here, 8% of the load piled up"
    )
    # a growing latency with a lag that held: no pass either
    assert allow_for_slowdown("pass", True, -50.0, 76_000.0, 0.18)[:2] == ("undecided", False)
    # a failure larger than the slowdown (34 % of the load, 13 % slower), a slowdown within the
    # machine's noise (10 % or less), a faster machine, or nothing failed: as they were
    assert allow_for_slowdown("fail", True, 33_356.0, 99_000.0, 0.13) == ("fail", True, "")
    assert allow_for_slowdown("fail", False, 6_144.0, 76_000.0, 0.10) == ("fail", False, "")
    assert allow_for_slowdown("fail", True, 6_144.0, 76_000.0, 0.0) == ("fail", True, "")
    assert allow_for_slowdown("pass", False, 100.0, 76_000.0, 0.3) == ("pass", False, "")
    assert allow_for_slowdown("undecided", False, 700.0, 76_000.0, 0.3) == ("undecided", False, "")


def test_a_run_that_fell_behind_on_a_slower_machine_is_undecided_and_says_why(tmp_path, monkeypatch):
    # the lag grows 1,000/s at 20,000 records/s (5 % of the load; limit 200)
    from tests.experiment.helpers import sawtooth_run

    run = lambda: sawtooth_run(rate=20_000.0, batch_s=1.0, seconds=40, growth=1_000.0)  # noqa: E731
    *_, same = _judge_synthetic(tmp_path, monkeypatch, run(), 20_000, 40, speeds=(1000.0, 1000.0, 1000.0))
    assert (same.verdict, same.lag_verdict) == ("fail", "fail")
    *_, slower = _judge_synthetic(tmp_path, monkeypatch, run(), 20_000, 40, speeds=(1000.0, 860.0, 840.0))
    assert (slower.verdict, slower.lag_verdict) == ("undecided", "undecided")
    assert slower.note.startswith("falling behind not judged: the machine ran 15% slower than its mean speed here, 5")
    # slower at one end only: on average over the run, 8.5 % (a phase that began as it ended, or a
    # flip of a second on a machine whose speed flips), within the machine's own noise
    *_, one_end = _judge_synthetic(tmp_path, monkeypatch, run(), 20_000, 40, speeds=(1000.0, 980.0, 850.0))
    assert one_end.verdict == "fail"
    *_, barely = _judge_synthetic(tmp_path, monkeypatch, run(), 20_000, 40, speeds=(1000.0, 1000.0, 960.0))
    assert barely.verdict == "fail"  # 4 % slower: within the machine's own noise


def test_a_run_whose_processing_p95_bounds_hold_the_limit_is_undecided_and_says_where_it_lies(tmp_path, monkeypatch):
    # a flat lag at 20,000 records/s; every record's latency known within 50 ms around UC1's 8 s
    from tests.experiment.helpers import sawtooth_run

    def judged(low, high):
        run = sawtooth_run(rate=20_000.0, batch_s=1.0, seconds=40, growth=0.0)
        return _judge_synthetic(tmp_path, monkeypatch, run, 20_000, 40, latency=(low, high))[-1]

    held, between, above = judged(7_950.0, 8_000.0), judged(7_980.0, 8_030.0), judged(8_000.0, 8_050.0)
    assert held.processing_limit_ms == between.processing_limit_ms == 8_000.0
    assert (held.verdict, held.processing_p95_ms, held.note) == ("pass", 8_000.0, "")
    assert (between.verdict, between.processing_p95_ms) == ("undecided", 8_030.0)
    assert between.note == "processing p95 lies in (7,980, 8,030] ms, which holds its limit"
    assert (above.verdict, above.processing_slo) == ("fail", False)


def test_every_slo_judges_the_span_after_the_start_up_backlog_drained(tmp_path, monkeypatch):
    # one slow batch at 4 s piles up a backlog that drains until well after the 5 s warm-up; the
    # batches that drained it read records 9 s old, every batch after them 1 s: the processing p95
    # is the steady span's (the lag trend's), not one that takes the backlog's records in
    from datetime import datetime

    from streamscale.experiment.slo import lag_trend_estimate
    from tests.experiment.helpers import slow_batch_run

    run = slow_batch_run(rate=20_000.0, capacity=60_000.0, seconds=60, slow_at=4.0, slow_s=8.0)
    samples, batches, t0 = run
    steady = lag_trend_estimate(samples, batches, t0, 5.0, "in").start_s
    assert steady > 15.0  # well after the warm-up

    def ends_s(b):
        started = datetime.fromisoformat(b["timestamp"].replace("Z", "+00:00")).timestamp() - t0
        return started + b["batch_ms"] / 1000

    def latency(b):
        return (9_000.0, 9_050.0) if ends_s(b) < steady else (950.0, 1_000.0)

    # judged from the warm-up's end, the backlog's records would be more than 5 % of the records
    behind = sum(b["input_rows"] for b in batches if 5.0 <= ends_s(b) < steady)
    assert behind > 0.05 * sum(b["input_rows"] for b in batches if ends_s(b) >= 5.0)
    *_, res = _judge_synthetic(tmp_path, monkeypatch, run, 20_000, 60, latency=latency)
    assert res.trend_from_s == pytest.approx(steady, abs=0.01)
    assert (res.processing_p95_ms, res.processing_slo, res.verdict) == (1_000.0, True, "pass"), res.note


@pytest.mark.parametrize("sut", ["uc2", "uc3", "uc4", "examples/jobs/totals.py:totals"])
def test_every_pipeline_that_drops_late_records_is_held_to_the_dropped_records_slo(tmp_path, monkeypatch, sut):
    from tests.experiment.helpers import sawtooth_run

    def judged(sut, dropped):
        run = sawtooth_run(rate=20_000.0, batch_s=1.0, seconds=40, growth=0.0)
        return _judge_synthetic(tmp_path, monkeypatch, run, 20_000, 40, sut=sut, dropped=dropped)[-1]

    # 800,000 records generated; the default threshold: at most 1 % of them (8,000) dropped
    many, few = judged(sut, 10_000), judged(sut, 100)
    assert (many.dropped, many.dropped_slo, many.verdict) == (10_000, False, "fail")
    assert (few.dropped_slo, few.verdict) == (True, "pass"), few.note
    # UC1 drops nothing behind a watermark: whatever the count says, there is no such SLO
    assert judged("uc1", 10_000).dropped_slo


def _stalled_run(stall_at: float = 35.0, seconds: int = 60):
    """A query that keeps up with 20,000 records/s in 1 s batches until ``stall_at``, then commits
    nothing more: its lag samples grow by the whole load from there."""
    from types import SimpleNamespace

    from tests.experiment.helpers import sawtooth_run

    samples, batches, t0 = sawtooth_run(rate=20_000.0, batch_s=1.0, seconds=seconds)
    kept = [b for b in batches if _batch_end(b, t0) <= stall_at]
    last_end = max(_batch_end(b, t0) for b in kept)
    done = sum(int(v) for v in kept[-1]["end_offsets"]["in"].values())
    stalled = [
        s if s.t_s <= last_end else SimpleNamespace(t_s=s.t_s, lag=s.end_total - done, end_total=s.end_total,
                                                     committed_total=done)
        for s in samples
    ]  # fmt: skip
    return stalled, kept, t0


def _batch_end(b, t0):
    from datetime import datetime

    return datetime.fromisoformat(b["timestamp"].replace("Z", "+00:00")).timestamp() - t0 + b["batch_ms"] / 1000


def test_a_query_that_stops_committing_fails_as_stalled_and_says_so(tmp_path, monkeypatch):
    from streamscale.benchmark.runline import run_line
    from streamscale.experiment.slo import stall

    samples, batches, t0 = _stalled_run()
    s = stall(samples, batches, t0, 1.0)
    assert s is not None and s.since_s == pytest.approx(35.0, abs=1.0) and s.for_s == pytest.approx(25.0, abs=1.0)
    assert s.lag_to - s.lag_from == pytest.approx(20_000 * s.for_s, rel=0.05)
    # the commits before the stall alone hold the limit: the lag after them decides
    *_, res = _judge_synthetic(tmp_path, monkeypatch, (samples, batches, t0), 20_000, 60)
    assert (res.verdict, res.lag_verdict, res.lag_slo) == ("fail", "fail", False)
    assert res.note.startswith("stalled: no batch committed for the last 25 s (25 median batches), the lag grew from")
    assert "stalled: no batch committed" in run_line(res)
    # a pause shorter than five median batches (and 10 s) is no stall; nor is one with nothing arriving
    assert stall(*_stalled_run(stall_at=52.0), 1.0) is None
    flat = [type(x)(t_s=x.t_s, lag=0, end_total=x.end_total, committed_total=x.end_total) for x in samples]
    assert stall(flat, batches, t0, 1.0) is None
    assert stall(samples, [], t0, 1.0) is None  # nothing committed yet: a cold start, not a stall


def test_a_look_at_a_stalled_query_decides_the_run(tmp_path, monkeypatch):
    from streamscale.experiment.slo import stall

    samples, batches, t0 = _stalled_run()
    decided, point, *_ = _judge_synthetic(tmp_path, monkeypatch, (samples, batches, t0), 20_000, 60)
    import streamscale.benchmark.slos as slos

    fitted = []  # a look that fits the trend: the stall did not decide it
    trend = slos.lag_trend_estimate
    monkeypatch.setattr(slos, "lag_trend_estimate", lambda *a, **k: fitted.append(1) or trend(*a, **k))
    assert point.rate == 20_000  # a look's limit: 200
    at = lambda t: [x for x in samples if x.t_s <= t]  # noqa: E731 - the samples a look at t sees
    assert stall(at(40), batches, t0, 1.0) is None  # 5 s after the last commit: not yet a stall
    decided(at(40), batches, t0, "in")
    assert fitted == [1]
    assert stall(at(50), batches, t0, 1.0) is not None  # 15 s: a stall, which decides the look alone
    assert decided(at(50), batches, t0, "in") and fitted == [1]


def test_a_runs_slowdown_is_the_mean_of_its_readings_against_the_reference():
    from streamscale.benchmark.outcome import Speeds

    assert Speeds(20e6, 20e6, 13e6).slowdown == pytest.approx(0.175)
    assert Speeds(20e6, 22e6, 20e6).slowdown == 0.0
