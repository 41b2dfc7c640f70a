"""Records in Avro: the schema derived from the records' fields or read from an ``.avsc`` file (and
checked against the fields), each record's body as Avro's binary encoding, optionally in
Confluent's wire format (a magic byte 0 and the schema id, 4 bytes big-endian, before the body).

A chunk's bodies are encoded column by column (:class:`ColumnEncoder`): the schemas a records
section can have hold only Avro's primitive types (and unions of one with null), whose binary
encoding is a zig-zag varint (int, long), 8 little-endian bytes (double), one byte (boolean) or a
length and UTF-8 bytes (string), laid out in the schema's field order. fastavro's writer, one call
per record, cost the generator ~8× the CPU of the same fields in JSON; the tests read every body
back with fastavro's reader.

Timestamps travel as epoch milliseconds, ``long`` in a derived schema, as on the JSON wire; an
``.avsc`` may give them as ``long`` with ``logicalType: timestamp-millis``.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

AVRO_TYPES = {
    "string": "string",
    "long": "long",
    "int": "int",
    "double": "double",
    "boolean": "boolean",
    "timestamp": "long",
}
MAGIC = b"\x00"


class AvroSchemaError(ValueError):
    pass


def derived_schema(fields: dict[str, str], name: str = "Record") -> dict:
    """The Avro record schema of ``fields`` (name -> streamscale type)."""
    return {
        "type": "record",
        "name": name,
        "namespace": "streamscale",
        "fields": [{"name": n, "type": AVRO_TYPES[t]} for n, t in fields.items()],
    }


def read_schema(path: Path, fields: dict[str, str]) -> dict:
    """An ``.avsc`` file's schema, parsed and checked against ``fields``; AvroSchemaError saying what
    does not parse or does not match."""
    import fastavro

    try:
        schema = json.loads(path.read_text())
        fastavro.parse_schema(schema)
    except FileNotFoundError:
        raise AvroSchemaError(f"{path} does not exist") from None
    except (ValueError, TypeError, KeyError, fastavro.schema.SchemaParseException) as exc:
        raise AvroSchemaError(f"{path} is not an Avro schema: {str(exc).splitlines()[0][:200]}") from None
    if not isinstance(schema, dict) or schema.get("type") != "record":
        raise AvroSchemaError(f"{path}: give a record schema (type: record), as the records are")
    given = {f["name"]: f["type"] for f in schema.get("fields", [])}
    if set(given) != set(fields):
        raise AvroSchemaError(f"{path}: its fields ({', '.join(given)}) are not the records' ({', '.join(fields)})")
    for name, t in fields.items():
        if not _fits(given[name], t):
            raise AvroSchemaError(f"{path}: field {name} is {json.dumps(given[name])}, not {t} as the records say")
    return schema


def _fits(avro_type, field_type: str) -> bool:
    if isinstance(avro_type, list):  # a union: null and the type
        rest = [x for x in avro_type if x != "null"]
        return len(rest) == 1 and _fits(rest[0], field_type)
    if isinstance(avro_type, dict):
        if field_type == "timestamp" and avro_type.get("logicalType") == "timestamp-millis":
            return avro_type.get("type") == "long"
        return "logicalType" not in avro_type and _fits(avro_type.get("type"), field_type)
    return avro_type == AVRO_TYPES[field_type]


def wire_prefix(wire: str, schema_id: int) -> bytes:
    """What goes before each body: nothing, or Confluent's magic byte and schema id."""
    return MAGIC + struct.pack(">I", schema_id) if wire == "confluent" else b""


@dataclass(frozen=True)
class Column:
    """A chunk's values of one field: drawn numbers, or JSON tokens (with their plain text for
    strings and the suffix a number's token takes, ``e-3``)."""

    toks: list[bytes] | None
    text: list[bytes] | None
    suffix: bytes = b""
    numbers: np.ndarray | None = None

    def key_text(self) -> list[bytes]:
        """The values as a Kafka key: a string's text, a number as JSON writes it."""
        if self.numbers is None:
            return self.text if self.text is not None else [t + self.suffix for t in self.toks]
        if self.numbers.dtype.kind == "f":
            return [repr(float(v)).encode() for v in self.numbers]
        return repr(self.numbers.tolist())[1:-1].encode().split(b", ") if len(self.numbers) else []

    def __len__(self) -> int:
        return len(self.numbers) if self.numbers is not None else len(self.toks)


