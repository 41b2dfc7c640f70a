"""One experiment for real: the settings a (load, resources) point runs with, and the runner that runs
it (broker topics, load generator, Spark pipeline) and judges it with the SLOs of
:mod:`streamscale.experiment.slo`. Search, repetitions and files are :mod:`.execution`'s job.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable
from pathlib import Path

from streamscale.benchmark.results import ExperimentResult, exp_id
from streamscale.benchmark.spec import Spec
from streamscale.benchmark.units import Axes
from streamscale.broker.connection import KafkaConnection
from streamscale.experiment.slo import lag_limit, lag_trend_estimate, latency_percentile_ms, median_batch_ms


def experiment_settings(spec: Spec, load: float, resources: int) -> dict:
    """What one experiment runs: pipeline parameters, number of sensors, Spark master and conf."""
    ex, bm = spec.execution, spec.benchmark
    params = dict(bm.params)
    sensors = int(load)
    if ex.load.type == "nested_groups":
        params["levels"] = int(load)
        params.setdefault("children", 4)
        sensors = params["children"] ** int(load)
    elif ex.load.type == "window_s":
        params["window_s"] = float(load)
        sensors = ex.load.sensors
    conf = {}
    if ex.resources.type == "cores" and not ex.master:
        master = f"local[{resources}]"
    else:
        master = ex.master or "local[*]"
        n = resources if ex.resources.type == "executors" else 1
        cores = ex.executor_cores if ex.resources.type == "executors" else resources
        conf.update(
            {
                "spark.executor.instances": n,
                "spark.executor.cores": cores,
                "spark.cores.max": n * cores,
                "spark.executor.memory": ex.executor_memory,
                "spark.dynamicAllocation.enabled": "false",
            }
        )
    confine = ex.resources.type == "cores" and master.startswith("local") and ex.resources.confine
    return {
        "params": params,
        "sensors": sensors,
        "master": master,
        "spark_conf": conf,
        "rate": sensors / bm.loadgen.period_s,
        "cpus": resources if confine else None,
    }


def emission_period_s(spec: Spec, params: dict) -> float | None:
    """How often the pipeline's windows close (its window slide, s): its output, and with it the
    lag, jumps once per period; None for a pipeline without event-time windows."""
    from streamscale.pipelines import make_pipeline

    grid = make_pipeline(spec.benchmark.sut, params).window_grid_ms()
    return grid[1] / 1000 if grid else None


# A run whose lag sampler failed for more than this share of its seconds is not judged: the trend
# interpolates across a few missing samples, but a run sampled for part of its length would be
# judged on that part (a batch's lag needs the topic's end offset around its commit).
MAX_MISSED_LAG_SAMPLES = 0.05


def run_validity(generator_reached_target: bool, lag_samples_missed: int, duration_s: float) -> tuple[bool, str]:
    """Whether a run can be judged, and why not."""
    if not generator_reached_target:
        return False, "generator fell short of its target rate: experiment invalid"
    if lag_samples_missed > MAX_MISSED_LAG_SAMPLES * duration_s:
        return False, f"{lag_samples_missed} lag samples of {duration_s:g} s failed: experiment invalid"
    return True, ""


class ExperimentRunner:
    """Runs single experiments for real (broker, generator, Spark pipeline) and judges them."""

    def __init__(self, spec: Spec, out_dir: Path, bootstrap: KafkaConnection | str, sessions=None):
        """``sessions``: a :class:`~streamscale.experiment.sessions.SparkSessions` the experiments take
        their Spark sessions from (its owner closes it); default: one of the runner's own, keeping a
        session from one experiment for the next when the spec says ``reuse_spark``."""
        from streamscale.experiment.sessions import SparkSessions

        self.spec, self.out_dir, self.bootstrap = spec, out_dir, bootstrap
        self.own_sessions = sessions is None
        self.sessions = SparkSessions(keep=spec.execution.reuse_spark) if sessions is None else sessions

    def close(self) -> None:
        """Stop a session the runner kept (its own sessions only)."""
        if self.own_sessions:
            self.sessions.close()

    def __call__(
        self, load: float, resources: int, repetition: int, on_lag: Callable | None = None
    ) -> ExperimentResult:
        from streamscale.experiment.sut import run_sut
        from streamscale.observe import prometheus

        spec, ex = self.spec, self.spec.execution
        s = experiment_settings(spec, load, resources)
        prometheus.experiment.info(
            {
                "benchmark": spec.name,
                "sut": spec.benchmark.sut,
                "load": f"{load:g}",
                "resources": str(resources),
                "repetition": str(repetition),
            }
        )
        r = run_sut(
            spec.benchmark.sut,
            sensors=s["sensors"],
            duration_s=ex.duration_s,
            master=s["master"],
            params=s["params"],
            partitions=spec.benchmark.topics.partitions,
            gen_workers=spec.benchmark.loadgen.workers,
            bootstrap=self.bootstrap,
            spark_conf=s["spark_conf"],
            period_s=spec.benchmark.loadgen.period_s,
            distribution=spec.benchmark.loadgen.distribution,
            on_lag=on_lag,
            cpus=s["cpus"],
            sessions=self.sessions,
        )
        trend = lag_trend_estimate(
            r.lag, r.batches, r.t0_wall, ex.warmup_s, r.input_topic, period_s=emission_period_s(spec, s["params"])
        )
        slope, limit = trend.slope, lag_limit(r.target_rate, ex.slos.lag_trend_threshold)
        lag_verdict = trend.verdict(limit)
        # undecided: the runner adds repetitions (execution.extra_repetitions); when none is left
        # the point estimate decides, as a bare slope did before intervals
        lag_ok = lag_verdict == "pass" or (lag_verdict == "undecided" and slope <= limit)
        windowed = spec.benchmark.sut in ("uc2", "uc4")
        frac = r.dropped_late / r.generated if r.generated else 0.0
        thr = ex.slos.dropped_records_threshold
        dropped_ok = not windowed or thr is None or frac <= thr
        p95 = latency_percentile_ms(r.batches, 0.95, r.t0_wall or None, ex.warmup_s)
        batch_ms = median_batch_ms(r.batches, r.t0_wall or None, trend.start_s)
        lat_limit = ex.slos.latency_p95_ms
        latency_ok = lat_limit is None or (p95 is not None and p95 <= lat_limit)
        valid, invalid_note = run_validity(r.generator_reached_target, r.lag_samples_missed, ex.duration_s)
        res = ExperimentResult(
            exp_id=exp_id(load, resources, repetition),
            load=load,
            resources=resources,
            repetition=repetition,
            target_rate=r.target_rate,
            generator_rate=round(r.generator_rate, 1),
            generator_reached_target=r.generator_reached_target,
            valid=valid,
            lag_slope=round(slope, 3) if math.isfinite(slope) else slope,
            lag_limit=limit,
            lag_slo=lag_ok,
            dropped=r.dropped_late,
            dropped_fraction=round(frac, 6),
            dropped_slo=dropped_ok,
            passed=valid and lag_ok and dropped_ok and latency_ok,
            final_lag=r.final_lag,
            processed_records=r.processed_records,
            sampler_cpu_pct=round(100 * r.sampler_cpu_s / ex.duration_s, 3),
            wall_s=round(r.wall_s, 1),
            note=invalid_note or ("lag interval straddles the limit" if lag_verdict == "undecided" else ""),
            lag_low=round(trend.low, 3),
            lag_high=round(trend.high, 3),
            lag_basis=trend.basis,
            lag_period_s=trend.period_s,
            lag_verdict=lag_verdict,
            latency_p95_ms=float("nan") if p95 is None else p95,
            latency_slo=latency_ok,
            trend_from_s=round(trend.start_s, 3),
            median_batch_ms=float("nan") if batch_ms is None else batch_ms,
            generator_cpu_pct=round(100 * r.generator_cpu_s / ex.duration_s, 1),
            machine_cpu_pct=round(r.machine_cpu_pct, 1),
        )
        self._write_lag(res, r.lag, trend)
        prometheus.experiments_total.labels("invalid" if not valid else "pass" if res.passed else "fail").inc()
        return res

    def _write_lag(self, res: ExperimentResult, lag, trend) -> None:
        from streamscale.benchmark.plots import plot_lag

        d = self.out_dir / "lag"
        d.mkdir(parents=True, exist_ok=True)
        with open(d / f"{res.exp_id}.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["t_s", "lag"])
            w.writerows([[x.t_s, x.lag] for x in lag])
        bt, bl = trend.commits  # the lag after each commit, as the trend was fitted from
        if bt:
            with open(d / f"{res.exp_id}-batches.csv", "w", newline="") as f:
                w = csv.writer(f)
                w.writerow(["t_s", "lag_after_commit"])
                w.writerows(zip(bt, bl))
        plot_lag(
            [x.t_s for x in lag],
            [x.lag for x in lag],
            self.spec.execution.warmup_s,
            res,
            d / f"{res.exp_id}.png",
            trend=trend,
            axes=Axes.of(self.spec),
        )
