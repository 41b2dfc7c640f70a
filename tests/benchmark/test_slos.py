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
    # after an undecided lag trend the others are asked only whether they surely fail
    asked = []

    class Asked(Fixed):
        def check(self, obs, confidence):
            asked.append(self.name)
            return super().check(obs, confidence)

    assert not judge(NO_RUN, [Fixed("lag_trend", "undecided"), Asked("p95", "fail")], look=True).decided
    assert asked == ["p95"]


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


def _latencies(over: int, within: int, longest_s: float | None = 300.0) -> Observation:
    """A look at 60 s whose records so far took 8,000-8,050 ms (``over``) or 2,000-2,050 ms."""
    from types import SimpleNamespace

    batch = {"processing_latency": [(8_000.0, 8_050.0, over), (2_000.0, 2_050.0, within)]}
    lag = [SimpleNamespace(t_s=float(t)) for t in range(61)]
    obs = Observation(lag=lag, batches=[batch], t0_wall=None, warmup_s=0.0, longest_s=longest_s)
    obs.__dict__.update(steady_s=0.0)  # the span judged: the whole run so far
    return obs


def test_a_look_fails_a_processing_p95_that_the_records_to_come_cannot_bring_back_whatever_the_lag():
    from streamscale.benchmark.slos import ProcessingLatency

    # At 60 s of a run whose longest is 300 s, 10,000 records/s to come: 2,400,000 more. With
    # 500,000 so far, the p95 stays over 8,000 ms for good once more than 5 % of 2,900,000
    # (145,000) already took longer: 150,000 do, 140,000 do not (the p95 so far fails either way).
    check = ProcessingLatency(8_000.0, 10_000.0)
    sure, unsure = check.check(_latencies(150_000, 350_000), 0.95), check.check(_latencies(140_000, 360_000), 0.95)
    assert (sure.verdict, sure.sure) == ("fail", True)
    assert (unsure.verdict, unsure.sure) == ("fail", False)
    # at a run's end (no rate) and without a longest, nothing is called sure
    assert not ProcessingLatency(8_000.0).check(_latencies(150_000, 350_000), 0.95).sure
    assert not check.check(_latencies(150_000, 350_000, None), 0.95).sure
    # a look whose lag trend is undecided: a sure latency failure decides it, an unsure one does not
    lag = Fixed("lag_trend", "undecided")
    decided = judge(_latencies(150_000, 350_000), [lag, check], look=True)
    assert (decided.verdict, decided.decided) == ("fail", True)
    going_on = judge(_latencies(140_000, 360_000), [lag, check], look=True)
    assert (going_on.verdict, going_on.decided) == ("undecided", False)


def test_an_undecided_lag_says_the_interval_it_was_judged_at_where_a_run_line_shows_the_95_percent_one():
    # the demo's 1-core run at 22,000 records/s: its 95 % interval [-2,642, 1,338] lay below the
    # limit of 1,374, while its last look, judged at 96.25 % (the error its looks left), straddled it
    import re

    from streamscale.benchmark.slos import LagTrend, Observation
    from streamscale.experiment.sequential import t_quantile
    from streamscale.experiment.slo import Trend

    se = (1_338.117 + 652.018) / t_quantile(20, 0.95)
    trend = Trend(-652.018, 0.0, -2_642.153, 1_338.117, 22, "seconds", se=se, df=20)
    obs = Observation(lag=[], batches=[], t0_wall=None, warmup_s=9.0, ran_s=30.1)
    obs.__dict__.update(trend=trend, median_batch_ms=2_354.0, stall=None, slowdown=0.0)
    check = LagTrend(0.01, 137_357.9)  # a limit of 1,373.6 records/s
    assert check.check(obs, 0.95).verdict == "pass"
    judged = check.check(obs, 0.9625)
    assert judged.verdict == "undecided"
    said = re.fullmatch(r"lag interval at 96\.25 %, \[(-?[\d,]+), (-?[\d,]+)\], still straddles the limit after 30 s",
                        judged.undecided_note)  # fmt: skip
    assert said, judged.undecided_note
    low, high = (float(x.replace(",", "")) for x in said.groups())
    assert low < -2_642 and 1_373.6 < high  # wider than the 95 % interval, and across the limit
