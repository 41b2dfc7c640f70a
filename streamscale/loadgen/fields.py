"""Field generators of a described record (``records.fields.NAME.gen``), drawn a chunk at a time.

Each generator gives, for a chunk of records, one *token* per record: the field's value as it is
written into the record (JSON: a quoted string, a number, ``true``; CSV: the plain text), and for
the key field also its plain text (the Kafka key). Values are drawn with numpy in bulk: a record
costs a list index or two, not a call per field (``benchmarks/loadgen_throughput.py``).

Generators (``TYPE`` is the field's type):

* ``sequence``: the record's number, unique and increasing (worker w of W numbers its records
  w, w+W, w+2W, ...); long, int or string.
* ``keys:N``: one of N keys, uniform; ``zipf:N,S``: one of N keys, key i drawn with weight
  1/(i+1)^S (key 0 most often). Strings ``key-0`` ... ``key-(N-1)``, or the numbers 0 ... N-1.
* ``uniform:A,B``, ``normal:MEAN,SD`` (double; long/int: whole numbers), ``constant:V``,
  ``choice:a|b|c`` (uniform over the listed values, of the field's type).
* ``now``: the record's send time; ``late:P,MAX_S``: the send time, a fraction P of records set
  back by up to MAX_S seconds (uniform), so they arrive out of order. Timestamps travel as epoch
  milliseconds.
* ``bytes:N``: a string of N letters and digits (a payload).
* ``ref:INPUT.FIELD,MAX_S``: the value of FIELD (a ``sequence``) of a record that the input INPUT
  of the same run sent at most MAX_S seconds before, uniform among them: a click names an
  impression that was shown. It is computed, not looked up: a sequence's value is its record's
  number, and the number's send time follows from that generator's schedule (:class:`RefClock`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import numpy as np

TYPES = ("string", "long", "int", "double", "boolean", "timestamp")
GENERATORS = (
    "sequence",
    "keys:N",
    "zipf:N,S",
    "uniform:A,B",
    "normal:MEAN,SD",
    "constant:V",
    "choice:a|b|c",
    "now",
    "late:P,MAX_S",
    "bytes:N",
    "ref:INPUT.FIELD,MAX_S",
)
# a field's type on the wire, in the decoding contract's DDL (streamscale.sparkio.formats)
DDL_TYPES = {
    "string": "STRING",
    "long": "BIGINT",
    "int": "INT",
    "double": "DOUBLE",
    "boolean": "BOOLEAN",
    "timestamp": "BIGINT",
}
INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_ALPHABET = np.frombuffer(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", np.uint8)
PAYLOAD_POOL = 256  # distinct payloads per bytes:N field (drawn at random per record)
MAX_KEYS = 10_000_000
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"


class GenError(ValueError):
    """A generator that cannot be read, or does not fit its field's type (the message says why)."""


@dataclass
class Chunk:
    """What a chunk of records shares: their numbers and send times (epoch ms)."""

    seq: np.ndarray
    send_ms: np.ndarray
    rng: np.random.Generator


def _ints_text(a: np.ndarray) -> list[bytes]:
    # one repr of the whole list: ~20x cheaper than a format per number
    return repr(a.tolist())[1:-1].encode().split(b", ") if len(a) else []


def _thousandths_text(a: np.ndarray) -> list[bytes]:
    """Doubles to three decimals as whole thousandths: the record's template writes them with an
    ``e-3`` exponent (``97562e-3`` is the JSON and CSV number 97.562), which costs a third of a
    float's repr per number."""
    return _ints_text(np.rint(a * 1000).astype(np.int64))


