"""Kinds of input a user adds: records made by code of their own, named in a spec by a word.

Described records (``fields``) and replayed samples (``replay``) are the records section's own;
another kind registers here once (:func:`register_kind`, or an installed package's entry point in
the group ``streamscale.kinds``, loaded when a spec first names it) and a spec then says
``records: {kind: WORD, options: {...}}``. The generators, the decoding contract, the lag and the
drain take it as they take the others: a kind says its columns (what the job's decoding reads),
the field it stamps with each record's send time, and makes each worker's records.

A kind's object travels to the generator's worker processes (they are spawned) by pickling, its
class by reference: define it in a module they can import (an installed one, or one on the path),
whose import registers it there too.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

KINDS: dict[str, type[InputKind]] = {}
ENTRY_POINTS = "streamscale.kinds"  # where an installed package declares its kinds of input, by word

# the types a kind's columns may have: a described field's (timestamps travel as epoch milliseconds)
COLUMN_TYPES = ("string", "long", "int", "double", "boolean", "timestamp")


class KindMaker:
    """A worker's records of one kind: :meth:`make` gives the keys (None: no key) and values of its
    records ``k0`` to ``k1 - 1``; record k of worker w of W is number ``k * W + w`` of the run, sent
    at ``send_ms`` (epoch milliseconds, one per record)."""

    where = None  # each record's partition where the maker knows it (else the generator computes it)

    def place(self, partitions: int) -> None:
        """Told the topic's partitions before the first record (a maker may place its keys)."""

    def make(self, k0: int, k1: int, send_ms: np.ndarray) -> tuple[list[bytes] | None, list[bytes]]:
        raise NotImplementedError


class InputKind:
    """A registered kind of input. A subclass sets :attr:`word` (what a spec names it by) and
    :attr:`encodings` (those of ``json`` and ``csv`` its values are written in), takes the spec's
    ``options`` in its constructor (a ValueError there is the spec's one-line error), and gives
    :meth:`columns`, :meth:`send_time_field` and :meth:`maker`."""

    word: ClassVar[str] = ""
    encodings: ClassVar[tuple[str, ...]] = ("json",)

    def __init__(self, options: dict):
        self.options = dict(options)

    def columns(self) -> list[tuple[str, str]]:
        """(name, type) of each field of a record's value, in order (types of COLUMN_TYPES)."""
        raise NotImplementedError

    def send_time_field(self) -> str | None:
        """The field holding each record's send time (epoch ms; the output latency reads it), if any."""
        return None

    def maker(self, encoding: str, seed: int, worker: int, workers: int) -> KindMaker:
        raise NotImplementedError


def register_kind(cls: type[InputKind]) -> type[InputKind]:
    """Register a kind of input under its word (a class decorator)."""
    if not cls.word or not cls.word.isidentifier():
        raise ValueError(f"a kind of input's word must be a name, not {cls.word!r}")
    KINDS[cls.word] = cls
    return cls


def _installed(word: str) -> type[InputKind] | None:
    """The kind an installed package declares under ``word`` in the entry point group
    ENTRY_POINTS (its import registers it; a package may also name the class itself there)."""
    from importlib.metadata import entry_points

    for point in entry_points(group=ENTRY_POINTS, name=word):
        try:
            found = point.load()
        except Exception as exc:  # noqa: BLE001 - the package's code: its error, one line
            raise ValueError(f"kind '{word}' ({point.value}) failed to import: {type(exc).__name__}: {exc}") from None
        if isinstance(found, type) and issubclass(found, InputKind) and word not in KINDS:
            register_kind(found)
        return KINDS.get(word)
    return None


def kind_of(word: str, options: dict, encoding: str) -> InputKind:
    """The registered kind ``word`` with its ``options``, or a ValueError saying what is wrong."""
    cls = KINDS.get(word) or _installed(word)
    if cls is None:
        known = ", ".join(sorted(KINDS)) or "none registered"
        raise ValueError(f"kind '{word}' is not a registered kind of input ({known})")
    if encoding not in cls.encodings or encoding == "avro":  # Avro's schema is the described fields'
        raise ValueError(f"kind '{word}' writes its records as {' or '.join(cls.encodings)}, not {encoding}")
    try:
        kind = cls(options)
    except Exception as exc:  # noqa: BLE001 - the kind's own check of its options: its words, one line
        raise ValueError(f"kind '{word}', options: {exc}") from None
    try:
        columns = [(str(name), str(type_)) for name, type_ in kind.columns()]
    except Exception as exc:  # noqa: BLE001 - the kind's code: its error, one line
        raise ValueError(f"kind '{word}': its columns failed: {type(exc).__name__}: {exc}") from None
    if not columns:
        raise ValueError(f"kind '{word}' says no columns: a job decodes a record's value by them")
    for name, type_ in columns:
        if type_ not in COLUMN_TYPES:
            raise ValueError(f"kind '{word}': column {name} has type {type_}, not one of {', '.join(COLUMN_TYPES)}")
    return kind
