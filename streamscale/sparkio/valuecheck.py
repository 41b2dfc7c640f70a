"""One decoded field against its schema type: the per-field part of the decoding contract
(:mod:`streamscale.sparkio.formats`), shared by the JSON and CSV decoders."""

from __future__ import annotations

import math

import pyarrow as pa

FLOAT_MAX = 3.4028234663852886e38  # the largest finite float32
_INT_RANGE = {pa.int32(): (-(2**31), 2**31 - 1), pa.int64(): (-(2**63), 2**63 - 1)}


class HugeInt:
    """A JSON integer longer than Python's int() converts (sys.get_int_max_str_digits digits)."""

    def __init__(self, text: str):
        self.text = text


def float_fields_as_double(schema: pa.Schema) -> pa.Schema:
    """The schema a block reader reads with: FLOAT fields as doubles, then range-checked and cast,
    as a value decoded by itself is (Python reads every number as a double first)."""
    return pa.schema([pa.field(f.name, pa.float64()) if pa.types.is_float32(f.type) else f for f in schema])


def check(value, typ: pa.DataType):  # noqa: C901
    """``value`` as a field of type ``typ``, or ValueError saying why it is not one."""
    if value is None:
        raise ValueError("missing")
    if pa.types.is_string(typ):
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {_kind(value)}")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate from a \ud800 escape: not text Arrow can hold
            raise ValueError("string is not valid Unicode (lone surrogate)") from None
    elif pa.types.is_integer(typ):
        if isinstance(value, HugeInt):
            raise ValueError(f"integer of {len(value.text)} digits out of range for {typ}")
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {_kind(value)}")
        lo, hi = _INT_RANGE[typ]
        if not lo <= value <= hi:
            raise ValueError(f"integer {value} out of range for {typ}")
    elif pa.types.is_floating(typ):
        if isinstance(value, HugeInt):
            raise ValueError(f"number of {len(value.text)} digits out of range for a double")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number, got {_kind(value)}")
        try:
            value = float(value)
        except OverflowError:
            raise ValueError("number out of range for a double") from None
        if not math.isfinite(value):
            raise ValueError(f"number is not finite ({value})")
        if pa.types.is_float32(typ) and abs(value) > FLOAT_MAX:
            raise ValueError("number out of range for a float")
    elif pa.types.is_boolean(typ) and not isinstance(value, bool):
        raise ValueError(f"expected a boolean, got {_kind(value)}")
    return value


def _kind(value) -> str:
    return "integer" if isinstance(value, HugeInt) else type(value).__name__
