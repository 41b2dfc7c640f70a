"""The SLOs a run is judged by, registered in one place: each a name, how the spec's ``slos``
section and an experiment's point make its checker (:mod:`.slos`), whether it judges at a look,
and the words a run line gives its verdict.

The built-in SLOs register in :mod:`.slos`. Another one is a module that defines a checker (an
object whose ``check(observation, confidence)`` gives an :class:`~.slos.SloVerdict` named as it
is) and calls :func:`register_slo`; its setting in a spec is ``execution.slos.NAME`` (any value:
its checker reads it), and a run's ``slo_verdicts`` column, its run line and its verdict take it in
with no other edit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class SloKind:
    """A registered SLO. ``make(slos, point, at_end)`` gives its checker for an experiment (None:
    it does not apply to it): ``slos`` is the spec's section (a registered SLO's own setting is
    ``slos.others[name]``), ``point`` the plan's experiment, ``at_end`` whether the run is over
    (else a look at it as it goes). ``at_look``: it judges at looks too (the first registered of
    those leads a look). ``words(verdict)``: what a run line says of a verdict other than pass
    (None: the run line's own words, the built-in SLOs'). ``builtin``: its settings are fields of
    the spec's ``slos`` section of their own, not ``slos.NAME``."""

    name: str
    make: Callable[..., object | None]
    at_look: bool = False
    words: Callable[[str], str] | None = None
    builtin: bool = False


SLOS: dict[str, SloKind] = {}


def register_slo(kind: SloKind) -> SloKind:
    """Register ``kind``; one of the same name is replaced."""
    SLOS[kind.name] = kind
    return kind


def checkers(slos, point, at_end: bool) -> tuple:
    """The checkers of every registered SLO that applies to ``point``, in registration order: all
    of them once a run is over, at a look those that judge at looks (the built-in SLOs are there
    once :mod:`.slos` is imported, as every judge of a run imports it)."""
    kinds = [k for k in SLOS.values() if at_end or k.at_look]
    made = (k.make(slos, point, at_end) for k in kinds)
    return tuple(c for c in made if c is not None)


def run_line_words(slo_verdicts: str) -> list[str]:
    """What a run line says of the SLOs that give their own words (not pass), from a run's
    ``slo_verdicts`` column ("name=verdict" apart by spaces)."""
    said = []
    for item in slo_verdicts.split():
        name, _, verdict = item.partition("=")
        kind = SLOS.get(name)
        if kind is not None and kind.words is not None and verdict != "pass":
            said.append(kind.words(verdict))
    return said
