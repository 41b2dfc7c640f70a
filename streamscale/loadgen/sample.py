"""A sample of the user's own records, replayed at the load's rate (``records: {replay: FILE}``).

The sample is read once (JSON lines, CSV or Parquet, by its suffix), its columns typed (whole
numbers long, other numbers double, true/false boolean, the rest string; Parquet timestamps
timestamp) and every row turned into a template of its encoded value. Records then cycle through
the rows in the file's order. The ``event_time`` field is re-stamped: a record's event time is its
send time less how late the row was in the sample (how far its time lies behind the newest time
before it), so in-order rows carry their send time and out-of-order rows stay as late as they were.
``key_copies: K`` makes K disjoint copies of the key space (string keys get ``#1`` ... ``#K-1``
appended, whole-number keys are shifted by the key range), record i carrying copy i mod K, so a
sample of a few keys can carry a load spread over many.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from streamscale.errors import ConfigError

SUFFIXES = {
    ".jsonl": "json",
    ".ndjson": "json",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
MAX_ROWS = 5_000_000


def _fail(path: Path, msg: str) -> ConfigError:
    return ConfigError(f"replay file {path}: {msg}")


def _json_rows(path: Path) -> tuple[list[str], list[list], list[int]]:
    names: list[str] = []
    rows: list[dict] = []
    lines: list[int] = []
    with open(path, encoding="utf-8", errors="strict") as f:
        try:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    doc = json.loads(line)
                except ValueError as exc:
                    raise _fail(path, f"line {n} is not valid JSON ({exc})") from None
                if not isinstance(doc, dict):
                    raise _fail(path, f"line {n} is not a JSON object")
                for k in doc:
                    if k not in names:
                        if rows:
                            raise _fail(path, f"line {n} has a field '{k}' that the lines before it lack")
                        names.append(k)
                rows.append(doc)
                lines.append(n)
                if len(rows) > MAX_ROWS:
                    raise _fail(path, f"more than {MAX_ROWS:,} records: replay a smaller sample")
        except UnicodeDecodeError as exc:
            raise _fail(path, f"not UTF-8 text ({exc.reason})") from None
    cols = []
    for name in names:
        col = []
        for doc, n in zip(rows, lines):
            if name not in doc:
                raise _fail(path, f"line {n} has no field '{name}'")
            col.append(doc[name])
        cols.append(col)
    return names, cols, lines


def _frame_rows(path: Path, kind: str) -> tuple[list[str], list[list], list[int], list[str]]:
    import pandas as pd

    if kind == "csv":
        try:
            df = pd.read_csv(path, keep_default_na=False, na_values=[""])
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise _fail(path, f"cannot read it as CSV: {first}") from None
        first_line = 2  # the header is line 1
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            table = pq.read_table(path)
        except (pa.ArrowException, OSError) as exc:
            raise _fail(path, f"cannot read it as Parquet: {str(exc).splitlines()[0]}") from None
        df = table.to_pandas()
        first_line = 1
    if len(df) > MAX_ROWS:
        raise _fail(path, f"more than {MAX_ROWS:,} records: replay a smaller sample")
    kinds = []
    for name in df.columns:
        s = df[name]
        bad = s.isna().to_numpy().nonzero()[0]
        if len(bad):
            where = "line" if kind == "csv" else "row"
            raise _fail(path, f"{where} {int(bad[0]) + first_line} has no value for '{name}'")
        if pd.api.types.is_datetime64_any_dtype(s):
            kinds.append("timestamp")
            df[name] = s.dt.tz_localize(None) if getattr(s.dt, "tz", None) is not None else s
        else:
            kinds.append("")
    cols = []
    for name, k in zip(df.columns, kinds):
        if k == "timestamp":
            cols.append((df[name].astype("datetime64[ms]").astype("int64")).tolist())
        else:
            cols.append(df[name].tolist())
    lines = list(range(first_line, first_line + len(df)))
    return [str(c) for c in df.columns], cols, lines, kinds


def _type_of(col: list) -> str:
    if all(isinstance(v, bool) for v in col):
        return "boolean"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in col):
        return "long"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in col):
        return "double"
    return "string"


def _ms(path: Path, name: str, col: list, lines: list[int]) -> list[int]:
    """An event-time column as epoch ms: numbers are taken as ms, text as a date and time."""
    import pandas as pd

    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in col):
        return [int(v) for v in col]
    out = []
    for v, n in zip(col, lines):
        try:
            t = pd.Timestamp(v)
            if t.tzinfo is None:
                t = t.tz_localize("UTC")
            out.append(int(t.value // 1_000_000))
        except (ValueError, TypeError):
            raise _fail(path, f"line {n}: '{name}' = {v!r} is not a time (epoch ms or ISO 8601)") from None
    return out


@dataclass
class Sample:
    path: Path
    columns: list[tuple[str, str]]  # (name, type) in the record's order
    templates: list[bytes]  # per row: its encoded value with %s (key copy) and %d (event time) holes
    holes: list[str]  # which holes, in order: "key", "time"
    keys: list[bytes] | None  # per row: the Kafka key's text (copy 0)
    key_number: list[int] | None = None  # per row: a whole-number key (copies shift it)
    key_span: int = 1
    lateness_ms: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    encoding: str = "json"
    key_text: list[bytes] | None = None  # per row: the Kafka key (the key field's plain text)
    key_type: str | None = None

    @classmethod
    def read(cls, path: Path, key: str | None, event_time: str | None, encoding: str = "json") -> Sample:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"replay file {path} does not exist")
        kind = SUFFIXES.get(path.suffix.lower())
        if kind is None:
            raise _fail(path, f"use a .jsonl, .csv or .parquet file, not '{path.suffix or 'no suffix'}'")
        if kind == "json":
            names, cols, lines = _json_rows(path)
            fixed = [""] * len(names)
        else:
            names, cols, lines, fixed = _frame_rows(path, kind)
        if not lines:
            raise _fail(path, "holds no records")
        types = [f or _type_of(c) for f, c in zip(fixed, cols)]
        for name, col in zip(names, cols):
            for v, n in zip(col, lines):
                if isinstance(v, (dict, list)):
                    raise _fail(path, f"line {n}: '{name}' holds a nested value; replay takes flat records")
                if isinstance(v, float) and not math.isfinite(v):
                    raise _fail(path, f"line {n}: '{name}' is not a finite number")
                if v is None:
                    raise _fail(path, f"line {n} has no value for '{name}'")
        for what, name in (("key", key), ("event_time", event_time)):
            if name is not None and name not in names:
                raise _fail(path, f"{what} '{name}' is not one of its fields ({', '.join(names)})")
        lateness = np.zeros(len(lines), np.int64)
        if event_time is not None:
            i = names.index(event_time)
            cols[i] = _ms(path, event_time, cols[i], lines)
            types[i] = "timestamp"
            ts = np.asarray(cols[i], np.int64)
            lateness = np.maximum.accumulate(ts) - ts
        return cls._build(path, names, cols, types, key, event_time, lateness, encoding)

    @classmethod
    def _build(cls, path, names, cols, types, key, event_time, lateness, encoding) -> Sample:
        def token(v, t: str, name: str) -> bytes:
            if t == "boolean":
                return b"true" if v else b"false"
            if t in ("long", "timestamp"):
                return str(int(v)).encode()
            if t == "double":
                return repr(float(v)).encode()
            s = str(v)
            if encoding == "csv":
                if any(ch in s for ch in ',\n\r"'):
                    raise _fail(path, f"'{name}' = {s!r} holds a comma, quote or line break: replay it as JSON")
                return s.encode()
            return json.dumps(s).encode()

        holes = [h for n, h in ((key, "key"), (event_time, "time")) if n is not None]
        holes.sort(key=lambda h: names.index(key if h == "key" else event_time))
        templates = []
        for r in range(len(lateness)):
            parts = []
            for name, col, t in zip(names, cols, types):
                if name == event_time:
                    parts.append((b'"%s":' % name.encode() if encoding == "json" else b"") + b"%d")
                elif name == key:
                    parts.append((b'"%s":' % name.encode() if encoding == "json" else b"") + b"%s")
                else:
                    tok = token(col[r], t, name).replace(b"%", b"%%")
                    parts.append((b'"%s":' % name.encode() if encoding == "json" else b"") + tok)
            templates.append(b"{" + b",".join(parts) + b"}" if encoding == "json" else b",".join(parts))
        keys = key_number = None
        span = 1
        if key is not None:
            i = names.index(key)
            keys = [token(v, types[i], key) for v in cols[i]]  # written form; text below
            if types[i] == "long":
                key_number = [int(v) for v in cols[i]]
                span = max(key_number) - min(key_number) + 1
        key_text = key_type = None
        if key is not None:
            i = names.index(key)
            key_type = types[i]
            plain = key_type in ("boolean", "long", "double")  # written as they read
            key_text = [k if plain else str(v).encode() for v, k in zip(cols[i], keys)]
        columns = list(zip(names, types))
        return cls(path, columns, templates, holes, keys, key_number, span, lateness, encoding, key_text, key_type)

    def replayer(self, copies: int):
        """``f(seq, send_ms) -> (keys, values)`` for records numbered ``seq``."""
        if copies > 1 and self.keys is None:
            raise ConfigError(f"replay file {self.path}: key_copies copies the key space: name the key field")
        if copies > 1 and self.key_type not in ("string", "long"):
            raise ConfigError(f"replay file {self.path}: key_copies needs a string or whole-number key")
        n = len(self.templates)
        tmpl, holes, late = self.templates, self.holes, self.lateness_ms
        text, written, numbers, span = self.key_text, self.keys, self.key_number, self.key_span
        json_string = self.key_type == "string" and self.encoding == "json"

        def key_of(r: int, c: int) -> tuple[bytes, bytes]:
            if c == 0:
                return written[r], text[r]
            if numbers is not None:
                k = b"%d" % (numbers[r] + c * span)
                return k, k
            t = text[r] + b"#%d" % c
            return (json.dumps(t.decode()).encode() if json_string else t), t

        def replay(seq: np.ndarray, send_ms: np.ndarray):
            rows = (seq // copies) % n
            stamps = (send_ms - late[rows]).tolist()
            rl = rows.tolist()
            if copies > 1:
                cl = (seq % copies).tolist()
                pairs = [key_of(r, c) for r, c in zip(rl, cl)]
            elif text is not None:
                pairs = [(written[r], text[r]) for r in rl]
            else:
                pairs = None
            if holes == ["key", "time"]:
                values = [tmpl[r] % (p[0], t) for r, p, t in zip(rl, pairs, stamps)]
            elif holes == ["time", "key"]:
                values = [tmpl[r] % (t, p[0]) for r, p, t in zip(rl, pairs, stamps)]
            elif holes == ["time"]:
                values = [tmpl[r] % t for r, t in zip(rl, stamps)]
            elif holes == ["key"]:
                values = [tmpl[r] % p[0] for r, p in zip(rl, pairs)]
            else:  # no hole: the format only turns %% back into %
                values = [tmpl[r] % () for r in rl]
            return ([p[1] for p in pairs] if pairs is not None else None), values

        return replay
