"""A drain probe: where a bracket search starts for one resource amount.

The job, on that amount, reads a backlog of its own records (the spec's records, inputs and keys,
written before its query starts, as fast as the generator goes) in micro-batches of a streaming
run's size; its rate is the records of the batches after the first (which pays the cold start)
over their summed durations. One run of :class:`~streamscale.experiment.sut.SutRun` with a drain's
stop policy does it, in the Spark session the amount's experiments then run in.

A batch's size decides what the rate means: a batch costs a fixed time (planning, scheduling,
committing: 0.6 s for a small job on one core) and a time per record, so small batches say little of
what the job does in a streaming run near its capacity, whose batches grow until they take seconds.
The figure is for batches of a target length: :data:`BATCH_S`, or a third of the
processing-latency SLO's limit where that is shorter. The first drain's batches are sized to take
about a second at a guess (the spec's first load on the first amount; the amount below's figure,
scaled, on the others), and it warms a fresh JVM; a second drain (and more, up to :data:`ROUNDS`,
while the batches took less than two thirds of the target, or larger batches took no longer) reads
batches sized for the target at the figure so far (until a cost can be fitted, at least half as
large again as the last's, and four times as large where larger batches took no longer). A
windowed job's drains span its window period and lateness in event time, so that windows close in
them as in a run (the first run after a probe whose windows closed nowhere paid for the JIT's first
closes: a lag that rose for its first 24 s, failed at 72,000 records/s, where a 300 s run passed).
The cost of a batch is fitted to the batches of the drains, and the figure is what a batch of the
target length reads per second by that fit (at most :data:`EXTRAPOLATION` times the best rate
measured). The probe gives a start, not an answer: no verdict comes from it, and a run shares the
machine with its generator while a drain does not.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from streamscale import terminal
from streamscale.benchmark.units import approx
from streamscale.errors import ConfigError

RATED_BATCHES = 4  # batches a drain rates, after its first
FIRST_BATCH_S = 1.0  # the first drain's batches are sized to take about this long at the guess
BATCH_S = 4.0  # the figure: what the job reads in batches of this long (a streaming run near its capacity)
# ...or of a third of the processing-latency SLO's limit, where that is shorter: a record waits for the
# batch running when it arrives, then for its own, so batches of a third keep the p95 below the limit
LATENCY_SHARE = 1 / 3
MIN_RECORDS = 5_000
MAX_RECORDS = 3_000_000  # ~8 s of the generator's fastest on this machine kind
DRAIN_S = 120.0  # the longest a drain reads its backlog (a job far slower than the guess)
ROUNDS = 5  # drains at most (each one's batches sized from the last: a job far faster than the guess)
# a fitted line read far beyond the batches it was fitted to is no figure: at most this many times
# the best rate a drain measured (a light job's 73,000-record batches took 1.0 s, and the line through
# them read 673,000/s at 2.7 s, where the generator could not even produce 390,000)
EXTRAPOLATION = 2.0
# batches that took within this factor of the target read what a batch of the target does, whatever
# the fixed part of their cost (an informed first drain's, sized for the target, need no second)
AT_TARGET = 1.1
NEAR = 1.5  # a drain whose batches took within this factor below the target needs no larger ones
# how much a drain's batches grow over the last's where larger batches took no longer (their fixed cost
# hides what a record costs)
FLAT_GROWTH = 4.0


@dataclass(frozen=True)
class Drain:
    """One drain of a probe: its backlog (sized for ``guess`` records/s), what the query read
    and how fast."""

    round: int
    guess: float  # records/s the backlog was sized for
    records: int  # the backlog (what the job reads of it)
    batch_records: int  # the most records a batch may read (the cap the drain asked for; largest: what it read)
    processed: int  # records the query read before it stopped
    rate: float  # records/s over the rated batches' summed durations (0: none was rated)
    batches: int  # rated batches
    batch_s: float  # their mean duration (NaN: none)
    undrained: int  # records of the backlog the query had not read when the drain ended
    read_s: float  # from the query's start until it read the backlog (or DRAIN_S ran out)
    wall_s: float  # the drain's whole run: topics, backlog, query, tear-down
    per_batch: tuple = ()  # (records, ms) of each rated batch
    warm: bool = True  # rated on a warm JVM (a first drain: only in its second half, where it has one)

    @property
    def largest(self) -> int:
        """The most records a rated batch read (less than batch_records where the job caps them)."""
        return max((n for n, _ in self.per_batch), default=0)

    @property
    def estimate(self) -> float:
        """The drain's rate; without a rated batch, the records read over the drain's time."""
        return self.rate if self.rate > 0 else self.processed / max(self.read_s, 1e-9)


@dataclass(frozen=True)
class Probe:
    """A resource amount's probe: its figure (records/s the job read; None: none came) and drains."""

    resources: int
    config: str
    rate: float | None
    drains: tuple[Drain, ...]
    note: str = ""
    fixed_s: float = math.nan  # what a batch costs whatever its records (the fit's intercept), s
    per_record_us: float = math.nan  # what each record adds (its slope), microseconds
    batch_s: float = BATCH_S  # the batches the figure is for

    def as_dict(self) -> dict:
        return {
            "resources": self.resources,
            "config": self.config,
            "records_per_s": None if self.rate is None else round(self.rate),
            "note": self.note,
            "fixed_s": self.fixed_s,
            "per_record_us": self.per_record_us,
            "batch_s": self.batch_s,
            "drains": [{**asdict(d), "per_batch": [list(x) for x in d.per_batch]} for d in self.drains],
        }

    @classmethod
    def from_dict(cls, d: dict) -> Probe:
        """A probe as :meth:`as_dict` wrote it (an interrupted execution's, resumed)."""
        rate = d["records_per_s"]
        drains = tuple(Drain(**{**x, "per_batch": tuple(map(tuple, x["per_batch"]))}) for x in d["drains"])
        return cls(
            int(d["resources"]),
            d["config"],
            None if rate is None else float(rate),
            drains,
            d["note"],
            float(d["fixed_s"]),
            float(d["per_record_us"]),
            float(d["batch_s"]),
        )

    def words(self, amount: str) -> str:
        """What the progress says of it."""
        if self.rate is None:
            return f"probe: {amount}: no figure ({self.note}): the search starts at the spec's first load"
        sizes = " and ".join(f"{d.batch_records:,}" for d in self.drains)
        said = f"probe: {amount}: ~{approx(self.rate)} records/s in batches of {self.batch_s:.1f} s"
        said += f" (batches drained: {sizes}"
        if math.isfinite(self.fixed_s):
            said += f"; {self.fixed_s:.2f} s a batch and {self.per_record_us:.1f} us a record"
        return said + ")" + (f"; {self.note}" if self.note else "")