@dataclass(frozen=True)
class RefClock:
    """When each record of a referenced input is sent: its generator's ``t0_ms`` (the stamp of
    each worker's record 0), each worker's rate (records/s) and how many records it sends at most
    (None: until stopped). Worker w of W numbers its records w, w+W, ... (``sequence``) and stamps
    record k with ``t0_ms + k * 1000 / rate``. ``t0_ms`` None: the origin of the referring worker's
    own schedule, which the two share, bound once it is set (``RecordMaker.bind_origin``)."""

    t0_ms: int | None
    rates: tuple[float, ...]
    limits: tuple[int | None, ...]

    def numbers(self, send_ms: np.ndarray, max_s: float, rng: np.random.Generator) -> np.ndarray:
        """For each send time, the number of a record stamped within ``max_s`` seconds before it
        (uniform among them: a worker by its share of the rate, then one of its records)."""
        rates = np.asarray(self.rates, dtype=float)
        w = rng.choice(len(rates), size=len(send_ms), p=rates / rates.sum())
        r = rates[w]
        since = (send_ms - self.t0_ms).astype(float)
        hi = np.floor(since * r / 1000.0)
        lo = np.maximum(np.ceil((since - max_s * 1000.0) * r / 1000.0), 0)
        limit = np.array([np.inf if x is None else x - 1 for x in self.limits], dtype=float)[w]
        hi = np.minimum(hi, limit)
        lo = np.minimum(lo, np.maximum(hi, 0))  # before its first record (or past its last): that one
        hi = np.maximum(hi, lo)
        k = lo + np.floor(rng.random(len(send_ms)) * (hi - lo + 1))
        return (k.astype(np.int64) * len(rates)) + w


@dataclass
class Generator:
    """``suffix``: what the record's template writes after the token (``e-3`` after thousandths)."""

    kind: str
    type: str
    encoding: str
    args: tuple = ()
    pool_tokens: list[bytes] = field(default_factory=list)  # for pooled kinds: what is written
    pool_text: list[bytes] = field(default_factory=list)  # and the plain text (a Kafka key)
    cdf: np.ndarray | None = None
    last_idx: np.ndarray | None = None
    clock: RefClock | None = None  # ref: the referenced input's schedule (bound by the run)

    @property
    def ref(self) -> tuple[str, str, float] | None:
        """(input, field, max_s) of a ``ref:`` generator, else None."""
        return self.args if self.kind == "ref" else None

    @property
    def suffix(self) -> bytes:
        return b"e-3" if self.type == "double" and self.kind in ("uniform", "normal") else b""

    def draw(self, c: Chunk) -> tuple[list[bytes], list[bytes] | None]:
        """Tokens for the chunk's records, and their plain text where it differs (strings)."""
        n = len(c.seq)
        k = self.kind
        if self.pool_tokens:
            if k == "zipf":
                idx = np.searchsorted(self.cdf, c.rng.random(n), side="right")
                idx = np.minimum(idx, len(self.pool_tokens) - 1)
            else:
                idx = c.rng.integers(0, len(self.pool_tokens), n)
            self.last_idx = idx  # which pool entries: a key's partition is known per entry
            il = idx.tolist()
            toks = self.pool_tokens
            text = self.pool_text
            return [toks[i] for i in il], ([text[i] for i in il] if text is not toks else None)
        if k in ("sequence", "ref") and self.type == "string":
            plain = _ints_text(c.seq if k == "sequence" else self.numbers(c, as_text=True))
            return ([b'"%s"' % t for t in plain] if self.encoding == "json" else plain), plain
        x = self.numbers(c)
        if self.type == "double":
            return _thousandths_text(x), None
        return _ints_text(x), None

    def numbers(self, c: Chunk, as_text: bool = False) -> np.ndarray | None:
        """The chunk's values as numbers, for the kinds that draw numbers (None: tokens only), with the
        draws :meth:`draw` makes; doubles rounded to the thousandths their text has."""
        n, k = len(c.seq), self.kind
        if self.pool_tokens or (k in ("sequence", "ref") and self.type == "string" and not as_text):
            return None
        if k == "sequence":
            return c.seq
        if k == "ref":
            if self.clock is None:  # pragma: no cover - GeneratorConfig refuses a load without it
                raise GenError(f"ref:{self.args[0]}.{self.args[1]} names an input this generator was not given")
            return self.clock.numbers(c.send_ms, self.args[2], c.rng)
        if k in ("now", "late"):
            ms = c.send_ms
            if k == "late":
                p, max_s = self.args
                late = c.rng.random(n) < p
                back = (c.rng.random(n) * max_s * 1000).astype(np.int64)
                ms = ms - np.where(late, back, 0)
            return ms
        if k in ("uniform", "normal"):
            a, b = self.args
            if self.type == "double":
                x = c.rng.uniform(a, b, n) if k == "uniform" else c.rng.normal(a, b, n)
                return np.rint(x * 1000) / 1000  # the same double as the text k e-3 reads as
            if k == "uniform":
                return c.rng.integers(int(a), int(b), n, endpoint=True)
            lo, hi = INT_RANGE[self.type]
            return np.clip(np.rint(c.rng.normal(a, b, n)), lo, hi).astype(np.int64)
        raise AssertionError(f"no drawing for {k}")  # pragma: no cover - parse() builds known kinds


