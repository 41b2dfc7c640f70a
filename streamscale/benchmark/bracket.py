"""The capacity of each resource amount as a bracket: the highest load it held and the lowest load
it failed, searched until they lie within a resolution of each other (not rungs fixed in advance).

Per resource amount, in ascending order: the first load tried is where the amount below failed
(one step above its highest load held where it failed none: its runs or its time ran out first;
else the given start); the search multiplies the load by ``factor`` while it holds (divides
while it fails) until it has a load held and a load failed, then tries their geometric middle until
``failed / held <= 1 + resolution``. Loads are rounded to two significant digits (three where two
would not fall strictly between the ends).

More resources never hold less (the search's monotonicity), so the load the amount below held is
this amount's lower end until a run says more: it is *assumed*, not run, and said so. A run whose
verdict stayed undecided (its interval still straddled the limit at its longest, max_duration_s)
is neither end: above a load held the search steps past it upwards until a load fails, and
between the ends it narrows beside it (the middle of the ends on either side of it), so that a
bracket's ends are a decided pass and a decided fail. Only where the runs or the time end before
a load above the held one failed is the upper end an undecided load, and the bracket says so.
A run that could not be judged (the load generator fell short of the load) is no end:
the machine cannot test at or beyond it, so the search goes on between it and the highest load
held (their geometric middle) until the two lie within the resolution or a load fails; the
answer says which load the generator could not produce.

An end decided by a run on a machine whose speed drifted is run again (``confirm``), with the other
end run again beside it (interleaved: held, failed), so that the drift falls on both. Where the
two runs of an end disagree, the point is undecided and the bracket widens past it: the held end
moves down to the next load held, the failed end up to the next load failed (or stays, said to be
undecided); with no load held left, the search goes on below the lowest load tried.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from streamscale.benchmark.search import Outcome
from streamscale.benchmark.units import round_significant

PASS, FAIL, UNDECIDED, INVALID = "pass", "fail", "undecided", "invalid"
# what a run costs beyond its load (topics made, Spark's query started and stopped, the judging):
# what a time budget counts for each run besides its duration
RUN_OVERHEAD_S = 10.0


def run_cost(duration_s: float, overheads: list[float]) -> float:
    """What the next run is expected to take, for a time budget: ``duration_s`` and the most a run
    took beyond its load so far (``overheads``; topics made, the query started and stopped, the
    judging), RUN_OVERHEAD_S before any ran (in a kept Spark session a run took ~2 s, in one of
    its own ~10 s more)."""
    return duration_s + (max(overheads) if overheads else RUN_OVERHEAD_S)


def _always(*_args) -> bool:
    return True


@dataclass
class Bracket:
    resources: int
    held: float | None = None  # the highest load held (None: not even the lowest tried)
    failed: float | None = None  # the lowest load failed or undecided (None: every load tried held)
    held_assumed: bool = False  # held by fewer resources, not run with these
    failed_undecided: bool = False  # the upper end is a run that stayed undecided, not a failure
    ceiling: str = ""  # why the search could not go higher
    out_of_time: bool = False  # the time budget ended the search before the resolution was reached
    verdicts: dict = field(default_factory=dict)  # load -> pass | fail | undecided | invalid
    confirmed: dict = field(default_factory=dict)  # load -> the verdict of its run again (a drifted end)
    rate: Callable[[float], float] = float  # a load value in records/s (UC4's load is a level n: 4^n)
    fits: Callable[..., bool] = _always  # whether one more run (or ``runs`` more) fits the time budget
    probed: float | None = None  # its drain probe's figure (None: no probe)
    fewer_held: float | None = None  # the load fewer resources held, run on them (None: none)

    @property
    def width(self) -> float | None:
        """failed / held - 1 in records/s: how far apart the ends lie (None without both)."""
        if self.held is None or self.failed is None:
            return None
        return self.rate(self.failed) / self.rate(self.held) - 1

    @property
    def runs(self) -> int:
        return len(self.verdicts) + len(self.confirmed)

    def as_dict(self) -> dict:
        return {
            "resources": self.resources,
            "held": self.held,
            "failed": self.failed,
            "width": self.width,
            "held_assumed": self.held_assumed,
            "failed_undecided": self.failed_undecided,
            "ceiling": self.ceiling,
            "out_of_time": self.out_of_time,
            "runs": self.runs,
            "verdicts": {f"{k:g}": v for k, v in sorted(self.verdicts.items())},
            "confirmed": {f"{k:g}": v for k, v in sorted(self.confirmed.items())},
        }


def nice(load: float, digits: int = 2) -> float:
    return float(max(1.0, round_significant(load, digits)))


def between(low: float, high: float, whole: bool = False) -> float | None:
    """The geometric middle of two loads, rounded to two significant digits (three where two fall on
    an end); with ``whole`` loads (UC4's levels) the whole number halfway; None when no such load
    lies strictly between them."""
    if whole:
        mid = float(math.floor((low + high) / 2))
        return mid if low < mid < high else None
    mid = math.sqrt(low * high)
    for digits in (2, 3):
        x = nice(mid, digits)
        if low < x < high:
            return x
    return None


@dataclass(frozen=True)
class Settings:
    """How a bracket search steps: ``resolution`` (failed / held - 1 to reach, in records/s),
    ``factor`` (the step outwards; ``factor_down`` downwards while nothing held, where it differs),
    ``low``/``high`` (the loads it may try), ``max_runs`` (the most experiments per resource
    amount), ``whole`` (loads are whole numbers stepped by one: UC4's levels of groups) and
    ``rate`` (a load in records/s, in which the resolution is judged)."""

    resolution: float = 0.15
    factor: float = 2.0
    low: float = 1.0
    high: float = math.inf
    max_runs: int = 12
    whole: bool = False
    rate: Callable[[float], float] = float
    factor_down: float | None = None  # the step down while nothing held (None: ``factor``)
    # whether a load that stayed undecided on a resource amount leaned over its capacity (its lag's
    # trend estimate over the limit): the step down from it is then a failure's (None: none did)
    leans: Callable[[float, int], bool] | None = None
    # the longest step up from loads held above a probe's figure, which each pass in a row there
    # lengthens (None: steps of ``factor`` only)
    climb: float | None = None


@dataclass(frozen=True)
class Budget:
    """A search's time budget: its ``deadline`` (time.monotonic(); None: none), and what a run is
    expected to take, ``run_cost_s`` (a number, or a callable asked before each run)."""

    deadline: float | None = None
    run_cost_s: float | Callable[[], float] = 0.0


def bracket_search(
    resources: list[int],
    verdict: Callable[[float, int], str],
    start: float,
    settings: Settings = Settings(),
    confirm: Callable[[float, int], str] | None = None,
    drifted: Callable[[float, int], bool] | None = None,
    budget: Budget = Budget(),
    probe: Callable[[int], float | None] | None = None,
) -> list[Bracket]:
    """One :class:`Bracket` per resource amount; ``verdict(load, resources)`` runs (or recalls) an
    experiment and returns pass, fail, undecided or invalid. ``drifted(load, resources)``: whether
    a run that decided that point was taken on a drifting machine; ``confirm(load, resources)``
    runs such an end again. The ``budget`` is shared equally by the amounts still to search; a run
    starts only if it ends before its amount's share (an amount's first run always starts). An
    amount whose bracket is not there yet when its share is spent (a held end or a failed end
    missing, or the ends still wider apart than the resolution) may go on into the later amounts'
    shares, as long as each of them keeps time for one run: an answer for one amount beats a second
    run for the next, which starts from it (where this one failed; it holds at least what this one
    held). ``probe(resources)``: the load a drain probe of that amount gives (None: none), where
    its search starts instead (half such a step under it), in steps of at most 1 + 0.95 x
    resolution (upwards above the probe's figure, longer with each pass in a row:
    :func:`_climbing`), its ends all run on it (none assumed from the amount below; a first step
    down from a failure that would pass below the load the amount below held stops at their
    middle: :func:`_above_fewer`)."""
    st, deadline = settings, budget.deadline
    out: list[Bracket] = []
    below: Bracket | None = None
    amounts = sorted(resources)
    probe_s = [0.0]  # the longest probe so far: what each later amount keeps besides a run
    for i, res in enumerate(amounts):
        b = Bracket(res, rate=st.rate)
        if deadline is not None:
            later = len(amounts) - i - 1
            share = time.monotonic() + (deadline - time.monotonic()) / (later + 1)
            b.fits = lambda runs=1, b=b, share=share, later=later: _fits(
                b, share, deadline, later, st.resolution, budget.run_cost_s, probe_s[0], runs
            )
        t0 = time.monotonic()
        probed = b.probed = probe(res) if probe is not None else None
        probe_s[0] = max(probe_s[0], time.monotonic() - t0) if probe is not None else 0.0
        steps = _probed_steps(st) if probed is not None else st
        if probed is None and below is not None and below.held is not None:
            b.held, b.held_assumed = below.held, True
        elif below is not None and not below.held_assumed:
            b.fewer_held = below.held
        first = _centred(probed, steps) if probed is not None else _first_load(below, start, st.factor, st.whole)
        first = min(max(first, st.low), st.high)
        _search(b, verdict, first if st.whole else nice(first), steps)
        if confirm is not None and drifted is not None and confirm_ends(b, confirm, drifted):
            _below_all(b, verdict, steps)
        out.append(b)
        below = b
    return out


def _probed_steps(st: Settings) -> Settings:
    """The steps of a search from a probe, which starts near the capacity: one inside the resolution,
    so that a pass and a fail one step apart are a bracket (5 % under it: loads are rounded to two
    digits); downwards from a failure (or an undecided load whose lag grew faster than the limit),
    where the probe overrated the job (a light job the generator and the broker starve of CPU in a
    run, not in a drain), two such steps at once."""
    step = 1 + 0.95 * st.resolution
    return dataclasses.replace(
        st, factor=min(st.factor, step), factor_down=min(st.factor, step**2), climb=max(st.factor, step)
    )


def _centred(probed: float, steps: Settings) -> float:
    """Where a search from a probe starts: half a step under the probe's figure, so that its first
    two runs (that one passing, the next a step up) bracket the probe. A run at the capacity itself
    is the one a run can least decide (its lag neither stays flat nor grows much): a UC2 run at its
    probe's 47,000 records/s on 1 core was still undecided after 48 s, where one a tenth either
    side decides in 20-30 s. Whole loads (UC4's levels) start at the probe."""
    return probed if steps.whole else probed / math.sqrt(steps.factor)


def _fits(
    b: Bracket,
    share: float,
    deadline: float,
    later: int,
    resolution: float,
    run_cost_s: float | Callable[[], float],
    probe_s: float = 0.0,
    runs: int = 1,
) -> bool:
    """Whether one more run of ``b``'s amount fits (or ``runs`` more, one after the other): its
    first always; then one that ends within its share; while it lacks an end or its ends lie wider
    apart than ``resolution``, one that leaves each of the ``later`` amounts its probe
    (``probe_s``) and a run before ``deadline``."""
    if b.runs == 0 and runs == 1:
        return True
    cost = run_cost_s() if callable(run_cost_s) else run_cost_s
    ends = time.monotonic() + runs * cost
    if ends <= share:
        return True
    unfinished = b.held is None or b.held_assumed or b.failed is None or b.width > resolution
    return unfinished and ends <= deadline - later * (cost + probe_s)


def _first_load(below: Bracket | None, start: float, factor: float, whole: bool) -> float:
    """Where an amount's search starts: where the amount below failed; one step above its highest
    load held when it failed none (its search ended by its runs or its time, not by a failure),
    which this amount holds as well; else ``start``."""
    if below is None:
        return start
    if below.failed is not None:
        return below.failed
    if below.held is not None:
        return _up(below.held, factor, math.inf, whole)
    return start


def _up(x: float, factor: float, high: float, whole: bool) -> float:
    """One step up from ``x``: a level more, or ``factor`` times the load, rounded; at most ``high``."""
    return min(x + 1, high) if whole else nice(min(x * factor, high))


def _down(x: float, factor: float, low: float, whole: bool) -> float:
    """One step down from ``x``: a level less, or the load over ``factor``, rounded; at least ``low``."""
    return max(x - 1, low) if whole else nice(max(x / factor, low))


def _run(b: Bracket, verdict, x: float) -> str:
    """Run ``x`` on ``b``'s amount; the bracket's ends move with its verdict."""
    v = verdict(x, b.resources)
    b.verdicts[x] = v
    if v == PASS and (b.held is None or b.held_assumed or x > b.held):
        b.held, b.held_assumed = x, False
    elif v == FAIL and (b.failed is None or x < b.failed):
        b.failed, b.failed_undecided = x, False
    elif v == INVALID and b.failed is None:
        b.ceiling = f"the load generator could not produce {x:,.0f} records/s here"
    return v


def _more(b: Bracket, st: Settings) -> bool:
    """Whether ``b`` may run once more: within its runs and its time."""
    if b.runs >= st.max_runs:
        return False
    if not b.fits():
        b.out_of_time = True
        return False
    return True


def _search(b: Bracket, verdict, load: float, st: Settings) -> None:
    _outwards(b, verdict, load, st)
    _inwards(b, verdict, st)
    if b.failed is None:  # no load above the held one failed: the lowest that stayed undecided, said so
        b.failed = lowest_undecided_above(b.verdicts, b.held)
        b.failed_undecided = b.failed is not None


def _outwards(b: Bracket, verdict, load: float, st: Settings) -> None:
    """Outwards until one load held and one did not; a load the generator could not produce is no
    end of the search while the loads between it and the highest held one are untried."""
    x, invalid = load, math.inf
    while x is not None and _more(b, st):
        if (b.held is not None and x <= b.held) or (b.failed is not None and x >= b.failed):
            break
        # a load that stayed undecided is not run again on the way up: the search steps past it
        v = b.verdicts[x] if b.verdicts.get(x) == UNDECIDED and b.held is not None else _run(b, verdict, x)
        if v == INVALID:
            invalid = min(invalid, x)
        x = _next_outwards(b, v, x, invalid, st)


def _next_outwards(b: Bracket, v: str, x: float, invalid: float, st: Settings) -> float | None:
    """The load the outward search tries after ``x`` (its verdict ``v``); None: it ends."""
    if v == INVALID:
        return _below_invalid(b, invalid, st)
    if v == PASS and b.failed is not None:
        return None
    if v == PASS or (v == UNDECIDED and b.held is not None):  # undecided: neither end, one step past it
        if x >= st.high:
            b.ceiling = f"{st.high:,.0f} records/s is the highest load the search may try"
            return None
        up = _up(x, _climbing(b, st) if v == PASS else st.factor, st.high, st.whole)
        if v == PASS and _reaches(b, x):
            up = _up(up, st.factor, st.high, st.whole)
        return _below_invalid(b, invalid, st) if up >= invalid else up
    if b.held is not None or x <= st.low:
        return None
    # A load that failed may lie far over the capacity (a probe that overrated the job): a long step
    # down, as from one that stayed undecided while its lag grew faster than the limit (likely, not
    # surely: on 2 cores UC2's demo was undecided at 53,000 records/s with 19 % of it piling up, and
    # one step down, at 43,000, again). One undecided with its lag's trend under the limit lies near
    # the capacity: one step, where two left the demo on 1 core 52 % apart (undecided at 32,000
    # records/s, its lag flat; then a pass at 21,000, and no time to halve them).
    near = v == UNDECIDED and not (st.leans is not None and st.leans(x, b.resources))
    return _above_fewer(b, x, _down(x, st.factor if near else st.factor_down or st.factor, st.low, st.whole), st)


def _above_fewer(b: Bracket, x: float, down: float, st: Settings) -> float:
    """The first step down from a load that did not hold, ``x``, where ``down`` would pass below the
    load fewer resources held: their middle instead, run on this amount. More resources most likely
    hold at least as much, and a first run that fails above it more likely met a busy machine: the
    demo's 2 cores failed 58,000 records/s with the machine 96 % busy, stepped two steps down to
    39,000 and answered "held ~39,000, failed ~58,000" beside 1 core's "held ~45,000". Only the
    first such step: where the middle does not hold either, the search steps down from it as
    from any load."""
    floor = b.fewer_held
    if floor is None or not down < floor < x or any(y > floor and y != x for y in b.verdicts):
        return down
    mid = between(floor, x, st.whole)
    return down if mid is None or mid in b.verdicts else mid


def _climbing(b: Bracket, st: Settings) -> float:
    """The step up from a load held: ``factor``; above a probe's figure, which underrated the job,
    ``factor`` squared after the second pass there, to the fourth power after the third, and so on
    up to ``climb`` (the search's own factor). Steps within the resolution cost a run per 15 % on
    the way up: a windowed count probed at 26,000 records/s on 1 core held every load up to 100,000
    in 13 steps, and its runs ran out before one failed. A failure then is bisected back to the
    resolution in a few runs."""
    if b.probed is None or st.climb is None:  # (whole loads step by one level whatever the factor)
        return st.factor
    above = sum(1 for x, v in b.verdicts.items() if v == PASS and x > b.probed)
    return min(st.climb, st.factor ** (2 ** max(0, above - 1)))


def _reaches(b: Bracket, x: float) -> bool:
    """Whether the step up from ``x``, which held, goes two steps: no load of ``b``'s amount failed
    yet, ``x`` lies above its probe's figure (which underrated the job: one step more most likely
    holds too) and the time budget holds one more run of it but not two. Its answer then has an
    upper end, wider apart, where one step would most likely have left it "higher untested" (UC2's
    demo on 1 core held 33,000, 41,000 and 51,000 records/s from a probe's 37,000 when its share
    of the time ended)."""
    return b.failed is None and b.probed is not None and x > b.probed and not b.fits(2)


def _below_invalid(b: Bracket, invalid: float, st: Settings) -> float | None:
    """The next load to try under the lowest load the generator could not produce: the middle
    between it and the highest load held, while they lie wider apart than the resolution; with
    none held yet (a start above what the generator produces), one step down, unless a load there
    already failed."""
    if b.held is None:
        below = _down(invalid, st.factor_down or st.factor, st.low, st.whole)
        return None if below >= invalid or b.failed is not None else below
    if b.rate(invalid) / b.rate(b.held) - 1 <= st.resolution:
        return None
    return between(b.held, invalid, st.whole)


def _inwards(b: Bracket, verdict, st: Settings) -> None:
    """Inwards, the geometric middle until the ends are within the resolution."""
    while b.held is not None and b.failed is not None:
        if b.width <= st.resolution or not _more(b, st):
            break
        mid = _inside(b, st.resolution, st.whole)
        if mid is None:
            break
        if _run(b, verdict, mid) == INVALID:
            # the middle could not be judged (the generator fell short): held and failed stay where
            # they are, so asking again would ask for the same run forever
            b.ceiling = f"the load generator could not produce {mid:,.0f} records/s here: the bracket stops narrowing"
            break


def lowest_undecided_above(verdicts: dict, held: float | None) -> float | None:
    """The lowest load above ``held`` (any load without one) whose verdict stayed undecided."""
    return min((x for x, v in verdicts.items() if v == UNDECIDED and (held is None or x > held)), default=None)


def _inside(b: Bracket, resolution: float, whole: bool) -> float | None:
    """The next load between the ends: their middle; with loads between them that stayed undecided,
    the middle of the highest of those and the failed end, then of the held end and the lowest of
    those, while either side is wider than ``resolution`` (no run inside the undecided span, which
    longer runs did not resolve); None when nothing is left to run."""
    undecided = [x for x, v in b.verdicts.items() if v == UNDECIDED and b.held < x < b.failed]
    if not undecided:
        mid = between(b.held, b.failed, whole)
        return None if mid in b.verdicts else mid
    middle = functools.partial(between, whole=whole)
    return around_undecided(b.held, b.failed, b.verdicts, resolution, middle, b.rate)


def around_undecided(held, failed, verdicts: dict, resolution: float, middle, rate=float) -> float | None:
    """The next load between ``held`` and ``failed`` where loads between them stayed undecided:
    the ``middle`` of the highest of those and ``failed``, then of ``held`` and the lowest of
    those, while that side is wider than ``resolution`` (in ``rate``s) and its middle untried; None
    when neither is."""
    undecided = [x for x, v in verdicts.items() if v == UNDECIDED and held < x < failed]
    low, high = min(undecided), max(undecided)
    sides = [(high, failed), (held, low)]
    for x in (middle(lo, hi) for lo, hi in sides if rate(hi) / rate(lo) - 1 > resolution):
        if x is not None and x not in verdicts:
            return x
    return None


def _below_all(b: Bracket, verdict, st: Settings) -> None:
    """A bracket left without a held end by its runs again: the search goes on below the lowest
    load tried, as far as its runs and time allow (those runs are not run again)."""
    lowest = min(b.verdicts)
    if lowest > st.low:
        _search(b, verdict, _down(lowest, st.factor, st.low, st.whole), st)


def confirm_ends(b: Bracket, confirm: Callable[[float, int], str], drifted: Callable[[float, int], bool]) -> bool:
    """Run both ends again, interleaved, when a run that decided either drifted; an end whose two
    runs disagree is undecided, and the bracket widens past it (see the module notes). True when
    no load held is left: the search must go on below."""
    ends = [x for x in (None if b.held_assumed else b.held, b.failed) if x is not None]
    if not any(drifted(x, b.resources) for x in ends):
        return False
    # the time budget holds for these runs too, both or none: one end run again alone puts the drift
    # on that end only. A bracket the search finished is not cut short by it (out_of_time): its
    # answer names the deciding runs on a drifting machine instead
    if b.runs and not b.fits(len(ends)):
        return False
    for x in ends:
        if not b.fits():
            break  # the first ran longer than planned: its verdict still counts
        b.confirmed[x] = confirm(x, b.resources)
    held, failed = b.held, b.failed
    if held in b.confirmed and b.confirmed[held] != PASS:
        b.verdicts[held] = UNDECIDED
        lower = [x for x, v in b.verdicts.items() if v == PASS and x < held]
        b.held = max(lower) if lower else None
    if failed in b.confirmed and b.confirmed[failed] == PASS and b.verdicts.get(failed) != PASS:
        b.verdicts[failed] = UNDECIDED
        higher = [x for x, v in b.verdicts.items() if v == FAIL and x > failed]
        if higher:
            b.failed, b.failed_undecided = min(higher), False
        else:
            b.failed_undecided = True
    return b.held is None and not b.held_assumed


@dataclass(frozen=True)
class BracketSearch:
    """The bracket strategy (:class:`~streamscale.benchmark.search.Search`): per resource amount a
    bracket from ``start`` (or from its probe), its ends run again where a drifting machine decided
    them."""

    resources: tuple
    start: float
    settings: Settings
    run_cost_s: Callable[[], float]
    probe: Callable[[int], float | None] | None = None  # a resource amount's start from a drain probe

    def run(self, trials) -> Outcome:
        budget = Budget(trials.deadline, self.run_cost_s)
        found = bracket_search(
            list(self.resources),
            trials.verdict,
            self.start,
            self.settings,
            trials.confirm,
            trials.drifted,
            budget=budget,
            probe=self.probe,
        )
        return outcome_of([b.as_dict() for b in found])


@dataclass(frozen=True)
class EndsDecided:
    """A bracket search whose brackets' ends are then decided by runs of their own
    (``trials.ends_decided``: strategy.confirm's long runs, or runs under the SLO where the search
    judged a looser lag threshold), refined where they do not hold."""

    search: BracketSearch

    def run(self, trials) -> Outcome:
        found = self.search.run(trials)
        rows, whole = found.brackets, self.search.settings.whole
        return outcome_of([trials.ends_decided(b, whole, len(rows) - i - 1) for i, b in enumerate(rows)])


def outcome_of(rows: list[dict]) -> Outcome:
    """A bracket search's outcome from its rows (as :meth:`Bracket.as_dict` writes them)."""
    metric = {b["resources"]: b["held"] for b in rows}
    return Outcome(metric, {b["resources"] for b in rows if b["held_assumed"]}, rows)
