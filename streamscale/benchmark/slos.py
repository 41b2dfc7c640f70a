"""The SLOs as checkers, and one pure :func:`judge` that serves a run's looks (may it stop?) and its
final verdict.

An :class:`Observation` is a run as the SLOs see it: its lag samples, its micro-batches, the load it
was given and what the machine did around it. Every checker judges one steady span of it: from the
end of the warm-up, or later where the lag trend found the start-up backlog still draining (a
latency percentile that took in the backlog's records would fail a steady state that holds). A
backlog that never drains (the lag still surely falling faster than the limit when the run ends)
fails the lag trend, said so; at a look it only lets the run go on.

Each checker's :meth:`check` gives an :class:`SloVerdict` (name, value, bounds, limit, verdict,
notes). A run is invalid when its validity fails, else it fails when any SLO failed, else it is
undecided while any is, else it passes. At a look the lag trend leads: a failed trend decides the
run, an undecided one lets it go on (unless another SLO surely fails: a processing p95 that the
records still to come by the run's longest cannot bring back within its limit), a held one
decides it once no other SLO is undecided.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

from streamscale.benchmark.sloregistry import SloKind, register_slo
from streamscale.benchmark.verdict import (
    allow_for_slowdown,
    bounds_verdict,
    bucket_floor_ms,
    delivered_rate,
    latency_growing,
    percentile_verdict,
    run_validity,
    worst,
)
from streamscale.experiment.processing import processing_bounds, processing_trend, records_over
from streamscale.experiment.slo import lag_limit, lag_trend_estimate, latency_percentile_ms, median_batch_ms, stall

# The order a run's notes are said in, whichever SLO said them.
NOTE_INVALID, NOTE_STALL, NOTE_BACKLOG, NOTE_GROWING, NOTE_EXCUSE = range(5)


@dataclass(frozen=True)
class Observation:
    """A run so far (at a look) or whole: what the SLOs judge."""

    lag: Sequence  # LagSample: once a second
    batches: Sequence  # the micro-batches' progress, as dicts
    t0_wall: float | None  # the wall-clock time of the first lag sample
    warmup_s: float
    topic: str | None = None  # the input topic, whose end offsets the batches read
    period_s: float | None = None  # the pipeline's window slide: its lag jumps once per period
    ran_s: float = 0.0
    target_rate: float = 0.0  # records/s the generator was asked for
    generator_rate: float = 0.0  # what it reached (the delivered rate without enough samples)
    generator_reached_target: bool = True
    generator_error: str | None = None
    lag_samples_missed: int = 0
    generated: int = 0
    dropped_late: int = 0
    slowdown: float = float("nan")  # the machine slower than at the execution's start (NaN: unknown)
    longest_s: float | None = None  # at a look: when the load stops whatever the looks say

    @property
    def now_s(self) -> float:
        """How far the run got: its length when over, else its last lag sample's time."""
        return self.ran_s or (self.lag[-1].t_s if self.lag else 0.0)

    @cached_property
    def trend(self):
        return lag_trend_estimate(self.lag, self.batches, self.t0_wall, self.warmup_s, self.topic, self.period_s)

    @cached_property
    def steady_s(self) -> float:
        """Where every SLO starts judging (see the module's notes)."""
        start = self.trend.start_s
        return start if math.isfinite(start) else self.warmup_s

    @cached_property
    def delivered(self) -> float:
        """Records/s that reached the input topic over the steady span."""
        return delivered_rate(self.lag, self.steady_s, self.generator_rate)

    @cached_property
    def median_batch_ms(self) -> float | None:
        return median_batch_ms(self.batches, self.t0_wall or None, self.trend.start_s)

    @cached_property
    def stall_batch_s(self) -> float:
        """The median batch after the warm-up, s (0: none): what a stall is counted in. Without the
        trend, so that a look at a stalled query needs no fit."""
        return (median_batch_ms(self.batches, self.t0_wall or None, self.warmup_s) or 0) / 1000

    @cached_property
    def stall(self):
        """The query's stall at the run's end, or None."""
        return stall(self.lag, self.batches, self.t0_wall or None, self.stall_batch_s)

    @cached_property
    def processing_trend(self):
        return processing_trend(self.batches, self.t0_wall, self.steady_s) if self.t0_wall else None

    @cached_property
    def processing_growing(self) -> bool:
        return latency_growing(self.processing_trend, self.ran_s - self.steady_s)

    def slowdown_allowed(self, lag_verdict: str) -> tuple[str, bool, str]:
        """(lag verdict, whether a growing latency fails, a note) once the machine's slowdown
        around the run is allowed for (:func:`~streamscale.benchmark.verdict.allow_for_slowdown`)."""
        return allow_for_slowdown(lag_verdict, self.processing_growing, self.trend.slope, self.delivered, self.slowdown)