def _json_string(s: str) -> bytes:
    return json.dumps(s).encode()


def _token(value: str, type_: str, encoding: str) -> tuple[bytes, bytes]:
    """A literal value of the field's type: (token, plain text)."""
    if type_ == "string":
        if encoding == "csv" and any(ch in value for ch in ',\n\r"'):
            raise GenError(f"value {value!r} holds a comma, quote or line break: CSV records cannot carry it")
        return (_json_string(value) if encoding == "json" else value.encode()), value.encode()
    if type_ == "boolean":
        if value.strip().lower() not in ("true", "false"):
            raise GenError(f"'{value}' is not a boolean (true or false)")
        t = value.strip().lower().encode()
        return t, t
    if type_ == "double":
        if not re.fullmatch(_NUMBER, value.strip()):
            raise GenError(f"'{value}' is not a number")
        t = repr(float(value)).encode()
        return t, t
    if type_ in ("long", "int", "timestamp"):
        if not re.fullmatch(r"[-+]?\d+", value.strip()):
            raise GenError(f"'{value}' is not a whole number")
        lo, hi = INT_RANGE.get(type_, INT_RANGE["long"])
        v = int(value)
        if not lo <= v <= hi:
            raise GenError(f"{v} is out of the {type_} range")
        t = str(v).encode()
        return t, t
    raise GenError(f"unknown type '{type_}'")  # pragma: no cover - the model checks types


def _numbers(text: str, n: int, what: str) -> list[float]:
    parts = text.split(",") if text else []
    if len(parts) != n or not all(re.fullmatch(_NUMBER, p.strip()) for p in parts):
        raise GenError(f"needs {n} number{'s' if n > 1 else ''}: {what}")
    return [float(p) for p in parts]


def _count(text: str, what: str) -> int:
    if not re.fullmatch(r"\d+", text.strip()) or not 1 <= int(text) <= MAX_KEYS:
        raise GenError(f"needs a whole number from 1 to {MAX_KEYS:,}: {what}")
    return int(text)


def _key_pool(n: int, type_: str, encoding: str) -> tuple[list[bytes], list[bytes]]:
    if type_ == "string":
        text = [b"key-%d" % i for i in range(n)]
        return ([b'"%s"' % t for t in text] if encoding == "json" else text), text
    if type_ in ("long", "int"):
        if type_ == "int" and n - 1 > INT_RANGE["int"][1]:
            raise GenError("more keys than an int holds")  # pragma: no cover - MAX_KEYS is below
        text = _ints_text(np.arange(n))
        return text, text
    raise GenError(f"keys are strings or whole numbers, not {type_}")


def parse(gen: str, type_: str, encoding: str = "json") -> Generator:
    """A field's generator from its text; :class:`GenError` says what is wrong with it."""
    name, _, arg = str(gen).strip().partition(":")
    name = name.strip().lower()
    usage = {g.split(":")[0]: g for g in GENERATORS}
    if name not in usage:
        raise GenError(f"unknown generator '{gen}': use one of {', '.join(GENERATORS)}")
    return _PARSERS[name](name, arg, usage[name], type_, encoding)


def _sequence(name: str, arg: str, what: str, type_: str, encoding: str) -> Generator:
    if type_ not in ("long", "int", "string"):
        raise GenError(f"sequence numbers records: type long, int or string, not {type_}")
    return Generator(name, type_, encoding)


