"""Record values -> typed columns: a small DDL subset, and the one decoding contract of JSON and CSV
values that both Kafka connectors enforce (the Python source in its reader, Spark's connector in
``mapInArrow`` right after its scan, :mod:`streamscale.sparkio.io`).

A JSON value is valid when all of this holds (anything else gets a reason in ``value_error``):

* its bytes are UTF-8, and they hold one JSON object (RFC 8259: no ``NaN``, ``Infinity``, single
  quotes, comments, trailing commas or leading zeros), with nothing but JSON whitespace around it;
* it nests at most :data:`MAX_DEPTH` levels deep (the object itself is level 1);
* every schema field is there and not null, and of its type: ``STRING`` a JSON string of valid
  Unicode (no lone surrogate), ``BIGINT``/``INT`` a JSON integer (no fraction or exponent) in
  range, ``DOUBLE``/``FLOAT`` a JSON number that is finite as a double (and within a float's range
  for ``FLOAT``), ``BOOLEAN`` ``true`` or ``false``. A field given twice: the last one counts.
  Other fields may hold any JSON (numbers of any size included).

A CSV value is one line of exactly the schema's fields; numbers are plain decimals (``-12``,
``1.5e3``; no ``+``, ``0x``, ``_``, ``nan`` or ``inf``), booleans ``true``/``false``.

Whole batches are decoded by Arrow's C++ JSON/CSV readers. Values that the block reader might
judge differently from this contract (a newline, ``NaN`` or deep nesting in them) are decoded one
by one; a block the reader refuses is split in halves until the values it refuses are found, and
those are decided one by one: every value gets the same answer whichever way it went.
"""

from __future__ import annotations

import json
import re
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamscale.errors import ConfigError
from streamscale.sparkio.valuecheck import FLOAT_MAX, HugeInt, check, float_fields_as_double
from streamscale.sparkio.valuecsv import CSV_ERRORS, Refused, csv_block, csv_one, csv_plain

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

MAX_DEPTH = 1000  # deeper JSON is malformed: Python's parser recurses once per level
_SMALL_BLOCK = 16  # a refused block this small is decided value by value, not split further


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
    if len(set(f.name for f in fields)) != len(fields):
        raise ConfigError(f"valueSchema names a field twice: '{ddl}'")
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


def decode(values, fmt: str, schema: pa.Schema) -> tuple[list[pa.Array], list[str | None]]:
    """Decode record values (a list of bytes or None, or an Arrow binary array); returns the
    columns and, per record, None or the reason it is malformed. Malformed rows get nulls in every
    decoded column."""
    if fmt == "json":
        block, one, plain = _block_json, _one_json, _json_plain
    elif fmt == "csv":
        block, one, plain = csv_block, csv_one, csv_plain
    else:
        raise ConfigError(f"valueFormat must be one of {FORMATS}, not '{fmt}'")
    arr = values if isinstance(values, pa.Array) else pa.array(values, pa.binary())
    if not pa.types.is_binary(arr.type):
        arr = arr.cast(pa.binary())
    n = len(arr)
    if n == 0:
        return [pa.array([], f.type) for f in schema], []
    eligible = plain(arr)
    if eligible.all():
        try:
            return block(arr, schema), [None] * n
        except _REFUSED:
            pass
    pieces: list[tuple[np.ndarray, list[pa.Array]]] = []
    singles: list[int] = list(np.flatnonzero(~eligible))
    _bisect(arr, np.flatnonzero(eligible), schema, block, pieces, singles)
    return _assemble(arr, schema, one, pieces, singles, n)


class _Malformed(Exception):
    pass


_REFUSED = (pa.ArrowInvalid, _Malformed, Refused)


def _bisect(arr, idx: np.ndarray, schema, block, pieces: list, singles: list) -> None:
    """Decode ``arr[idx]`` as blocks, halving a refused block until its refused values are found."""
    stack = [idx]
    while stack:
        part = stack.pop()
        if len(part) == 0:
            continue
        if len(part) <= _SMALL_BLOCK and len(part) < len(idx):
            singles.extend(part)
            continue
        try:
            pieces.append((part, block(arr.take(pa.array(part)), schema)))
        except _REFUSED:
            if len(part) == 1:
                singles.extend(part)
            else:
                half = len(part) // 2
                stack += [part[half:], part[:half]]


def _assemble(arr, schema, one, pieces, singles, n):
    """The block-decoded pieces and the values decided one by one, back in the records' order."""
    errors: list[str | None] = [None] * n
    if singles:
        singles = sorted(int(i) for i in singles)
        raw = arr.take(pa.array(singles)).to_pylist()
        rows = []
        for i, v in zip(singles, raw):
            if v is None:
                errors[i] = "null value"
                rows.append(None)
                continue
            try:
                rows.append(one(v, schema))
            except (ValueError, UnicodeDecodeError, RecursionError, *CSV_ERRORS) as exc:
                errors[i] = f"{type(exc).__name__}: {exc}"[:300]
                rows.append(None)
        one_cols = [pa.array([r[k] if r is not None else None for r in rows], f.type) for k, f in enumerate(schema)]
        pieces = [*pieces, (np.array(singles, dtype=np.int64), one_cols)]
    order = np.concatenate([p for p, _ in pieces])
    back = pa.array(np.argsort(order, kind="stable"))
    cols = [pa.concat_arrays([c[k] for _, c in pieces]).take(back) for k in range(len(schema))]
    return cols, errors


