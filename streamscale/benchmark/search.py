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
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from streamscale.benchmark.answer import assumed_capacities

T = TypeVar("T")


class Strategy(Protocol):
    """How the candidates of one search (resource amounts for a load, loads for an amount) are
    tried: ``first_passing`` (demand: the fewest resources) and ``last_passing`` (capacity: the
    highest load), each asking ``ok(candidate)`` and assuming monotonicity where it says so."""

    name: str

    def first_passing(self, cands: Sequence[T], ok: Callable[[T], bool]) -> T | None: ...

    def last_passing(self, cands: Sequence[T], ok: Callable[[T], bool]) -> T | None: ...


class Full:
    """Every candidate is run; no monotonicity assumed."""

    name = "full"

    def first_passing(self, cands, ok):
        verdicts = [ok(c) for c in cands]
        return next((c for c, v in zip(cands, verdicts) if v), None)

    def last_passing(self, cands, ok):
        verdicts = [ok(c) for c in cands]
        passing = [c for c, v in zip(cands, verdicts) if v]
        return passing[-1] if passing else None


class Linear:
    """Candidates in order until the first that passes (demand) or the first that fails (capacity)."""

    name = "linear"

    def first_passing(self, cands, ok):
        return next((c for c in cands if ok(c)), None)

    def last_passing(self, cands, ok):
        best = None
        for c in cands:
            if not ok(c):
                break
            best = c
        return best


class Binary:
    """Bisection over the ordered candidates."""

    name = "binary"

    def first_passing(self, cands, ok):
        lo, hi = 0, len(cands)  # invariant: cands[hi:] pass (known or assumed), cands[:lo] fail
        while lo < hi:
            mid = (lo + hi) // 2
            if ok(cands[mid]):
                hi = mid
            else:
                lo = mid + 1
        return cands[lo] if lo < len(cands) else None

    def last_passing(self, cands, ok):
        lo, hi = -1, len(cands) - 1  # invariant: cands[:lo+1] pass, cands[hi+1:] fail
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if ok(cands[mid]):
                lo = mid
            else:
                hi = mid - 1
        return cands[lo] if lo >= 0 else None


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (Full(), Linear(), Binary())}


def strategy(name: str | Strategy) -> Strategy:
    """A strategy by its name (or the strategy itself)."""
    if not isinstance(name, str):
        return name
    if name not in STRATEGIES:
        raise ValueError(f"unknown strategy '{name}': one of {tuple(STRATEGIES)}")
    return STRATEGIES[name]


class NoRestriction:
    """Every candidate is searched."""

    def candidates(self, cands: list, previous: int | None) -> list:
        return cands

    def found(self, found, cands: list, previous: int | None):
        return found

    def after(self, found, cands: list, previous: int | None) -> int | None:
        return None


class LowerBound:
    """Theodolite's lower-bound restriction, composable with any strategy: a higher load never needs
    fewer resources than a lower one, and more resources sustain at least the capacity of fewer.
    ``previous``: the index of the last search's result among the candidates (None: none yet), and
    one past the end when the last search found none (a higher load cannot pass with any amount)."""

    def candidates(self, cands: list, previous: int | None) -> list:
        return cands if previous is None else cands[previous:]

    def found(self, found, cands: list, previous: int | None):
        return found

    def after(self, found, cands: list, previous: int | None) -> int | None:
        """``previous`` for the next search, given what this one found."""
        return cands.index(found) if found is not None else len(cands)


class CapacityLowerBound(LowerBound):
    """For capacity: the loads above the capacity of fewer resources, which this amount holds at least."""

    def candidates(self, cands: list, previous: int | None) -> list:
        return cands if previous is None else cands[previous + 1 :]

    def found(self, found, cands: list, previous: int | None):
        return found if found is not None or previous is None else cands[previous]

    def after(self, found, cands: list, previous: int | None) -> int | None:
        return cands.index(found) if found is not None else previous


def resource_demand(
    loads: Sequence, resources: Sequence, passes: Callable, strategy_: str | Strategy = "linear", lower_bound=True
) -> dict:
    """{load: minimal resources meeting all SLOs, or None if none of the given amounts does}."""
    restrict = LowerBound() if lower_bound else NoRestriction()
    search = strategy(strategy_).first_passing
    return _sweep(loads, resources, lambda load: lambda res: passes(load, res), search, restrict)


def load_capacity(
    resources: Sequence, loads: Sequence, passes: Callable, strategy_: str | Strategy = "linear", lower_bound=True
) -> dict:
    """{resources: maximal load meeting all SLOs, or None if even the lowest load fails}."""
    restrict = CapacityLowerBound() if lower_bound else NoRestriction()
    search = strategy(strategy_).last_passing
    return _sweep(resources, loads, lambda res: lambda load: passes(load, res), search, restrict)


def _sweep(outer: Sequence, inner: Sequence, oracle_of: Callable, search: Callable, restrict) -> dict:
    """{x: what ``search`` finds among ``inner`` with ``oracle_of(x)``} for each x of ``outer`` in
    ascending order, each search over the candidates the restriction leaves after the last."""
    cands, result, previous = sorted(inner), {}, None
    for x in sorted(outer):
        found = search(restrict.candidates(cands, previous), oracle_of(x))
        result[x] = restrict.found(found, cands, previous)
        previous = restrict.after(result[x], cands, previous)
    return result


@dataclass
class Outcome:
    """What a search found for one configuration: its metric ({load: resources} for demand,
    {resources: load} for capacity), the points taken over from fewer resources without a run,
    and a bracket search's rows."""

    metric: dict
    assumed: set = field(default_factory=set)
    brackets: list[dict] | None = None


class Search(Protocol):
    """A search of one configuration over an execution's experiments (``trials``: its ``passes``,
    ``verdict``, ``confirm`` and ``drifted``)."""

    def run(self, trials) -> Outcome: ...


@dataclass(frozen=True)
class MetricSearch:
    """Demand (the fewest resources per load) or capacity (the highest load per amount) by a
    strategy, with or without the lower-bound restriction."""

    metric: str  # demand | capacity
    loads: tuple
    resources: tuple
    strategy: str = "linear"
    lower_bound: bool = True

    def run(self, trials) -> Outcome:
        oracle = CountingOracle(trials.passes)
        if self.metric == "demand":
            found = resource_demand(self.loads, self.resources, oracle, self.strategy, self.lower_bound)
            return Outcome(found)
        found = load_capacity(self.resources, self.loads, oracle, self.strategy, self.lower_bound)
        return Outcome(found, assumed_capacities(found, oracle.calls))


class CountingOracle:
    """Wraps a verdict function and counts (and remembers) the experiments it ran."""

    def __init__(self, passes: Callable):
        self.passes = passes
        self.calls: list[tuple] = []

    def __call__(self, load, res, **options) -> bool:
        self.calls.append((load, res))
        return self.passes(load, res, **options)
