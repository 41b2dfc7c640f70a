"""The capacity probe's arithmetic and its confinement after the warm batches, on hand-made batches
(the probe's drain for real runs in tests/test_demo.py)."""

from types import SimpleNamespace

import pytest

from streamscale.benchmark.probe import _confine_after, rate_batches
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
    done = _confine_after(run, 3, lambda: calls.append(len(run.batches)), 600_000, timeout=5)
    assert done == 3 and calls == [3]  # batch 4 ran when confined: the rate starts at the fifth


def test_a_drain_that_ends_before_its_warm_batches_is_a_config_error():
    with pytest.raises(ConfigError, match="fewer than 5 batches"):
        _confine_after(FakeRun(2), 3, lambda: pytest.fail("confined"), 200_000, timeout=5)


def test_a_drain_that_fails_before_its_warm_batches_raises_its_failure():
    run = FakeRun(2, error="boom")
    run.poll = lambda: None  # stays active, with a failure
    with pytest.raises(SparkError, match="boom"):
        _confine_after(run, 3, lambda: pytest.fail("confined"), 200_000, timeout=5)
