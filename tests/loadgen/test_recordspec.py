"""Described and replayed records: every generator's output checked against what its text says,
the values against the decoding contract both Kafka connectors enforce, and bad input refused
with the field or line named."""

import json

import numpy as np
import pyarrow as pa
import pytest

from streamscale.errors import ConfigError
from streamscale.loadgen.recordspec import RecordsSpec, records_spec
from streamscale.sparkio.formats import decode, parse_ddl

SIX = {
    "key": "user",
    "fields": {
        "seq": {"type": "long", "gen": "sequence"},
        "user": {"type": "string", "gen": "zipf:1000,1.2"},
        "amount": {"type": "double", "gen": "normal:50,10"},
        "n": {"type": "int", "gen": "uniform:-3,3"},
        "at": {"type": "timestamp", "gen": "late:0.25,5"},
        "payload": {"type": "string", "gen": "bytes:100"},
    },
}


def make(spec: RecordsSpec, n: int, worker=0, workers=1, t0=1_700_000_000_000):
    m = spec.maker(worker, workers)
    send = t0 + np.arange(n, dtype=np.int64) * 10
    return m.make(0, n, send), send


@pytest.mark.parametrize("encoding", ["json", "csv"])
def test_values_keep_the_decoding_contract(encoding):
    spec = records_spec({**SIX, "encoding": encoding}, "test")
    (keys, values), _ = make(spec, 5000)
    cols, errors = decode(values, encoding, parse_ddl(spec.value_ddl()))
    assert errors == [None] * 5000
    names = [n for n, _ in spec.columns()]
    table = dict(zip(names, (c.to_pylist() for c in cols)))
    assert table["user"] == [k.decode() for k in keys]  # the key is the key field's text
    assert table["seq"] == list(range(5000))
    assert all(len(p) == 100 for p in table["payload"])
    assert set(table["n"]) <= set(range(-3, 4)) and len(set(table["n"])) == 7


def test_sequence_is_unique_across_workers_and_chunks():
    spec = records_spec({"fields": {"s": {"type": "long", "gen": "sequence"}}}, "test")
    seen = []
    for w in range(3):
        m = spec.maker(w, 3)
        for k0, k1 in ((0, 7), (7, 20)):
            _, values = m.make(k0, k1, np.zeros(k1 - k0, np.int64))
            got = [json.loads(v)["s"] for v in values]
            assert got == sorted(got)  # increasing within a worker
            seen += got
    assert sorted(seen) == list(range(60))


def test_zipf_draws_keys_by_their_weights():
    # zipf:2,1: weights 1/1 and 1/2, so key-0 two thirds of the time
    spec = records_spec({"key": "k", "fields": {"k": {"type": "string", "gen": "zipf:2,1"}}}, "test")
    (keys, _), _ = make(spec, 60_000)
    share = keys.count(b"key-0") / len(keys)
    assert set(keys) == {b"key-0", b"key-1"}
    assert abs(share - 2 / 3) < 0.01


def test_keys_are_uniform_over_n_numbers():
    spec = records_spec({"key": "k", "fields": {"k": {"type": "long", "gen": "keys:4"}}}, "test")
    (keys, _), _ = make(spec, 40_000)
    counts = [keys.count(str(i).encode()) for i in range(4)]
    assert sum(counts) == 40_000 and min(counts) > 9_500


def test_now_and_late_event_times():
    spec = records_spec(
        {"fields": {"a": {"type": "timestamp", "gen": "now"}, "b": {"type": "timestamp", "gen": "late:0.2,3"}}},
        "test",
    )
    (_, values), send = make(spec, 20_000)
    docs = [json.loads(v) for v in values]
    assert [d["a"] for d in docs] == send.tolist()
    back = send - np.array([d["b"] for d in docs])
    assert back.min() >= 0 and back.max() <= 3000
    assert abs((back > 0).mean() - 0.2) < 0.01  # a fraction P set back


def test_choice_and_constant_of_each_type():
    spec = records_spec(
        {
            "fields": {
                "c": {"type": "string", "gen": 'choice:red|gr"een|blue'},
                "b": {"type": "boolean", "gen": "choice:true|false"},
                "d": {"type": "double", "gen": "constant:2.5"},
                "u": {"type": "double", "gen": "uniform:1,2"},
            }
        },
        "test",
    )
    (_, values), _ = make(spec, 3000)
    docs = [json.loads(v) for v in values]
    assert {d["c"] for d in docs} == {"red", 'gr"een', "blue"}
    assert {d["b"] for d in docs} == {True, False}
    assert {d["d"] for d in docs} == {2.5}
    assert all(1 <= d["u"] <= 2 for d in docs)


@pytest.mark.parametrize(
    "field,words",
    [
        ({"type": "text", "gen": "sequence"}, "fields.x.type"),
        ({"type": "long", "gen": "fibonacci"}, "field 'x'"),
        ({"type": "boolean", "gen": "sequence"}, "field 'x'"),
        ({"type": "string", "gen": "uniform:0,1"}, "field 'x'"),
        ({"type": "long", "gen": "zipf:10,-1"}, "exponent"),
        ({"type": "double", "gen": "late:2,5"}, "field 'x'"),
        ({"type": "long", "gen": "uniform:5,1"}, "at least A"),
        ({"type": "string", "gen": "keys:0"}, "field 'x'"),
    ],
)
def test_a_bad_field_is_named(field, words):
    with pytest.raises(ConfigError, match=words) as err:
        records_spec({"fields": {"x": field}}, "records.yaml")
    assert "records.yaml" in str(err.value)


