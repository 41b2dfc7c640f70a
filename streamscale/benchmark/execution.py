"""`streamscale benchmark run`: isolated experiments driven by a search strategy, with results on disk.

Results directory (one per execution):
    spec.yaml            the validated spec that ran
    experiments.csv      one row per experiment (:mod:`.results`: load, resources, repetition, slope,
                         SLO verdicts, ...)
    lag/<id>.csv|.png    lag samples of each experiment and its plot with the trend line
    summary.csv|.json    the metric: resource demand per load (or load capacity per resource amount)
    demand.png           (capacity.png) the metric with a linear fit
An interrupted execution resumes: experiments already in experiments.csv are not run again.
"""

from __future__ import annotations

import csv
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import yaml

from streamscale import terminal
from streamscale.benchmark.answer import answer, assumed_capacities
from streamscale.benchmark.experiment_runner import ExperimentRunner, emission_period_s
from streamscale.benchmark.results import (
    ExperimentResult,
    ResultsFile,
    exp_id,
    failed_without_output,
    old_late_rule_note,
)
from streamscale.benchmark.search import CountingOracle, load_capacity, majority, resource_demand
from streamscale.benchmark.spec import Spec
from streamscale.benchmark.units import Axes
from streamscale.broker.connection import KafkaConnection, build_connection, masked
from streamscale.errors import ConfigError

console = terminal.console()


def _saved(spec: Spec) -> dict:
    """The spec as results keep it: without credentials (results are shared; a changed password
    is not another spec either)."""
    d = spec.model_dump(mode="json")
    d["kafka"]["properties"] = masked(d["kafka"]["properties"])
    return d


class Execution:
    """One benchmark execution: search, repetitions, resume, files."""

    def __init__(self, spec: Spec, out_dir: Path, run_experiment: Callable[..., ExperimentResult], live=None):
        self.live = live  # streamscale.observe.live.LiveState, for `benchmark run --serve`
        self.spec = spec
        self.out_dir = out_dir
        self.run_experiment = run_experiment
        self.results = ResultsFile(out_dir)
        self.done: dict[tuple, ExperimentResult] = {}
        self.resumed = 0
        self.ran = 0
        out_dir.mkdir(parents=True, exist_ok=True)
        self._load_previous()

    def _load_previous(self) -> None:
        spec_file = self.out_dir / "spec.yaml"
        mine = _saved(self.spec)
        if spec_file.exists():
            try:  # read back as a spec: fields added since it was written take their defaults
                raw = yaml.safe_load(spec_file.read_text())
                # its properties are compared as saved (masked ones would not pass librdkafka's check)
                props = (raw.get("kafka") or {}).get("properties") or {}
                raw.setdefault("kafka", {})["properties"] = {}
                prev = _saved(Spec.model_validate(raw))
                prev["kafka"]["properties"] = masked(props)
            except (ValueError, TypeError, AttributeError, yaml.YAMLError):
                prev = None
            if prev != mine:
                raise ConfigError(
                    f"{self.out_dir} holds results of a different spec; choose another --out or delete it"
                )
        spec_file.write_text(yaml.safe_dump(mine, sort_keys=False))
        rows, repaired = self.results.load()
        if repaired:
            console.print(f"{self.results.path}: dropped a partial last row left by an interrupted run")
        old_rule = old_late_rule_note(rows)
        if old_rule:
            console.print(f"note: {self.results.path}: {old_rule}", highlight=False)
        self.done.update((r.key, r) for r in rows)

    def passes(self, load, res, extra_repetitions: int | None = None, extra_only_failing: bool = False) -> bool:
        """Whether ``res`` resources hold ``load``: the spec's repetitions, a majority deciding;
        ``extra_repetitions`` overrides the spec's runs added for an undecided lag interval (the
        demo adds one only where its answer hangs on the run), and ``extra_only_failing`` adds them
        only for an undecided run whose point estimate fails (an undecided pass stands)."""
        reps = self.spec.execution.repetitions
        extra_limit = self.spec.execution.extra_repetitions if extra_repetitions is None else extra_repetitions
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
                    self.live.start_experiment(exp_id=exp_id(load, res, rep), load=load, resources=res, repetition=rep)
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
                self.results.append(r)
                colour = "green" if r.passed else "red"
                console.print(
                    f"  [{colour}]{'PASS' if r.passed else 'FAIL'}[/] lag slope {r.lag_slope:,.1f}/s "
                    f"[{r.lag_low:,.1f}, {r.lag_high:,.1f}] (limit {r.lag_limit:,.0f}), "
                    f"{self._latency_text(r)}dropped "
                    f"{r.dropped:,}, generator {r.generator_rate:,.0f}/s ({r.generator_cpu_pct:.0f} % of a CPU; "
                    f"machine {r.machine_cpu_pct:.0f} % busy), "
                    f"median batch {r.median_batch_ms:,.0f} ms"
                    f"{'' if r.valid else ' [red]INVALID[/]'}"
                )
            retry = r.lag_verdict == "undecided" and r.valid and r.dropped_slo and extra < extra_limit
            if retry and not (extra_only_failing and r.passed):
                extra += 1  # the interval straddles the limit: no verdict from this run, one more
                console.print(f"  lag interval straddles the limit: repetition {reps + extra} added")
                continue
            verdicts.append(r.passed)
            decided = majority(verdicts, reps)
            if decided is not None and (self.spec.execution.stop_at_majority or len(verdicts) >= reps):
                return decided
        return bool(majority(verdicts, reps))

    def _latency_text(self, r: ExperimentResult) -> str:
        """The run's p95 output latency for its line (windowed UCs), with the limit where it is an
        SLO: a run can fail by its latency alone, and the line must say why."""
        limit = self.spec.execution.slos.latency_p95_ms
        if limit is not None and failed_without_output(r):
            return "[red]no output row after the warm-up (no p95 latency)[/], "
        if math.isnan(r.latency_p95_ms):
            # no output row after the warm-up (UC1 has none; a 60 s window may close only during
            # it) and no SLO failed for it: nothing (the demo's 24 s runs of UC2 mostly emit no
            # window, and a line on each read as a fault)
            return ""
        text = f"p95 latency {r.latency_p95_ms:,.0f} ms"
        if limit is None:
            return text + ", "
        bound = f"limit {limit:,.0f}" if r.latency_slo else f"[red]limit {limit:,.0f}[/]"
        return f"{text} ({bound}), "

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
        # a capacity taken over from fewer resources without a run is said so (table, plot, JSON)
        assumed = assumed_capacities(metric, oracle.calls) if ex.metric == "capacity" else set()
        summary = self._write_summary(metric, assumed)
        from streamscale.benchmark.plots import plot_metric

        plot_metric(
            metric,
            ex.metric,
            Axes.of(self.spec),
            self.out_dir / ("demand.png" if ex.metric == "demand" else "capacity.png"),
            most_tested=max(ex.resources.values),
            assumed=assumed,
        )
        return summary

    def _write_summary(self, metric: dict, assumed: set | frozenset = frozenset()) -> dict:
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
            "connector": spec_connector(self.spec),
            "metric": ex.metric,
            "answer": answer(metric, ex.metric, axes, self.spec.benchmark.sut, max(ex.resources.values), assumed),
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


