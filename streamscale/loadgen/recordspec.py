"""The records a load generator writes when they are not Theodolite's sensor readings: described
field by field (``fields`` with a type and a generator each) or replayed from a sample the user has
(``replay``), as a spec's ``benchmark.records`` or a YAML file of their own (``run-sut --records``).

A record is one JSON object (or CSV line) of its fields; ``key`` names the field whose plain text
is the Kafka key. Timestamps travel as epoch milliseconds and reach a job as Spark timestamps.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from streamscale.loadgen import avro
from streamscale.loadgen import fields as gens
from streamscale.loadgen.avro import AvroSchemaError
from streamscale.loadgen.kinds import InputKind, kind_of
from streamscale.loadgen.raw import RawSample
from streamscale.loadgen.sample import Sample
from streamscale.specs import StrictModel, base_dir, read_yaml, validate

FieldType = Literal["string", "long", "int", "double", "boolean", "timestamp"]
_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"


class FieldSpec(StrictModel):
    type: FieldType = Field(description="string, long, int, double, boolean or timestamp (epoch ms on the wire)")
    gen: str = Field(description="the field's generator: " + ", ".join(gens.GENERATORS))


class RecordsSpec(StrictModel):
    encoding: Literal["json", "csv", "avro"] = Field(
        "json", description="one JSON object, one CSV line or one Avro body (its schema: schema) per record"
    )
    schema_file: str | None = Field(
        None,
        alias="schema",
        description="avro: the records' schema as an .avsc file (default: derived from the fields)",
    )
    wire: Literal["plain", "confluent"] = Field(
        "plain", description="avro: the bare body, or Confluent's wire format (magic byte 0, schema id, body)"
    )
    schema_id: int = Field(1, ge=0, le=2**31 - 1, description="avro, wire confluent: the schema id written")
    key: str | None = Field(None, description="the field whose value is the Kafka key (none: no key)")
    fields: dict[str, FieldSpec] = Field(default_factory=dict, description="name -> type and generator, in order")
    replay: str | None = Field(
        None, description="a JSON-lines, CSV or Parquet sample to replay at the load's rate, cycling"
    )
    event_time: str | None = Field(
        None, description="replay: the sample's field re-stamped to the send time (its lateness in the sample kept)"
    )
    key_copies: int = Field(1, ge=1, le=100_000, description="replay: disjoint copies of the sample's key space")
    raw: bool = Field(
        False,
        description="replay: the sample's keys, value bytes and headers as they are (a Parquet capture, "
        "streamscale capture); your job decodes them (benchmark.decode: raw)",
    )
    kind: str | None = Field(
        None, description="a registered kind of input (streamscale.loadgen.kinds) that makes the records"
    )
    options: dict = Field(default_factory=dict, description="kind: its settings")
    seed: int = Field(42, description="seed of the generators' draws (each worker its own stream from it)")
    _sample: Sample | None = PrivateAttr(None)
    _kind: InputKind | None = PrivateAttr(None)  # pickled with the spec: its class by reference

    @field_validator("fields")
    @classmethod
    def _names(cls, v: dict):
        import re

        for name in v:
            if not re.match(_NAME, name):
                raise ValueError(f"field name '{name}': use letters, digits and _ (not first a digit)")
        return v

    @model_validator(mode="after")
    def _check(self, info: ValidationInfo):
        if self.kind is not None:
            return self._check_kind()
        if self.options:
            raise ValueError("options apply to a kind of input (kind: WORD)")
        if bool(self.fields) == bool(self.replay):
            raise ValueError(
                "give either fields (records described field by field), replay (a sample file) or kind "
                "(a registered kind of input)"
            )
        if self.replay and self.encoding == "avro":
            raise ValueError("encoding avro describes records field by field: a replayed sample has its own bytes")
        if self.replay:
            path = Path(self.replay)
            if not path.is_absolute():
                path = (base_dir(info) / path).resolve()
                self.replay = str(path)
            if self.raw:
                if self.key or self.event_time or self.encoding != "json":
                    raise ValueError(
                        "raw: the sample's own keys and bytes are sent: key, event_time and encoding do not apply"
                    )
                self._sample = RawSample.read(path)
                return self
            self._sample = Sample.read(path, self.key, self.event_time, self.encoding)
            return self
        if self.raw:
            raise ValueError("raw applies to replay: a sample captured from a topic (streamscale capture)")
        self._check_avro(info)
        if self.event_time or self.key_copies != 1:
            raise ValueError("event_time and key_copies apply to replay only")
        if self.key is not None and self.key not in self.fields:
            raise ValueError(f"key '{self.key}' is not one of the fields ({', '.join(self.fields)})")
        for name, f in self.fields.items():
            try:
                gens.parse(f.gen, f.type, self.text_encoding)
            except gens.GenError as exc:
                raise ValueError(f"field '{name}' ({f.type}, gen '{f.gen}'): {exc}") from None
        return self

    def _check_kind(self):
        given = [n for n in ("fields", "replay", "key", "event_time", "raw") if getattr(self, n)]
        given += ["schema"] if self.schema_file else []
        given += [n for n, dflt in (("wire", "plain"), ("schema_id", 1), ("key_copies", 1)) if getattr(self, n) != dflt]
        if given:
            raise ValueError(f"kind {self.kind} makes its own records: {', '.join(given)} do not apply")
        self.kind_obj()  # the kind, its options and its columns checked
        return self

    def _check_avro(self, info: ValidationInfo) -> None:
        # by value, not by what was written: a saved spec (results' spec.yaml) writes every default
        given = {"schema": self.schema_file is not None, "wire": self.wire != "plain", "schema_id": self.schema_id != 1}
        if self.encoding != "avro":
            if any(given.values()):
                raise ValueError(f"{', '.join(k for k, v in given.items() if v)} apply to encoding avro")
            return
        if self.schema_file:
            path = Path(self.schema_file)
            path = path if path.is_absolute() else (base_dir(info) / path).resolve()
            self.schema_file = str(path)
        try:
            self.avro_schema()
        except AvroSchemaError as exc:
            raise ValueError(f"schema: {exc}") from None

    @property
    def text_encoding(self) -> str:
        """How the generators write a value's text: Avro records are drawn as JSON, then encoded."""
        return "json" if self.encoding == "avro" else self.encoding

    def avro_schema(self) -> dict:
        """The records' Avro schema: the .avsc given, checked against the fields, or derived from them."""
        types = {n: f.type for n, f in self.fields.items()}
        if self.schema_file:
            return avro.read_schema(Path(self.schema_file), types)
        return avro.derived_schema(types)

    # -- what the pipeline reads -------------------------------------------------------------
    def columns(self) -> list[tuple[str, str]]:
        """(name, type) of every field, in record order (a raw sample's: none, its bytes are the job's)."""
        if self.raw:
            return []
        if self.kind is not None:
            return self.kind_obj().columns()
        if self.replay:
            return self.sample().columns
        return [(n, f.type) for n, f in self.fields.items()]

    def value_ddl(self) -> str:
        """The decoding contract's schema of a record's value (timestamps as BIGINT milliseconds)."""
        return ", ".join(f"`{n}` {gens.DDL_TYPES[t]}" for n, t in self.columns())

    def send_time_field(self) -> str | None:
        """The field stamped with each record's send time (``gen: now``; a replay's ``event_time``),
        None when there is none."""
        if self.replay:
            return None if self.raw else self.event_time
        if self.kind is not None:
            return self.kind_obj().send_time_field()
        return next((n for n, f in self.fields.items() if f.gen.strip() == "now"), None)

    def kind_obj(self) -> InputKind:
        """The kind of input that makes the records (``kind``), with its options."""
        if self._kind is None:  # at validation, or built without it
            self._kind = kind_of(self.kind, self.options, self.encoding)
        return self._kind

    def sample(self):
        if self._sample is None:  # a spec unpickled in a worker, or built without validation
            if self.raw:
                self._sample = RawSample.read(Path(self.replay))
            else:
                self._sample = Sample.read(Path(self.replay), self.key, self.event_time, self.encoding)
        return self._sample

    def refs(self) -> dict[str, tuple[str, str, float]]:
        """Field -> (input, field, max_s) of each ``ref:`` field."""
        found = {}
        for name, f in self.fields.items():
            if f.gen.strip().lower().startswith("ref:"):
                found[name] = gens.parse(f.gen, f.type, self.text_encoding).ref
        return found

    def maker(self, worker: int = 0, workers: int = 1, refs: dict | None = None):
        """``refs``: input -> its RefClock, for the ``ref:`` fields."""
        if self.raw:
            return self.sample().maker(worker, workers, self.key_copies)
        if self.kind is not None:
            return self.kind_obj().maker(self.encoding, self.seed, worker, workers)
        return RecordMaker(self, worker, workers, refs)


