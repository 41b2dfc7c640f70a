"""What one run comes to: its SLO checkers (from the plan's runs and the experiment's point), the run as
they observe it, and the typed result row their :func:`~streamscale.benchmark.slos.judge` gives.
Pure: a finished run's figures in, an :class:`~streamscale.benchmark.results.ExperimentResult` out.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from streamscale.benchmark.plan import Point, Runs
from streamscale.benchmark.results import ExperimentResult, exp_id
from streamscale.benchmark.sloregistry import checkers
from streamscale.benchmark.slos import Judgement, Observation, judge
from streamscale.experiment.noise import DRIFT_LIMIT, drift, run_slowdown
from streamscale.experiment.processing import processing_percentile_ms


@dataclass(frozen=True)
class Speeds:
    """The machine's calibration speed at the execution's start, just before and just after a run."""

    reference: float
    before: float
    after: float

    @property
    def slowdown(self) -> float:
        return run_slowdown(self.reference, self.before, self.after)

    @property
    def drift(self) -> float:
        return drift(self.reference, self.before, self.after)


def look_checkers(runs: Runs, point: Point) -> tuple:
    """What a look judges: the registered SLOs that judge at looks (the lag trend first, on the
    rate the load sends)."""
    return checkers(runs.slos, point, at_end=False)


def first_look_s(runs: Runs, point: Point) -> float:
    """When a run is first looked at: ``min_duration_s``, or for a windowed pipeline (its window
    period) not before its fitted span holds two whole window periods (the fit that removes a
    window close's jump needs them) where the run is long enough for that."""
    first = runs.shortest_s if runs.shortest_s is not None else runs.duration_s
    period = point.period_s
    if period and runs.warmup_s + 2 * period <= runs.duration_s:
        first = max(first, runs.warmup_s + 2 * period)
    return first


def looking(runs: Runs, point: Point, looks) -> Callable[..., bool]:
    """``decided(lag, batches, t0_wall, topic)``: whether a run so far is decided (sequential
    testing), by :func:`look_checkers` at the confidence each look may spend (``looks``: a
    :class:`~streamscale.experiment.sequential.Looks`)."""
    checkers, warmup = look_checkers(runs, point), runs.warmup_s

    def decided(lag, batches, t0_wall, topic) -> bool:
        obs = Observation(lag, batches, t0_wall, warmup, topic, point.period_s, longest_s=looks.longest_s)
        return judge(obs, checkers, looks.confidence(), look=True).decided

    return decided


def final_checkers(runs: Runs, point: Point) -> tuple:
    """What a finished run is judged by: every registered SLO that applies to it (dropped records
    only where the pipeline may drop some)."""
    return checkers(runs.slos, point, at_end=True)


def observation(r, warmup_s: float, point: Point, ran_s: float, slowdown_: float = float("nan")) -> Observation:
    """A finished run (a :class:`~streamscale.experiment.sut.SutResult`) as the SLOs see it."""
    share = getattr(r, "read_share", 1.0)  # what the query reads of the load (SutResult.read_share)
    return Observation(
        lag=r.lag,
        batches=r.batches,
        t0_wall=r.t0_wall,
        warmup_s=warmup_s,
        topic=r.input_topic,
        period_s=point.period_s,
        ran_s=ran_s,
        # what the query reads, as its lag and the delivered rate count (unread inputs left out)
        target_rate=r.target_rate * share,
        generator_rate=r.generator_rate * share,
        generator_reached_target=r.generator_reached_target,
        generator_error=r.generator_error,
        lag_samples_missed=r.lag_samples_missed,
        generated=round(r.generated * share),
        dropped_late=r.dropped_late,
        slowdown=slowdown_,
    )


def judged(
    runs: Runs, point: Point, repetition: int, r, speeds: Speeds, confidence: float = 0.95
) -> tuple[ExperimentResult, Observation]:
    """The result row of a finished run ``r`` of ``point``, and the observation it was judged on."""
    ran = r.ran_s or runs.duration_s
    obs = observation(r, runs.warmup_s, point, ran, speeds.slowdown)
    verdict = judge(obs, final_checkers(runs, point), confidence)
    moved = speeds.drift
    notes = list(verdict.notes)
    if moved > DRIFT_LIMIT:
        notes.append(f"the machine's speed moved by {moved:.0%} around the run")
    row = ExperimentResult(
        exp_id=exp_id(point.load, point.resources, repetition, point.config),
        config=point.config,
        load=point.load,
        resources=point.resources,
        repetition=repetition,
        note="; ".join(notes),
        slo_verdicts=" ".join(f"{v.name}={v.verdict}" for v in verdict.slos),
        **_lag_columns(obs, verdict),
        **_latency_columns(obs, verdict, point),
        **_run_columns(r, obs, verdict, ran),
        speed_before=round(speeds.before),
        speed_after=round(speeds.after),
        drift=round(moved, 3),
        drifted=moved > DRIFT_LIMIT,
    )
    return row, obs


def _nan(x) -> float:
    return float("nan") if x is None else x


def _rounded(x, digits: int = 3) -> float:
    return round(x, digits) if x is not None and math.isfinite(x) else float("nan")


def _lag_columns(obs: Observation, j: Judgement) -> dict:
    trend, lag = obs.trend, j.of("lag_trend")
    slope = trend.slope
    return {
        "lag_slope": round(slope, 3) if math.isfinite(slope) else slope,
        "lag_limit": lag.limit,
        "lag_slo": lag.verdict == "pass",
        "lag_low": round(trend.low, 3),
        "lag_high": round(trend.high, 3),
        "lag_basis": trend.basis,
        "lag_period_s": trend.period_s,
        "lag_verdict": lag.verdict,
        "trend_from_s": round(trend.start_s, 3),
        "median_batch_ms": _nan(obs.median_batch_ms),
        "delivered_rate": round(obs.delivered, 1),
        "valid": j.of("validity").verdict != "invalid",
        "verdict": j.verdict,
        "passed": j.verdict == "pass",
    }


def _latency_columns(obs: Observation, j: Judgement, point: Point) -> dict:
    output, processing, growth = j.of("output_latency"), j.of("processing_latency"), obs.processing_trend
    dropped = j.of("dropped_records")
    longest = [b["processing_max_ms"] for b in obs.batches if b.get("processing_max_ms") is not None]
    return {
        "latency_p95_ms": _nan(output.value),
        "latency_slo": output.verdict != "fail",
        "processing_p50_ms": _nan(processing_percentile_ms(obs.batches, 0.5, obs.t0_wall or None, obs.steady_s)),
        "processing_p95_ms": _nan(processing.value),
        "processing_p99_ms": _nan(processing_percentile_ms(obs.batches, 0.99, obs.t0_wall or None, obs.steady_s)),
        "processing_max_ms": max(longest) if longest else float("nan"),
        "processing_limit_ms": _nan(point.processing_limit_ms),
        "processing_slo": processing.verdict != "fail",
        "processing_growing": obs.processing_growing,
        "processing_trend": _rounded(growth.slope if growth is not None else None),
        "processing_trend_low": _rounded(growth.low if growth is not None else None),
        "processing_trend_high": _rounded(growth.high if growth is not None else None),
        "dropped_slo": dropped is None or dropped.verdict == "pass",
    }


def _run_columns(r, obs: Observation, j: Judgement, ran: float) -> dict:
    return {
        "target_rate": r.target_rate,
        "latency_at": getattr(r, "latency_at", "commit"),
        "generator_rate": round(r.generator_rate, 1),
        "generator_reached_target": r.generator_reached_target,
        "cpu_s_per_million": round(r.spark_cpu_pct / 100 * ran / r.processed_records * 1e6, 2)
        if r.processed_records
        else float("nan"),
        "dropped": r.dropped_late,
        "dropped_fraction": round(r.dropped_late / r.generated if r.generated else 0.0, 6),
        "final_lag": r.final_lag,
        "processed_records": r.processed_records,
        "sampler_cpu_pct": round(100 * r.sampler_cpu_s / ran, 3),
        "wall_s": round(r.wall_s, 1),
        "generator_cpu_pct": round(100 * r.generator_cpu_s / ran, 1),
        "machine_cpu_pct": round(r.machine_cpu_pct, 1),
        "ran_s": round(ran, 1),
        "decided_s": _rounded(getattr(r, "decided_s", None), 1),
        "spark_cpu_pct": round(r.spark_cpu_pct, 1),
        "broker_cpu_pct": round(r.broker_cpu_pct, 1),
        "steal_pct": round(r.steal_pct, 2),
    }