@dataclass(frozen=True)
class SloVerdict:
    name: str
    value: float | None  # what the run measured (a slope, a percentile, a fraction)
    low: float | None  # the bounds the value is known between (None: exact or unknown)
    high: float | None
    limit: float | None  # None: no such limit (the SLO holds)
    verdict: str  # pass | fail | undecided | invalid
    notes: tuple[tuple[int, str], ...] = ()  # (order, text): said whatever the run's verdict
    undecided_note: str = ""  # said when the run is undecided and so is this SLO
    sure: bool = False  # a look's fail that the rest of the run cannot undo (it decides the look)


@dataclass(frozen=True)
class Validity:
    """A run can be judged: its load reached the input topic, its lag was sampled."""

    name = "validity"

    def check(self, obs: Observation, confidence: float) -> SloVerdict:
        valid, why = run_validity(
            obs.generator_reached_target,
            obs.lag_samples_missed,
            obs.ran_s,
            obs.delivered,
            obs.target_rate,
            obs.generator_error,
        )
        notes = ((NOTE_INVALID, why),) if why else ()
        return SloVerdict(self.name, obs.delivered, None, None, obs.target_rate, "pass" if valid else "invalid", notes)


@dataclass(frozen=True)
class LagTrend:
    """The consumer lag's trend over the steady span grows by at most ``threshold`` of the records/s
    (``rate``; default: the rate delivered); a query that stopped committing fails as stalled.
    ``at_end``: the run is over, so a backlog still draining when it ended (the lag surely falling
    faster than the limit all through the steady span) is a fail: no steady state was seen; at a
    look it only keeps the run going."""

    threshold: float = 0.01
    rate: float | None = None
    at_end: bool = False
    name = "lag_trend"

    def check(self, obs: Observation, confidence: float) -> SloVerdict:
        limit = lag_limit(self.rate if self.rate is not None else obs.delivered, self.threshold)
        stalled = obs.stall
        if stalled is not None:  # its trend is the one before it stalled: the lag after says more
            note = (NOTE_STALL, stalled.note(obs.stall_batch_s))
            return SloVerdict(self.name, None, None, None, limit, "fail", (note,))
        trend = obs.trend
        if self.at_end and trend.draining(limit):
            note = (
                NOTE_BACKLOG,
                f"the backlog never drained: the lag still fell {-trend.slope:,.0f} records/s when the run "
                f"ended after {obs.ran_s:.0f} s (no steady state seen; a longer run may see one)",
            )
            return SloVerdict(self.name, trend.slope, trend.low, trend.high, limit, "fail", (note,))
        tooth = 0.0 if self.at_end else self._tooth(obs)
        verdict, _, excuse = obs.slowdown_allowed(trend.verdict(limit, confidence, tooth))
        notes = ((NOTE_EXCUSE, excuse),) if excuse else ()
        undecided = ""
        if verdict == "undecided" and not excuse:
            undecided = f"lag interval{_judged_at(trend, confidence)} still straddles the limit after {obs.ran_s:.0f} s"
            if trend.draining(limit):
                undecided = f"lag still falling faster than the limit after {obs.ran_s:.0f} s (catching up, not steady)"
            elif trend.verdict(limit, confidence) == "fail":
                undecided = (
                    f"lag grew {trend.grown():,.0f} records, less than a batch's {tooth:,.0f} (by which the lag after "
                    f"each commit wanders), after {obs.ran_s:.0f} s"
                )
        return SloVerdict(self.name, trend.slope, trend.low, trend.high, limit, verdict, notes, undecided)

    def _tooth(self, obs: Observation) -> float:
        """A look's: the records of a median batch since the warm-up, at the rate judged."""
        rate = self.rate if self.rate is not None else obs.delivered
        return rate * (obs.median_batch_ms or 0.0) / 1000