class RecordMaker:
    """Keys and values of a worker's records k0 .. k1-1 (record k of worker w is number k*W + w)."""

    def __init__(self, spec: RecordsSpec, worker: int, workers: int, refs: dict | None = None):
        self.spec, self.worker, self.workers = spec, worker, workers
        self.rng = np.random.default_rng([spec.seed, worker])
        if spec.replay:
            self.replayer = spec.sample().replayer(spec.key_copies)
            return
        self.replayer = None
        self.where: np.ndarray | None = None  # the last chunk's partitions, where place() knows them
        self._pool_partition: np.ndarray | None = None
        self.gens = [gens.parse(f.gen, f.type, spec.text_encoding) for f in spec.fields.values()]
        for g in self.gens:
            if g.ref is not None and (refs or {}).get(g.ref[0]) is not None:
                g.clock = refs[g.ref[0]]
        avro_on = spec.encoding == "avro"
        self.avro = avro.ColumnEncoder(spec.avro_schema(), spec.wire, spec.schema_id) if avro_on else None
        self.key_at = list(spec.fields).index(spec.key) if spec.key else None
        pieces = [b"%s" + g.suffix for g in self.gens]
        if spec.text_encoding == "json":
            named = (b'"%s":' % n.encode() + p for n, p in zip(spec.fields, pieces))
            self.template = b"{" + b",".join(named) + b"}"
        else:
            self.template = b",".join(pieces)

    def bind_origin(self, t0_ms: int) -> None:
        """The ``ref:`` clocks that share this worker's schedule origin get it, once it is set."""
        for g in self.gens if self.replayer is None else ():
            if g.clock is not None and g.clock.t0_ms is None:
                g.clock = dataclasses.replace(g.clock, t0_ms=t0_ms)

    def place(self, partitions: int) -> None:
        """Keys drawn from a pool (keys:N, zipf, choice) get their partition per pool entry once
        (crc32 of the key, as librdkafka's default partitioner): :attr:`where` after each chunk."""
        if self.replayer is not None or self.key_at is None:
            return
        g = self.gens[self.key_at]
        if g.pool_text and not g.suffix:
            import zlib

            self._pool_partition = np.array([zlib.crc32(t) % partitions for t in g.pool_text], np.int64)

    def make(self, k0: int, k1: int, send_ms: np.ndarray) -> tuple[list[bytes] | None, list[bytes]]:
        seq = np.arange(k0, k1, dtype=np.int64) * self.workers + self.worker
        if self.replayer is not None:
            return self.replayer(seq, send_ms)
        chunk = gens.Chunk(seq, send_ms, self.rng)
        if self.avro is not None:
            return self._make_avro(chunk)
        cols, keys = [], None
        for i, g in enumerate(self.gens):
            toks, text = g.draw(chunk)
            cols.append(toks)
            if i == self.key_at:
                keys = text if text is not None else [x + g.suffix for x in toks] if g.suffix else toks
                if self._pool_partition is not None:
                    self.where = self._pool_partition[g.last_idx]
        t = self.template
        return keys, [t % row for row in zip(*cols)]

    def _make_avro(self, chunk) -> tuple[list[bytes] | None, list[bytes]]:
        """Avro bodies, column by column: numbers as drawn, strings and pools as their text."""
        columns, keys = {}, None
        for i, (name, g) in enumerate(zip(self.spec.fields, self.gens, strict=True)):
            x = g.numbers(chunk)
            toks, text = g.draw(chunk) if x is None else (None, None)
            columns[name] = avro.Column(toks, text, g.suffix, x)
            if i == self.key_at:
                keys = columns[name].key_text()
                if self._pool_partition is not None:
                    self.where = self._pool_partition[g.last_idx]
        return keys, self.avro.encode(columns)


def records_spec(data, source: str, folder: Path | None = None) -> RecordsSpec:
    """A records section from parsed YAML (``folder``: where its replay file is looked for)."""
    return validate(RecordsSpec, data, source, "fields (or replay), encoding and key", folder)


def load_records(path: str | Path) -> RecordsSpec:
    """A records YAML file (``run-sut --records``); a replay file it names lies beside it."""
    path = Path(path)
    data = read_yaml(path)
    if isinstance(data, dict) and "records" in data and len(data) == 1:
        data = data["records"]  # a file that wraps the section as a spec does
    return records_spec(data, str(path), path.parent)
