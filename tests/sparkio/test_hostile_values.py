"""Hostile record values on both connectors: every value that breaks the decoding contract
(streamscale.sparkio.formats) is marked, counted and dead-lettered once, valid ones are exact and
finite, and the query keeps running.

An independent strict decoder (below) is the reference: JSON by Python's parser with every number
kept as text (no NaN or Infinity), nesting counted by a scanner of its own, finite doubles,
integers within int64, strings that are valid Unicode, UTF-8 throughout; CSV numbers as plain
decimals.
"""

import csv
import json
import math
import re
import sys
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscale.sparkio import formats, kafka
from streamscale.sparkio.io import (
    Decoding,
    WriteQuery,
    decode_values,
    read_kafka_ranges,
    read_records,
    route_dead_letters,
)
from streamscale.sparkio.kafka import SourceConfig, read_range
from tests.conftest import produce
from tests.pipelines.helpers import dead_letters

pytestmark = pytest.mark.spark

DDL = "identifier STRING, timestamp BIGINT, valueInW DOUBLE"
SCHEMA = formats.parse_ddl(DDL)
I64 = (-(2**63), 2**63 - 1)


# -- the reference ---------------------------------------------------------------------------
def _reject(_):
    raise ValueError


def _nesting(text: str) -> int:
    """Deepest nesting of arrays and objects, outside strings (a character scanner)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def ref_json(value: bytes):
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if _nesting(text) > 1000:
        return None
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(10_000)
    try:
        doc = json.loads(
            text, parse_constant=_reject, parse_int=lambda s: ("int", s), parse_float=lambda s: ("float", s)
        )
    except ValueError:
        return None
    finally:
        sys.setrecursionlimit(limit)
    if not isinstance(doc, dict):
        return None
    i, t, v = doc.get("identifier"), doc.get("timestamp"), doc.get("valueInW")
    if not isinstance(i, str) or re.search("[\ud800-\udfff]", i):
        return None
    if not (isinstance(t, tuple) and t[0] == "int" and len(t[1]) < 25 and I64[0] <= int(t[1]) <= I64[1]):
        return None
    if not (isinstance(v, tuple) and math.isfinite(float(v[1]))):
        return None
    return (i, int(t[1]), float(v[1]))


def ref_csv(value: bytes):
    try:
        text = value.decode("utf-8")
        rows = list(csv.reader([text], strict=True))
    except (UnicodeDecodeError, csv.Error):
        return None
    if "\n" in text or "\r" in text or len(rows) != 1 or len(rows[0]) != 3:
        return None
    i, t, v = rows[0]
    if not re.fullmatch(r"-?[0-9]+", t) or len(t) > 25 or not I64[0] <= int(t) <= I64[1]:
        return None
    if not re.fullmatch(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?", v) or not math.isfinite(float(v)):
        return None
    return (i, int(t), float(v))


# -- generators ------------------------------------------------------------------------------
ident = st.text(max_size=12)
i64 = st.integers(*I64)
big = st.one_of(st.integers(min_value=2**63), st.integers(max_value=-(2**63) - 1))
finite = st.floats(allow_nan=False, allow_infinity=False)

# what a field the schema does not name may hold: valid JSON of any size or depth up to the limit,
# and what is not JSON at all
OTHER = [
    "NaN",
    "-Infinity",
    "1e400",
    "1" * 5000,
    '"\\ud800"',
    '"a\nb"',
    "[" * 999 + "]" * 999,
    "[" * 1000 + "]" * 1000,
    '{"a":1,"a":2}',
    "null",
    '"}"',
    "-0",
]


def _doc(i, t, v, other=None):
    d = f'{{"identifier": {json.dumps(i)}, "timestamp": {t}, "valueInW": {json.dumps(v)}'
    return (d + (f', "x": {other}' if other is not None else "") + "}").encode("utf-8", "surrogatepass")


json_values = st.one_of(
    st.builds(_doc, ident, i64, finite),  # valid
    st.builds(_doc, ident, i64, finite, st.sampled_from(OTHER)),
    st.builds(_doc, ident, big, finite),  # int64 overflow
    st.builds(
        lambda i, c: f'{{"identifier": {json.dumps(i)}, "timestamp": 1, "valueInW": {c}}}'.encode(),
        ident,
        st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "-1e999", '"NaN"', "1" * 400]),
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
    st.builds(
        lambda d, pre, post: pre + d + post,
        st.builds(_doc, ident, i64, finite),
        st.sampled_from([b"", b" ", b"\n", b"\x0c", b"\xef\xbb\xbf"]),
        st.sampled_from([b"", b"\r\n", b"}", b" {}", b"\x00"]),
    ),
    st.builds(  # bytes that are not UTF-8 in a field the schema does not name
        lambda d, b: d[:-1] + b', "x": "' + b + b'"}',
        st.builds(_doc, ident, i64, finite),
        st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc3\xa9"]),
    ),
    st.builds(  # a field twice: the last one counts
        lambda i: b'{"identifier": "a", "identifier": ' + i + b', "timestamp": 1, "valueInW": 1}',
        st.sampled_from([b'"b"', b"2", b"null"]),
    ),
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

REF = {"json": ref_json, "csv": ref_csv}
VALUES = {"json": json_values, "csv": csv_values}
SETTINGS = dict(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


def _assert_follows_reference(values, errors, rows, ref):
    for v, err, row in zip(values, errors, rows):
        want = ref(v) if v is not None else None
        if want is None:
            assert err, v
        else:
            assert err is None, (v, err)
            assert row == want, v


# -- the decoder: a batch of any mix, and every value by itself -------------------------------
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_the_decoder_follows_the_contract_in_a_batch_and_value_by_value(fmt):
    @settings(max_examples=150, **SETTINGS)
    @given(st.lists(st.one_of(VALUES[fmt], st.none()), min_size=1, max_size=80))
    def decode(values):
        cols, errors = formats.decode(values, fmt, SCHEMA)
        rows = list(zip(*(c.to_pylist() for c in cols)))
        _assert_follows_reference(values, errors, rows, REF[fmt])
        # a value decoded by itself is judged as in the batch (the exact way and Arrow's block agree)
        for v, err, row in zip(values, errors, rows):
            alone_cols, alone_err = formats.decode([v], fmt, SCHEMA)
            assert alone_err[0] == err or (alone_err[0] and err), v
            assert tuple(c[0].as_py() for c in alone_cols) == row, v

    decode()


# -- through Kafka and Spark, on either connector ---------------------------------------------
@pytest.fixture(autouse=True)
def _close_readers():
    yield
    kafka._close_clients()


def _read_back(spark, broker, connector, topic, fmt, start, end):
    """The decoded rows of offsets [start, end) of partition 0, as the connector's read path gives them."""
    if connector == "python":
        cfg = SourceConfig.from_options(
            {
                "kafka.bootstrap.servers": broker.bootstrap,
                "subscribe": topic,
                "valueFormat": fmt,
                "valueSchema": DDL,
                "includeRaw": "false",
            }
        )
        return [r for rb in read_range(cfg, topic, 0, start, end) for r in rb.to_pylist()]
    raw = read_kafka_ranges(spark, broker.bootstrap, {topic: {"0": start}}, {topic: {"0": end}})
    return sorted((r.asDict() for r in decode_values(raw, DDL, fmt).collect()), key=lambda r: r["kafka_offset"])


