"""What a run's figures make of it: whether it can be judged (the load it was given, its lag
samples), the processing-latency limit, a run whose latency keeps growing, and the verdict.

The load credited to a run is the rate at which its records reached the input topic over the
span its lag trend was fitted on: the slope of the topic's end offsets, which the lag sampler
reads once a second, not the rate the generator handed records to its client (a client whose
sends queue up would be credited with records the broker never had). A run given less than
:data:`DELIVERED_MIN` of its target is not judged, and says why; the lag limit is a fraction of
the rate delivered.

A run passes only when its records' processing latency does not keep growing either (Karimov et
al.'s sustainable throughput): its per-batch p95's trend over the fitted span, with an interval
that allows for autocorrelated batches, lies above zero and grew by more than
:data:`LATENCY_GROWTH_MS` over the span: a query that falls further behind with every batch.

A latency percentile is known between two bounds, and a limit between them is neither held nor
failed by the run: for the processing latency, bounds 50 ms apart (streamscale.experiment.
processing, :func:`bounds_verdict`); for the output latency, the edges of its 19 % bucket
(streamscale.pipelines.output, :func:`percentile_verdict`). Calling a bucket that holds the limit a
failure would put a bracket's failed end where a longer run holds.
"""

from __future__ import annotations

import bisect
import math

from streamscale.benchmark.results import ExperimentResult, exp_id
from streamscale.experiment.slo import Trend, fit

# A run whose lag sampler failed for more than this share of its seconds is not judged: the trend
# interpolates across a few missing samples, but a run sampled for part of its length would be
# judged on that part (a batch's lag needs the topic's end offset around its commit).
MAX_MISSED_LAG_SAMPLES = 0.05
DELIVERED_MIN = 0.99  # of the target rate, reaching the input topic over the fitted span
LATENCY_GROWTH_MS = 1_000.0  # a processing p95 that rose by more than this over the span, surely


def delivered_rate(samples, start_s: float, fallback: float) -> float:
    """Records/s that reached the input topic from ``start_s`` to the run's last lag sample: the
    slope of the end offsets the sampler read (``fallback`` with fewer than three samples)."""
    pts = [(s.t_s, s.end_total) for s in samples if s.t_s >= start_s and s.end_total is not None]
    if len(pts) < 3 or pts[-1][0] - pts[0][0] <= 0:
        return fallback
    slope = fit([t for t, _ in pts], [e for _, e in pts]).slope
    return float(slope) if math.isfinite(slope) else fallback


def run_validity(
    generator_reached_target: bool,
    lag_samples_missed: int,
    duration_s: float,
    delivered: float | None = None,
    target: float | None = None,
    generator_error: str | None = None,
) -> tuple[bool, str]:
    """Whether a run can be judged, and why not."""
    if generator_error and not generator_reached_target:
        return False, f"{generator_error}: experiment invalid"
    if delivered is not None and target and delivered < DELIVERED_MIN * target:
        return False, (
            f"records reached the input topic at {delivered:,.0f}/s, below {DELIVERED_MIN:.0%} of the "
            f"target {target:,.0f}/s: experiment invalid"
        )
    if not generator_reached_target:
        return False, "generator fell short of its target rate: experiment invalid"
    if lag_samples_missed > MAX_MISSED_LAG_SAMPLES * duration_s:
        return False, f"{lag_samples_missed} lag samples of {duration_s:g} s failed: experiment invalid"
    return True, ""


def latency_growing(trend: Trend | None, span_s: float) -> bool:
    """Whether a run's processing latency keeps growing over the ``span_s`` seconds it was fitted
    on (see the module notes); the trend is in ms per second."""
    if trend is None or trend.n < 3 or not math.isfinite(trend.low) or not math.isfinite(span_s):
        return False
    return trend.low > 0 and trend.slope * span_s > LATENCY_GROWTH_MS


def slowdown_explains(slope: float, delivered: float, slowdown: float) -> bool:
    """Whether a run's falling behind is within what the machine's slowdown around it explains: the
    machine ran slower than its mean speed in the execution (streamscale.experiment.noise.SpeedLog)
    by more than DRIFT_LIMIT, and the share of the load that piled up (the lag's slope over the
    rate delivered) is smaller than that slowdown.
    Such a run's lag failure and growing latency are no failure of the load: at the machine's
    usual speed the query may have kept up, and a longer run on a steadier machine decides."""
    from streamscale.experiment.noise import DRIFT_LIMIT

    if not (math.isfinite(slope) and math.isfinite(slowdown) and delivered > 0):
        return False
    return slowdown > DRIFT_LIMIT and slope / delivered < slowdown


