"""CSV record values: one line of exactly the schema's fields (the CSV part of the decoding
contract in :mod:`streamscale.sparkio.formats`), a block at a time or one value at a time."""

from __future__ import annotations

import csv
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamscale.sparkio.valuecheck import FLOAT_MAX, check

CSV_ERRORS = (csv.Error,)

# CSV numbers as both ways accept them (Arrow's own parser would also take "0x10", "+1", "1_0"
# is Python's): the block reads text, checks it with these, then casts.
_INT = r"-?[0-9]+"
_FLOAT = r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?"


class Refused(Exception):
    """The block holds a value the contract refuses: it is decided value by value."""


def csv_plain(arr: pa.Array) -> np.ndarray:
    """Values that are one line (a line break would split the block's rows)."""
    return pc.invert(pc.match_substring_regex(arr, r"[\n\r]")).fill_null(False).to_numpy(zero_copy_only=False)


def csv_block(arr: pa.Array, schema: pa.Schema) -> list[pa.Array]:
    import pyarrow.csv as pacsv

    joined = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(arr)], pa.int32()), arr), b"\n")
    buf = joined[0].as_buffer()
    table = pacsv.read_csv(
        pa.BufferReader(buf),
        read_options=pacsv.ReadOptions(
            column_names=schema.names, use_threads=False, block_size=max(buf.size + 1, 1 << 20)
        ),
        convert_options=pacsv.ConvertOptions(
            column_types={f.name: pa.string() for f in schema},
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        ),
    )
    if table.num_rows != len(arr):
        raise Refused  # an empty value (no row) or a quoted line break
    cols = []
    for f in schema:
        text = table.column(f.name).combine_chunks()
        try:
            text.validate(full=True)  # invalid UTF-8
        except pa.ArrowInvalid:
            raise Refused from None
        if pa.types.is_string(f.type):
            cols.append(text)
            continue
        if pa.types.is_boolean(f.type):
            low = pc.utf8_lower(text)
            if not pc.all(pc.is_in(low, pa.array(["true", "false"]))).as_py():
                raise Refused
            cols.append(pc.equal(low, "true"))
            continue
        pattern = _INT if pa.types.is_integer(f.type) else _FLOAT
        if not pc.all(pc.match_substring_regex(text, f"^{pattern}$")).as_py():
            raise Refused
        # out of range: ArrowInvalid, the value is decided by itself. A FLOAT is read as a double
        # first, as one value by itself is.
        col = pc.cast(text, pa.float64() if pa.types.is_floating(f.type) else f.type)
        if pa.types.is_floating(f.type):
            if not pc.all(pc.is_finite(col)).as_py():
                raise Refused
            if pa.types.is_float32(f.type):
                if pc.max(pc.abs(col)).as_py() > FLOAT_MAX:
                    raise Refused
                col = col.cast(pa.float32())
        cols.append(col)
    return cols


def csv_one(value: bytes, schema: pa.Schema) -> list:
    # the csv module reads quotes as Arrow's block reader does, so both ways agree
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
                if not re.fullmatch(_INT, text):
                    raise ValueError
                out.append(check(int(text), f.type))
            elif pa.types.is_floating(f.type):
                if not re.fullmatch(_FLOAT, text):
                    raise ValueError
                out.append(check(float(text), f.type))
            else:
                out.append({"true": True, "false": False}[text.lower()])
        except (ValueError, KeyError):
            raise ValueError(f"field '{f.name}': cannot read '{text[:40]}' as {f.type}") from None
    return out
