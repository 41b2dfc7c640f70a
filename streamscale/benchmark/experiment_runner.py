"""One experiment for real: the settings a (load, resources) point runs with, and the runner that runs
it (broker topics, load generator, Spark pipeline) and judges it with the SLOs of
:mod:`streamscale.experiment.slo`. Search, repetitions and files are :mod:`.execution`'s job.
"""

from __future__ import annotations

import csv
import math
import time
from collections.abc import Callable
from pathlib import Path

from streamscale.benchmark.results import ExperimentResult, exp_id
from streamscale.benchmark.spec import Spec
from streamscale.benchmark.units import Axes
from streamscale.benchmark.verdict import (
    allow_for_slowdown,
    bucket_floor_ms,
    combined_verdict,
    delivered_rate,
    died_result,
    latency_growing,
    latency_verdicts,
    processing_limit_ms,
    run_validity,
    worst,
)
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import SparkDied
from streamscale.experiment.processing import (
    batch_processing_ms,
    processing_bounds,
    processing_percentile_ms,
    processing_trend,
)
from streamscale.experiment.slo import lag_limit, lag_trend_estimate, median_batch_ms, stall


def experiment_settings(spec: Spec, load: float, resources: int, config: str = "") -> dict:
    """What one experiment runs: pipeline parameters, number of sensors, Spark master and conf;
    ``config``: the named configuration's settings over the spec's."""
    ex, bm = spec.execution, spec.benchmark
    config_conf, config_params = spec.config(config)
    params = {**bm.params, **config_params}
    sensors = int(load)
    rate = None
    if ex.load.type == "rate":
        rate = float(load)
        sensors = max(1, round(load * bm.loadgen.period_s)) if bm.records is None else int(round(load))
    elif ex.load.type == "nested_groups":
        params["levels"] = int(load)
        params.setdefault("children", 4)
        sensors = params["children"] ** int(load)
    elif bm.sut == "uc4" and ex.load.type == "sensors":
        params["sensors"] = sensors  # a registry of that many: groups of four, the last partly filled
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
    conf.update(config_conf)
    confine = ex.resources.type == "cores" and master.startswith("local") and ex.resources.confine
    return {
        "params": params,
        "sensors": sensors,
        "master": master,
        "spark_conf": conf,
        "rate": rate if rate is not None else sensors / bm.loadgen.period_s,
        "load_rate": rate,
        "cpus": resources if confine else None,
        "config": config,
    }


def steady_from(trend, warmup_s: float) -> float:
    """Where every SLO of a run starts judging: the end of the warm-up, or later where the lag
    trend found the start-up backlog still draining (its fitted span's start). One span for all:
    a latency percentile that took in the backlog's records would fail a steady state that holds."""
    return trend.start_s if math.isfinite(trend.start_s) else warmup_s


def _rounded(trend, name: str) -> float:
    """A trend's figure to three decimals; NaN without a trend or a finite figure."""
    x = getattr(trend, name) if trend is not None else float("nan")
    return round(x, 3) if math.isfinite(x) else float("nan")


def faulted(res: ExperimentResult, fault: str) -> ExperimentResult:
    """A run during which the environment failed: invalid, with the fault as its reason."""
    import dataclasses

    note = f"{fault}: experiment invalid" + (f"; {res.note}" if res.note else "")
    return dataclasses.replace(res, valid=False, passed=False, verdict="invalid", fault=fault, note=note)


def _stopping_on_fault(judge: Callable, watch) -> Callable:
    def decided(*args) -> bool:
        return bool(watch.dead()) or judge(*args)

    return decided


def drops_late(spec: Spec, params: dict) -> bool:
    """Whether the pipeline may drop records behind a watermark: its dropped-records SLO applies."""
    from streamscale.pipelines import make_pipeline

    return bool(make_pipeline(spec.benchmark.sut, params, records=spec.benchmark.records).drops_late)


def emission_period_s(spec: Spec, params: dict) -> float | None:
    """How often the pipeline's windows close (its window slide, s): its output, and with it the
    lag, jumps once per period; None for a pipeline without event-time windows."""
    from streamscale.pipelines import make_pipeline

    grid = make_pipeline(spec.benchmark.sut, params, records=spec.benchmark.records).window_grid_ms()
    return grid[1] / 1000 if grid else None


