"""Theodolite's ActivePowerRecord {identifier, timestamp (ms), valueInW}: encodings and value distributions."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import numpy as np

from streamscale.errors import ConfigError

ENCODINGS = ("json", "csv")
ACTIVE_POWER_DDL = "identifier STRING, timestamp BIGINT, valueInW DOUBLE"


def sensor_id(i: int) -> str:
    return f"s_{i}"


@dataclass(frozen=True)
class ActivePowerRecord:
    identifier: str
    timestamp: int
    valueInW: float

    def encode(self, encoding: str = "json") -> bytes:
        return Encoder(encoding).encode(self.identifier, self.timestamp, self.valueInW)

    @classmethod
    def decode(cls, value: bytes, encoding: str = "json") -> ActivePowerRecord:
        if encoding == "json":
            d = json.loads(value)
            return cls(d["identifier"], int(d["timestamp"]), float(d["valueInW"]))
        ident, ts, v = value.decode().split(",")
        return cls(ident, int(ts), float(v))


class Encoder:
    """Fast byte encoding: the per-sensor prefix is built once, repr() keeps doubles exact."""

    def __init__(self, encoding: str = "json"):
        if encoding not in ENCODINGS:
            raise ConfigError(f"encoding must be one of {ENCODINGS}, not '{encoding}'")
        self.encoding = encoding
        self._prefix: dict[str, bytes] = {}

    def prefix(self, ident: str) -> bytes:
        p = self._prefix.get(ident)
        if p is None:
            if self.encoding == "json":
                p = b'{"identifier":' + json.dumps(ident).encode() + b',"timestamp":'
            else:
                if "," in ident or "\n" in ident:
                    raise ConfigError(f"sensor id {ident!r} cannot be CSV-encoded")
                p = ident.encode() + b","
            self._prefix[ident] = p
        return p

    def encode(self, ident: str, ts: int, value: float) -> bytes:
        if self.encoding == "json":
            return self.prefix(ident) + b'%d,"valueInW":%s}' % (ts, repr(float(value)).encode())
        return self.prefix(ident) + b"%d,%s" % (ts, repr(float(value)).encode())


_DIST = re.compile(r"^(constant|uniform|normal):([-+0-9.eE]+)(?:,([-+0-9.eE]+))?$")


@dataclass(frozen=True)
class ValueDistribution:
    """``constant:V``, ``uniform:LO,HI`` or ``normal:MEAN,STD`` (seeded, so runs are reproducible)."""

    kind: str = "uniform"
    a: float = 0.0
    b: float = 100.0

    @classmethod
    def parse(cls, text: str) -> ValueDistribution:
        m = _DIST.match(text.strip())
        if not m:
            raise ConfigError(f"value distribution '{text}': use constant:V, uniform:LO,HI or normal:MEAN,STD")
        kind, a, b = m.group(1), float(m.group(2)), m.group(3)
        if kind != "constant" and b is None:
            raise ConfigError(f"value distribution '{text}' needs two numbers")
        b = float(b) if b is not None else a
        if kind == "uniform" and b < a:
            raise ConfigError(f"value distribution '{text}': HI must be >= LO")
        if kind == "normal" and b < 0:
            raise ConfigError(f"value distribution '{text}': STD must be >= 0")
        return cls(kind, a, b)

    def __str__(self) -> str:
        return f"{self.kind}:{self.a:g}" + ("" if self.kind == "constant" else f",{self.b:g}")

    def sample(self, rng: np.random.Generator, n: int) -> list[float]:
        if self.kind == "constant":
            return [self.a] * n
        if self.kind == "uniform":
            return rng.uniform(self.a, self.b, n).round(3).tolist()
        return rng.normal(self.a, self.b, n).round(3).tolist()
