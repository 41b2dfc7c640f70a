"""`streamscale benchmark run`: isolated experiments driven by a search strategy, with results on disk.

Results directory (one per execution):
    spec.yaml            the validated spec that ran
    experiments.csv      one row per experiment (load, resources, repetition, slope, SLO verdicts, ...)
    lag/<id>.csv|.png    lag samples of each experiment and its plot with the trend line
    summary.csv|.json    the metric: resource demand per load (or load capacity per resource amount)
    demand.png           (capacity.png) the metric with a linear fit
An interrupted execution resumes: experiments already in experiments.csv are not run again.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import yaml
from rich.console import Console

from streamscale.benchmark.answer import answer
from streamscale.benchmark.search import CountingOracle, load_capacity, majority, resource_demand
from streamscale.benchmark.spec import Spec
from streamscale.benchmark.units import Axes
from streamscale.errors import ConfigError
from streamscale.execution.metrics import lag_limit, lag_trend_estimate, latency_percentile_ms

console = Console()


@dataclass
class ExperimentResult:
    exp_id: str
    load: float
    resources: int
    repetition: int
    target_rate: float
    generator_rate: float
    generator_reached_target: bool
    valid: bool
    lag_slope: float
    lag_limit: float
    lag_slo: bool
    dropped: int
    dropped_fraction: float
    dropped_slo: bool
    passed: bool
    final_lag: int
    processed_records: int
    sampler_cpu_pct: float
    wall_s: float
    note: str = ""
    lag_low: float = float("nan")  # 95 % interval of the lag slope
    lag_high: float = float("nan")
    lag_basis: str = ""  # fitted through batch commits ("batches") or 1 s samples ("seconds")
    lag_verdict: str = ""  # pass | fail | undecided (interval straddles the limit)
    latency_p95_ms: float = float("nan")  # output latency after the warm-up (windowed UCs; 19 % buckets)
    latency_slo: bool = True  # holds, or no latency limit in the spec
    trend_from_s: float = float("nan")  # the warm-up's end: warmup_s, or later while the start-up backlog drained


def _exp_id(load, res, rep) -> str:
    return f"load{load:g}_res{res}_rep{rep}"


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


class ExperimentRunner:
    """Runs single experiments for real (broker, generator, Spark pipeline) and judges them."""

    def __init__(self, spec: Spec, out_dir: Path, bootstrap: str):
        self.spec, self.out_dir, self.bootstrap = spec, out_dir, bootstrap

    def __call__(
        self, load: float, resources: int, repetition: int, on_lag: Callable | None = None
    ) -> ExperimentResult:
        from streamscale.execution.sut import run_sut
        from streamscale.observe import metrics

        spec, ex = self.spec, self.spec.execution
        s = experiment_settings(spec, load, resources)
        metrics.experiment.info(
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
        )
        trend = lag_trend_estimate(r.lag, r.batches, r.t0_wall, ex.warmup_s, r.input_topic)
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
        lat_limit = ex.slos.latency_p95_ms
        latency_ok = lat_limit is None or (p95 is not None and p95 <= lat_limit)
        valid = r.generator_reached_target
        res = ExperimentResult(
            exp_id=_exp_id(load, resources, repetition),
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
            note="generator fell short of its target rate: experiment invalid"
            if not valid
            else "lag interval straddles the limit"
            if lag_verdict == "undecided"
            else "",
            lag_low=round(trend.low, 3),
            lag_high=round(trend.high, 3),
            lag_basis=trend.basis,
            lag_verdict=lag_verdict,
            latency_p95_ms=float("nan") if p95 is None else p95,
            latency_slo=latency_ok,
            trend_from_s=round(trend.start_s, 3),
        )
        self._write_lag(res, r.lag, trend)
        metrics.experiments_total.labels("invalid" if not valid else "pass" if res.passed else "fail").inc()
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


class Execution:
    """One benchmark execution: search, repetitions, resume, files."""

    def __init__(self, spec: Spec, out_dir: Path, run_experiment: Callable[..., ExperimentResult], live=None):
        self.live = live  # streamscale.observe.live.LiveState, for `benchmark run --serve`
        self.spec = spec
        self.out_dir = out_dir
        self.run_experiment = run_experiment
        self.csv_path = out_dir / "experiments.csv"
        self.done: dict[tuple, ExperimentResult] = {}
        self.resumed = 0
        self.ran = 0
        out_dir.mkdir(parents=True, exist_ok=True)
        self._load_previous()

    def _load_previous(self) -> None:
        spec_file = self.out_dir / "spec.yaml"
        mine = self.spec.model_dump(mode="json")
        if spec_file.exists():
            prev = yaml.safe_load(spec_file.read_text())
            if prev != mine:
                raise ConfigError(
                    f"{self.out_dir} holds results of a different spec; choose another --out or delete it"
                )
        spec_file.write_text(yaml.safe_dump(mine, sort_keys=False))
        if not self.csv_path.exists():
            return
        text = self.csv_path.read_text()
        if text and not text.endswith("\n"):
            # a run killed while writing left a partial last row: drop it (that experiment runs
            # again) and repair the file, so that appended rows start on a line of their own
            text = text[: text.rfind("\n") + 1]
            tmp = self.csv_path.with_suffix(".csv.tmp")
            tmp.write_text(text)
            os.replace(tmp, self.csv_path)
            console.print(f"{self.csv_path}: dropped a partial last row left by an interrupted run")
        types = {f.name: f.type for f in fields(ExperimentResult)}
        for row in csv.DictReader(io.StringIO(text)):
            vals = {}
            try:
                if None in row or None in row.values():
                    raise ValueError("wrong number of fields")
                for k, v in row.items():
                    t = types[k]
                    vals[k] = (
                        (v == "True")
                        if t in ("bool", bool)
                        else float(v)
                        if t in ("float", float)
                        else int(v)
                        if t in ("int", int)
                        else v
                    )
            except (KeyError, ValueError) as exc:
                raise ConfigError(
                    f"{self.csv_path}: a row cannot be read ({exc}); move the file away to start over"
                ) from None
            r = ExperimentResult(**vals)
            self.done[(r.load, r.resources, r.repetition)] = r

    def _append(self, r: ExperimentResult) -> None:
        new = not self.csv_path.exists()
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=[x.name for x in fields(ExperimentResult)])
        if new:
            w.writeheader()
        w.writerow(asdict(r))
        with open(self.csv_path, "a", newline="") as f:
            f.write(buf.getvalue())  # one write of whole rows, on disk before the next experiment
            f.flush()
            os.fsync(f.fileno())

    def passes(self, load, res) -> bool:
        reps = self.spec.execution.repetitions
        verdicts: list[bool] = []
        extra = 0  # repetitions added because a lag interval straddled the limit
        rep = -1
        while rep + 1 < reps + extra:
            rep += 1
            key = (float(load), int(res), rep)
            r = self.done.get(key)
            if r is not None:
                self.resumed += 1
            else:
                console.print(
                    f"[bold]experiment[/] load {load:g} x resources {res} (repetition {rep + 1}/{reps + extra})"
                )
                t0 = time.monotonic()
                if self.live is not None:
                    self.live.start_experiment(exp_id=_exp_id(load, res, rep), load=load, resources=res, repetition=rep)
                with console.status("warming up") as status:

                    def on_lag(sample, status=status, t0=t0):
                        status.update(
                            f"load {load:g} x {res}: {time.monotonic() - t0:5.0f} s, consumer lag {sample.lag:,}"
                        )
                        if self.live is not None:
                            self.live.add_sample(sample.t_s, sample.lag)

                    r = self.run_experiment(load, res, rep, on_lag=on_lag)
                if self.live is not None:
                    self.live.end_experiment(asdict(r))
                self.ran += 1
                self.done[key] = r
                self._append(r)
                colour = "green" if r.passed else "red"
                console.print(
                    f"  [{colour}]{'PASS' if r.passed else 'FAIL'}[/] lag slope {r.lag_slope:,.1f}/s "
                    f"[{r.lag_low:,.1f}, {r.lag_high:,.1f}] (limit {r.lag_limit:,.0f}), dropped "
                    f"{r.dropped:,}, generator {r.generator_rate:,.0f}/s"
                    f"{'' if r.valid else ' [red]INVALID[/]'}"
                )
            if (
                r.lag_verdict == "undecided"
                and r.valid
                and r.dropped_slo
                and extra < self.spec.execution.extra_repetitions
            ):
                extra += 1  # the interval straddles the limit: no verdict from this run, one more
                console.print(f"  lag interval straddles the limit: repetition {reps + extra} added")
                continue
            verdicts.append(r.passed)
            decided = majority(verdicts, reps)
            if decided is not None:
                return decided
        return bool(majority(verdicts, reps))

    def run(self, search: Callable[[Callable], dict] | None = None) -> dict:
        """The spec's search, or ``search(passes) -> metric`` (the demo's: it stops at the first
        load one core cannot hold); either way the same experiments, files and summary."""
        ex = self.spec.execution
        oracle = CountingOracle(self.passes)
        loads = [float(v) for v in ex.load.values]
        res = list(ex.resources.values)
        if search is not None:
            metric = search(oracle)
        elif ex.metric == "demand":
            metric = resource_demand(loads, res, oracle, ex.strategy.name, ex.strategy.lower_bound)
        else:
            metric = load_capacity(res, loads, oracle, ex.strategy.name, ex.strategy.lower_bound)
        summary = self._write_summary(metric)
        from streamscale.benchmark.plots import plot_metric

        plot_metric(
            metric,
            ex.metric,
            Axes.of(self.spec),
            self.out_dir / ("demand.png" if ex.metric == "demand" else "capacity.png"),
            most_tested=max(ex.resources.values),
        )
        return summary

    def _write_summary(self, metric: dict) -> dict:
        ex = self.spec.execution
        kx, ky = ("load", "resources") if ex.metric == "demand" else ("resources", "load")
        rows = [{kx: k, ky: v} for k, v in metric.items()]
        with open(self.out_dir / "summary.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[kx, ky])
            w.writeheader()
            w.writerows(rows)
        cpu = [r.sampler_cpu_pct for r in self.done.values()]
        axes = Axes.of(self.spec)
        summary = {
            "name": self.spec.name,
            "sut": self.spec.benchmark.sut,
            "metric": ex.metric,
            "answer": answer(metric, ex.metric, axes, self.spec.benchmark.sut, max(ex.resources.values)),
            "load_label": axes.load_label,
            "resource_label": axes.resource_label,
            "load_type": ex.load.type,
            "resource_type": ex.resources.type,
            "strategy": ex.strategy.name,
            "lower_bound": ex.strategy.lower_bound,
            "results": rows,
            "experiments_run": self.ran,
            "experiments_resumed": self.resumed,
            "invalid_experiments": sum(1 for r in self.done.values() if not r.valid),
            "max_sampler_cpu_pct": max(cpu) if cpu else None,
        }
        (self.out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary


def run_execution(
    spec: Spec, out_dir: Path, bootstrap: str | None = None, live=None, search: Callable[[Callable], dict] | None = None
) -> dict:
    """Run the execution, then write report.html (streamscale.observe.report) next to its results."""
    from contextlib import ExitStack

    from streamscale.broker import EmbeddedBroker
    from streamscale.observe.report import environment, write_report

    with ExitStack() as stack:
        bs = bootstrap or spec.execution.bootstrap_servers
        embedded = bs is None
        if embedded:
            bs = stack.enter_context(EmbeddedBroker(log_dir=out_dir / "logs")).bootstrap
        execution = Execution(spec, out_dir, ExperimentRunner(spec, out_dir, bs), live=live)
        (out_dir / "environment.json").write_text(json.dumps(environment(spec, bs, embedded), indent=2))
        summary = execution.run(search)
    summary["report"] = str(write_report(out_dir))
    return summary