class ExperimentRunner:
    """Runs single experiments for real (broker, generator, Spark pipeline) and judges them."""

    def __init__(
        self,
        spec: Spec,
        out_dir: Path,
        bootstrap: KafkaConnection | str,
        sessions=None,
        broker_pids=None,
        replication_factor: int | None = None,
    ):
        """``sessions``: a :class:`~streamscale.experiment.sessions.SparkSessions` the experiments take
        their Spark sessions from (its owner closes it); default: one of the runner's own, keeping a
        session from one experiment for the next when the spec says ``reuse_spark``. ``broker_pids``:
        the broker's processes (an embedded broker's), whose CPU each experiment reports.
        ``replication_factor``: of the experiments' topics (default: the spec's, else 1)."""
        from streamscale.experiment.sessions import SparkSessions

        self.spec, self.out_dir, self.bootstrap = spec, out_dir, bootstrap
        self.own_sessions = sessions is None
        self.sessions = SparkSessions(keep=spec.execution.reuse_spark) if sessions is None else sessions
        self.broker_pids = list(broker_pids or [])
        self.replication_factor = replication_factor or spec.replication_factor(embedded=False)
        self.reference_speed: float | None = None  # the execution's first calibration
        self.watch = None  # the embedded Kafka's BrokerWatch (streamscale.benchmark.faults), if embedded
        self.looks = None  # the running experiment's Looks, when it is looked at as it goes (judge)

    def close(self) -> None:
        """Stop a session the runner kept (its own sessions only)."""
        if self.own_sessions:
            self.sessions.close()

    def judge(self, s: dict, limit: float):
        """Whether a run so far is decided (sequential testing): its lag trend's interval, at the
        confidence this look may spend (:class:`~streamscale.experiment.sequential.Looks`), clears
        the limit, and where it held, no latency limit lies between its p95's bounds."""
        from streamscale.experiment.sequential import Looks
        from streamscale.experiment.sut import CHECK_EVERY_S

        ex = self.spec.execution
        period = emission_period_s(self.spec, s["params"])
        self.looks = looks = Looks(ex.duration_s, self.first_look_s(s, period), CHECK_EVERY_S)

        proc_limit = processing_limit_ms(self.spec, s["params"])

        def decided(lag, batches, t0_wall, topic) -> bool:
            if stall(lag, batches, t0_wall or None, (median_batch_ms(batches, t0_wall or None) or 0) / 1000):
                return True  # a stalled query fails its lag SLO: nothing after this decides more
            trend = lag_trend_estimate(lag, batches, t0_wall, ex.warmup_s, topic, period_s=period)
            verdict = trend.verdict(limit, looks.confidence())
            if verdict != "pass":
                return verdict == "fail"
            steady = steady_from(trend, ex.warmup_s)
            slos = latency_verdicts(batches, t0_wall or None, steady, ex.slos.latency_p95_ms, proc_limit)
            return worst(*(v for _, _, v in slos.values())) != "undecided"

        return decided

    def __call__(
        self, load: float, resources: int, repetition: int, on_lag: Callable | None = None, config: str = ""
    ) -> ExperimentResult:
        from streamscale.experiment.noise import calibration_speed
        from streamscale.observe import prometheus

        spec, ex = self.spec, self.spec.execution
        s = experiment_settings(spec, load, resources, config)
        prometheus.experiment.info(
            {
                "benchmark": spec.name,
                "sut": spec.benchmark.sut,
                "load": f"{load:g}",
                "resources": str(resources),
                "repetition": str(repetition),
            }
        )
        limit = lag_limit(s["rate"], ex.slos.lag_trend_threshold)
        self.looks = None
        self._restore_broker()
        speed_before = calibration_speed()
        if self.reference_speed is None:
            self.reference_speed = speed_before
        t_run = time.monotonic()
        try:
            r = self._run_sut(spec, s, on_lag, limit)
        except SparkDied as died:
            # a query whose batches outgrow the driver's memory ran out of it: the load was not
            # held; the next experiment starts a new JVM (experiment.sessions)
            res = died_result(load, resources, repetition, s["rate"], limit, str(died), time.monotonic() - t_run)
            res.config, res.exp_id = config, exp_id(load, resources, repetition, config)
            prometheus.experiments_total.labels("fail").inc()
            return res
        fault = self.watch.fault() if self.watch is not None else ""
        res = self._judged(load, resources, repetition, s, r, speed_before)
        return faulted(res, fault) if fault else res

    def _restore_broker(self) -> None:
        """Every embedded node up before a run: one that died in the run before is started again."""
        if self.watch is None:
            return
        started = self.watch.restore()
        if started:
            from streamscale import terminal

            terminal.console().print(f"  {' and '.join(started)} of the embedded broker started again", highlight=False)

    def first_look_s(self, s: dict, period: float | None = None) -> float:
        """When a run is first looked at: ``min_duration_s``, or for a windowed pipeline (its
        window ``period``, default the pipeline's) not before its fitted span holds two whole
        window periods (the fit that removes a window close's jump needs them) where the run is
        long enough for that."""
        ex = self.spec.execution
        first = ex.shortest_s if ex.shortest_s is not None else ex.duration_s
        if period is None:
            period = emission_period_s(self.spec, s["params"])
        if period and ex.warmup_s + 2 * period <= ex.duration_s:
            first = max(first, ex.warmup_s + 2 * period)
        return first

    def _confidence(self, ran_s: float) -> float:
        """The lag verdict's confidence: a run stopped at a look, that look's; one that went the
        whole way, what its looks left (:mod:`streamscale.experiment.sequential`); 95 % without looks."""
        looks = self.looks
        if looks is None or not looks.taken:
            return 0.95
        if ran_s < self.spec.execution.duration_s - 0.5:
            return 1 - looks.per_look()
        return looks.final_confidence()

    def _run_sut(self, spec: Spec, s: dict, on_lag, limit: float):
        from streamscale.experiment.sut import run_sut

        ex = spec.execution
        judge = self.judge(s, limit) if ex.shortest_s is not None else None  # sets self.looks
        if judge is not None and self.watch is not None:
            # a node that died decides the run at its next look: what follows measures the fault
            judge = _stopping_on_fault(judge, self.watch)
        return run_sut(
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
            judge=judge,
            min_duration_s=self.looks.first_s if judge is not None else None,
            broker_pids=self.watch.pids() if self.watch is not None else self.broker_pids,  # a node started again
            replication_factor=self.replication_factor,
            topic_config=spec.benchmark.topics.config(),
            records=spec.benchmark.records,
            rate=s["load_rate"],
        )

    def _judged(self, load: float, resources: int, repetition: int, s: dict, r, speed_before: float):
        from streamscale.experiment.noise import DRIFT_LIMIT, calibration_speed, drift, slowdown
        from streamscale.observe import prometheus

        spec, ex = self.spec, self.spec.execution
        speed_after = calibration_speed()
        trend = lag_trend_estimate(
            r.lag, r.batches, r.t0_wall, ex.warmup_s, r.input_topic, period_s=emission_period_s(spec, s["params"])
        )
        ran = r.ran_s or ex.duration_s
        fitted_from = steady_from(trend, ex.warmup_s)
        delivered = delivered_rate(r.lag, fitted_from, r.generator_rate)
        slope, limit = trend.slope, lag_limit(delivered, ex.slos.lag_trend_threshold)
        lag_verdict = trend.verdict(limit, self._confidence(ran))
        frac = r.dropped_late / r.generated if r.generated else 0.0
        thr = ex.slos.dropped_records_threshold
        dropped_ok = not drops_late(spec, s["params"]) or thr is None or frac <= thr
        batch_ms = median_batch_ms(r.batches, r.t0_wall or None, trend.start_s)
        proc_limit = processing_limit_ms(spec, s["params"])
        # no record processed after the warm-up: no latency to hold a limit to (nothing got through)
        slos = latency_verdicts(r.batches, r.t0_wall or None, fitted_from, ex.slos.latency_p95_ms, proc_limit)
        (p95, _, latency), (proc95, _, processing) = slos["output"], slos["processing"]
        proc = {0.5: processing_percentile_ms(r.batches, 0.5, r.t0_wall or None, fitted_from), 0.95: proc95}
        proc_trend = processing_trend(r.batches, r.t0_wall, fitted_from) if r.t0_wall else None
        growing = latency_growing(proc_trend, ran - fitted_from)
        valid, invalid_note = run_validity(
            r.generator_reached_target, r.lag_samples_missed, ran, delivered, r.target_rate, r.generator_error
        )
        slow = slowdown(self.reference_speed, speed_before, speed_after)
        lag_verdict, growth_fails, excuse = allow_for_slowdown(lag_verdict, growing, slope, delivered, slow)
        stalled = stall(r.lag, r.batches, r.t0_wall or None, (batch_ms or 0) / 1000)
        if stalled is not None:  # its trend is the one before it stalled: the lag after says more
            lag_verdict, excuse = "fail", ""
        verdict = combined_verdict(valid, lag_verdict, dropped_ok and not growth_fails, worst(latency, processing))
        moved = drift(self.reference_speed, speed_before, speed_after)
        notes = [invalid_note] if invalid_note else []
        if stalled is not None:
            notes.append(stalled.note((batch_ms or 0) / 1000))
        if growing:
            notes.append(f"processing latency kept growing ({proc_trend.slope:,.0f} ms per s)")
        if excuse:
            notes.append(excuse)
        if verdict == "undecided" and lag_verdict == "undecided" and not excuse:
            notes.append(
                f"lag still falling faster than the limit after {ran:.0f} s (catching up, not steady)"
                if trend.draining(limit)
                else f"lag interval still straddles the limit after {ran:.0f} s"
            )
        for what, (v, _, slo) in slos.items():
            if verdict == "undecided" and slo == "undecided":
                low = (
                    bucket_floor_ms(v)
                    if what == "output"
                    else processing_bounds(r.batches, 0.95, r.t0_wall or None, fitted_from)[0]
                )
                notes.append(f"{what} p95 lies in ({low:,.0f}, {v:,.0f}] ms, which holds its limit")
        if moved > DRIFT_LIMIT:
            notes.append(f"the machine's speed moved by {moved:.0%} around the run")

        def nan(x):
            return float("nan") if x is None else x

        longest = [b["processing_max_ms"] for b in r.batches if b.get("processing_max_ms") is not None]

        res = ExperimentResult(
            exp_id=exp_id(load, resources, repetition, s["config"]),
            config=s["config"],
            load=load,
            resources=resources,
            repetition=repetition,
            target_rate=r.target_rate,
            generator_rate=round(r.generator_rate, 1),
            delivered_rate=round(delivered, 1),
            processing_growing=growing,
            cpu_s_per_million=round(r.spark_cpu_pct / 100 * ran / r.processed_records * 1e6, 2)
            if r.processed_records
            else float("nan"),
            generator_reached_target=r.generator_reached_target,
            valid=valid,
            lag_slope=round(slope, 3) if math.isfinite(slope) else slope,
            lag_limit=limit,
            lag_slo=lag_verdict == "pass",
            dropped=r.dropped_late,
            dropped_fraction=round(frac, 6),
            dropped_slo=dropped_ok,
            passed=verdict == "pass",
            final_lag=r.final_lag,
            processed_records=r.processed_records,
            sampler_cpu_pct=round(100 * r.sampler_cpu_s / ran, 3),
            wall_s=round(r.wall_s, 1),
            note="; ".join(notes),
            lag_low=round(trend.low, 3),
            lag_high=round(trend.high, 3),
            lag_basis=trend.basis,
            lag_period_s=trend.period_s,
            lag_verdict=lag_verdict,
            latency_p95_ms=nan(p95),
            latency_slo=latency != "fail",
            trend_from_s=round(trend.start_s, 3),
            median_batch_ms=nan(batch_ms),
            generator_cpu_pct=round(100 * r.generator_cpu_s / ran, 1),
            machine_cpu_pct=round(r.machine_cpu_pct, 1),
            verdict=verdict,
            ran_s=round(ran, 1),
            processing_p50_ms=nan(proc[0.5]),
            processing_p95_ms=nan(proc[0.95]),
            processing_max_ms=max(longest) if longest else float("nan"),
            processing_limit_ms=nan(proc_limit),
            processing_slo=processing != "fail",
            processing_trend=_rounded(proc_trend, "slope"),
            processing_trend_low=_rounded(proc_trend, "low"),
            processing_trend_high=_rounded(proc_trend, "high"),
            spark_cpu_pct=round(r.spark_cpu_pct, 1),
            broker_cpu_pct=round(r.broker_cpu_pct, 1),
            steal_pct=round(r.steal_pct, 2),
            speed_before=round(speed_before),
            speed_after=round(speed_after),
            drift=round(moved, 3),
            drifted=moved > DRIFT_LIMIT,
        )
        self._write_lag(res, r, trend)
        prometheus.experiments_total.labels(res.verdict).inc()  # pass, fail, undecided or invalid
        return res

    def _write_lag(self, res: ExperimentResult, r, trend) -> None:
        """The run's lag (each second and after each commit), its batches' own processing p95 (what
        the latency's trend was fitted from) and the lag plot."""
        from streamscale.benchmark.plots import plot_lag

        lag = r.lag
        d = self.out_dir / "lag"
        d.mkdir(parents=True, exist_ok=True)
        _write_csv(d / f"{res.exp_id}.csv", ["t_s", "lag"], [[x.t_s, x.lag] for x in lag])
        bt, bl = trend.commits  # the lag after each commit, as the trend was fitted from
        if bt:
            _write_csv(d / f"{res.exp_id}-batches.csv", ["t_s", "lag_after_commit"], zip(bt, bl))
        if r.t0_wall:
            rows = batch_processing_ms(r.batches, r.t0_wall)
            _write_csv(d / f"{res.exp_id}-latency.csv", ["t_s", "processing_p95_ms"], rows)
        plot_lag(
            [x.t_s for x in lag],
            [x.lag for x in lag],
            self.spec.execution.warmup_s,
            res,
            d / f"{res.exp_id}.png",
            trend=trend,
            axes=Axes.of(self.spec),
        )


def _write_csv(path: Path, header: list[str], rows) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
