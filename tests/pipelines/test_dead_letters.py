"""Undecodable records reach the dead-letter topic once each, with their origin, on either
connector (Spark's has no dead-letter path: a second query routes them), counted as malformed,
while the valid ones are aggregated exactly; again after a restart from the checkpoint."""

from __future__ import annotations

import pandas as pd
import pytest

from streamscale.pipelines import make_pipeline
from tests.conftest import produce
from tests.pipelines.helpers import (
    T0,
    assert_stats_equal,
    dead_letters,
    latest_per_key,
    read_topic,
    rec,
    reference_stats,
)

pytestmark = pytest.mark.spark

# Values that break the decoding contract (streamscale.sparkio.formats), the same on both
# connectors: not JSON, not an object, a missing field, a timestamp that is no integer or does not
# fit, numbers that are not finite, invalid UTF-8, nesting deeper than the limit.
BAD = [
    b"{not json",
    b"",
    b"[1, 2, 3]",
    b'{"identifier": "s_0", "valueInW": 1.0}',
    b'{"identifier": "s_1", "timestamp": "noon", "valueInW": 2.0}',
    b'{"identifier": "s_2", "timestamp": 99999999999999999999, "valueInW": 1.0}',
    b'{"identifier": "s_0", "timestamp": 1.5e300, "valueInW": 1.0}',
    b'{"identifier": "s_1", "timestamp": 1700000000000, "valueInW": NaN}',
    b'{"identifier": "s_2", "timestamp": 1700000000000, "valueInW": 1e400}',
    b'{"identifier": "s_0", "timestamp": 1700000000000, "valueInW": -Infinity}',
    b'{"identifier": "s_1\xff", "timestamp": 1700000000000, "valueInW": 1.0}',
    b'{"identifier": "s_2", "timestamp": 1700000000000, "valueInW": 1.0, "x": '
    + b"[" * 100_000
    + b"]" * 100_000
    + b"}",
]


@pytest.mark.parametrize("connector", ["python", "spark"])
def test_undecodable_records_are_dead_lettered_once_and_counted(connector, spark, broker, topic_factory, tmp_path):
    src, out, dlq = topic_factory(2), topic_factory(2), topic_factory(1)
    good = [(f"s_{s}", T0 + i * 1_000, float(i * s)) for i in range(20) for s in range(3)]  # in time order
    pipe = make_pipeline(
        "uc2", {"window_s": 10, "lateness_s": 5, "emit": "update", "dead_letter_topic": dlq}, connector=connector
    )
    totals = []
    for phase in (good[:30] + BAD[:6], good[30:] + BAD[6:]):
        sent = [
            (r[0].encode(), rec(*r), i % 2) if isinstance(r, tuple) else (None, r, i % 2) for i, r in enumerate(phase)
        ]
        produce(broker.bootstrap, src, sent)
        run = pipe.start(spark, broker.bootstrap, src, out, str(tmp_path / "ck"), available_now=True)
        run.await_available(300)
        assert run.exception() is None
        totals.append(run.totals())
    assert sum(t["malformed"] for t in totals) == len(BAD)

    letters = dead_letters(broker.bootstrap, dlq)
    assert sorted(v for v, _ in letters) == sorted(BAD)  # each once, no valid record
    source = {(v, int(h["source.partition"]), int(h["source.offset"])) for v, h in letters}
    assert all(h["error"] and h["source.topic"] == src.encode() for _, h in letters)
    in_topic = {(m[3], m[0], m[1]) for m in read_topic(broker.bootstrap, src, 2) if m[3] in BAD}
    assert source == in_topic  # the headers point at the record itself

    got = latest_per_key(read_topic(broker.bootstrap, out, 2), ["identifier"])
    ref = pd.DataFrame(good, columns=["identifier", "ts", "valueInW"])
    ref["windowStartMs"] = ref["ts"] - ref["ts"] % 10_000
    assert_stats_equal(got, reference_stats(ref, ["identifier"]), ["identifier"])