def test_the_key_must_be_a_field():
    with pytest.raises(ConfigError, match="key 'nope'"):
        records_spec({"key": "nope", "fields": {"x": {"type": "long", "gen": "sequence"}}}, "test")


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return p


def test_replay_restamps_event_time_keeping_lateness(tmp_path):
    rows = [("a", 1000, 1.5), ("b", 2000, 2.5), ("a", 1500, 3.5), ("c", 4000, 4.5)]
    write(tmp_path, "s.jsonl", "\n".join(json.dumps({"u": u, "t": t, "v": v}) for u, t, v in rows) + "\n")
    spec = records_spec({"replay": "s.jsonl", "key": "u", "event_time": "t"}, "test", tmp_path)
    assert spec.columns() == [("u", "string"), ("t", "timestamp"), ("v", "double")]
    (keys, values), send = make(spec, 8)
    docs = [json.loads(v) for v in values]
    # in order: the send time; row 3 lay 500 ms behind the newest time before it, and still does
    lateness = [0, 0, 500, 0]
    assert [d["t"] for d in docs] == [int(s) - lateness[i % 4] for i, s in enumerate(send)]
    assert [d["u"] for d in docs] == [r[0] for r in rows] * 2
    assert [d["v"] for d in docs] == [r[2] for r in rows] * 2
    assert keys == [r[0].encode() for r in rows] * 2


def test_key_copies_are_disjoint(tmp_path):
    write(tmp_path, "s.csv", "user,n\nx,1\ny,2\n")
    spec = records_spec({"replay": "s.csv", "key": "user", "key_copies": 3}, "test", tmp_path)
    (keys, values), _ = make(spec, 12)
    assert len(set(keys)) == 6  # 2 keys x 3 copies
    assert {json.loads(v)["user"].encode() for v in values} == set(keys)
    numeric = records_spec({"replay": "s.csv", "key": "n", "key_copies": 3}, "test", tmp_path)
    (nkeys, _), _ = make(numeric, 12)
    assert sorted({int(k) for k in nkeys}) == [1, 2, 3, 4, 5, 6]  # shifted by the key range (2)


def test_replay_of_parquet(tmp_path):
    import pyarrow.parquet as pq

    t = pa.table({"id": [1, 2, 3], "ok": [True, False, True], "name": ["a", "b,c", "d"]})
    pq.write_table(t, tmp_path / "s.parquet")
    spec = records_spec({"replay": "s.parquet", "key": "id"}, "test", tmp_path)
    (keys, values), _ = make(spec, 3)
    assert [json.loads(v) for v in values] == t.to_pylist()
    assert keys == [b"1", b"2", b"3"]
    cols, errors = decode(values, "json", parse_ddl(spec.value_ddl()))
    assert errors == [None] * 3


@pytest.mark.parametrize(
    "name,text,words",
    [
        ("s.jsonl", '{"a": 1}\n{"a": 2\n', "line 2 is not valid JSON"),
        ("s.jsonl", '{"a": 1}\n[1, 2]\n', "line 2 is not a JSON object"),
        ("s.jsonl", '{"a": 1}\n{"a": 1, "b": 2}\n', "line 2 has a field 'b'"),
        ("s.jsonl", '{"a": 1, "b": 2}\n{"a": 1}\n', "line 2 has no field 'b'"),
        ("s.jsonl", '{"a": {"x": 1}}\n', "line 1: 'a' holds a nested value"),
        ("s.csv", "a,b\n1,2\n3\n", "line 3 has no value for 'b'"),
        ("s.csv", 'a,b\n1,2\n3,4,5,6\n"x', "cannot read it as CSV"),
        ("s.txt", "a\n", "use a .jsonl, .csv or .parquet"),
        ("s.jsonl", "", "holds no records"),
    ],
)
def test_a_replay_file_that_does_not_parse_says_where(tmp_path, name, text, words):
    write(tmp_path, name, text)
    with pytest.raises(ConfigError, match=words):
        records_spec({"replay": name}, "test", tmp_path)


def test_a_missing_replay_file_and_a_bad_event_time(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        records_spec({"replay": "none.jsonl"}, "test", tmp_path)
    write(tmp_path, "s.jsonl", '{"t": "yesterday-ish"}\n')
    with pytest.raises(ConfigError, match="line 1: 't' = 'yesterday-ish' is not a time"):
        records_spec({"replay": "s.jsonl", "event_time": "t"}, "test", tmp_path)


def test_a_double_key_is_the_number_the_record_holds():
    spec = records_spec({"key": "x", "fields": {"x": {"type": "double", "gen": "uniform:-5,5"}}}, "test")
    (keys, values), _ = make(spec, 200)
    assert [float(k) for k in keys] == [json.loads(v)["x"] for v in values]
    assert all(v == round(v, 3) and -5 <= v <= 5 for v in (json.loads(x)["x"] for x in values))