def broker_change_note(out_dir: Path, env: dict) -> str | None:
    """One line when the results already in ``out_dir`` were measured on another kind of broker
    (e.g. the embedded Tansu of older streamscale versions), else None."""
    path = Path(out_dir) / "environment.json"
    try:
        before = str(json.loads(path.read_text()).get("broker", ""))
    except (OSError, ValueError, AttributeError):
        return None

    def kind(text: str) -> str:
        return text.split(" at ", 1)[0].strip()

    now = str(env.get("broker", ""))
    if not before or kind(before) == kind(now):
        return None
    return (
        f"the experiments already in {out_dir} ran on {kind(before)}; the ones run now run on {kind(now)}: "
        "their figures are not directly comparable"
    )


def spec_connector(spec: Spec) -> str:
    """The Kafka connector the spec's runs use: its ``connector`` parameter, else the default."""
    from streamscale.sparkio.io import kafka_impl

    return kafka_impl(spec.benchmark.params.get("connector"))


def short_for_windows(spec: Spec) -> str | None:
    """Why the runs are too short for their pipeline's windows, if they are: windows that close
    within a run make the lag jump once per window slide, which the trend fits out only over two
    whole periods after the warm-up (streamscale.experiment.slo.fit_periodic)."""
    ex = spec.execution
    if ex.load.type == "window_s":
        return None  # the window is the load: one period per load, no single rule
    period = emission_period_s(spec, dict(spec.benchmark.params))
    if not period or period > ex.duration_s or ex.duration_s - ex.warmup_s >= 2 * period:
        return None
    return (
        f"{spec.benchmark.sut.upper()}'s windows close every {period:g} s; {ex.duration_s:g} s runs with "
        f"{ex.warmup_s:g} s warm-up fit the lag trend over less than two of those periods, so a window "
        f"closing near a run's end can pass for growth: duration_s ≥ warmup_s + {2 * period:g} fits the "
        "jump out"
    )


def run_execution(
    spec: Spec,
    out_dir: Path,
    bootstrap: KafkaConnection | str | None = None,
    live=None,
    search: Callable[[Callable], dict] | None = None,
    properties: dict | None = None,
    sessions=None,
) -> dict:
    """Run the execution, then write report.html (streamscale.benchmark.report) next to its results.

    ``bootstrap``: a connection or bootstrap servers, else an embedded broker; ``properties``: Kafka
    client properties for every client of the run. Neither given: both from the spec's ``kafka:``
    section (a caller that gives either has read the section itself, as the command line does).
    ``sessions``: the caller's :class:`~streamscale.experiment.sessions.SparkSessions` (the demo's
    holds the probe's session for the first experiment); default: the runner's own."""
    from contextlib import ExitStack

    from streamscale.benchmark.report import write_report
    from streamscale.broker import EmbeddedBroker
    from streamscale.observe.html import environment

    with ExitStack() as stack:
        if bootstrap is None and properties is None:  # the section (the environment is the CLI's)
            bootstrap, properties = build_connection(section=spec.kafka_section(), use_env=False)
        embedded = bootstrap is None
        if embedded:
            bootstrap = stack.enter_context(EmbeddedBroker(log_dir=out_dir / "logs")).bootstrap
        conn = KafkaConnection.of(bootstrap, properties)
        note = short_for_windows(spec)
        if note:
            console.print(f"note: {note}", highlight=False)
        runner = ExperimentRunner(spec, out_dir, conn, sessions)
        stack.callback(runner.close)  # a kept session stops before the broker it reads
        execution = Execution(spec, out_dir, runner, live=live)
        env = environment(spec, conn.bootstrap, embedded)
        changed = broker_change_note(out_dir, env)
        if changed and execution.done:
            console.print(f"note: {changed}", highlight=False)
        (out_dir / "environment.json").write_text(json.dumps(env, indent=2))
        summary = execution.run(search)
    summary["report"] = str(write_report(out_dir))
    return summary