def _keyed(name: str, arg: str, what: str, type_: str, encoding: str) -> Generator:
    if name == "keys":
        n, s = _count(arg, what), 0.0
    else:
        head, _, tail = arg.partition(",")
        n, s = _count(head, what), _numbers(tail, 1, what)[0]
        if s <= 0:
            raise GenError(f"the exponent S must be positive: {what}")
    toks, text = _key_pool(n, type_, encoding)
    g = Generator(name, type_, encoding, (n, s), toks, text)
    if name == "zipf":
        w = 1.0 / np.power(np.arange(1, n + 1, dtype=float), s)
        g.cdf = np.cumsum(w) / w.sum()
    return g


def _numeric(name: str, arg: str, what: str, type_: str, encoding: str) -> Generator:
    if type_ not in ("long", "int", "double"):
        raise GenError(f"{name} draws numbers: type double, long or int, not {type_}")
    a, b = _numbers(arg, 2, what)
    if name == "uniform" and b < a:
        raise GenError(f"B must be at least A: {what}")
    if name == "normal" and b < 0:
        raise GenError(f"SD must be at least 0: {what}")
    if type_ != "double" and name == "uniform":
        lo, hi = INT_RANGE[type_]
        if a != int(a) or b != int(b) or not lo <= a <= b <= hi:
            raise GenError(f"A and B must be whole numbers within the {type_} range: {what}")
    return Generator(name, type_, encoding, (a, b))


def _listed(name: str, arg: str, what: str, type_: str, encoding: str) -> Generator:
    values = [arg] if name == "constant" else arg.split("|")
    if not arg or any(v == "" for v in values):
        raise GenError(f"needs {'a value' if name == 'constant' else 'values between |'}: {what}")
    pairs = [_token(v, "long" if type_ == "timestamp" else type_, encoding) for v in values]
    toks = [t for t, _ in pairs]
    text = [p for _, p in pairs]
    return Generator(name, type_, encoding, tuple(values), toks, text if type_ == "string" else toks)


def _event_time(name: str, arg: str, what: str, type_: str, encoding: str) -> Generator:
    if type_ not in ("timestamp", "long"):
        raise GenError(f"{name} is an event time: type timestamp (or long), not {type_}")
    if name == "now":
        if arg:
            raise GenError("now takes no argument")
        return Generator(name, type_, encoding)
    p, max_s = _numbers(arg, 2, what)
    if not 0 <= p <= 1 or max_s < 0:
        raise GenError(f"P is a fraction from 0 to 1 and MAX_S at least 0: {what}")
    return Generator(name, type_, encoding, (p, max_s))


def _bytes(name: str, arg: str, what: str, type_: str, encoding: str) -> Generator:
    if type_ != "string":
        raise GenError(f"bytes makes a payload string: type string, not {type_}")
    if not re.fullmatch(r"\d+", arg.strip()) or not 0 <= int(arg) <= 1_000_000:
        raise GenError(f"needs a length from 0 to 1,000,000 bytes: {what}")
    size = int(arg)
    rng = np.random.default_rng(size)
    text = [_ALPHABET[rng.integers(0, len(_ALPHABET), size)].tobytes() for _ in range(PAYLOAD_POOL)]
    toks = [b'"%s"' % t for t in text] if encoding == "json" else text
    return Generator(name, type_, encoding, (size,), toks, text)


def _ref(name: str, arg: str, what: str, type_: str, encoding: str) -> Generator:
    m = re.fullmatch(r"\s*([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\s*,\s*(" + _NUMBER + r")\s*", arg)
    if not m:
        raise GenError(f"needs an input, a field of it and a number of seconds: {what}")
    if type_ not in ("long", "int", "string"):
        raise GenError(f"ref names a sequence number: type long, int or string, not {type_}")
    max_s = float(m.group(3))
    if not 0 <= max_s <= 86_400:
        raise GenError(f"MAX_S is from 0 to 86,400 seconds: {what}")
    return Generator(name, type_, encoding, (m.group(1), m.group(2), max_s))


# each generator's parser, by its name (GENERATORS' first words)
_PARSERS = {
    "sequence": _sequence,
    "keys": _keyed,
    "zipf": _keyed,
    "uniform": _numeric,
    "normal": _numeric,
    "constant": _listed,
    "choice": _listed,
    "now": _event_time,
    "late": _event_time,
    "bytes": _bytes,
    "ref": _ref,
}
