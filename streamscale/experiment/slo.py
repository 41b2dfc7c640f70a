"""The consumer-lag trend and the lag SLO (Henning and Hasselbring, §5.3), computed here and nowhere else.

The lag of a micro-batch query is a sawtooth: it grows while a batch runs and drops when the batch
commits. A least-squares slope through samples taken once a second sees the teeth: three identical
60 s runs at 20,000 records/s gave -560, +332 and +160 records/s against a limit of 200. So the
trend is fitted through the lag *right after each batch commits* (the sawtooth's troughs, one
phase): the topic's end offset at the batch's end time (interpolated between the sampler's
once-a-second readings) minus the batch's end offsets (from the query's progress). With fewer than
four batches after the warm-up the once-a-second samples are used, and the result says so.

A windowed pipeline adds a second, slower tooth: when its windows close (every window slide, e.g.
once a minute) one batch emits them all and the lag jumps. A line through less than two of those
periods sees the jump as a trend: UC2 at 25,000 records/s with 60 s windows, 40 s fitted after
the warm-up, failed with 287 [108, 466] against 250 because a window closed 14 s before the end,
while 50,000/s passed. So when the fitted span holds at least two whole periods of ``period_s``,
the trend is fitted over the last whole periods with one level per phase of the period (ordinary
least squares with phase-bin dummies: the periodic jump is absorbed, a growing lag is not).

The slope comes with a 95 % confidence interval (ordinary least squares, Student's t) whose
standard error allows for autocorrelated points: consecutive batch lags are not independent (a
batch's size depends on how long the one before took), and an interval that treats them as such
is too narrow, so that a run looked at often decides on noise. The error allows for AR(1)
residuals and is never below Newey and West's HAC error or the ordinary one (``slope_se``). The SLO
(lag grows by at most ``threshold`` x the generated records/s) *passes* when the whole interval is
at or below the limit, *fails* when the whole interval is above it, and is *undecided* when the
interval straddles it: the benchmark runner then adds a repetition and records that it did.

The troughs of a real query wander (their lag-1 autocorrelation reached 0.93 in a 160,000
records/s run), and such an interval stays wide for minutes. A lag that stays within a band is
decided all the same: where the lag after each commit over the fitted span lay within a band no
wider than the limit times the span, the lag cannot have grown faster than the limit from the
span's start to its end, however it moved in between (``Trend.bounded``); the SLO passes then. A
run 25 % over its capacity piles up a fifth of its load every second and leaves any such band
at once; one 25 % under it keeps a band of about a batch's records.

At a look, a lag that grew faster than the limit but by less than a batch's records over the fitted
span is not failed yet: the troughs after each commit wander by about a batch's records (a batch
that runs long leaves more behind it), and a 14 s span of a run whose 300 s run passed rose by
0.23 s of input, less than a batch, fast enough to fail 1 % of its load. A load 25 % over its
capacity rises by a batch's records within five batches.

A lag that surely falls by more than the limit (the whole interval below minus the limit) is not a
steady state either: the query is catching up after a slow batch, and the slope says how fast it
drained, not whether it keeps up; such a trend is *undecided* (a run looked at goes on): a load
passed on such a trend can fail a longer run.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from streamscale.experiment.sequential import t_quantile

MIN_BATCHES = 4
# The bounded-lag rule (Trend.bounded) needs a span of commits: at least this many, this long, so
# that a band is the lag's movement and not the few commits of a run that barely started.
MIN_BAND_COMMITS = 8
MIN_BAND_SPAN_S = 10.0


def _t975(df: int) -> float:
    return t_quantile(df, 0.95)


@dataclass(frozen=True)
class Trend:
    slope: float  # records/s
    intercept: float
    low: float  # 95 % confidence interval of the slope
    high: float
    n: int  # points fitted
    basis: str  # "batches" (after each commit) or "seconds" (the sampler's readings)
    commits: tuple = ((), ())  # (times, lags) after every batch commit, warm-up included (for plots)
    start_s: float = float("nan")  # the first point fitted: where the warm-up ended
    period_s: float = 0.0  # a window period whose phases were fitted as levels of their own (0: none)
    se: float = float("nan")  # the slope's standard error
    df: int = 0  # its degrees of freedom

    def interval(self, confidence: float = 0.95) -> tuple[float, float]:
        """The slope's two-sided interval at ``confidence`` (0.95 is ``low``, ``high``)."""
        if confidence == 0.95 or not math.isfinite(self.se):
            return self.low, self.high
        half = t_quantile(self.df, confidence) * self.se
        return self.slope - half, self.slope + half

    def verdict(self, limit: float, confidence: float = 0.95, tooth: float = 0.0) -> str:
        """pass, fail or undecided against ``limit`` at ``confidence`` (see the module notes); a
        fail needs the fitted line to rise by at least ``tooth`` records over the fitted span (a
        look's: a batch's records, by which the troughs after each commit wander)."""
        if not math.isfinite(self.slope):
            return "fail"  # no trend could be judged: not a pass
        low, high = self.interval(confidence)
        if self.draining(limit):
            return "undecided"
        if self.bounded(limit):
            return "pass"
        material = self.grown() >= tooth
        if self.grew(limit) and material:
            return "fail"
        if high <= limit:
            return "pass"
        if low > limit and material:
            return "fail"
        return "undecided"

    def grown(self) -> float:
        """Records the fitted line rises by from the first commit fitted to the last (inf: not
        fitted through commits)."""
        kept = [t for t in self.commits[0] if t >= self.start_s] if math.isfinite(self.start_s) else []
        return self.slope * (kept[-1] - kept[0]) if len(kept) >= 2 else math.inf

    def span(self) -> tuple[list[float], list[float]] | None:
        """(times, lags) after each commit over the fitted span; None where the trend is not fitted
        through commits, or through fewer than MIN_BAND_COMMITS of them or a span shorter than
        MIN_BAND_SPAN_S."""
        if self.basis != "batches" or not math.isfinite(self.start_s):
            return None
        kept = [(t, y) for t, y in zip(*self.commits) if t >= self.start_s]
        if len(kept) < MIN_BAND_COMMITS or kept[-1][0] - kept[0][0] < MIN_BAND_SPAN_S:
            return None
        return [t for t, _ in kept], [y for _, y in kept]

    def band(self) -> tuple[float, float] | None:
        """(span s, range) of the lag after each commit over the fitted span: from its first commit
        to its last, how far apart the highest and the lowest lag after a commit lay (None: no
        such span, :meth:`span`)."""
        got = self.span()
        if got is None:
            return None
        times, lags = got
        return times[-1] - times[0], max(lags) - min(lags)

    def grew(self, limit: float) -> bool:
        """Whether the lag kept growing faster than ``limit``: every lag after a commit in the
        span's last quarter lay above every one in its first quarter by more than ``limit`` times
        the whole span, and each quarter's median above the one before (a backlog that one slow
        batch piled up and the query drains again rises and falls: no growth that goes on)."""
        got = self.span()
        if got is None or limit < 0:
            return False
        times, lags = got
        span = times[-1] - times[0]
        quarters = [[y for t, y in zip(times, lags) if k <= 4 * (t - times[0]) / span < k + 1] for k in range(4)]
        quarters[3] += [lags[-1]]  # the last commit closes the last quarter
        if not all(quarters):
            return False
        medians = [float(np.median(q)) for q in quarters]
        rising = all(a < b for a, b in zip(medians, medians[1:]))
        return rising and min(quarters[3]) - max(quarters[0]) > limit * span

    def bounded(self, limit: float) -> bool:
        """Whether the lag after each commit stayed within a band no wider than ``limit`` times the
        span: from the span's start to its end the lag cannot have grown by more than ``limit``
        per second, however its troughs wandered or its windows closed in between (a fitted slope
        through troughs whose errors follow each other, lag-1 autocorrelation near 0.9, has an
        interval too wide to decide this in a short run). The fitted slope must be within the
        limit too."""
        band = self.band()
        if band is None or limit <= 0 or not math.isfinite(self.slope):
            return False
        span, width = band
        return width <= limit * span and self.slope <= limit

    def draining(self, limit: float) -> bool:
        """Whether the lag surely falls by more than ``limit`` (> 0): catching up, not steady. At
        95 % whatever a look's confidence: this only keeps a run from passing yet, and a look's
        wider interval let a run fall 3,998/s [-6,149, -1,848] against 590 pass."""
        return limit > 0 and math.isfinite(self.slope) and self.high < -limit

    def line(self, t):
        return self.intercept + self.slope * np.asarray(t, dtype=float)


