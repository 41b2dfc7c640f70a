"""The SLO checkers and the one judge, with plain data."""

import pytest

from streamscale.benchmark.slos import (
    NOTE_EXCUSE,
    NOTE_INVALID,
    NOTE_STALL,
    DroppedRecords,
    Observation,
    judge,
)
from tests.benchmark.helpers import NO_RUN, Fixed


@pytest.mark.parametrize(
    "verdicts, expected",
    [
        (["pass", "pass", "pass"], "pass"),
        (["pass", "undecided", "pass"], "undecided"),
        (["pass", "undecided", "fail"], "fail"),  # a decided failure outweighs an undecided SLO
        (["invalid", "fail", "undecided"], "invalid"),  # an invalid run is not judged at all
        (["pass", "fail", "pass"], "fail"),
    ],
)
def test_a_run_is_invalid_else_failed_else_undecided_else_passed(verdicts, expected):
    checkers = [Fixed(f"slo{i}", v) for i, v in enumerate(verdicts)]
    j = judge(NO_RUN, checkers)
    assert j.verdict == expected
    assert [v.verdict for v in j.slos] == verdicts  # every SLO's own verdict is kept
    assert j.of("slo1").verdict == verdicts[1] and j.of("nothing") is None


@pytest.mark.parametrize(
    "lag, others, decided",
    [
        ("fail", ["undecided"], True),  # a failed lag trend decides a look alone
        ("undecided", ["fail"], False),  # an undecided one lets the run go on, whatever else
        ("pass", ["pass", "pass"], True),
        ("pass", ["pass", "undecided"], False),  # a latency limit between its p95's bounds
        ("pass", ["fail", "pass"], True),  # a held trend and a failed latency: decided (a fail)
    ],
)
def test_at_a_look_the_lag_trend_leads(lag, others, decided):
    checkers = [Fixed("lag_trend", lag)] + [Fixed(f"latency{i}", v) for i, v in enumerate(others)]
    assert judge(NO_RUN, checkers, look=True).decided is decided


def test_a_look_stops_checking_once_its_fate_is_known():
    class Exploding:
        name = "late"

        def check(self, obs, confidence):
            raise AssertionError("checked after the look was decided")

    assert judge(NO_RUN, [Fixed("lag_trend", "fail"), Exploding()], look=True).decided
    assert not judge(NO_RUN, [Fixed("lag_trend", "undecided"), Exploding()], look=True).decided


def test_notes_come_in_one_order_and_undecided_ones_only_for_an_undecided_run():
    excuse = Fixed("lag_trend", "undecided", ((NOTE_EXCUSE, "slower machine"),), "straddles")
    stalled = Fixed("b", "pass", ((NOTE_STALL, "stalled"),))
    invalid = Fixed("validity", "pass", ((NOTE_INVALID, "short"),))
    between = Fixed("p95", "undecided", (), "p95 between")
    assert judge(NO_RUN, [excuse, stalled, invalid, between]).notes == (
        "short",
        "stalled",
        "slower machine",
        "straddles",
        "p95 between",
    )
    failed = judge(NO_RUN, [excuse, Fixed("dropped", "fail"), between])
    assert failed.verdict == "fail" and failed.notes == ("slower machine",)


def test_dropped_records_hold_up_to_their_share_of_the_generated_ones():
    def verdict(dropped: int, generated: int, threshold=0.01) -> str:
        obs = Observation(lag=[], batches=[], t0_wall=None, warmup_s=0.0, generated=generated, dropped_late=dropped)
        return DroppedRecords(threshold).check(obs, 0.95).verdict

    assert verdict(100, 10_000) == "pass"  # exactly 1 %
    assert verdict(101, 10_000) == "fail"
    assert verdict(0, 0) == "pass"  # nothing generated: nothing dropped
    assert verdict(10_000, 10_000, None) == "pass"  # no such limit


def test_a_look_waits_for_a_lag_to_grow_by_a_batch_before_failing_it_and_the_runs_end_does_not():
    # the 1 % SLO run of 4-round hashes at 220,000 records/s that failed at 24 s (its 300 s run passed):
    # its lag after each commit from the warm-up's end rose 6,000/s, by less than a batch's records
    import dataclasses

    from streamscale.benchmark.slos import LagTrend, Observation
    from streamscale.experiment.slo import fit_periodic

    times = (11.355, 12.791, 14.293, 15.878, 17.474, 19.001, 20.818, 22.449)
    lags = (311_835, 314_917, 331_520, 334_043, 325_944, 350_032, 391_319, 366_317)
    trend = dataclasses.replace(fit_periodic(times, lags, 0.0, "batches"), commits=(times, lags), start_s=times[0])
    obs = Observation(lag=[], batches=[], t0_wall=None, warmup_s=10.0, ran_s=24.5)
    obs.__dict__.update(trend=trend, median_batch_ms=1_589.0, stall=None)  # what the run's samples gave
    look = LagTrend(0.01, 220_000.0).check(obs, 0.95)
    assert look.verdict == "undecided" and "less than a batch's 349,580" in look.undecided_note
    assert LagTrend(0.01, 220_000.0, at_end=True).check(obs, 0.95).verdict == "fail"