class ColumnEncoder:
    """A chunk's records, given column by column, to Avro bodies of one schema (with the wire's
    prefix); see the module's notes."""

    def __init__(self, schema: dict, wire: str = "plain", schema_id: int = 1):
        self.prefix = wire_prefix(wire, schema_id)
        self.plan = []  # (field, Avro primitive type, union branch index or None), in the schema's order
        for f in schema["fields"]:
            t, branch = f["type"], None
            if isinstance(t, list):
                branch = next(i for i, x in enumerate(t) if x != "null")
                t = t[branch]
            if isinstance(t, dict):
                t = t["type"]
            self.plan.append((f["name"], t, branch))

    def encode(self, columns: dict[str, Column]) -> list[bytes]:
        """The bodies of a chunk given per field (:class:`Column`)."""
        n = len(next(iter(columns.values()))) if columns else 0
        pieces = [_constant(self.prefix, n)] if self.prefix else []
        for name, t, branch in self.plan:
            if branch is not None:
                pieces.append(_constant(bytes([2 * branch]), n))  # the union's branch, a zig-zag varint
            pieces += _column(t, columns[name])
        return _assemble(pieces, n)


def _constant(b: bytes, n: int):
    return np.tile(np.frombuffer(b, np.uint8), (n, 1)), np.full(n, len(b), np.int64)


def _column(t: str, c: Column) -> list:
    n, x, toks = len(c), c.numbers, c.toks
    if t in ("long", "int"):
        return [_varints(np.asarray(x if x is not None else np.array(toks).astype(np.int64), np.int64))]
    if t == "double":
        values = x if x is not None else np.array([v + c.suffix for v in toks]).astype(np.float64)
        return [(np.asarray(values, "<f8").view(np.uint8).reshape(-1, 8), np.full(n, 8, np.int64))]
    if t == "boolean":
        return [(np.array([[v == b"true"] for v in toks], np.uint8), np.ones(n, np.int64))]
    plain = c.text if c.text is not None else [json.loads(v).encode() for v in toks]
    lens = np.fromiter(map(len, plain), np.int64, len(plain))
    return [_varints(lens), (b"".join(plain), lens)]


def _varints(a: np.ndarray):
    """Each value's zig-zag varint: (bytes, a row each, up to 10), (its length)."""
    v = ((a << 1) ^ (a >> 63)).view(np.uint64)
    out = np.zeros((len(v), 10), np.uint8)
    lens = np.ones(len(v), np.int64)
    for i in range(10):
        out[:, i] = (v & np.uint64(0x7F)).astype(np.uint8)
        v = v >> np.uint64(7)
        more = v != 0
        if not more.any():
            return out[:, : i + 1], lens
        out[more, i] |= 0x80
        lens += more
    return out, lens


def _assemble(pieces: list, n: int) -> list[bytes]:
    """The records' bodies: each piece's bytes per record, one after the other."""
    total = np.zeros(n, np.int64)
    for _, lens in pieces:
        total += lens
    ends = np.cumsum(total)
    starts = ends - total
    flat = np.empty(int(ends[-1]) if n else 0, np.uint8)
    cursor = starts.copy()
    for data, lens in pieces:
        if isinstance(data, bytes):  # variable: the strings' bytes, joined
            raw = np.frombuffer(data, np.uint8)
            first = np.cumsum(lens) - lens
            flat[np.repeat(cursor - first, lens) + np.arange(len(raw))] = raw
        else:
            cols = np.arange(data.shape[1])
            valid = cols[None, :] < lens[:, None]
            flat[(cursor[:, None] + cols[None, :])[valid]] = data[valid]
        cursor += lens
    blob = flat.tobytes()
    return [blob[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
