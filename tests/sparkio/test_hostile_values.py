"""Hostile record values through the source: every value that does not decode into the schema's types
is marked, counted and dead-lettered once, valid ones are exact, and the query keeps running.

An independent strict decoder (below) is the reference: JSON numbers only (no NaN/Infinity), finite
doubles, integers within int64, strings that are valid Unicode, CSV numbers as plain decimals.
"""

import csv
import json
import math
import re
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscale.sparkio import kafka
from streamscale.sparkio.io import read_records
from streamscale.sparkio.kafka import SourceConfig, read_range
from tests.conftest import produce

pytestmark = pytest.mark.spark

DDL = "identifier STRING, timestamp BIGINT, valueInW DOUBLE"
I64 = (-(2**63), 2**63 - 1)


# -- the reference ---------------------------------------------------------------------------
def _reject(_):
    raise ValueError


def ref_json(value: bytes):
    try:
        doc = json.loads(value.decode("utf-8"), parse_constant=_reject)
    except (ValueError, RecursionError):
        return None
    if not isinstance(doc, dict):
        return None
    i, t, v = doc.get("identifier"), doc.get("timestamp"), doc.get("valueInW")
    if not isinstance(i, str) or re.search("[\ud800-\udfff]", i):
        return None
    if type(t) is not int or not I64[0] <= t <= I64[1]:
        return None
    try:
        if type(v) not in (int, float) or not math.isfinite(float(v)):
            return None
    except OverflowError:  # an integer beyond any double
        return None
    return (i, t, float(v))


def ref_csv(value: bytes):
    try:
        text = value.decode("utf-8")
        rows = list(csv.reader([text], strict=True))
    except (UnicodeDecodeError, csv.Error):
        return None
    if "\n" in text or "\r" in text or len(rows) != 1 or len(rows[0]) != 3:
        return None
    i, t, v = rows[0]
    if not re.fullmatch(r"-?[0-9]+", t) or not I64[0] <= int(t) <= I64[1]:
        return None
    if not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", v) or not math.isfinite(float(v)):
        return None
    return (i, int(t), float(v))


# -- generators ------------------------------------------------------------------------------
ident = st.text(max_size=12)
i64 = st.integers(*I64)
big = st.one_of(st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1))
finite = st.floats(allow_nan=False, allow_infinity=False)


def _doc(i, t, v):
    return json.dumps({"identifier": i, "timestamp": t, "valueInW": v}).encode()


json_values = st.one_of(
    st.builds(_doc, ident, i64, finite),  # valid
    st.builds(_doc, ident, big, finite),  # int64 overflow
    st.builds(
        lambda i, c: f'{{"identifier": {json.dumps(i)}, "timestamp": 1, "valueInW": {c}}}'.encode(),
        ident,
        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999"]),
    ),
    st.builds(
        lambda n: ('{"identifier": ' + "[" * n + "]" * n + ', "timestamp": 1, "valueInW": 1}').encode(),
        st.integers(1, 30_000),
    ),  # nesting, deep too
    st.builds(lambda n: ("[" * n + "]" * n).encode(), st.integers(1, 30_000)),
    st.builds(_doc, st.one_of(st.integers(), st.none(), st.booleans()), i64, finite),  # wrong types
    st.builds(_doc, ident, st.one_of(finite, st.text(max_size=3), st.booleans()), finite),
    st.builds(_doc, ident, i64, st.one_of(st.text(max_size=3), st.booleans(), st.none())),
    st.builds(lambda i: b'{"identifier": "\\ud800' + i.encode() + b'", "timestamp": 1, "valueInW": 1}', ident),
    st.binary(max_size=40),  # invalid UTF-8, empty
    st.builds(lambda d, junk: d[:-1] + junk, st.builds(_doc, ident, i64, finite), st.binary(max_size=4)),
)


def _line(i, t, v):
    return f"{i},{t},{v}".encode()