NO_TREND = Trend(float("nan"), float("nan"), float("nan"), float("nan"), 0, "none")


def hac_lags(n: int) -> int:
    """Newey and West's (1994) lag truncation for n points: floor(4 (n/100)^(2/9))."""
    return int(4 * (n / 100) ** (2 / 9)) if n > 0 else 0


# The lag-1 autocorrelation of a fitted line's residuals is biased low by about (1 + 3 rho) / n for
# a series' mean alone (Marriott and Pope), more with the slope removed too; three times that
# correction is what brought the slope's 95 % interval to 90-97 % coverage on AR(1) noise with
# rho 0-0.8 and 15-40 points (600 series each), where once that gave 81-96 %.
BIAS_CORRECTION = 3.0


def residual_rho(resid: np.ndarray) -> float:
    """The residuals' lag-1 autocorrelation, corrected for its small-sample bias (see
    BIAS_CORRECTION), within [0, 0.95]."""
    n = len(resid)
    denom = float(resid @ resid)
    if n < 3 or denom == 0:
        return 0.0
    raw = float(resid[1:] @ resid[:-1]) / denom
    return min(0.95, max(0.0, raw + BIAS_CORRECTION * (1 + 3 * raw) / n))


def slope_se(x: np.ndarray, resid: np.ndarray, column: int = 0) -> tuple[float, int]:
    """The standard error of coefficient ``column`` of a least-squares fit with design ``x`` and
    residuals ``resid``, allowing for autocorrelated residuals, and its degrees of freedom. The
    largest of: the ordinary error; Newey and West's HAC error (Bartlett weights over
    ``hac_lags(n)`` lags, scaled by n / (n - k)); the ordinary error inflated for AR(1) residuals,
    by (1 + rho) / (1 - rho) in variance with ``residual_rho``. The degrees of freedom are the
    effective sample's, n (1 - rho) / (1 + rho) - k. On autocorrelated residuals the ordinary
    interval covers the true slope far less often than it says, and Newey and West's alone not
    enough either (tests/experiment/test_slo.py checks the interval on AR(1) noise)."""
    n, k = x.shape
    bread = np.linalg.inv(x.T @ x)
    ordinary = float(resid @ resid) / (n - k) * float(bread[column, column])
    scores = x * resid[:, None]
    meat = scores.T @ scores
    lags = hac_lags(n)
    for lag in range(1, lags + 1):
        cross = scores[lag:].T @ scores[:-lag]
        meat += (1.0 - lag / (lags + 1)) * (cross + cross.T)
    hac = float((bread @ meat @ bread)[column, column]) * n / (n - k)
    rho = residual_rho(resid)
    inflation = (1 + rho) / (1 - rho)
    df = max(1, int(n / inflation) - k)
    return math.sqrt(max(ordinary, hac, ordinary * inflation, 0.0)), df


