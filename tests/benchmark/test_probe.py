"""The capacity probe's arithmetic and its confinement after the warm batches, on hand-made batches
(the probe's drain for real runs in tests/test_demo.py)."""

from types import SimpleNamespace

import pytest

from streamscale.benchmark.probe import BacklogPart, backlog_parts, confine_after, rate_batches, start_backlog
from streamscale.errors import ConfigError, SparkError


def b(rows, ms):
    return SimpleNamespace(input_rows=rows, batch_ms=ms)


def test_the_rate_is_the_rated_batches_records_over_their_busy_time():
    batches = [b(100_000, 11_000), b(100_000, 2_000), b(100_000, 2_500), b(0, 40), b(100_000, 1_900), b(50_000, 1_000)]
    p = rate_batches(1, batches, 4, 450_000)
    # the empty batch is neither rated nor listed; 150,000 records in 2.9 s
    assert p.rate == pytest.approx(150_000 / 2.9)
    assert (p.records, p.batches, p.unrated) == (150_000, 2, 3)
    assert p.per_batch == [(100_000, 11_000), (100_000, 2_000), (100_000, 2_500), (100_000, 1_900), (50_000, 1_000)]
    assert rate_batches(2, batches, 1, 450_000).rate == pytest.approx(350_000 / 7.4)  # after the first


def test_a_backlog_too_short_to_rate_is_a_config_error():
    with pytest.raises(ConfigError, match="more records"):
        rate_batches(1, [b(100_000, 9_000), b(100_000, 2_000)], 2, 200_000)


class FakeRun:
    """A drain whose poll completes one batch per call until ``total`` are done."""

    def __init__(self, total, error=None):
        self.batches, self.total, self.error = [], total, error
        self.main_query = self

    def poll(self):
        if len(self.batches) < self.total:
            self.batches.append(b(100_000, 2_000))

    @property
    def isActive(self):  # noqa: N802 - pyspark's name
        return len(self.batches) < self.total

    def exception(self):
        return self.error


def test_confinement_comes_once_after_the_warm_batches():
    run, calls = FakeRun(6), []
    done = confine_after(run, 3, lambda: calls.append(len(run.batches)), 600_000, timeout=5)
    assert done == 3 and calls == [3]  # batch 4 ran when confined: the rate starts at the fifth


def test_a_drain_that_ends_before_its_warm_batches_is_a_config_error():
    with pytest.raises(ConfigError, match="fewer than 5 batches"):
        confine_after(FakeRun(2), 3, lambda: pytest.fail("confined"), 200_000, timeout=5)


def test_a_drain_that_fails_before_its_warm_batches_raises_its_failure():
    run = FakeRun(2, error="boom")
    run.poll = lambda: None  # stays active, with a failure
    with pytest.raises(SparkError, match="boom"):
        confine_after(run, 3, lambda: pytest.fail("confined"), 200_000, timeout=5)


def closes_per_batch(parts, sensors, batch, window_ms, lateness_ms):
    """Windows closed by each batch of ``batch`` records read in order: an independent replay of
    the event times (record k of a part at start + k x period / sensors) against Spark's rule (a
    window ending at e is closed once the largest event time seen reaches e + lateness)."""
    times = [p.start_ms + k * p.period_s * 1000 / sensors for p in parts for k in range(p.records)]
    closed, out = set(), []
    for i in range(0, len(times), batch):
        seen_max = max(times[: i + batch])
        ends = {int(t // window_ms + 1) * window_ms for t in times[: i + batch]}
        new = {e for e in ends if e + lateness_ms <= seen_max} - closed
        closed |= new
        out.append(len(new))
    return out


def test_a_windowed_probe_closes_a_window_in_every_warm_batch_after_the_first_and_none_when_rated():
    # the demo's UC2: 10 s windows, 5 s lateness; 4 warm batches and 3 more of 1,000 records each
    # (1,000 sensors), the clock at 3.456 s past a window boundary
    parts = backlog_parts(7_000, 1_000, 1_000, warm_batches=4, window_s=10, lateness_s=5, now_ms=1_700_000_003_456)
    # warm: 4 readings per sensor, 10 s apart, from the boundary; then 3 at 1 s apart, 5 s after
    # the warm span (40 s) ended
    assert parts == [BacklogPart(4_000, 10.0, 1_700_000_000_000), BacklogPart(3_000, 1.0, 1_700_000_045_000)]
    # batches 2-4 close the windows batches 1-3 filled, batch 5 (the one confined while it runs,
    # unrated) the last warm one; the rated batches 6 and 7 close none
    assert closes_per_batch(parts, 1_000, 1_000, 10_000, 5_000) == [0, 1, 1, 1, 1, 0, 0]


def test_a_probe_without_windows_or_warm_batches_is_one_part_at_one_reading_per_second():
    assert backlog_parts(600, 100, 100) == [BacklogPart(600, 1.0)]
    assert backlog_parts(600, 100, 100, warm_batches=3) == [BacklogPart(600, 1.0)]  # UC1: no windows
    assert backlog_parts(600, 100, 100, window_s=10) == [BacklogPart(600, 1.0)]
    # the warm batches take every record: nothing would be left to rate in a part of its own
    assert backlog_parts(300, 100, 100, warm_batches=3, window_s=10) == [BacklogPart(300, 1.0)]


class FakeGenerator:
    """Writes its config's records at once, or ``short`` fewer; logs starts and waits in ``log``."""

    log: list = []
    short = 0

    def __init__(self, cfg):
        self.cfg = cfg

    def start(self):
        FakeGenerator.log.append(("start", self.cfg.period_s, self.cfg.start_time_ms))
        return self

    def wait(self, timeout=None):
        FakeGenerator.log.append(("done", self.cfg.period_s))
        return SimpleNamespace(delivered=self.cfg.records - FakeGenerator.short)

    def stop(self, timeout=None):
        return self.wait()


@pytest.fixture
def fake_generator(monkeypatch):
    import streamscale.loadgen

    FakeGenerator.log, FakeGenerator.short = [], 0
    monkeypatch.setattr(streamscale.loadgen, "LoadGenerator", FakeGenerator)
    return FakeGenerator


def test_a_backlog_writes_its_parts_one_after_the_other(fake_generator):
    parts = [BacklogPart(400, 10.0, 1_000), BacklogPart(300, 1.0, 46_000)]
    assert start_backlog("127.0.0.1:9", "t", 700, 100, parts).wait(5) == 700
    # the second part starts only once the first is written (its records follow in every partition)
    assert fake_generator.log == [("start", 10.0, 1_000), ("done", 10.0), ("start", 1.0, 46_000), ("done", 1.0)]


def test_a_backlog_whose_first_part_falls_short_writes_no_second(fake_generator):
    fake_generator.short = 1
    parts = [BacklogPart(400, 10.0, 1_000), BacklogPart(300, 1.0, 46_000)]
    assert start_backlog("127.0.0.1:9", "t", 700, 100, parts).wait(5) == 399  # the probe says 399 of 700
    assert [e for e in fake_generator.log if e[0] == "start"] == [("start", 10.0, 1_000)]
