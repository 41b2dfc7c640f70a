"""Confirmation: a bracket's ends decided by long runs (Theodolite's 300 s, a 60 s warm-up, no
early stop), for any system under test and configuration.

The search's short runs find a bracket fast; a long run at each of its ends says whether it holds.
Where one does not (a held end that fails long, a failed end that passes, or an undecided upper
end that passes), long runs decide the bracket anew from the loads the search tried
(:func:`refine`), at most ``confirm_runs`` of them more per resource amount.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass

from streamscale.benchmark.bracket import around_undecided, between, lowest_undecided_above


def long_spec(spec: dict, resources: int, loads: list[float], seconds: float, warmup: float, name: str) -> dict:
    """``spec`` re-checking ``loads`` on ``resources``: every run ``seconds`` long after ``warmup``,
    once; the execution named ``name``."""
    spec = json.loads(json.dumps(spec))
    spec["execution"].update(
        load={**spec["execution"]["load"], "values": sorted(loads)},
        resources={**spec["execution"]["resources"], "values": [resources]},
        duration_s=seconds,
        max_duration_s=seconds,
        warmup_s=warmup,
        min_duration_s=None,
        repetitions=1,
        stop_at_majority=False,
        extra_repetitions=0,
        strategy={"name": "full", "lower_bound": False},
        metric="demand",
        reuse_spark=False,
    )
    spec["name"] = name
    return spec


@dataclass(frozen=True)
class Past:
    """Under the SLOs, an end at a load where runs disagreed moves ``step`` past it once the ends
    are decided (:func:`past_disputed`); ``disputed``: the loads where runs so far disagreed (some
    held the load, some failed it)."""

    step: float
    disputed: frozenset[float] = frozenset()


def steps_past(x: float, step: float, between) -> tuple[float | None, float | None]:
    """(below, above): the loads ``step`` either side of ``x``, ``between``'s middle of ``x`` and
    the load a step squared away (None: none lies between them), where an end at ``x`` where runs
    disagreed moves (:func:`past_disputed`)."""
    return between(x / (1 + step) ** 2, x), between(x, x * (1 + step) ** 2)


def end_holds(bracket: dict, held_verdict: str | None, failed_verdict: str | None) -> bool:
    """Whether long runs confirm a bracket: its held end passes, its failed end fails (an upper end
    left undecided claims no failure, so any verdict there confirms it)."""
    if held_verdict is not None and held_verdict != "pass":
        return False
    return failed_verdict is None or failed_verdict == "fail" or bool(bracket.get("failed_undecided"))


def refine(
    bracket: dict,
    long_verdict,
    first: dict[float, str],
    resolution: float,
    max_runs: int,
    between,
    past: Past | None = None,
) -> dict:
    """A bracket whose ends long runs decide, from a search's ``bracket`` (its dict) whose long
    re-check disagreed with it or passed its undecided upper end; a long run decides over the
    search's short one at a load.

    ``first``: the long verdicts already taken (load -> verdict); ``long_verdict(load)`` runs one
    more. The held end walks down the loads the search held until a long run passes there
    (where none does, below the lowest that failed, a resolution's step at a time); the
    upper end is the lowest load above it whose long run did not pass (at a failed end that
    passed: the next load above that the search did not hold; where every load above passed, one a
    ``resolution`` higher, and so on, below any load the search's generator could not produce);
    then their middle (``between``) is run until they lie within ``resolution`` or ``max_runs``
    more long runs were taken. Returns ``held``, ``failed`` (None: none found), ``failed_undecided``
    (its long run measured no failure: undecided or invalid), ``width`` and ``long`` (every long
    verdict, load -> verdict). ``past``: how an end where runs disagreed moves past that load
    afterwards (None: it does not, as under strategy.confirm's long runs).
    """
    r = _Refinement(bracket, long_verdict, dict(first), max_runs, past)
    lo = r.held_end()
    lo, hi = r.upper_end(lo)
    lo, hi = r.descend(lo, hi, resolution, between)
    lo, hi = r.climb(lo, hi, resolution, between)
    lo, hi = r.narrow(lo, hi, resolution, between)
    if hi is None:  # no long run above the held end failed: the lowest that stayed undecided, if any
        hi = lowest_undecided_above(r.runs, lo)
    return {
        "held": lo,
        "failed": hi,
        "failed_undecided": hi is not None and r.runs.get(hi) != "fail",
        "width": None if lo is None or hi is None else hi / lo - 1,
        "long": dict(sorted(r.runs.items())),
    }


class _Refinement:
    """The long verdicts of one refinement: those given, and up to ``max_runs`` more."""

    def __init__(self, bracket: dict, long_verdict, runs: dict[float, str], max_runs: int, past: Past | None = None):
        self.long_verdict, self.runs, self.max_runs, self.added = long_verdict, runs, max_runs, 0
        self.past = past
        self.short = {float(k): v for k, v in bracket.get("verdicts", {}).items()}
        # the lowest load the generator could not produce in the search: no long run is asked at or above it
        self.ceiling = min((x for x, v in self.short.items() if v == "invalid"), default=float("inf"))
        self.held = None if bracket.get("held") is None else float(bracket["held"])
        self.upper = None if bracket.get("failed") is None else float(bracket["failed"])

    def verdict(self, x: float) -> str | None:
        """The long verdict at ``x``, run now if it was not; None: no long run is left."""
        if x not in self.runs:
            if self.added >= self.max_runs:
                return None
            v = self.long_verdict(x)
            if v is None:  # the caller has no run left (its time budget)
                return None
            self.added += 1
            self.runs[x] = v
        return self.runs[x]

    def held_end(self) -> float | None:
        """The highest load the search held (at most its held end) whose long run passes."""
        held = self.held
        held_loads = {x for x, v in self.short.items() if v == "pass"} | ({held} if held is not None else set())
        for x in sorted((x for x in held_loads if held is None or x <= held), reverse=True):
            v = self.verdict(x)
            if v is None:
                return None
            if v == "pass":
                return x
        return None

    def upper_end(self, lo: float | None) -> tuple[float | None, float | None]:
        """Every load above the held end the search tried or a long run failed, lowest first: the
        first whose long run fails (or cannot be judged) is the upper end; one that passes raises the
        held end, one that stays undecided decides nothing and the next load upward is run."""
        runs, upper = self.runs, self.upper
        above = sorted(
            x
            for x in set(self.short) | set(runs) | ({upper} if upper is not None else set())
            if (lo is None or x > lo) and (x < self.ceiling or x in runs)
        )
        for x in above:
            # never run long and held by the search, or below a load that passed a long run: no
            # evidence against it, and a long run there would spend one that a higher load needs
            if x not in runs and (self.short.get(x) == "pass" or any(v == "pass" and y > x for y, v in runs.items())):
                continue
            v = self.verdict(x)
            if v is None:
                break
            if v not in ("pass", "undecided"):
                return lo, x
            if v == "pass":
                lo = x
        return lo, None

    def descend(self, lo, hi, resolution: float, between) -> tuple[float | None, float | None]:
        """No load the search held passed its long run, and one failed: the capacity lies lower, so
        runs go down a resolution's step at a time from the lowest that failed, past any that stays
        undecided, until one passes (a held end found, not "held none")."""
        bottom = hi
        while lo is None and bottom is not None:
            x = between(bottom / (1 + resolution) ** 2, bottom)
            v = None if x is None else self.verdict(x)
            if v is None or v == "invalid":
                break
            if v == "pass":
                lo = x
            elif v == "fail":
                hi = x
            bottom = x
        return lo, hi

    def climb(self, lo, hi, resolution: float, between) -> tuple[float | None, float | None]:
        """No load above the held end failed long (an upper end the search left undecided, a failed
        end that passed, long runs that stayed undecided): the capacity lies higher, so long runs go
        on up a resolution's step at a time, past any that stays undecided, until one fails."""
        top = max([lo] + [x for x, v in self.runs.items() if v == "undecided" and x > lo]) if lo is not None else None
        while lo is not None and hi is None:
            x = between(top, top * (1 + resolution) ** 2)
            v = None if x is None or x >= self.ceiling else self.verdict(x)
            if v is None:
                break
            if v == "pass":
                lo = top = x
            elif v == "undecided":
                top = x
            else:
                hi = x
        return lo, hi

    def narrow(self, lo, hi, resolution: float, between) -> tuple[float | None, float | None]:
        """Halve the bracket (at ``between``'s middle) until it is within ``resolution``, its ends
        a decided pass and a decided fail; around a middle whose long run stays undecided as the
        search does (:func:`~streamscale.benchmark.bracket.around_undecided`: the side above it
        first, where a load over the capacity fails within a minute), until neither side is wider.
        A load where runs disagreed and a run would decide nothing (:meth:`moot`) is stepped around
        the same way."""
        while lo is not None and hi is not None and hi / lo - 1 > resolution:
            seen = {**self.moot(lo, hi, between), **self.runs}
            stuck = any(v == "undecided" and lo < x < hi for x, v in seen.items())
            mid = around_undecided(lo, hi, seen, resolution, between) if stuck else between(lo, hi)
            v = None if mid is None else self.verdict(mid)
            if v is None:
                break
            if v != "undecided":
                lo, hi = (mid, hi) if v == "pass" else (lo, mid)
        return lo, hi

    def moot(self, lo: float, hi: float, between) -> dict[float, str]:
        """The loads between ``lo`` and ``hi`` where runs disagreed and no run here was taken, where
        one would decide nothing, as undecided: whichever way it went, the end it gave would then
        move ``past.step`` past it (:func:`past_disputed`), to ``lo`` or ``hi`` or beyond."""
        if self.past is None:
            return {}
        out = {}
        for x in (x for x in self.past.disputed if x not in self.runs and lo < x < hi):
            down, up = steps_past(x, self.past.step, between)
            if down is not None and up is not None and down <= lo and up >= hi:
                out[x] = "undecided"
        return out


def confirm_bracket(
    b: dict,
    long_verdict: Callable[[float, str], str],
    resolution: float,
    max_runs: int,
    whole: bool = False,
    past: Past | None = None,
) -> dict:
    """``b`` (a bracket's dict, :meth:`~streamscale.benchmark.bracket.Bracket.as_dict`) with its ends
    decided by long runs: ``long_verdict(load, end)`` runs one (``end``: "held", "failed", "" for a
    load of a bracket decided anew, "between" for one halving ends that held: None where no run is
    left for it). Adds ``long`` (load -> long verdict) and ``long_confirmed`` (the search's ends
    held over long runs as they were). ``past``: as :func:`refine`'s."""
    first: dict[float, str] = {}
    for end in ("held", "failed"):
        if b.get(end) is not None and float(b[end]) not in first:
            first[float(b[end])] = long_verdict(float(b[end]), end)
    held = None if b.get("held") is None else first[float(b["held"])]
    failed = None if b.get("failed") is None else first[float(b["failed"])]
    ok = end_holds(b, held, failed)
    higher = ok and failed == "pass" and bool(b.get("failed_undecided"))  # the capacity lies above
    # an upper end whose long run stayed undecided is no end: the next load upward gets its long run
    higher = higher or failed == "undecided"
    middle = functools.partial(between, whole=whole)
    if ok and not higher:
        # an upper end the search left undecided and its long run failed is a failed end now
        undecided = bool(b.get("failed_undecided")) and failed != "fail"
        held_up = {**b, "long": first, "long_confirmed": True, "held_assumed": False, "failed_undecided": undecided}
        return narrowed(held_up, lambda x: long_verdict(x, "between"), resolution, max_runs, middle, past)
    r = refine(b, lambda x: long_verdict(x, ""), first, resolution, max_runs, middle, past)
    return {**b, **r, "long_confirmed": False, "held_assumed": False}


def past_disputed(b: dict, disputed: Callable[[float, str], bool], verdict, step: float, between) -> dict:
    """``b`` (a bracket's dict, its ends decided) with each end where the runs at it disagreed
    (``disputed(load, end)``: some held the load, some failed it) moved outward past it, to the
    load ``step`` beyond (``between``'s middle of the end and one a step squared away), when a run
    there (``verdict(load, end)``; None: no run is left) gives what that end claims. Runs that
    disagree put a load within the machine's noise of the capacity: any later run there, a 300 s
    one that checks the answer among them, may go either way. Adds ``disputed`` (each end's
    load where runs disagreed, moved past or not) and the runs to ``long`` (load -> verdict)."""
    out, found = {**b, "long": dict(b.get("long") or {})}, []
    outward = {"held": ("pass", 0), "failed": ("fail", 1)}  # the claim, and which side of steps_past() is outward
    for end, (claim, side) in outward.items():
        x = out.get(end)
        if x is None or (end == "failed" and out.get("failed_undecided")) or not disputed(float(x), end):
            continue
        found.append(float(x))
        y = steps_past(float(x), step, between)[side]
        v = None if y is None else verdict(y, end)
        if v is not None:
            out["long"][y] = v
        if v == claim:  # the search's ends no longer stand as they were
            out[end], out["long_confirmed"] = y, False
    if not found:
        return b
    if out.get("held") is not None and out.get("failed") is not None:
        out["width"] = float(out["failed"]) / float(out["held"]) - 1
    return {**out, "disputed": found}


def search_loads(b: dict, verdict: str) -> set[float]:
    """The loads a bracket's search gave ``verdict`` (``b``: Bracket.as_dict; a confirming run that
    passed a failed end left it undecided there)."""
    return {float(k) for k, v in (b.get("verdicts") or {}).items() if v == verdict}


def held_unchecked(search: dict, out: dict) -> dict:
    """``out``, a bracket decided anew from ``search``'s (both as dicts) whose runs the time budget
    ended before a held end passed one: its held end is the highest load the search held below
    every load those runs did not pass, itself not run again (``held_unchecked``), and its upper
    end the search's where those runs found none. A held end those runs passed stands."""
    if out.get("held") is not None:
        return out
    judged = {float(k): v for k, v in (out.get("long") or {}).items()}
    below = min([x for x, v in judged.items() if v != "pass"], default=math.inf)
    held_by_search = search_loads(search, "pass")
    if search.get("held") is not None and not search.get("held_assumed"):
        held_by_search.add(float(search["held"]))
    held = max((x for x in held_by_search if x < below and x not in judged), default=None)
    if held is None:
        return out
    failed, undecided = out.get("failed"), out.get("failed_undecided", False)
    if failed is None and search.get("failed") is not None:
        failed, undecided = float(search["failed"]), bool(search.get("failed_undecided"))
    width = None if failed is None else failed / held - 1
    return {
        **out,
        "held": held,
        "failed": failed,
        "failed_undecided": undecided,
        "width": width,
        "held_unchecked": True,
    }


def narrowed(b: dict, long_verdict, resolution: float, max_runs: int, between, past: Past | None = None) -> dict:
    """A bracket whose ends held (``b``, its long verdicts in ``long``) but lie more than
    ``resolution`` apart (its search stepped past a load it could not decide, or the time budget
    ended its steps): its middle run as its ends were, halving it until it is within
    ``resolution``, at most ``max_runs`` more runs (``long_verdict`` None: no run is left)."""
    if b.get("held") is None or b.get("failed") is None or b.get("failed_undecided"):
        return b
    ends = float(b["held"]), float(b["failed"])
    if ends[1] / ends[0] - 1 <= resolution:
        return b
    r = _Refinement(b, long_verdict, dict(b["long"]), max_runs, past)
    lo, hi = r.narrow(*ends, resolution, between)
    if r.added == 0:
        return b
    runs = dict(sorted(r.runs.items()))
    return {**b, "held": lo, "failed": hi, "width": hi / lo - 1, "long": runs, "long_confirmed": (lo, hi) == ends}