def fit(times, values, basis: str = "seconds") -> Trend:
    """Least-squares line with the slope's 95 % interval (infinite with two points; the standard
    error allows for autocorrelation: ``slope_se``)."""
    t = np.asarray(times, dtype=float)
    y = np.asarray(values, dtype=float)
    if len(t) < 2 or np.ptp(t) == 0:
        return NO_TREND
    slope, intercept = np.polyfit(t, y, 1)
    n = len(t)
    if n > 2:
        resid = y - (intercept + slope * t)
        se, df = slope_se(np.column_stack([t - t.mean(), np.ones(n)]), resid)
        half = _t975(df) * se
    else:
        se, half, df = float("inf"), float("inf"), 0
    return Trend(float(slope), float(intercept), float(slope - half), float(slope + half), n, basis, se=se, df=df)


PHASE_BINS_MAX = 12


def fit_periodic(times, values, period_s: float, basis: str = "batches") -> Trend:
    """The trend through points spanning at least two whole periods of ``period_s``: fitted over
    the last whole periods, with one level per phase bin of the period (up to PHASE_BINS_MAX bins,
    each at least two point spacings wide, so every bin has points in every period). Falls back
    to ``fit`` when fewer than two whole periods or too few points per bin are there."""
    t = np.asarray(times, dtype=float)
    y = np.asarray(values, dtype=float)
    if len(t) < 2 or not period_s or period_s <= 0:
        return fit(t, y, basis)
    periods = int((t[-1] - t[0]) // period_s)
    if periods < 2:
        return fit(t, y, basis)
    keep = t >= t[-1] - periods * period_s
    t, y = t[keep], y[keep]
    spacing = float(np.median(np.diff(t))) if len(t) > 1 else period_s
    bins = int(max(1, min(PHASE_BINS_MAX, period_s // (2 * spacing)))) if spacing > 0 else 1
    phase = np.minimum(((t - t[0]) % period_s) / period_s * bins, bins - 1).astype(int)
    used = np.unique(phase)
    x = np.column_stack([t - t.mean(), *[(phase == b).astype(float) for b in used]])
    n, k = x.shape
    if n <= k + 1:
        return fit(t, y, basis)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    resid = y - x @ coef
    try:
        se, df = slope_se(x, resid)
    except np.linalg.LinAlgError:
        return fit(t, y, basis)
    slope, half = float(coef[0]), _t975(df) * se
    # the drawn line runs through the points' mean level (the phase levels average out over periods)
    intercept = float(y.mean() - slope * t.mean())
    return Trend(
        slope, intercept, slope - half, slope + half, n, basis, start_s=float(t[0]), period_s=period_s, se=se, df=df
    )


def _end_total(end_offsets, topic: str | None) -> int | None:
    if isinstance(end_offsets, str):
        try:
            end_offsets = json.loads(end_offsets)
        except ValueError:
            return None
    if not isinstance(end_offsets, dict) or not end_offsets:
        return None
    # a run of several input topics names them all, comma-separated (Kafka's names hold no comma)
    found = [end_offsets.get(t) for t in (topic.split(",") if topic else list(end_offsets))]
    found = [parts for parts in found if isinstance(parts, dict)]
    if not found:
        return None
    return sum(int(v) for parts in found for v in parts.values())


def progress_field(batch, name: str):
    """A batch's field, from BatchMetrics or from its dict (asdict, or read back from CSV)."""
    return batch.get(name) if isinstance(batch, dict) else getattr(batch, name, None)


def batch_end_s(batch, t0_wall: float) -> float | None:
    """When a batch ended, in seconds since ``t0_wall``: its progress timestamp (its start, UTC ISO)
    plus its triggerExecution time; None when the timestamp cannot be read."""
    try:
        start = datetime.fromisoformat(str(progress_field(batch, "timestamp")).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
    return start + int(progress_field(batch, "batch_ms") or 0) / 1000 - t0_wall


def batch_boundary_lags(batches, samples, t0_wall: float, topic: str | None = None):
    """(times, lags) right after each batch commits; times in seconds since ``t0_wall`` (the
    sampler's start), lag = topic end at that time (interpolated) - the batch's end offsets."""
    if not samples:
        return [], []
    st = np.array([s.t_s for s in samples], dtype=float)
    se = np.array([s.end_total for s in samples], dtype=float)
    times, lags = [], []
    for b in batches:
        if not progress_field(b, "input_rows"):
            continue
        done = _end_total(progress_field(b, "end_offsets"), topic)
        t = batch_end_s(b, t0_wall)
        if done is None or t is None:
            continue
        if t < st[0] or t > st[-1]:
            continue  # outside the sampled span: no end offset to compare with
        times.append(round(t, 3))
        lags.append(float(np.interp(t, st, se)) - done)
    return times, lags


def backlog_gone(lags, tolerance: float = 0.1) -> int:
    """Index of the first lag (after each commit) down to the level of the rest of the run: at most
    the median of the lags after it, plus ``tolerance`` of that median. Until then the query is
    still draining what piled up while it started; a lag that only grows is at its level at once.
    Leaves at least MIN_BATCHES points (fewer cannot give a trend and its interval)."""
    last = max(0, len(lags) - MIN_BATCHES)
    for i in range(last):
        level = float(np.median(lags[i + 1 :]))
        if lags[i] <= level + tolerance * abs(level) + 1:
            return i
    return last


def lag_trend_estimate(
    samples,
    batches=(),
    t0_wall: float | None = None,
    warmup_s: float = 0.0,
    topic: str | None = None,
    period_s: float | None = None,
) -> Trend:
    """The run's lag trend after the warm-up: through the batch boundaries when there are at
    least MIN_BATCHES of them, else through the once-a-second samples. The warm-up ends at
    ``warmup_s`` or, through the batch boundaries, later if the backlog of the start-up is not
    gone by then (``backlog_gone``): a query that catches up after the fixed warm-up would
    otherwise show the catching up as a falling trend. ``period_s``: the pipeline's window slide
    (its output jumps once per period); over two whole periods or more it is fitted out
    (``fit_periodic``)."""
    t, y = batch_boundary_lags(batches, samples, t0_wall, topic) if batches and t0_wall else ([], [])
    keep = [(a, b) for a, b in zip(t, y) if a >= warmup_s]
    if len(keep) >= MIN_BATCHES:
        keep = keep[backlog_gone([b for _, b in keep]) :]
        trend = fit_periodic([a for a, _ in keep], [b for _, b in keep], period_s or 0.0, "batches")
    else:
        keep = [(s.t_s, s.lag) for s in samples if s.t_s >= warmup_s]
        trend = fit_periodic([a for a, _ in keep], [b for _, b in keep], period_s or 0.0, "seconds")
    start = trend.start_s if trend.period_s else (keep[0][0] if keep else float("nan"))
    return dataclasses.replace(trend, commits=(tuple(t), tuple(y)), start_s=start)


def lag_trend(times_s, lags, warmup_s: float = 0.0) -> float:
    """Slope in records/s through the samples taken after ``warmup_s`` (NaN with fewer than two)."""
    keep = [(t, y) for t, y in zip(times_s, lags) if t >= warmup_s]
    return fit([t for t, _ in keep], [y for _, y in keep]).slope


def lag_limit(generated_rate: float, threshold: float = 0.01) -> float:
    return threshold * generated_rate


# -- end-to-end latency (event time to output) -----------------------------------------------------
# Each output row's latency (end of its batch's write - newest event time of its window) is counted on the
# executors into fixed geometric buckets (streamscale.pipelines.output.LATENCY_EDGES_MS: one
# observation per batch, rows at or below each edge), so a run's percentile merges batches exactly
# at the buckets' resolution (2^(1/4): 19 %), reported as the bucket's upper edge (never below the
# true value).


def after_warmup(batches, t0_wall: float | None, warmup_s: float):
    """The batches that ended after the warm-up (all of them without ``t0_wall``)."""
    for b in batches:
        if t0_wall is not None:
            end = batch_end_s(b, t0_wall)
            if end is None or end < warmup_s:
                continue
        yield b


def latency_percentile_ms(
    batches, q: float = 0.95, t0_wall: float | None = None, warmup_s: float = 0.0
) -> float | None:
    """The run's q-quantile of the output latency from the batches' cumulative counts
    (``latency_cdf``: rows at or below each edge) and row counts; batches ending before the
    warm-up are left out. None: no rows (or no latency measured, e.g. UC1's output); inf: beyond
    the largest edge."""
    from streamscale.pipelines.output import LATENCY_EDGES_MS

    total, cum = 0, np.zeros(len(LATENCY_EDGES_MS))
    for b in after_warmup(batches, t0_wall, warmup_s):
        counts, n = progress_field(b, "latency_cdf"), progress_field(b, "output_records")
        if not counts or not n:
            continue
        total += int(n)
        cum += np.asarray(counts, dtype=float)
    if total == 0:
        return None
    k = int(np.searchsorted(cum, q * total, side="left"))
    return float(LATENCY_EDGES_MS[k]) if k < len(LATENCY_EDGES_MS) else float("inf")


def median_batch_ms(batches, t0_wall: float | None = None, warmup_s: float = 0.0) -> float | None:
    """Median duration (``batch_ms``, Spark's triggerExecution) of the micro-batches that read
    records and ended after the warm-up; None when there is none."""
    ms = [
        float(progress_field(b, "batch_ms"))
        for b in after_warmup(batches, t0_wall, warmup_s)
        if progress_field(b, "input_rows")
    ]
    return float(np.median(ms)) if ms else None


# -- a query that stopped committing ---------------------------------------------------------------
# The lag trend is fitted through batch commits; a query that stops committing (its broker gone, a
# task hung) leaves no commit to fit, and its trend would be the one before it stalled. The lag
# the sampler saw after the last commit is the evidence: no commit for STALL_BATCHES median batches
# (at least STALL_MIN_S) while that lag grew is a stall, a failure of the lag SLO.
STALL_BATCHES = 5
STALL_MIN_S = 10.0


@dataclasses.dataclass(frozen=True)
class Stall:
    since_s: float  # the last commit, seconds since the sampler's start
    for_s: float  # how long no batch committed until the last lag sample
    lag_from: int  # the lag sampled at the last commit
    lag_to: int  # and at the run's last sample

    def note(self, median_batch_s: float) -> str:
        batches = f" ({self.for_s / median_batch_s:.0f} median batches)" if median_batch_s > 0 else ""
        return (
            f"stalled: no batch committed for the last {self.for_s:.0f} s{batches}, "
            f"the lag grew from {self.lag_from:,} to {self.lag_to:,}"
        )


def stall(samples, batches, t0_wall: float | None, median_batch_s: float | None) -> Stall | None:
    """The run's stall at its end (see above), or None when it kept committing (or has not
    committed yet)."""
    if not samples or not t0_wall:
        return None
    ends = [e for b in batches if (e := batch_end_s(b, t0_wall)) is not None]
    if not ends:
        return None  # no commit yet: a cold start's first batch, judged by the samples' trend
    last = max(ends)
    for_s = samples[-1].t_s - last
    if for_s < max(STALL_BATCHES * (median_batch_s or 0.0), STALL_MIN_S):
        return None
    before = [x for x in samples if x.t_s <= last]
    lag_from = before[-1].lag if before else samples[0].lag
    if samples[-1].lag <= lag_from:
        return None  # nothing waited: no input arrived meanwhile
    return Stall(round(last, 3), round(for_s, 3), int(lag_from), int(samples[-1].lag))
