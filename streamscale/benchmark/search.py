"""Search strategies of the Theodolite method: full, linear, binary, and the lower-bound restriction.

``passes(load, resources) -> bool`` is the verdict of one (repeated) experiment. Resource demand:
for every load the fewest resources that pass. Load capacity: for every resource amount the
highest load that passes. Linear and binary search assume the usual monotonicity (more resources
never hurt, more load never helps); the lower-bound restriction uses it across loads: a higher load
never needs fewer resources than a lower one, so its search starts at the previous load's result
(and, for capacity, more resources sustain at least the previous capacity).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")

STRATEGIES = ("full", "linear", "binary")


def _first_passing(cands: Sequence[T], ok: Callable[[T], bool], name: str) -> T | None:
    if name == "full":
        verdicts = [ok(c) for c in cands]
        return next((c for c, v in zip(cands, verdicts) if v), None)
    if name == "linear":
        for c in cands:
            if ok(c):
                return c
        return None
    if name == "binary":
        lo, hi = 0, len(cands)  # invariant: cands[hi:] pass (known or assumed), cands[:lo] fail
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(cands[mid]):
                hi = mid
            else:
                lo = mid + 1
        return cands[lo] if lo < len(cands) else None
    raise ValueError(f"unknown strategy '{name}': one of {STRATEGIES}")


def _last_passing(cands: Sequence[T], ok: Callable[[T], bool], name: str) -> T | None:
    if name == "full":
        verdicts = [ok(c) for c in cands]
        passing = [c for c, v in zip(cands, verdicts) if v]
        return passing[-1] if passing else None
    if name == "linear":
        best = None
        for c in cands:
            if not ok(c):
                break
            best = c
        return best
    if name == "binary":
        lo, hi = -1, len(cands) - 1  # invariant: cands[:lo+1] pass, cands[hi+1:] fail
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ok(cands[mid]):
                lo = mid
            else:
                hi = mid - 1
        return cands[lo] if lo >= 0 else None
    raise ValueError(f"unknown strategy '{name}': one of {STRATEGIES}")


def resource_demand(
    loads: Sequence, resources: Sequence, passes: Callable, strategy: str = "linear", lower_bound: bool = True
) -> dict:
    """{load: minimal resources meeting all SLOs, or None if none of the given amounts does}."""
    result: dict = {}
    start = 0
    for load in sorted(loads):
        cands = list(sorted(resources))[start:]
        r = _first_passing(cands, lambda res, load=load: passes(load, res), strategy)
        result[load] = r
        if lower_bound and r is not None:
            start = sorted(resources).index(r)
        elif lower_bound and r is None:
            start = len(resources)  # a higher load cannot pass with any of them either
    return result


def load_capacity(
    resources: Sequence, loads: Sequence, passes: Callable, strategy: str = "linear", lower_bound: bool = True
) -> dict:
    """{resources: maximal load meeting all SLOs, or None if even the lowest load fails}."""
    result: dict = {}
    loads = list(sorted(loads))
    known = None  # index of a load known to pass (previous capacity)
    for res in sorted(resources):
        if lower_bound and known is not None:
            cands = loads[known + 1 :]
            found = _last_passing(cands, lambda load, res=res: passes(load, res), strategy)
            cap = found if found is not None else loads[known]
        else:
            cap = _last_passing(loads, lambda load, res=res: passes(load, res), strategy)
        result[res] = cap
        if lower_bound and cap is not None:
            known = loads.index(cap)
    return result


class CountingOracle:
    """Wraps a verdict function and counts (and remembers) the experiments it ran."""

    def __init__(self, passes: Callable):
        self.passes = passes
        self.calls: list[tuple] = []

    def __call__(self, load, res, **options) -> bool:
        self.calls.append((load, res))
        return self.passes(load, res, **options)


def majority(verdicts: Sequence[bool], repetitions: int) -> bool | None:
    """True/False once a strict majority of ``repetitions`` agrees, else None (run another)."""
    yes = sum(1 for v in verdicts if v)
    no = len(verdicts) - yes
    need = repetitions // 2 + 1
    if yes >= need:
        return True
    if no >= repetitions - need + 1:
        return False
    return None
