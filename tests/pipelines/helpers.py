"""Fixed inputs, the pipelines' outputs read back, and independent pandas references."""

from __future__ import annotations

import json
import time

import pandas as pd
from confluent_kafka import Consumer, TopicPartition

from tests.conftest import produce

T0 = 1_700_000_000_000  # a multiple of every window size used here (ms since the epoch)


def windows(ts: int, size: int, slide: int) -> list[tuple[int, int]]:
    """Spark's windows of a reading at ``ts``: the last starts at ts - ts mod slide, the others back
    by the slide while they still contain ts; (start, end), newest first."""
    out, start = [], ts - ts % slide
    while start + size > ts:
        out.append((start, start + size))
        start -= slide
    return out


def rec(ident: str, ts: int, value: float) -> bytes:
    return json.dumps({"identifier": ident, "timestamp": ts, "valueInW": value}).encode()


def send(bootstrap: str, topic: str, records: list[tuple[str, int, float]], partitions: int) -> None:
    # keyed by sensor like the load generator; explicit partition keeps the test independent of hashing
    produce(bootstrap, topic, ((r[0].encode(), rec(*r), int(r[0].split("_")[1]) % partitions) for r in records))


def dead_letters(bootstrap: str, topic: str) -> list:
    """(value, headers) of every record up to the topic's end offsets (one partition)."""
    from streamscale.broker import BrokerAccess

    with BrokerAccess(bootstrap) as a:
        end = a.end_offsets(topic)[0]
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"dlq-{topic}", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list = []
    deadline = time.monotonic() + 60  # a bound, not a wait: the records are there
    try:
        while len(out) < end and time.monotonic() < deadline:
            out += [(m.value(), dict(m.headers())) for m in c.consume(1000, 1.0) if m.error() is None]
    finally:
        c.close()
    return out


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[tuple[int, int, bytes, bytes]]:
    from streamscale.broker import BrokerAccess

    with BrokerAccess(bootstrap) as a:
        ends = a.end_offsets(topic)
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "read-back",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out, done = [], {p for p, e in ends.items() if e == 0}
    deadline = time.monotonic() + 60
    while len(done) < len(ends) and time.monotonic() < deadline:
        for m in c.consume(5000, 0.2):
            if m.error() is None:
                out.append((m.partition(), m.offset(), m.key(), m.value()))
            elif m.offset() >= ends[m.partition()]:
                done.add(m.partition())
    c.close()
    return out


def latest_per_key(msgs, key_fields: list[str]) -> pd.DataFrame:
    """The output topic is a changelog: the last record per key and window is the final result."""
    rows = {}
    for _p, _o, _k, v in sorted(msgs):
        doc = json.loads(v)
        rows[tuple(doc[f] for f in key_fields) + (doc["windowStartMs"],)] = doc
    df = pd.DataFrame(list(rows.values()))
    return df.sort_values(key_fields + ["windowStartMs"]).reset_index(drop=True)


def reference_stats(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    g = df.groupby(keys + ["windowStartMs"])["valueInW"]
    out = pd.DataFrame(
        {
            "count": g.count(),
            "sum": g.sum(),
            "mean": g.mean(),
            "min": g.min(),
            "max": g.max(),
            "variance": g.var(ddof=0),
        }
    ).reset_index()
    return out.sort_values(keys + ["windowStartMs"]).reset_index(drop=True)


def assert_stats_equal(got: pd.DataFrame, want: pd.DataFrame, keys: list[str]) -> None:
    cols = keys + ["windowStartMs", "count", "sum", "mean", "min", "max"]
    assert len(got) == len(want), f"{len(got)} output windows, reference has {len(want)}"
    g, w = got[cols].reset_index(drop=True), want[cols].reset_index(drop=True)
    g["count"] = g["count"].astype("int64")
    w["count"] = w["count"].astype("int64")
    # values are multiples of 0.25: sums, means, min and max are exact in binary floating point
    pd.testing.assert_frame_equal(g, w, check_dtype=False, check_exact=True)
    # the variance is computed incrementally by Spark and in two passes by pandas: rounding differs
    pd.testing.assert_series_equal(
        got["variance"].reset_index(drop=True),
        want["variance"].reset_index(drop=True),
        check_names=False,
        rtol=1e-12,
        atol=1e-9,
    )