def sizing(rate: float, batch_s: float, event_s: float = 0.0) -> tuple[int, int]:
    """(backlog, records per batch) for batches of about ``batch_s`` at ``rate`` records/s: the
    first and RATED_BATCHES more, or as many whole batches more as span ``event_s`` of event time
    at that rate (a windowed job's window period and lateness: its windows close in the drain, as
    they do in a run, and the JIT compiles their closing there); within MIN_RECORDS and
    MAX_RECORDS."""
    batches = RATED_BATCHES + 1
    batch = max(1, int(min(MAX_RECORDS, max(MIN_RECORDS, rate * batch_s * batches))) // batches)
    if event_s > 0:
        batches = max(batches, math.ceil(rate * event_s / batch) + 1)
    batches = max(1, min(batches, MAX_RECORDS // batch))
    return batch * batches, batch


def warm_first(batches: int) -> bool:
    """Whether a first drain of ``batches`` batches warms its JVM in its first half, its second
    half rated as a later drain's would be."""
    return batches >= 2 * (RATED_BATCHES + 1)


def drain_of(result, round_: int, guess: float, records: int, batch: int) -> Drain:
    """A drain from its run's result (streamscale.experiment.sut.SutResult)."""
    # the backlog's tail (what the partitions held beyond whole batches) is no batch of its size
    largest = max((b["input_rows"] for b in result.batches), default=0)
    read = [b for b in result.batches if b["input_rows"]]
    # the first: the cold start; a first drain of many batches (a windowed job's) warms a fresh JVM
    # in its first half and is rated by its second (or from where its runner confined it)
    first = len(read) // 2 if round_ == 1 and warm_first(len(read)) else 1
    if result.rated_from is not None:
        first = max(1, result.rated_from)
    rated = [b for b in read[first:] if b["input_rows"] >= largest / 2]
    busy = sum(b["batch_ms"] for b in rated) / 1000
    return Drain(
        round=round_,
        guess=guess,
        records=records,
        batch_records=batch,
        processed=result.processed_records,
        rate=sum(b["input_rows"] for b in rated) / busy if busy > 0 else 0.0,
        batches=len(rated),
        batch_s=busy / len(rated) if rated else math.nan,
        undrained=result.undrained,
        read_s=result.ran_s,
        wall_s=result.wall_s,
        per_batch=tuple((int(b["input_rows"]), int(b["batch_ms"])) for b in rated),
        warm=round_ > 1 or warm_first(len(read)),
    )


def batch_cost(per_batch: list[tuple[int, int]]) -> tuple[float, float] | None:
    """(seconds a batch costs whatever its records, seconds each record adds): the least-squares
    line through (records, duration) of batches whose sizes differ by at least 1.5x; None where
    they do not, or the line does not rise."""
    if len(per_batch) < 3:
        return None
    xs = [float(n) for n, _ in per_batch]
    ys = [ms / 1000 for _, ms in per_batch]
    if max(xs) < 1.5 * min(xs):
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    if slope <= 0:
        return None
    return max(0.0, my - slope * mx), slope


def capped(d: Drain) -> bool:
    """Whether the job read smaller batches than the drain asked for (its own cap)."""
    # Spark's maxOffsetsPerTrigger splits a batch over the partitions to the record: a batch asked
    # for 104,096 records and capped at 100,000 reads 100,000 (the tail batch is not rated)
    return 0 < d.largest < d.batch_records * 0.99


def batch_target_s(processing_limit_ms: float | None) -> float:
    """The batches a probe's figure is for: BATCH_S, or LATENCY_SHARE of the processing-latency
    limit where that is shorter (at least a second)."""
    if processing_limit_ms is None:
        return BATCH_S
    return max(1.0, min(BATCH_S, processing_limit_ms / 1000 * LATENCY_SHARE))


def near(d: Drain, batch_s: float, cost: tuple[float, float] | None = None) -> bool:
    """Whether a drain's batches were about those of ``batch_s``: by the fitted ``cost`` of a batch,
    at least 1/NEAR of the records such a batch reads (a batch that costs a fixed 1.65 s, as on an
    executor of a cluster, takes 1.8 s for 41,000 records where one of 2.7 s reads 200,000); without
    a fit, at least 1/NEAR of its duration."""
    if cost is not None and cost[0] < batch_s:
        fixed, per_record = cost
        return d.largest >= (batch_s - fixed) / per_record / NEAR
    return d.batch_s >= batch_s / NEAR


def fit_batches(drains: list[Drain]) -> list[tuple[int, int]]:
    """The (records, ms) of the batches a cost is fitted to: the drains' rated batches (with three
    or more drains, the first's left out: they warmed a fresh JVM)."""
    return [x for d in (drains[1:] if len(drains) >= 3 else drains) for x in d.per_batch]


def nearby(drains: list[Drain], batch_s: float) -> bool:
    """Whether the last drain's batches were about those of ``batch_s`` (:func:`near`, by the cost
    fitted so far), and not :func:`flat`: no larger ones are needed."""
    return near(drains[-1], batch_s, fitted_cost(drains)) and not flat(drains)


def fitted_cost(drains: list[Drain]) -> tuple[float, float] | None:
    """The cost of a batch fitted to the drains' batches (:func:`fit_batches`)."""
    return batch_cost(fit_batches(drains))


def flat(drains: list[Drain]) -> bool:
    """Whether the batches a cost is fitted to (:func:`fit_batches`) differ in size by 1.5x or more
    and the larger took no longer: their fixed cost hides what a record costs (and a warming JVM
    makes the line fall), so how long they took says nothing of how near a batch of the target
    they were (a windowed count's batches of 3,000 records took 1.9 s, near a target of 2.7 s by
    duration, where a streaming run read 125,000 a batch in 1.3 s)."""
    batches = fit_batches(drains)
    sizes = [n for n, _ in batches]
    return len(sizes) >= 3 and max(sizes) >= 1.5 * min(sizes) and batch_cost(batches) is None


def growth(drains: list[Drain], batch_s: float) -> float:
    """How many times the largest batch read the next drain's batches read at least, while no cost
    is fitted: 1.5 where the batches are too alike to fit one; where they are :func:`flat`,
    FLAT_GROWTH, or with the cold first drain among them (two drains), the square of how far below
    ``batch_s`` the last took, within 1.5 and FLAT_GROWTH. A windowed count's batches of 2,000 to
    21,500 records all took 1.2-1.9 s: grown by the target over their duration (~2x a drain), its
    probe read a quarter of what its runs held. Four times is what warm drains allow: a line that
    did not rise from n to 4n records (within the ~0.4 s a warming JVM gains from a drain to the
    next) puts a record's cost under 0.4 s / 3n, so batches of 16n take at most ~1.6 s more. After
    a cold first drain, whose batches took ~0.5 s more, a line that fell bounds a record's cost far
    less: the square keeps the next batches under the target times how far below it the last took,
    even where their records cost all of it."""
    if not flat(drains):
        return 1.5
    if len(drains) >= 3:
        return FLAT_GROWTH
    return max(1.5, min(FLAT_GROWTH, (batch_s / drains[-1].batch_s) ** 2))


def figure(
    drains: list[Drain], batch_s: float = BATCH_S, bounded: bool = True
) -> tuple[float, tuple[float, float] | None]:
    """The probe's records/s: the last drain's rate where its batches took about ``batch_s`` or
    were capped by the job (its max_offsets_per_trigger: the largest batches it reads in a
    streaming run too); else what the fitted cost of a batch gives for a batch of ``batch_s`` (at
    least the best rate a drain measured), or without a fit the best rate measured. With three
    drains the first (whose batches warmed a fresh JVM) is left out of the fit. ``bounded=False``:
    the line as it reads, beyond EXTRAPOLATION (what the next drain's batches are sized from, so
    that it measures there instead)."""
    best, last = max(d.estimate for d in drains), drains[-1]
    cost = fitted_cost(drains)
    if capped(last) or near(last, batch_s, cost):
        return last.estimate, cost
    if cost is None:
        return best, cost
    fixed, per_record = cost
    fitted = (batch_s - fixed) / (per_record * batch_s) if fixed < batch_s else 0.0
    return min(max(best, fitted), EXTRAPOLATION * best if bounded else math.inf), cost


def unfitted(drains: list[Drain], batch_s: float) -> bool:
    """Whether the next drain must read larger batches to fit their cost: none is fitted yet, the
    job did not cap its batches, and the last ones took less than 1/AT_TARGET of ``batch_s`` (what
    they read says little of a batch of ``batch_s`` while the fixed part of their cost is unknown)."""
    last = drains[-1]
    return not capped(last) and last.batch_s < batch_s / AT_TARGET and fitted_cost(drains) is None


def wider(records: int, batch: int, largest: int, factor: float = 1.5) -> tuple[int, int]:
    """(backlog, records per batch) of a drain whose batches read at least ``factor`` times the
    ``largest`` a drain read so far, where no cost could be fitted yet: batches of about the same
    size cannot tell what a batch costs whatever its size from what each record adds (an executor's
    batches of 16,000 and 22,010 records both took 1.8 s, and the probe read 12,100/s where runs
    held 88,000). At most MAX_RECORDS in all."""
    least = min(math.ceil(factor * largest), MAX_RECORDS // 2)
    if batch >= least:
        return records, batch
    batches = max(2, min(records // batch, MAX_RECORDS // least))
    return least * batches, least


def probe(
    run_drain: Callable[[float, int, int], object],
    guess: float,
    resources: int,
    config: str = "",
    batch_s: float = BATCH_S,
    event_s: float = 0.0,
    informed: bool = False,
) -> Probe:
    """A resource amount's probe: ``run_drain(guess, records, batch_records)`` runs one drain (its
    SutResult); its figure is for batches of ``batch_s``; each drain spans ``event_s`` of event
    time at least (:func:`sizing`). The first drain's batches are sized for FIRST_BATCH_S at
    ``guess`` (it warms a fresh JVM, and is rated by its second half where it is long), or for
    ``batch_s`` where the guess is ``informed`` (scaled from a probe of fewer resources: a second
    drain sized so would mostly repeat the first, ~20 s on 2 cores of UC2); the next
    for ``batch_s`` at the figure so far (until a cost is fitted, at least :func:`growth` times the
    largest batch read: :func:`wider`), and so on up to ROUNDS while a drain's batches took less
    than 1/NEAR of ``batch_s`` or were :func:`flat`, the job did not cap them, and larger ones fit
    the backlog."""
    drains: list[Drain] = []
    rate, size_s = guess, (batch_s if informed else min(FIRST_BATCH_S, batch_s))
    for round_ in range(1, ROUNDS + 1):
        records, batch = sizing(rate, size_s, event_s)
        if drains and unfitted(drains, batch_s):
            records, batch = wider(records, batch, drains[-1].largest, growth(drains, batch_s))
        if len(drains) >= 2 and batch < 1.5 * drains[-1].largest:
            break  # no larger batch to learn from
        drains.append(drain_of(run_drain(rate, records, batch), round_, rate, records, batch))
        last = drains[-1]
        # nothing read; or, once a JVM is warm (after the first drain, or in its second half),
        # capped by the job's own max_offsets_per_trigger or batches near the target
        if last.estimate <= 0 or (last.warm and (capped(last) or nearby(drains, batch_s))):
            break
        rate, size_s = figure(drains, batch_s, bounded=False)[0], batch_s
    if drains[-1].estimate <= 0:
        return Probe(resources, config, None, tuple(drains), "the job read none of its backlog")
    rate, cost = figure(drains, batch_s)
    fixed, per_record = cost if cost is not None else (math.nan, math.nan)
    note = ""
    if flat(drains):
        note = "larger batches took no longer: the best rate measured (the job may read more)"
    elif not near(drains[-1], batch_s, cost) and cost is None:
        note = "batches too alike to fit their cost: the best rate measured"
    if capped(drains[-1]):
        note = f"the job reads at most {drains[-1].largest:,} records a batch: their rate"
    return Probe(resources, config, float(round(rate)), tuple(drains), note, fixed, per_record * 1e6, batch_s)


class Probes:
    """An execution's drain probes: one per configuration and resource amount, run when its search
    starts, kept in ``probes.json`` (an interrupted execution resumes without running them again).
    ``run_drain(load, resources, config, records, batch_records)`` runs one drain (its SutResult)."""

    def __init__(self, plan, out_dir: Path, run_drain: Callable[..., object]):
        self.plan, self.path, self.run_drain = plan, out_dir / "probes.json", run_drain
        self.found: dict[tuple[str, int], Probe] = {}
        if self.path.exists():
            try:
                rows = json.loads(self.path.read_text())
                self.found = {(p.config, p.resources): p for p in map(Probe.from_dict, rows)}
            except (ValueError, KeyError, TypeError) as exc:
                raise ConfigError(f"{self.path}: not a probes file of this version ({exc})") from None

    def as_list(self) -> list[dict]:
        return [p.as_dict() for _, p in sorted(self.found.items())]

    def start(self, config: str, resources: int) -> float | None:
        """The load a search of ``resources`` under ``config`` starts at: its probe's figure as a
        load value (None: the probe gave none)."""
        key = (config, int(resources))
        if key not in self.found:
            self.found[key] = self._probe(config, int(resources))
            self.path.write_text(json.dumps(self.as_list(), indent=2))
        found = self.found[key]
        if found.rate is None:
            return None
        return self.plan.load.load_of(found.rate / self._read_share(config, resources))

    def _read_share(self, config: str, resources: int) -> float:
        """Of the load, what the job reads (the probe's figure counts only that)."""
        point = self.plan.point(self.plan.runs.load_values[0], resources, config)
        return point.read_rate / point.rate if point.rate > 0 else 1.0

    def _guess(self, config: str, resources: int) -> tuple[float, bool]:
        """records/s the first drain is sized for, and whether a probe informed it: the amount
        below's figure scaled to this one; on the first amount, the spec's first load."""
        below = [p for (c, n), p in self.found.items() if c == config and n < resources and p.rate]
        if below:
            p = max(below, key=lambda p: p.resources)
            return p.rate * resources / p.resources, True
        first = self.plan.runs.load_values[0]
        return self.plan.load.rate(first) * self._read_share(config, resources), False

    def _probe(self, config: str, resources: int) -> Probe:
        """Run the probe of ``resources`` under ``config`` and say its figure."""
        from streamscale.errors import SparkDied

        point = self.plan.point(self.plan.runs.load_values[0], resources, config)
        console = terminal.console()
        if self.plan.pipeline(point).trigger().real_time:
            found = Probe(resources, config, None, (), "real-time mode reads no backlog in batches")
        else:
            share = self._read_share(config, resources)

            def run(guess: float, records: int, batch: int):
                load = self.plan.load.load_of(guess / share)
                return self.run_drain(load, resources, config, round(records / share), batch)

            target = batch_target_s(point.processing_limit_ms)
            try:
                with console.status(f"probe: {self.plan.axes.resources(resources)} draining a backlog"):
                    event_s = (point.period_s or 0.0) + (point.lateness_s if point.period_s else 0.0)
                    guess, informed = self._guess(config, resources)
                    found = probe(run, guess, resources, config, target, event_s, informed)
            except SparkDied as died:
                found = Probe(resources, config, None, (), f"the job ran out of memory: {died}")
        console.print(f"  {found.words(self.plan.axes.resources(resources))}", highlight=False)
        return found
