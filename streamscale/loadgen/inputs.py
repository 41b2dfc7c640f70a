"""Several named inputs of one job (``benchmark.inputs``): each its own records, topic, share of the
load and partitions, e.g. impressions and the clicks that refer to them (``ref:``).

The load (records/s) is split by the shares; the generators' workers start in the order the
references need (a referenced input first), their schedules start together once all are ready (a
click's impression has been sent), and they stop the other way round.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from streamscale.loadgen.feed import Feed
from streamscale.loadgen.recordspec import RecordsSpec
from streamscale.specs import StrictModel

_NAME = r"^[A-Za-z_][A-Za-z0-9_]*$"
SHARE_TOLERANCE = 1e-6


class InputSpec(StrictModel):
    records: RecordsSpec = Field(description="this input's records (fields and generators, or replay: FILE)")
    share: float = Field(description="its part of the load (records/s); the shares sum to 1")
    partitions: int | None = Field(None, ge=1, description="its topic's partitions (default: topics.partitions)")
    decode: Literal["fields", "raw"] | None = Field(
        None, description="fields or raw (Spark's Kafka columns), as benchmark.decode (its default)"
    )
    unread: bool = Field(
        False,
        description="the job does not read it: generated at its share all the same, left out of the lag and "
        "the delivered rate (an input the job never reads is otherwise refused)",
    )


@dataclass(frozen=True)
class Input:
    """One input as a run needs it: its name, records, share and partitions (None: the run's) and how
    the job gets it (fields or raw)."""

    name: str
    records: RecordsSpec
    share: float
    partitions: int | None
    decode: str
    unread: bool = False  # generated, not read by the job: out of the lag (inputs.NAME.unread)

    def rate(self, total: float) -> float:
        return total * self.share


@dataclass(frozen=True)
class Inputs:
    """A job's several inputs, in the order their generators start (referenced ones first)."""

    items: tuple[Input, ...]

    def __iter__(self):
        return iter(self.items)

    def __len__(self) -> int:
        return len(self.items)

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.items]

    def refs_of(self, name: str) -> set[str]:
        """The inputs the records of input ``name`` refer to."""
        return {inp for inp, _, _ in self.by_name(name).records.refs().values()}

    def by_name(self, name: str) -> Input:
        return next(i for i in self.items if i.name == name)

    def feeds(self) -> tuple[Feed, ...]:
        """One feed per input, in start order (streamscale.loadgen.feed)."""
        return tuple(
            Feed(i.name, i.records, i.share, i.partitions, tuple(sorted(self.refs_of(i.name))), not i.unread)
            for i in self.items
        )


def resolve_inputs(specs: dict[str, InputSpec], decode: str = "fields") -> Inputs:
    """The inputs of ``benchmark.inputs``, checked (ValueError saying what is wrong), in start order."""
    if not specs:
        raise ValueError("inputs: name at least one input")
    for name, spec in specs.items():
        if not re.match(_NAME, name):
            raise ValueError(f"inputs.{name}: name inputs with letters, digits and _ (not first a digit)")
        if not (math.isfinite(spec.share) and spec.share > 0):
            raise ValueError(f"inputs.{name}.share: a share is a positive fraction of the load, not {spec.share:g}")
    total = sum(s.share for s in specs.values())
    if abs(total - 1) > SHARE_TOLERANCE:
        shares = " + ".join(f"{s.share:g}" for s in specs.values())
        raise ValueError(f"inputs: the shares split the load and sum to 1, not {shares} = {total:g}")
    for name, spec in specs.items():
        _check_refs(name, spec.records, specs)
    if all(s.unread for s in specs.values()):
        raise ValueError("inputs: every input says unread: true, so the job reads none of them")
    items = {n: Input(n, s.records, s.share, s.partitions, s.decode or decode, s.unread) for n, s in specs.items()}
    return Inputs(tuple(items[n] for n in _start_order(specs)))


def _check_refs(name: str, records: RecordsSpec, specs: dict[str, InputSpec]) -> None:
    for fld, (inp, ref_field, _) in records.refs().items():
        where = f"inputs.{name}.records.fields.{fld}: ref:{inp}.{ref_field}"
        if inp == name:
            raise ValueError(f"{where} refers to its own input: ref: names another input")
        if inp not in specs:
            raise ValueError(f"{where} names no input (the inputs are {', '.join(specs)})")
        target = specs[inp].records.fields.get(ref_field)
        if target is None:
            raise ValueError(f"{where}: {inp} has no field {ref_field} ({', '.join(specs[inp].records.fields)})")
        if target.gen.strip().lower() != "sequence":
            raise ValueError(
                f"{where}: a ref names a field numbered by gen: sequence (whose values follow from the send "
                f"times), and {inp}.{ref_field} is gen: {target.gen}"
            )
        if target.type != records.fields[fld].type:
            raise ValueError(f"{where}: {fld} is {records.fields[fld].type}, {inp}.{ref_field} is {target.type}")


def _start_order(specs: dict[str, InputSpec]) -> list[str]:
    """The inputs with every referenced one before those referring to it (ValueError on a cycle)."""
    deps = {n: {inp for inp, _, _ in s.records.refs().values()} for n, s in specs.items()}
    order: list[str] = []
    while len(order) < len(specs):
        ready = [n for n in specs if n not in order and deps[n] <= set(order)]
        if not ready:
            left = ", ".join(n for n in specs if n not in order)
            raise ValueError(f"inputs: {left} refer to each other in a circle: one of them must be sent first")
        order.extend(ready)
    return order