csv_values = st.one_of(
    st.builds(_line, st.from_regex(r"[a-z0-9]{0,8}", fullmatch=True), i64, finite.map(repr)),
    st.builds(_line, st.from_regex(r"[a-z]{1,4}", fullmatch=True), big, st.just("1.0")),
    st.builds(_line, st.just("s"), i64, st.sampled_from(["nan", "inf", "-inf", "1e400", "NaN", "+1", " 2", "0x1"])),
    st.builds(_line, st.just("s"), st.sampled_from(["1_0", "0x10", " 1", "1.5", "+3", ""]), st.just("1")),
    st.builds(lambda s: s.encode(), st.text(max_size=20)),  # anything, commas, quotes
    st.binary(max_size=30),
)


# -- the test --------------------------------------------------------------------------------
@pytest.fixture(autouse=True)
def _close_readers():
    yield
    kafka._close_clients()


@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_hostile_values_are_dead_lettered_once_and_valid_ones_exact(spark, broker, topic_factory, tmp_path, fmt):
    from confluent_kafka import Consumer, TopicPartition

    topic, dlq = topic_factory(1, f"hostile-{fmt}"), topic_factory(1, f"dlq-{fmt}")
    ref = ref_json if fmt == "json" else ref_csv
    cfg = SourceConfig.from_options(
        {
            "kafka.bootstrap.servers": broker.bootstrap,
            "subscribe": topic,
            "valueFormat": fmt,
            "valueSchema": DDL,
            "includeRaw": "false",
        }
    )
    produced: list[bytes] = []

    @settings(
        max_examples=30,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(st.lists(json_values if fmt == "json" else csv_values, min_size=200, max_size=260))
    def through_the_reader(values):
        # the task's own read path, per example: decoded columns and error marks per record
        start = len(produced)
        produce(broker.bootstrap, topic, ((None, v, 0) for v in values))
        produced.extend(values)
        rows = [r for rb in read_range(cfg, topic, 0, start, len(produced)) for r in rb.to_pylist()]
        assert [r["kafka_offset"] for r in rows] == list(range(start, len(produced)))
        for r, v in zip(rows, values):
            want = ref(v)
            if want is None:
                assert r["value_error"], v
            else:
                assert r["value_error"] is None, (v, r["value_error"])
                assert (r["identifier"], r["timestamp"], r["valueInW"]) == want, v

    through_the_reader()
    assert len(produced) >= 6_000

    # the whole topic through a Spark query with a dead-letter topic: alive, exact, once
    name = f"q_{uuid.uuid4().hex[:8]}"
    df = read_records(
        spark,
        broker.bootstrap,
        topic,
        value_format=fmt,
        value_ddl=DDL,
        dead_letter_topic=dlq,
        starting_offsets="earliest",
        max_offsets_per_trigger=3000,
    )
    q = (
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination(600)
    assert q.exception() is None and not q.isActive
    rows = {r["kafka_offset"]: r for r in spark.table(name).collect()}
    assert sorted(rows) == list(range(len(produced)))
    bad = set()
    for off, v in enumerate(produced):
        want = ref(v)
        if want is None:
            bad.add(off)
            assert rows[off]["value_error"]
        else:
            assert (rows[off]["identifier"], rows[off]["timestamp"], rows[off]["valueInW"]) == want
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "dlq-check", "enable.auto.commit": False})
    c.assign([TopicPartition(dlq, 0, 0)])
    dead: list[int] = []
    try:
        while len(dead) < len(bad):
            msgs = c.consume(1000, 5.0)
            if not msgs:
                break
            for m in msgs:
                h = dict(m.headers())
                assert h["error"] and h["source.topic"] == topic.encode()
                off = int(h["source.offset"])
                assert m.value() == produced[off]
                dead.append(off)
    finally:
        c.close()
    assert sorted(dead) == sorted(bad)  # each bad record once, no valid one
