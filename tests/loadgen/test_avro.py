"""Records in Avro (streamscale.loadgen.avro): the schema derived or read and checked, each body
read back by fastavro exactly, Confluent's wire format byte for byte, and what cannot be one line."""

import io
import json

import fastavro
import numpy as np
import pytest

from streamscale.errors import ConfigError
from streamscale.loadgen.recordspec import records_spec

FIELDS = {
    "id": {"type": "long", "gen": "sequence"},
    "user": {"type": "string", "gen": "keys:5"},
    "cents": {"type": "int", "gen": "uniform:1,100"},
    "ok": {"type": "boolean", "gen": "choice:true|false"},
    "at": {"type": "timestamp", "gen": "now"},
}


def spec(tmp_path, **extra):
    return records_spec({"encoding": "avro", "key": "user", "fields": FIELDS, **extra}, "t", tmp_path)


def test_a_derived_schema_has_the_fields_types_and_each_body_reads_back(tmp_path):
    s = spec(tmp_path)
    assert [(f["name"], f["type"]) for f in s.avro_schema()["fields"]] == [
        ("id", "long"), ("user", "string"), ("cents", "int"), ("ok", "boolean"), ("at", "long")
    ]  # fmt: skip
    keys, values = s.maker(0, 1).make(0, 50, np.arange(1000, 1050))
    parsed = fastavro.parse_schema(s.avro_schema())
    rows = [fastavro.schemaless_reader(io.BytesIO(v), parsed) for v in values]
    assert [r["id"] for r in rows] == list(range(50)) and [r["at"] for r in rows] == list(range(1000, 1050))
    assert [r["user"].encode() for r in rows] == keys and all(1 <= r["cents"] <= 100 for r in rows)
    assert {type(r["ok"]) for r in rows} == {bool}


def test_confluent_s_wire_format_is_magic_byte_schema_id_then_the_body(tmp_path):
    plain = spec(tmp_path).maker(0, 1).make(0, 3, np.arange(3))[1]
    framed = spec(tmp_path, wire="confluent", schema_id=258).maker(0, 1).make(0, 3, np.arange(3))[1]
    assert framed == [b"\x00\x00\x00\x01\x02" + v for v in plain]


def test_an_avsc_is_read_and_a_timestamp_millis_travels_as_milliseconds(tmp_path):
    schema = {
        "type": "record", "name": "P",
        "fields": [{"name": n, "type": {"long": "long", "string": "string", "int": "int", "boolean": "boolean"}.get(
            f["type"], {"type": "long", "logicalType": "timestamp-millis"})} for n, f in FIELDS.items()],
    }  # fmt: skip
    (tmp_path / "p.avsc").write_text(json.dumps(schema))
    s = spec(tmp_path, schema="p.avsc")
    _, values = s.maker(0, 1).make(0, 2, np.array([1_764_660_000_123, 1_764_660_000_124]))
    rows = [fastavro.schemaless_reader(io.BytesIO(v), fastavro.parse_schema(schema)) for v in values]
    assert [int(r["at"].timestamp() * 1000) for r in rows] == [1_764_660_000_123, 1_764_660_000_124]


@pytest.mark.parametrize(
    "avsc,words",
    [
        ("{not json", "p.avsc is not an Avro schema"),
        ('{"type": "enum", "name": "E", "symbols": ["A"]}', "give a record schema"),
        ('{"type": "record", "name": "P", "fields": [{"name": "id", "type": "long"}]}', r"its fields \(id\) are not"),
        (
            json.dumps(
                {"type": "record", "name": "P", "fields": [{"name": n, "type": "string"} for n in FIELDS]}
            ),  # fmt: skip
            'field id is "string", not long as the records say',
        ),
    ],
)
def test_an_avsc_that_does_not_parse_or_match_is_one_line(tmp_path, avsc, words):
    (tmp_path / "p.avsc").write_text(avsc)
    with pytest.raises(ConfigError, match=words):
        spec(tmp_path, schema="p.avsc")


@pytest.mark.parametrize(
    "data,words",
    [
        ({"encoding": "avro", "schema": "missing.avsc"}, "missing.avsc does not exist"),
        ({"encoding": "json", "wire": "confluent"}, "wire apply to encoding avro"),
        ({"encoding": "csv", "schema": "x.avsc"}, "schema apply to encoding avro"),
    ],
)
def test_avro_options_out_of_place_are_one_line(tmp_path, data, words):
    with pytest.raises(ConfigError, match=words):
        records_spec({**data, "fields": FIELDS}, "t", tmp_path)


def test_each_body_is_byte_for_byte_fastavro_s_for_every_type_a_schema_may_have(tmp_path):
    fields = {
        "id": {"type": "long", "gen": "sequence"},
        "big": {"type": "long", "gen": "uniform:-9000000000000,9000000000000"},
        "small": {"type": "int", "gen": "normal:0,1000"},
        "w": {"type": "double", "gen": "normal:0,1e6"},
        "flag": {"type": "boolean", "gen": "choice:true|false"},
        "name": {"type": "string", "gen": 'choice:é|a,b|"q"|tab\there'},
        "blob": {"type": "string", "gen": "bytes:300"},
        "seq": {"type": "string", "gen": "sequence"},
        "at": {"type": "timestamp", "gen": "late:0.5,30"},
    }
    schema = {"type": "record", "name": "All", "fields": [
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},  # another order
        {"name": "name", "type": ["null", "string"]},
        *[{"name": n, "type": {"long": "long", "int": "int", "double": "double", "boolean": "boolean",
                               "string": "string"}[f["type"]]}
          for n, f in fields.items() if n not in ("at", "name")],
    ]}  # fmt: skip
    (tmp_path / "all.avsc").write_text(json.dumps(schema))
    s = records_spec({"encoding": "avro", "schema": "all.avsc", "wire": "confluent", "fields": fields}, "t", tmp_path)
    _, bodies = s.maker(0, 1).make(0, 400, np.arange(400) + 1_764_660_000_000)
    parsed = fastavro.parse_schema(schema)
    rows = [fastavro.schemaless_reader(io.BytesIO(b[5:]), parsed) for b in bodies]
    for body, row in zip(bodies, rows, strict=True):
        again = io.BytesIO()
        fastavro.schemaless_writer(again, parsed, row)
        assert body == b"\x00\x00\x00\x00\x01" + again.getvalue()
    # the same records as in JSON, field by field
    js = records_spec({"encoding": "json", "fields": fields}, "t").maker(0, 1)
    for row, text in zip(rows, js.make(0, 400, np.arange(400) + 1_764_660_000_000)[1], strict=True):
        want = json.loads(text)
        assert {**row, "at": int(row["at"].timestamp() * 1000)} == want


@pytest.mark.parametrize("extra", [{}, {"encoding": "avro", "wire": "confluent", "schema_id": 9}])
def test_a_section_as_results_save_it_reads_back_the_same(tmp_path, extra):
    # a results folder's spec.yaml writes every field, defaults included, and is read back on resume
    s = records_spec({"key": "user", "fields": FIELDS, **extra}, "t", tmp_path)
    saved = s.model_dump(mode="json", by_alias=True)
    assert records_spec(saved, "t", tmp_path).model_dump(mode="json", by_alias=True) == saved