def allow_for_slowdown(lag: str, growing: bool, slope: float, delivered: float, slowdown: float):
    """(lag verdict, whether a growing latency fails, a note) once a slowdown that explains the
    run's falling behind (:func:`slowdown_explains`) is allowed for: neither its lag failure nor
    its growing latency fails it, nor does either let it pass (its lag is undecided), and the note
    says why; else as they were, and no note."""
    if not (slowdown_explains(slope, delivered, slowdown) and (lag == "fail" or growing)):
        return lag, growing, ""
    share = f"{slope / delivered:.0%} of the load" if slope > 0 else "none of the load"
    note = (
        f"falling behind not judged: the machine ran {slowdown:.0%} slower than its mean speed here, {share} piled up"
    )
    return "undecided", False, note


def percentile_verdict(value_ms: float | None, limit_ms: float | None) -> str:
    """A latency SLO's verdict from a percentile read as its bucket's upper edge: pass when the
    edge is within the limit, fail when the edge below it is at or above the limit (or nothing got
    through: None; or beyond the last edge: inf), else undecided (the limit lies inside the bucket)."""
    if limit_ms is None:
        return "pass"
    if value_ms is None or not math.isfinite(value_ms):
        return "fail"
    if value_ms <= limit_ms:
        return "pass"
    return "fail" if bucket_floor_ms(value_ms) >= limit_ms else "undecided"


def bounds_verdict(bounds: tuple[float, float] | None, limit_ms: float | None) -> str:
    """A latency SLO's verdict from a percentile known to lie above ``bounds[0]`` and at most at
    ``bounds[1]``: pass when the high bound is within the limit, fail when the low bound is at or
    above it (or nothing got through: None), else undecided."""
    if limit_ms is None:
        return "pass"
    if bounds is None:
        return "fail"
    low, high = bounds
    return "pass" if high <= limit_ms else "fail" if low >= limit_ms else "undecided"


def bucket_floor_ms(edge_ms: float) -> float:
    """The largest bucket edge below ``edge_ms`` (0 below the first): what a percentile read as
    ``edge_ms`` is known to exceed."""
    from streamscale.pipelines.output import LATENCY_EDGES_MS

    k = bisect.bisect_left(LATENCY_EDGES_MS, edge_ms * (1 - 1e-9))
    return LATENCY_EDGES_MS[k - 1] if k > 0 else 0.0


def majority_verdict(verdicts: list[str], repetitions: int, final: bool = False) -> str | None:
    """pass or fail once a strict majority of ``repetitions`` says so; invalid when every run was;
    None while more runs may decide (``final``: undecided instead)."""
    need = repetitions // 2 + 1
    for v in ("pass", "fail"):
        if verdicts.count(v) >= need:
            return v
    if verdicts and all(v == "invalid" for v in verdicts) and (final or len(verdicts) >= repetitions):
        return "invalid"
    left = repetitions - len(verdicts)
    if not final and any(verdicts.count(v) + left >= need for v in ("pass", "fail")):
        return None
    return "undecided"


def worst(*verdicts: str) -> str:
    """fail over undecided over pass."""
    return next((v for v in ("fail", "undecided") if v in verdicts), "pass")


def died_result(
    load: float, resources: int, repetition: int, rate: float, limit: float, reason: str, ran_s: float
) -> ExperimentResult:
    """A run whose Spark JVM died under the load: failed, with why, and nothing measured."""
    nan = float("nan")
    return ExperimentResult(
        exp_id=exp_id(load, resources, repetition),
        load=load,
        resources=resources,
        repetition=repetition,
        target_rate=rate,
        generator_rate=nan,
        generator_reached_target=True,
        valid=True,
        lag_slope=nan,
        lag_limit=limit,
        lag_slo=False,
        dropped=0,
        dropped_fraction=nan,
        dropped_slo=True,
        passed=False,
        final_lag=-1,
        processed_records=0,
        sampler_cpu_pct=nan,
        wall_s=round(ran_s, 1),
        note=reason,
        verdict="fail",
        ran_s=round(ran_s, 1),
    )