def _judged_at(trend, confidence: float) -> str:
    """The interval a verdict used where it is not the 95 % one a run line shows: a run looked at
    as it goes is judged at more (its error spent over its looks), so the 95 % interval may lie
    wholly below the limit while the one judged straddles it."""
    if confidence == 0.95 or not math.isfinite(trend.se):
        return ""
    low, high = trend.interval(confidence)
    level = f"{confidence * 100:.3f}".rstrip("0").rstrip(".")
    return f" at {level} %, [{low:,.0f}, {high:,.0f}],"


@dataclass(frozen=True)
class ProcessingGrowth:
    """The records' processing latency does not keep growing over the steady span (Karimov et al.'s
    sustainable throughput)."""

    name = "processing_growth"

    def check(self, obs: Observation, confidence: float) -> SloVerdict:
        trend, growing = obs.processing_trend, obs.processing_growing
        fails = obs.slowdown_allowed("pass")[1] if growing else False
        notes = ((NOTE_GROWING, f"processing latency kept growing ({trend.slope:,.0f} ms per s)"),) if growing else ()
        slope = trend.slope if trend is not None else None
        low, high = (trend.low, trend.high) if trend is not None else (None, None)
        return SloVerdict(self.name, slope, low, high, None, "fail" if fails else "pass", notes)


def _between(what: str, low: float, high: float) -> str:
    """The note of a p95 known to lie in (low, high] with the limit between."""
    return f"{what} p95 lies in ({low:,.0f}, {high:,.0f}] ms, which holds its limit"


@dataclass(frozen=True)
class OutputLatency:
    """The output latency's p95 (event time to output, windowed pipelines) within ``limit_ms``."""

    limit_ms: float | None = None
    name = "output_latency"

    def check(self, obs: Observation, confidence: float) -> SloVerdict:
        p95 = latency_percentile_ms(obs.batches, 0.95, obs.t0_wall or None, obs.steady_s)
        verdict = percentile_verdict(p95, self.limit_ms)
        low = bucket_floor_ms(p95) if p95 is not None and math.isfinite(p95) else None
        why = _between("output", low or 0, p95) if verdict == "undecided" else ""
        return SloVerdict(self.name, p95, low, p95, self.limit_ms, verdict, (), why)


@dataclass(frozen=True)
class ProcessingLatency:
    """Every record's processing latency (Kafka timestamp to its batch's commit): its p95 within
    ``limit_ms``. At a look (``rate``: the records/s the load sends), a p95 is surely over its
    limit when more than 5 % of the records the run would have by its longest (those so far and
    ``rate`` a second until then) already took longer: no records to come can bring it back, so
    it decides the look whatever the lag trend says."""

    limit_ms: float | None = None
    rate: float | None = None
    name = "processing_latency"

    def check(self, obs: Observation, confidence: float) -> SloVerdict:
        bounds = processing_bounds(obs.batches, 0.95, obs.t0_wall or None, obs.steady_s)
        verdict = bounds_verdict(bounds, self.limit_ms)
        low, high = bounds if bounds is not None else (None, None)
        why = _between("processing", low, high) if verdict == "undecided" else ""
        sure = verdict == "fail" and self._surely_over(obs)
        return SloVerdict(self.name, high, low, high, self.limit_ms, verdict, (), why, sure)

    def _surely_over(self, obs: Observation) -> bool:
        if self.rate is None or obs.longest_s is None or self.limit_ms is None:
            return False
        over, counted = records_over(obs.batches, self.limit_ms, obs.t0_wall or None, obs.steady_s)
        to_come = self.rate * max(0.0, obs.longest_s - obs.now_s)
        return over > 0.05 * (counted + to_come)


