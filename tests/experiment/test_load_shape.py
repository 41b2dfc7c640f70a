"""A load given as a rate, for every kind of feed: the generator's keys and period that make it."""

import pytest

from streamscale.errors import ConfigError
from streamscale.loadgen.feed import Feed
from streamscale.loadgen.inputs import InputSpec, resolve_inputs
from streamscale.loadgen.recordspec import records_spec
from streamscale.pipelines import make_pipeline


def _fields(**fields):
    return records_spec({"fields": fields}, "test")


def test_a_rate_for_each_kind_of_sut():
    (uc2,) = make_pipeline("uc2").feeds()
    assert uc2.shape(None, 1000, 1.0) == (1000, 1.0)  # no rate: the sensors as given
    assert uc2.shape(5000, 1000, 1.0) == (5000, 1.0)
    assert uc2.shape(5000, 1000, 2.0) == (10_000, 2.0)  # a sensor a record every 2 s
    (uc4,) = make_pipeline("uc4", {"levels": 2}).feeds()  # 16 sensors in the registry: they send faster
    assert uc4.shape(160, 1000, 1.0) == (16, 0.1)
    described = Feed(records=_fields(a={"type": "long", "gen": "sequence"}))
    assert described.shape(2500.4, 1000, 5.0) == (2500, 1.0)  # one key per record a second
    with pytest.raises(ConfigError, match="at least 1 record/s"):
        uc2.shape(0.5, 1000, 1.0)


def test_several_inputs_are_feeds_of_their_share_in_start_order():
    clicks = _fields(imp={"type": "long", "gen": "ref:imps.id,5"})
    imps = _fields(id={"type": "long", "gen": "sequence"})
    inputs = resolve_inputs(
        {
            "clicks": InputSpec(records=clicks, share=0.25),
            "imps": InputSpec(records=imps, share=0.7, partitions=3),
            "audit": InputSpec(records=imps, share=0.05, unread=True),
        }
    )
    feeds = {f.name: f for f in inputs.feeds()}
    assert [f.name for f in inputs.feeds()].index("imps") < [f.name for f in inputs.feeds()].index("clicks")
    assert feeds["clicks"].refs == ("imps",) and feeds["imps"].refs == ()
    assert feeds["imps"].topic("run") == "run.imps" and Feed().topic("run") == "run"
    assert feeds["imps"].shape(1000, 1, 1.0) == (700, 1.0) and feeds["imps"].partitions == 3
    assert feeds["imps"].backlog(10_000) == 7000 and feeds["audit"].backlog(10) == 1
    assert not feeds["audit"].read and feeds["clicks"].read
    with pytest.raises(ConfigError, match=r"^input audit \(0.05 of 10 records/s\): rate must be at least 1"):
        feeds["audit"].shape(10, 1, 1.0)


def test_a_windowed_backlog_starts_just_before_a_window_ends():
    from streamscale.experiment.sut import BACKLOG_LEAD_MS, backlog_start_ms

    assert backlog_start_ms(None, 12_345) is None  # no windows: now
    assert backlog_start_ms((5000, 5000), 12_345) == 15_000 - BACKLOG_LEAD_MS  # tumbling 5 s: ends at 5 s steps
    assert backlog_start_ms((5000, 5000), 15_000) == 15_000 - BACKLOG_LEAD_MS
    assert backlog_start_ms((10_000, 4000), 12_345) == 14_000 - BACKLOG_LEAD_MS  # 10 s sliding by 4 s: ends at 10+4k
    assert backlog_start_ms((60_000, 60_000), 61_000) == 120_000 - BACKLOG_LEAD_MS
