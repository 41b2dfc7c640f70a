"""A sample of a real topic: captured key, value bytes, headers and timestamp exactly, replayed
byte for byte at a rate with the Kafka timestamp the send time, key copies on raw keys; what
cannot be captured or replayed is one line."""

import time
from collections import Counter

import pandas as pd
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from streamscale.errors import ConfigError
from streamscale.loadgen import GeneratorConfig, LoadGenerator
from streamscale.loadgen.raw import RawSample, capture
from streamscale.loadgen.recordspec import records_spec

OLD_MS = 1_000_000_000_000  # 2001: a capture's timestamps are kept, a replay's are the send time


def _source(bootstrap: str, topic: str, n: int) -> list[tuple]:
    """n records over 2 partitions: bytes that are no text, every third without a key, headers on
    some (one of them repeated, one with an empty value)."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    sent = []
    for i in range(n):
        key = None if i % 3 == 0 else b"k\x00%d" % (i % 7)
        value = bytes([i % 256, 0, 255]) + b"v%d" % i
        heads = [("h", b"%d" % i), ("h", b""), ("trace", b"\xff")] if i % 2 else []
        p.produce(topic, value, key, partition=i % 2, headers=heads or None, timestamp=OLD_MS + i)
        sent.append((i % 2, key, value, heads))
    assert p.flush(30) == 0
    return sent


def _read_all(bootstrap: str, topic: str, partitions: int, n: int) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "raw-read", "enable.auto.commit": False})
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got, deadline = [], time.monotonic() + 60
    while len(got) < n and time.monotonic() < deadline:
        for m in c.consume(1000, 1.0):
            if not m.error():
                got.append(m)
    c.close()
    return got


def test_a_capture_keeps_every_byte_and_header(broker, topic_factory, tmp_path):
    topic = topic_factory(2, "capture-src")
    sent = _source(broker.bootstrap, topic, 200)
    out = tmp_path / "sample.parquet"
    assert capture(broker.bootstrap, topic, 150, out) == 150
    df = pd.read_parquet(out)
    assert len(df) == 150
    by_offset = {(p, o): (k, v, h) for p, o, k, v, h in zip(df.partition, df.offset, df.key, df.value, df.headers)}
    per_part = {0: [s for s in sent if s[0] == 0], 1: [s for s in sent if s[0] == 1]}
    for (part, offset), (k, v, h) in by_offset.items():
        _, key, value, heads = per_part[part][offset]
        assert (k, v) == (key, value)
        assert [(x["key"], x["value"]) for x in h] == heads
    stamps = sorted(df.timestamp)
    assert OLD_MS <= stamps[0] and stamps[-1] < OLD_MS + 200  # the records' own timestamps
    assert capture(broker.bootstrap, topic, 10_000, tmp_path / "all.parquet") == 200  # the topic held 200


def test_a_replay_sends_the_sample_byte_for_byte_cycling_at_the_send_time(broker, topic_factory, tmp_path):
    src, dst = topic_factory(2, "replay-src"), topic_factory(2, "replay-dst")
    _source(broker.bootstrap, src, 100)
    sample = tmp_path / "s.parquet"
    capture(broker.bootstrap, src, 100, sample)
    spec = records_spec({"replay": str(sample), "raw": True}, "test")
    t0 = int(time.time() * 1000)
    cfg = GeneratorConfig(broker.bootstrap, dst, sensors=2000, records=250, records_spec=spec)
    assert LoadGenerator(cfg).run().delivered == 250
    got = _read_all(broker.bootstrap, dst, 2, 250)
    assert len(got) == 250
    rows = RawSample.read(sample)
    expected = Counter()
    for i in range(250):  # cycling: record i is sample row i mod 100
        r = i % 100
        expected[(rows.keys[r], rows.values[r], tuple(rows.headers[r] or ()))] += 1
    assert Counter((m.key(), m.value(), tuple(m.headers() or ())) for m in got) == expected
    assert all(m.timestamp()[1] >= t0 - 1000 for m in got)  # the send time, not the sample's 2001


def test_key_copies_work_on_raw_keys(tmp_path):
    pq = tmp_path / "k.parquet"
    pd.DataFrame({"key": [b"a", b"b"], "value": [b"1", b"2"]}).to_parquet(pq)
    spec = records_spec({"replay": str(pq), "raw": True, "key_copies": 3}, "test")
    keys, values = spec.maker(0, 1).make(0, 12, None)
    assert values == [b"1"] * 3 + [b"2"] * 3 + [b"1"] * 3 + [b"2"] * 3
    assert keys == [b"a", b"a#1", b"a#2", b"b", b"b#1", b"b#2"] * 2


@pytest.mark.parametrize(
    "frame,extra,words",
    [
        ({"key": [b"a"], "payload": [b"x"]}, {}, "its rows have no value column (it has key, payload)"),
        ({"value": [b"x"]}, {"key": "value"}, "key, event_time and encoding do not apply"),
        ({"value": [b"x"]}, {"key_copies": 2}, "key_copies copies the key space: its records have no key"),
    ],
)
def test_a_sample_that_cannot_be_replayed_raw_is_one_line(tmp_path, frame, extra, words):
    pq = tmp_path / "bad.parquet"
    pd.DataFrame(frame).to_parquet(pq)
    with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
        spec = records_spec({"replay": str(pq), "raw": True, **extra}, "test")
        spec.maker(0, 1)


def test_raw_without_a_replay_and_a_missing_topic_are_one_line(broker, tmp_path):
    with pytest.raises(ConfigError, match="raw applies to replay"):
        records_spec({"raw": True, "fields": {"a": {"type": "long", "gen": "sequence"}}}, "test")
    with pytest.raises(ConfigError, match="capture: topic 'no-such-topic' does not exist"):
        capture(broker.bootstrap, "no-such-topic", 10, tmp_path / "x.parquet")
    assert not (tmp_path / "x.parquet").exists()


def test_a_raw_sample_is_for_a_job_that_decodes_it(tmp_path):
    from streamscale.pipelines import make_pipeline
    from streamscale.pipelines.jobsetup import JobSetup

    pq = tmp_path / "s.parquet"
    pd.DataFrame({"value": [b"x"]}).to_parquet(pq)
    (tmp_path / "j.py").write_text("def job(kafka, params):\n    return kafka\n")
    spec = records_spec({"replay": str(pq), "raw": True}, "test")
    with pytest.raises(ConfigError, match="set benchmark.decode: raw"):
        make_pipeline(f"{tmp_path}/j.py:job", records=spec)
    assert make_pipeline(f"{tmp_path}/j.py:job", records=spec, job=JobSetup(decode="raw")).raw
