"""Value decoding done inside the Kafka source: a small DDL subset, JSON and CSV record values.

Decoding in the source lets malformed records be counted and routed to a
dead-letter topic where they are read, before any Spark operator sees them.
Whole blocks are decoded by Arrow's C++ JSON/CSV readers; only a block that
fails falls back to record-by-record decoding to find the bad records.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson

from streamscale.errors import ConfigError

_TYPES = {
    "STRING": pa.string(),
    "VARCHAR": pa.string(),
    "BIGINT": pa.int64(),
    "LONG": pa.int64(),
    "INT": pa.int32(),
    "INTEGER": pa.int32(),
    "DOUBLE": pa.float64(),
    "FLOAT": pa.float32(),
    "BOOLEAN": pa.bool_(),
}
_FIELD = re.compile(r"^\s*`?([A-Za-z_][A-Za-z0-9_]*)`?\s+([A-Za-z]+)\s*$")

FORMATS = ("raw", "json", "csv")


def parse_ddl(ddl: str) -> pa.Schema:
    """'identifier STRING, timestamp BIGINT, valueInW DOUBLE' -> Arrow schema (all required)."""
    fields = []
    for part in ddl.split(","):
        m = _FIELD.match(part)
        if not m or m.group(2).upper() not in _TYPES:
            raise ConfigError(
                f"valueSchema: cannot read field '{part.strip()}'; use 'name TYPE' with TYPE one of {sorted(_TYPES)}"
            )
        fields.append(pa.field(m.group(1), _TYPES[m.group(2).upper()], nullable=True))
    if not fields:
        raise ConfigError("valueSchema is empty")
    return pa.schema(fields)


def spark_ddl(schema: pa.Schema) -> str:
    names = {
        pa.string(): "STRING",
        pa.int64(): "BIGINT",
        pa.int32(): "INT",
        pa.float64(): "DOUBLE",
        pa.float32(): "FLOAT",
        pa.bool_(): "BOOLEAN",
    }
    return ", ".join(f"`{f.name}` {names[f.type]}" for f in schema)


def decode(values: list[bytes | None], fmt: str, schema: pa.Schema) -> tuple[list[pa.Array], list[str | None]]:
    """Decode record values; returns the columns and, per record, None or the reason it is malformed.

    Malformed rows get nulls in every decoded column.
    """
    if fmt == "json":
        try:
            return _decode_block_json(values, schema)
        except (pa.ArrowInvalid, _Malformed):
            pass
        return _decode_each(values, schema, _one_json)
    if fmt == "csv":
        try:
            return _decode_block_csv(values, schema)
        except (pa.ArrowInvalid, _Malformed):
            pass
        return _decode_each(values, schema, _one_csv)
    raise ConfigError(f"valueFormat must be one of {FORMATS}, not '{fmt}'")


class _Malformed(Exception):
    pass


def _complete(table: pa.Table, n: int, schema: pa.Schema) -> tuple[list[pa.Array], list[str | None]]:
    if table.num_rows != n:
        raise _Malformed
    cols = [table.column(f.name).combine_chunks() for f in schema]
    if any(c.null_count for c in cols):
        raise _Malformed  # a missing field: find out which records in the slow path
    for c in cols:
        # Arrow's readers take NaN, Infinity and 1e400 as doubles, and invalid UTF-8 inside JSON
        # strings: the slow path names and refuses them
        if pa.types.is_floating(c.type) and not pc.all(pc.is_finite(c)).as_py():
            raise _Malformed
        if pa.types.is_string(c.type):
            try:
                c.validate(full=True)
            except pa.ArrowInvalid:
                raise _Malformed from None
    return cols, [None] * n


def _decode_block_json(values, schema):
    if any(v is None or not v.lstrip().startswith(b"{") for v in values):
        raise _Malformed
    # Raw newlines cannot occur inside JSON strings, so turning them into blanks keeps every
    # valid document valid and makes the block one-document-per-line.
    block = b"\n".join(v.replace(b"\n", b" ").replace(b"\r", b" ") for v in values)
    table = pajson.read_json(
        io.BytesIO(block),
        read_options=pajson.ReadOptions(block_size=max(len(block) + 1, 1 << 20), use_threads=False),
        parse_options=pajson.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore", newlines_in_values=False
        ),
    )
    return _complete(table, len(values), schema)


# CSV numbers as both paths accept them (Arrow's own parser would also take "0x10", "+1", "1_0"
# is Python's): the block path reads text, checks it with these, then casts.
_CSV_INT = r"-?[0-9]+"
_CSV_FLOAT = r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?"


def _decode_block_csv(values, schema):
    if any(v is None or b"\n" in v or b"\r" in v for v in values):
        raise _Malformed
    block = b"\n".join(values)
    table = pacsv.read_csv(
        io.BytesIO(block),
        read_options=pacsv.ReadOptions(
            column_names=schema.names, use_threads=False, block_size=max(len(block) + 1, 1 << 20)
        ),
        convert_options=pacsv.ConvertOptions(
            column_types={f.name: pa.string() for f in schema},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    if table.num_rows != len(values):
        raise _Malformed
    cols = []
    for f in schema:
        text = table.column(f.name).combine_chunks()
        try:
            text.validate(full=True)  # invalid UTF-8
        except pa.ArrowInvalid:
            raise _Malformed from None
        if pa.types.is_string(f.type):
            cols.append(text)
            continue
        if pa.types.is_boolean(f.type):
            low = pc.utf8_lower(text)
            if not pc.all(pc.is_in(low, pa.array(["true", "false"]))).as_py():
                raise _Malformed
            cols.append(pc.equal(low, "true"))
            continue
        pattern = _CSV_INT if pa.types.is_integer(f.type) else _CSV_FLOAT
        if not pc.all(pc.match_substring_regex(text, f"^{pattern}$")).as_py():
            raise _Malformed
        col = pc.cast(text, f.type)  # out of range: ArrowInvalid, the slow path names the record
        if pa.types.is_floating(f.type) and not pc.all(pc.is_finite(col)).as_py():
            raise _Malformed
        cols.append(col)
    return cols, [None] * len(values)


_INT_RANGE = {pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1)}


def _check(value, typ: pa.DataType):
    if value is None:
        raise ValueError("missing")
    if pa.types.is_string(typ):
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {type(value).__name__}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a \ud800 escape: not text Arrow can hold
            raise ValueError("string is not valid Unicode (lone surrogate)") from None
    elif pa.types.is_integer(typ):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {type(value).__name__}")
        lo, hi = _INT_RANGE[typ]
        if not lo <= value <= hi:
            raise ValueError(f"integer {value} out of range for {typ}")
    elif pa.types.is_floating(typ):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number, got {type(value).__name__}")
        try:
            value = float(value)
        except OverflowError:
            raise ValueError("number out of range for a double") from None
        if not math.isfinite(value):
            raise ValueError(f"number is not finite ({value})")
        if pa.types.is_float32(typ) and abs(value) > 3.4028234663852886e38:
            raise ValueError("number out of range for a float")
    elif pa.types.is_boolean(typ) and not isinstance(value, bool):
        raise ValueError(f"expected a boolean, got {type(value).__name__}")
    return value


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {text[:40]} is out of range for a double")
    return v


def _one_json(value: bytes, schema: pa.Schema) -> list:
    # NaN and Infinity are not JSON; 1e400 would become inf: both are refused here
    try:
        doc = json.loads(value.decode("utf-8"), parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        # deeper than Python's parser goes: Arrow's (the block path) decides, so a record decodes
        # the same whichever path its batch takes (deep nesting in an ignored field is fine there)
        try:
            cols, _ = _decode_block_json([value], schema)
        except (pa.ArrowInvalid, _Malformed):
            raise ValueError("nested too deeply or not of the schema's types") from None
        return [c[0].as_py() for c in cols]
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    out = []
    for f in schema:
        try:
            out.append(_check(doc.get(f.name), f.type))
        except ValueError as exc:
            raise ValueError(f"field '{f.name}': {exc}") from None
    return out


def _one_csv(value: bytes, schema: pa.Schema) -> list:
    # the csv module reads quotes as Arrow's block reader does, so both paths agree
    rows = list(csv.reader([value.decode("utf-8").rstrip("\r\n")], strict=True))
    if len(rows) != 1:
        raise ValueError("not one CSV line")
    parts = rows[0]
    if len(parts) != len(schema):
        raise ValueError(f"expected {len(schema)} fields, got {len(parts)}")
    out = []
    for f, text in zip(schema, parts):
        try:
            if pa.types.is_string(f.type):
                out.append(text)
            elif pa.types.is_integer(f.type):
                if not re.fullmatch(_CSV_INT, text):
                    raise ValueError
                out.append(_check(int(text), f.type))
            elif pa.types.is_floating(f.type):
                if not re.fullmatch(_CSV_FLOAT, text):
                    raise ValueError
                out.append(_check(float(text), f.type))
            else:
                out.append({"true": True, "false": False}[text.lower()])
        except (ValueError, KeyError):
            raise ValueError(f"field '{f.name}': cannot read '{text[:40]}' as {f.type}") from None
    return out


def _decode_each(values, schema, one):
    rows: list[list | None] = []
    errors: list[str | None] = []
    for v in values:
        if v is None:
            rows.append(None)
            errors.append("null value")
            continue
        try:
            rows.append(one(v, schema))
            errors.append(None)
        except (ValueError, UnicodeDecodeError, RecursionError, csv.Error) as exc:
            # RecursionError: JSON nested deeper than Python's parser goes (a poison value, not a bug)
            rows.append(None)
            errors.append(f"{type(exc).__name__}: {exc}"[:300])
    cols = [pa.array([r[i] if r is not None else None for r in rows], type=f.type) for i, f in enumerate(schema)]
    return cols, errors