@dataclass(frozen=True)
class DroppedRecords:
    """At most ``threshold`` of the generated records dropped behind a watermark (None: no limit)."""

    threshold: float | None = 0.01
    name = "dropped_records"

    def check(self, obs: Observation, confidence: float) -> SloVerdict:
        frac = obs.dropped_late / obs.generated if obs.generated else 0.0
        ok = self.threshold is None or frac <= self.threshold
        return SloVerdict(self.name, frac, None, None, self.threshold, "pass" if ok else "fail")


@dataclass(frozen=True)
class Judgement:
    verdict: str  # pass | fail | undecided | invalid
    slos: tuple[SloVerdict, ...]
    decided: bool  # a look may stop the run (see the module's notes)
    notes: tuple[str, ...] = field(default=())

    def of(self, name: str) -> SloVerdict | None:
        return next((v for v in self.slos if v.name == name), None)


def judge(obs: Observation, checkers: Sequence, confidence: float = 0.95, look: bool = False) -> Judgement:
    """The run's verdict by ``checkers`` (the first, at a look, leads: see the module's notes). At a
    look, checking stops as soon as the run's fate at this look is known."""
    slos: list[SloVerdict] = []
    for i, checker in enumerate(checkers):
        v = checker.check(obs, confidence)
        slos.append(v)
        if look and (i == 0 or v.sure) and v.verdict == "fail":
            return Judgement("fail", tuple(slos), True)
        if look and v.verdict == "undecided":
            return _undecided_unless_surely_failed(obs, checkers[i + 1 :], confidence, slos)
    valid = all(v.verdict != "invalid" for v in slos)
    verdict = "invalid" if not valid else worst(*(v.verdict for v in slos))
    notes = sorted((n for v in slos for n in v.notes), key=lambda n: n[0])
    said = [text for _, text in notes]
    if verdict == "undecided":
        said += [v.undecided_note for v in slos if v.verdict == "undecided" and v.undecided_note]
    return Judgement(verdict, tuple(slos), look or verdict != "undecided", tuple(said))


def _undecided_unless_surely_failed(obs: Observation, rest: Sequence, confidence: float, slos: list) -> Judgement:
    """A look with an undecided SLO: undecided, unless one of the ``rest`` surely fails (a
    verdict the rest of the run cannot undo), which decides it."""
    for checker in rest:
        v = checker.check(obs, confidence)
        if v.sure and v.verdict == "fail":
            return Judgement("fail", (*slos, v), True)
    return Judgement("undecided", tuple(slos), False)


# The built-in SLOs, in the order a run is judged by them (a look's are led by the lag trend).
register_slo(SloKind("validity", lambda slos, point, at_end: Validity() if at_end else None, builtin=True))
register_slo(
    SloKind(
        "lag_trend",
        # at a look on the rate the load sends (what the job reads of it); at the end on the rate delivered
        lambda slos, point, at_end: LagTrend(slos.lag_trend_threshold, None if at_end else point.read_rate, at_end),
        at_look=True,
        builtin=True,
    )
)
register_slo(
    SloKind("processing_growth", lambda slos, point, at_end: ProcessingGrowth() if at_end else None, builtin=True)
)
register_slo(
    SloKind(
        "output_latency", lambda slos, point, at_end: OutputLatency(slos.latency_p95_ms), at_look=True, builtin=True
    )
)
register_slo(
    SloKind(
        "processing_latency",
        # at a look on the rate the load sends: what says a p95 is surely over its limit
        lambda slos, point, at_end: ProcessingLatency(point.processing_limit_ms, None if at_end else point.read_rate),
        at_look=True,
        builtin=True,
    )
)
register_slo(
    SloKind(
        "dropped_records",
        # only where the pipeline may drop records behind a watermark
        lambda slos, point, at_end: (
            DroppedRecords(slos.dropped_records_threshold) if at_end and point.drops_late else None
        ),
        builtin=True,
    )
)