# -- JSON ------------------------------------------------------------------------------------
# Arrow's reader takes NaN and Infinity anywhere, and a value with a raw newline would be two
# lines of the block: such values, and deeply nested ones, go the exact way.
_NOT_PLAIN = r"[\n\r]|NaN|Infinity"


def _json_plain(arr: pa.Array) -> np.ndarray:
    """Values the block reader decides as the contract does (the rest are decided one by one)."""
    ok = pc.starts_with(arr, "{")
    if arr.null_count or not pc.all(ok).as_py():  # leading blanks, something else, or null
        ok = pc.or_kleene(ok, pc.match_substring_regex(arr, r"^[ \t]*\{"))
    if arr.null_count or _maybe_not_plain(arr):
        ok = pc.and_kleene(ok, pc.invert(pc.match_substring_regex(arr, _NOT_PLAIN)))
    if (pc.max(pc.binary_length(arr)).as_py() or 0) > MAX_DEPTH:
        # only a value longer than MAX_DEPTH bytes can nest deeper than MAX_DEPTH
        ok = pc.and_kleene(ok, pc.less_equal(pc.count_substring_regex(arr, r"[\[{]"), MAX_DEPTH))
    return ok.fill_null(False).to_numpy(zero_copy_only=False)


def _maybe_not_plain(arr: pa.Array) -> bool:
    """Whether any value may hold a line break, NaN or Infinity: a few vectorized byte comparisons
    over the batch's data (a per-value regex costs five times more). A match that spans two values
    only sends the batch the per-value way."""
    data = arr.buffers()[2]
    if data is None:
        return False
    a = np.frombuffer(data, np.uint8)
    if (a == 10).any() or (a == 13).any():
        return True
    for word in (b"NaN", b"Infinity"):
        at = np.flatnonzero(a[: len(a) - len(word) + 1] == word[0])
        hit = np.ones(len(at), dtype=bool)
        for k in range(1, len(word)):
            hit &= a[at + k] == word[k]
        if hit.any():
            return True
    return False


def _joined(arr: pa.Array) -> pa.Buffer:
    """The values one after the other, one per line (no null among them)."""
    return pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(arr)], pa.int32()), arr), b"\n")[0].as_buffer()


def _block_json(arr: pa.Array, schema: pa.Schema) -> list[pa.Array]:
    import pyarrow.json as pajson

    arr.cast(pa.string())  # the contract wants UTF-8 throughout: ignored fields are not checked below
    buf = _joined(arr)
    read = float_fields_as_double(schema)
    table = pajson.read_json(
        pa.BufferReader(buf),
        read_options=pajson.ReadOptions(block_size=max(buf.size + 1, 1 << 20), use_threads=False),
        parse_options=pajson.ParseOptions(
            explicit_schema=read, unexpected_field_behavior="ignore", newlines_in_values=False
        ),
    )
    if table.num_rows != len(arr):
        raise _Malformed  # a value held two documents, or one value spanned lines
    return complete(table, schema)


def complete(table: pa.Table, schema: pa.Schema) -> list[pa.Array]:
    """A block's columns in the schema's types, or _Malformed when a value broke the contract."""
    cols = []
    for f in schema:
        c = table.column(f.name).combine_chunks()
        if c.null_count:
            raise _Malformed  # a missing or null field: the exact way names it
        if pa.types.is_floating(c.type):
            if not pc.all(pc.is_finite(c)).as_py():
                raise _Malformed
            if pa.types.is_float32(f.type):
                if pc.max(pc.abs(c)).as_py() > FLOAT_MAX:
                    raise _Malformed
                c = c.cast(pa.float32())
        elif pa.types.is_string(c.type):
            try:
                c.validate(full=True)  # a lone surrogate in a field
            except pa.ArrowInvalid:
                raise _Malformed from None
        cols.append(c)
    return cols


def _int(text: str):
    try:
        return int(text)
    except ValueError:  # longer than Python converts (sys.get_int_max_str_digits): valid JSON all the same
        return HugeInt(text)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


_STRINGS_AND_BRACKETS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def _depth(text: str) -> int:
    depth = deepest = 0
    for m in _STRINGS_AND_BRACKETS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def _one_json(value: bytes, schema: pa.Schema) -> list:
    text = value.decode("utf-8")
    limit = sys.getrecursionlimit()
    deep = text.count("[") + text.count("{") > 200
    if deep:
        if _depth(text) > MAX_DEPTH:
            raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
        # Python's parser recurses once per level: room for MAX_DEPTH levels above this frame
        sys.setrecursionlimit(max(limit, 2 * MAX_DEPTH + 500))
    try:
        doc = json.loads(text, parse_constant=_reject_constant, parse_int=_int)
    finally:
        if deep:
            sys.setrecursionlimit(limit)
    if not isinstance(doc, dict):
        raise ValueError("not a JSON object")
    out = []
    for f in schema:
        try:
            out.append(check(doc.get(f.name), f.type))
        except ValueError as exc:
            raise ValueError(f"field '{f.name}': {exc}") from None
    return out


def avro_timestamp_millis(schema: dict) -> list[str]:
    """The fields an Avro record schema gives as ``timestamp-millis`` (Spark reads them as timestamps)."""
    out = []
    for f in schema.get("fields", []):
        types = f["type"] if isinstance(f["type"], list) else [f["type"]]
        if any(isinstance(t, dict) and t.get("logicalType") == "timestamp-millis" for t in types):
            out.append(f["name"])
    return out