@pytest.mark.parametrize("connector", ["python", "spark"])
@pytest.mark.parametrize("fmt", ["json", "csv"])
def test_hostile_values_are_dead_lettered_once_and_valid_ones_exact(
    spark, broker, topic_factory, tmp_path, connector, fmt
):
    topic, dlq = topic_factory(1, f"hostile-{fmt}"), topic_factory(1, f"dlq-{fmt}")
    ref = REF[fmt]
    produced: list[bytes] = []

    @settings(max_examples=30 if connector == "python" else 8, **SETTINGS)
    @given(st.lists(VALUES[fmt], min_size=200, max_size=260))
    def through_the_reader(values):
        start = len(produced)
        produce(broker.bootstrap, topic, ((None, v, 0) for v in values))
        produced.extend(values)
        rows = _read_back(spark, broker, connector, topic, fmt, start, len(produced))
        assert [r["kafka_offset"] for r in rows] == list(range(start, len(produced)))
        decoded = [(r["identifier"], r["timestamp"], r["valueInW"]) for r in rows]
        _assert_follows_reference(values, [r["value_error"] for r in rows], decoded, ref)

    through_the_reader()
    assert len(produced) >= 1_600

    # the whole topic through a streaming query with a dead-letter topic: alive, exact, once
    name = f"q_{uuid.uuid4().hex[:8]}"
    df = read_records(
        spark,
        broker.bootstrap,
        topic,
        Decoding(DDL, fmt, dead_letter_topic=dlq if connector == "python" else None),
        starting_offsets="earliest",
        max_offsets_per_trigger=3000,
        impl=connector,
    )
    queries = [
        df.writeStream.format("memory")
        .queryName(name)
        .option("checkpointLocation", str(tmp_path / name))
        .trigger(availableNow=True)
        .start()
    ]
    if connector == "spark":
        queries.append(
            route_dead_letters(
                spark,
                broker.bootstrap,
                topic,
                Decoding(value_format=fmt, dead_letter_topic=dlq),
                WriteQuery(str(tmp_path / "dlq"), {"availableNow": True}),
                starting_offsets="earliest",
            )
        )
    for q in queries:
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
    letters = dead_letters(broker.bootstrap, dlq)  # to the end offset: a second copy would show
    for value, headers in letters:
        assert headers["error"] and headers["source.topic"] == topic.encode()
        assert value == produced[int(headers["source.offset"])]
    assert sorted(int(h["source.offset"]) for _, h in letters) == sorted(bad)  # each bad record once, no valid one
