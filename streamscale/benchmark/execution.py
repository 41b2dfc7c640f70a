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
import dataclasses
import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import yaml
from rich.markup import escape

from streamscale import terminal
from streamscale.benchmark.answer import answer, bracket_answer
from streamscale.benchmark.experiment_runner import ExperimentRunner
from streamscale.benchmark.plan import Plan, as_plan
from streamscale.benchmark.results import (
    STOP_RULE,
    ExperimentResult,
    ResultsFile,
    exp_id,
)
from streamscale.benchmark.runline import run_line
from streamscale.benchmark.search import MetricSearch, Outcome, Search
from streamscale.benchmark.setting import broker_change_note, embedded_kafka, short_for_windows
from streamscale.benchmark.spec import Spec, long_runs_kept_s
from streamscale.benchmark.verdict import majority_verdict
from streamscale.broker.connection import KafkaConnection, build_connection, masked
from streamscale.errors import ConfigError
from streamscale.pipelines.jobref import display_name

console = terminal.console()


def _saved(spec: Spec) -> dict:
    """The spec as results keep it: without credentials (results are shared; a changed password
    is not another spec either)."""
    d = spec.model_dump(mode="json", by_alias=True)  # as a spec writes it (records.schema)
    d["kafka"]["properties"] = masked(d["kafka"]["properties"])
    return d


# the repetition number of a bracket end's confirming run (above any spec's repetitions)
CONFIRM_REP = 100
# a run that a broker fault made invalid runs again as repetition FAULT_REP + its own
FAULT_REP = 200
# the repetition number of a bracket end's long run (strategy.confirm)
LONG_REP = 300
# the repetition number of a bracket end's run under the SLO (a search judged at a looser lag threshold)
SLO_REP = 400
# a run that decides an end and ended early, undecided, or failed in a slow phase of the machine or at
# a load the search held, runs again once as its own rep + RERUN (Execution._again)
RERUN = 1


@dataclass(frozen=True)
class EndRuns:
    """The runs that decide a bracket's ends: their runner, repetition number, length (their
    duration_s, for the run line) and how a run of them is called."""

    runner: Callable[..., ExperimentResult]
    rep: int
    duration_s: float
    word: str
    longest_s: float  # how long one may go on while undecided

    def cut_short(self, r: ExperimentResult) -> bool:
        """Whether ``r`` ended undecided well before its longest: a look stopped it on a verdict
        the end did not keep (a failure a slowdown of the machine then excused), and more of it
        could have decided it."""
        return r.verdict == "undecided" and self.early(r)

    def failed_slow(self, r: ExperimentResult, fastest: float) -> float | None:
        """How much slower than ``fastest`` (the fastest calibration the execution has read) the
        machine was around ``r``, when ``r`` failed well before its longest in a slow phase of the
        machine (streamscale.experiment.noise.SLOW_PHASE); else None. A look fails a load within
        a minute, inside one phase, while a pass takes minutes of commits and spans phases: such a
        failure says what the load does in the machine's slow minutes only, and a run taken later
        (the 300 s runs that check an answer among them) may hold it."""
        from streamscale.experiment.noise import SLOW_PHASE, slowdown

        slower = slowdown(fastest, r.speed_before, r.speed_after)
        return slower if r.verdict == "fail" and self.early(r) and slower > SLOW_PHASE else None

    def early(self, r: ExperimentResult) -> bool:
        """Whether ``r`` ended well before its longest (before 90 % of it)."""
        return math.isfinite(r.ran_s) and r.ran_s < 0.9 * self.longest_s


class Execution:
    """One benchmark execution: search, repetitions, resume, files."""

    def __init__(
        self,
        plan: Plan | Spec,
        out_dir: Path,
        run_experiment: Callable[..., ExperimentResult],
        live=None,
        long_experiment: Callable[..., ExperimentResult] | None = None,
        extra: Callable[[], dict] | None = None,
        slo_experiment: Callable[..., ExperimentResult] | None = None,
        drain: Callable | None = None,
    ):
        """``run_experiment``: the search's runs (at the search's lag threshold: Plan.search);
        ``long_experiment``: strategy.confirm's long runs (Plan.long); ``slo_experiment``: runs of a
        bracket's ends under the SLO where the search judged a looser threshold (the plan's own);
        ``drain``: a drain probe's run (ExperimentRunner.drain; None: no probes)."""
        self.live = live  # streamscale.observe.live.LiveState, for `benchmark run --serve`
        self.extra = extra or dict  # what the caller adds to summary.json (the demo: its Spark sessions)
        self.plan = as_plan(plan)
        self.spec = self.plan.spec  # written to spec.yaml, and compared with the one there
        self.runs = self.plan.runs
        ex = self.runs
        self.ends: EndRuns | None = None  # what decides a bracket's ends (None: the search's runs)
        if ex.strategy.confirm:
            long = long_experiment or run_experiment
            confirm_s = ex.strategy.confirm_s
            self.ends = EndRuns(long, LONG_REP, confirm_s, f"{confirm_s:g} s run", confirm_s)
        elif self.plan.ends_rejudged and slo_experiment is not None:
            self.ends = EndRuns(slo_experiment, SLO_REP, ex.duration_s, "run under the SLOs", ex.longest_s)
        self.out_dir = out_dir
        self.run_experiment = run_experiment
        self.results = ResultsFile(out_dir)
        self.done: dict[tuple, ExperimentResult] = {}
        self.resumed = 0
        self.ran = 0
        self.config = ""  # the configuration being searched (execution.configs; "": the spec names none)
        self.overheads: list[float] = []  # what each run here took beyond its load (seconds)
        self.started = time.monotonic()
        self.deadline: float | None = None  # the configuration's search's time budget ends (time.monotonic())
        self.long_deadline: float | None = None  # and its ends' long runs' (strategy.confirm)
        self.budget_end: float | None = None  # the whole execution's time budget ends
        self.later = 0  # the brackets after the one whose ends are being decided
        self.ends_left = 1  # the runs under the SLOs still planned: the time left is shared among them
        self.cut: set[tuple] = set()  # the keys of runs the time budget ended before their longest
        out_dir.mkdir(parents=True, exist_ok=True)
        self._load_previous()
        self.probes = None  # each resource amount's drain probe (strategy.probe): drainprobe.Probes
        if drain is not None and self.plan.probed:
            from streamscale.benchmark.drainprobe import Probes

            self.probes = Probes(self.plan, out_dir, drain)

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
        if any(r.stop_rule != STOP_RULE for r in rows):
            raise ConfigError(
                f"{self.out_dir} holds experiments judged when a run undecided at duration_s ended there (now it "
                "goes on up to max_duration_s): they are not resumed; choose another --out or delete it"
            )
        if repaired:
            console.print(f"{self.results.path}: dropped a partial last row left by an interrupted run")
        self.done.update((r.key, r) for r in rows)

    def passes(self, load, res, extra_repetitions: int | None = None) -> bool:
        """Whether ``res`` resources hold ``load`` (an undecided point does not)."""
        return self.verdict(load, res, extra_repetitions) == "pass"

    def verdict(self, load, res, extra_repetitions: int | None = None) -> str:
        """pass, fail, undecided or invalid for ``res`` resources at ``load``: the spec's repetitions,
        a strict majority of them deciding. Runs that disagree with no majority leave the point
        undecided, as does a run whose lag interval still straddled its limit at its longest;
        ``extra_repetitions`` (default the spec's) adds runs for such a run."""
        reps = self.runs.repetitions
        extra_limit = self.runs.extra_repetitions if extra_repetitions is None else extra_repetitions
        verdicts: list[str] = []
        extra = 0
        rep = -1
        while rep + 1 < reps + extra:
            rep += 1
            r = self._run(load, res, rep, reps + extra)
            if r.verdict == "undecided" and extra < extra_limit:
                extra += 1
                console.print(f"  undecided: repetition {reps + extra} added")  # the run line said why
                continue
            verdicts.append(r.verdict)
            decided = majority_verdict(verdicts, reps)
            if decided is not None and (self.runs.stop_at_majority or len(verdicts) >= reps):
                return decided
        return majority_verdict(verdicts, reps, final=True)

    def drifted(self, load, res) -> bool:
        """Whether a run at this point (this configuration) was taken on a drifting machine."""
        return any(r.drifted for r in self._runs_at(load, res))

    def leans_over(self, load, res) -> bool:
        """Whether a run at this point that stayed undecided leaned over the capacity: its lag's
        trend estimate above the limit it was judged by (its interval reached below it)."""
        return any(r.verdict == "undecided" and r.lag_slope > r.lag_limit for r in self._runs_at(load, res))

    def _runs_at(self, load, res) -> list[ExperimentResult]:
        """Every run done at this point in the configuration searched, whatever its repetition."""
        point = (float(load), int(res), self.config)
        return [r for (x, n, _, c), r in self.done.items() if (x, n, c) == point]

    def confirm(self, load, res) -> str:
        """One more run of a bracket's end, as repetition CONFIRM_REP (recalled when resumed)."""
        if not self._recalled(load, res, CONFIRM_REP):  # recalled: not said again
            console.print(f"  an end of the bracket was decided on a drifting machine: load {load:g} run again")
        return self._run(load, res, CONFIRM_REP, None).verdict

    def _run(self, load, res, rep: int, of: int | None) -> ExperimentResult:
        """Repetition ``rep`` of ``of`` at a point (None: run again), recalled or run now; a run
        that a broker fault made invalid runs once more, on the nodes started again."""
        r = self._run_once(load, res, rep, "run again" if of is None else f"repetition {rep + 1}/{of}")
        if r.fault and rep < FAULT_REP:
            if not self._recalled(load, res, FAULT_REP + rep):
                watch = getattr(self.run_experiment, "watch", None)  # a runner's (faults.BrokerWatch)
                console.print(
                    f"  {watch.kind if watch else 'a broker'} fault made it invalid: run again once every node is up"
                )
            return self._run_once(load, res, FAULT_REP + rep, "run again")
        return r

    def end_verdict(self, load, res, end: str) -> str:
        """A run of ``load`` on ``res`` that decides an end of a bracket (a long run, or one under
        the SLO): its verdict; ``end``: which end (held, failed, or "" for a load between them).
        A run that ended early in a way the machine's drift puts in doubt runs once more, and that
        run's verdict decides (:meth:`_again`)."""
        runs = self.ends
        what = f"{runs.word} of the {end} end" if end in ("held", "failed") else f"{runs.word} between the ends"
        r = self._run_once(load, res, runs.rep, what, runs, end or "between")
        self.ends_left = max(1, self.ends_left - 1)
        why = "" if self._key(load, res, runs.rep) in self.cut else self._again(r)
        if not why or self._budget_refuses(1):
            return r.verdict
        if not self._recalled(load, res, runs.rep + RERUN):  # recalled: not said again
            console.print(f"  {why}: load {load:g} run again")
        return self._run_once(load, res, runs.rep + RERUN, f"{what}, run again", runs, end or "between").verdict

    def _again(self, r: ExperimentResult) -> str:
        """Why a run that decides an end runs again once ("": it does not): it ended undecided well
        before its longest; or it failed early (a look fails a load within a minute, inside one of
        the machine's phases) in a slow phase of the machine. One that failed early a load the
        search held is not run again: runs there disagree already, and an end there moves past it
        (:meth:`_past_disputed`) whichever way one more run went. (strategy.confirm's long runs are
        whole, their first look at their end: none of them ends early on a verdict.)"""
        runs = self.ends
        if runs.cut_short(r):
            return f"undecided after {r.ran_s:.0f} s of its {runs.longest_s:g}"
        slower = runs.failed_slow(r, self.fastest_speed())
        if slower is not None:
            return f"failed after {r.ran_s:.0f} s on a machine {slower:.0%} slower than its fastest here"
        return ""

    def fastest_speed(self) -> float:
        """The fastest calibration of the machine among this execution's runs (NaN: none read)."""
        speeds = [s for r in self.done.values() for s in (r.speed_before, r.speed_after) if s > 0]
        return max(speeds, default=float("nan"))

    def _run_once(
        self, load, res, rep: int, label: str, ends: EndRuns | None = None, confirms: str = ""
    ) -> ExperimentResult:
        key = self._key(load, res, rep)
        r = self.done.get(key)
        if r is not None:
            self.resumed += 1
            return r
        which = f" with {self.config}" if self.config else ""
        console.print(f"[bold]experiment[/] load {load:g} x resources {res}{which} ({label}) {self._progress()}")
        t0 = time.monotonic()
        if self.live is not None:
            eid = exp_id(load, res, rep, self.config)
            self.live.start_experiment(exp_id=eid, load=load, resources=res, repetition=rep)
        with console.status("warming up") as status:

            def on_lag(sample, status=status, t0=t0):
                status.update(f"load {load:g} x {res}: {time.monotonic() - t0:5.0f} s, consumer lag {sample.lag:,}")
                if self.live is not None:
                    self.live.add_sample(sample.t_s, sample.lag)

            # a configuration is named only where the spec has some (a caller's runner may not know of them)
            run = ends.runner if ends is not None else self.run_experiment
            capped = self._limit(run, ends)
            r = run(load, res, rep, on_lag=on_lag, **({"config": self.config} if self.config else {}))
        if confirms:
            r = dataclasses.replace(r, confirms=confirms)
        if self.live is not None:
            self.live.end_experiment(asdict(r))
        if math.isfinite(r.ran_s):
            self.overheads.append(max(0.0, time.monotonic() - t0 - r.ran_s))
        self.ran += 1
        self.done[key] = r
        self.results.append(r)
        if capped and r.verdict == "undecided" and not math.isfinite(r.decided_s):
            self.cut.add(key)  # undecided at the end the time budget gave it, before its longest
        duration = ends.duration_s if ends is not None else self.runs.duration_s
        line = run_line(r, self.runs.slos.latency_p95_ms, duration, cut=key in self.cut)
        console.print(line, highlight=False)
        return r

    def _limit(self, run, ends: EndRuns | None) -> bool:
        """Tell ``run`` (a runner with an ``until``: ExperimentRunner) when a run of it still
        undecided stops under the time budget: a search's run at its end, a run under the SLOs at
        its share of what is left (shared by the runs under the SLOs still planned), less what a run
        takes beyond its load; strategy.confirm's long runs are whole. Whether that comes before
        the run's longest."""
        from streamscale.benchmark.bracket import run_cost

        if not hasattr(run, "until"):
            return False
        whole = ends is not None and ends.rep == LONG_REP
        if self.deadline is None or whole:
            run.until = None
            return False
        left = self.deadline - time.monotonic()
        share = left / self.ends_left if ends is not None else left
        run.until = time.monotonic() + share - run_cost(0.0, self.overheads)
        return run.longest_now() < run.runs.longest_s - 0.5

    def most_experiments(self) -> int:
        """The most experiments the spec's search can run: each point's repetitions with their extra
        ones; a bracket search at most ``max_runs`` points per resource amount and two ends run again."""
        ex = self.runs
        per_point = ex.repetitions + ex.extra_repetitions
        if ex.strategy.name == "bracket":
            per_amount = ex.strategy.max_runs * per_point + 2
            if self.ends is not None:  # the ends and the runs deciding anew; under the SLOs, each run again
                deciding = 2 + ex.strategy.confirm_runs
                if self.ends.rep == SLO_REP:  # each run again, and an end past each one runs disagreed at
                    deciding = 2 * (deciding + 2)
                per_amount += deciding
        else:
            per_amount = len(ex.load_values) * per_point
        return len(self.plan.config_names) * len(ex.resource_values) * per_amount

    def _progress(self) -> str:
        """[k of at most n, elapsed, and the time left of a time budget]."""
        k, n = len(self.done) + 1, max(self.most_experiments(), len(self.done) + 1)
        said = [f"{k} of at most {n}", f"{_duration(time.monotonic() - self.started)} elapsed"]
        if self.budget_end is not None:
            said.append(f"{_duration(max(0.0, self.budget_end - time.monotonic()))} of the time budget left")
        return escape("[" + ", ".join(said) + "]")

    def run(self, search: Search | None = None) -> dict:
        """The spec's search (or ``search``, a :class:`~streamscale.benchmark.search.Search`) for
        each configuration in turn; then summary.csv, summary.json and the plot, once."""
        names = self.plan.config_names
        budget, reserve = self.runs.time_budget_s, self._long_reserve()
        self.budget_end = time.monotonic() + budget + reserve * len(names) if budget else None
        outcomes = {}
        for i, name in enumerate(names, 1):
            self.config = name
            if self.budget_end is not None:  # each configuration its share of what is left
                whole = time.monotonic() + (self.budget_end - time.monotonic()) / (len(names) - i + 1)
                self.deadline, self.long_deadline = whole - reserve, whole
            if name:
                console.print(f"[bold]configuration {name}[/] ({i} of {len(names)})")
            outcomes[name] = (search or self.search()).run(self)
        return self._write(outcomes)

    def search(self) -> Search:
        """The spec's search strategy (a bracket's ends then decided by runs of their own where the
        spec's execution has such runs: :class:`EndRuns`)."""
        from streamscale.benchmark.bracket import BracketSearch, EndsDecided, Settings

        ex = self.runs
        st, values = ex.strategy, list(ex.load_values)
        if st.name != "bracket":
            return MetricSearch(ex.metric, tuple(values), tuple(ex.resource_values), st.name, st.lower_bound)
        dim = self.plan.load
        low, high = dim.search_range(values)
        if self.probes is not None and len(values) == 1:  # the one value is a guess: each probe says where to look
            low, high = 1.0, math.inf
        settings = Settings(
            st.resolution, st.factor, low, high, st.max_runs, dim.whole, dim.rate, leans=self.leans_over
        )
        search = BracketSearch(
            tuple(ex.resource_values),
            values[0],
            settings,
            self.run_cost,
            (lambda res: self.probes.start(self.config, res)) if self.probes is not None else None,
        )
        return EndsDecided(search) if self.ends is not None else search

    def run_cost(self) -> float:
        """What a load's runs are planned to take, for the time budget: each at its longest (an
        undecided run goes on up to it) and the most a run took beyond its load so far. Under
        strategy.confirm, whose budget keeps the long runs' time apart from the search's and ends a
        search's run still undecided at the search's end, each at the longest a search's run here
        took (at least duration_s): planned at max_duration_s, a 16-round job's search from an
        underrated probe stopped after six runs of 22-87 s at 5 min of its 9 min 40 s."""
        from streamscale.benchmark.bracket import run_cost

        ex = self.runs
        longest = ex.longest_s
        if self.ends is not None and self.ends.rep == LONG_REP and self.deadline is not None:
            took = [r.ran_s for k, r in self.done.items() if k[2] < CONFIRM_REP and math.isfinite(r.ran_s)]
            longest = min(longest, max([ex.duration_s, *took]))
        return ex.repetitions * run_cost(longest, self.overheads)

    def _write(self, outcomes: dict[str, Outcome]) -> dict:
        """summary.csv, summary.json and the metric's plot of every configuration's outcome."""
        from streamscale.benchmark.plots import plot_brackets, plot_config_brackets, plot_metric

        ex, axes = self.runs, self.plan.axes
        plot = self.out_dir / ("demand.png" if ex.metric == "demand" else "capacity.png")
        if any(o.brackets is not None for o in outcomes.values()):
            table = [{**b, **({"config": n} if n else {})} for n, o in outcomes.items() for b in o.brackets]
            if self.probes is not None:  # each amount's probe beside its bracket
                for b in table:
                    found = self.probes.found.get((b.get("config", ""), b["resources"]))
                    b["probe_rate"] = found.rate if found is not None else None
            assumed = {(n, r) for n, o in outcomes.items() for r in o.assumed}
            metric = {(b.get("config", ""), b["resources"]): b["held"] for b in table}
            summary = self._summary(metric, assumed, brackets=table)
            draw = plot_brackets if list(outcomes) == [""] else plot_config_brackets
            draw(summary["answer"]["brackets"], axes, plot)
        elif list(outcomes) == [""]:
            summary = self._summary(outcomes[""].metric, outcomes[""].assumed)
            plot_metric(
                outcomes[""].metric,
                ex.metric,
                axes,
                plot,
                most_tested=max(ex.resource_values),
                assumed=outcomes[""].assumed,
            )
        else:
            summary = self._config_summary(outcomes)
        if self.probes is not None:
            summary["probes"] = self.probes.as_list()
        summary.update(self.extra())
        with open(self.out_dir / "summary.csv", "w", newline="") as f:
            rows = summary["results"]
            w = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else list(self._keys()))
            w.writeheader()
            w.writerows(rows)
        (self.out_dir / "summary.json").write_text(json.dumps(summary, indent=2))
        return summary

    def _keys(self) -> tuple[str, str]:
        return ("load", "resources") if self.runs.metric == "demand" else ("resources", "load")

    def ends_decided(self, b: dict, whole: bool, later: int = 0) -> dict:
        """An amount's bracket with its ends decided by the runs that decide them (:class:`EndRuns`:
        strategy.confirm's long runs, or runs under the SLO), refined where they do not hold
        (streamscale.benchmark.confirm); ``later``: the brackets after it, whose two ends each share
        the time budget left."""
        from streamscale.benchmark.confirm import confirm_bracket, held_unchecked, search_loads

        st, runs, res = self.runs.strategy, self.ends, b["resources"]
        ends = [f"{k} {b[k]:g}" for k in ("held", "failed") if b.get(k) is not None]
        if runs is None or not ends:
            return b
        # A run under the SLO judges the lag at a threshold no looser than the search's, by the same
        # runs' figures otherwise: a load the search failed fails under the SLO too, and is not run
        # again. Run again, a load near capacity on a drifting machine may pass once, and taking
        # that one pass over the search's failures would put the held end where runs disagree.
        failed = search_loads(b, "fail") if runs.rep == SLO_REP else set()
        to_run = [f"{k} {b[k]:g}" for k in ("held", "failed") if b.get(k) is not None and float(b[k]) not in failed]
        self.ends_left, self.later = len(to_run) + 2 * later, later
        # strategy.confirm's long runs of the ends themselves always run: the budget kept them
        if runs.rep == SLO_REP and self._budget_refuses(len(to_run)):
            return {**b, "ends_unchecked": "the time budget held no runs of them"}
        self._say_ends(b, to_run, len(ends))
        refused = []

        def verdict(x, end: str) -> str | None:
            if x in failed:
                return "fail"
            # a load other than the ends (one that narrows them, or one of a bracket decided anew)
            # is run only within the time budget
            if end not in ("held", "failed") and self._budget_refuses(1):
                refused.append(x)
                return None
            return self.end_verdict(x, res, end)

        out = confirm_bracket(b, verdict, st.resolution, st.confirm_runs, whole, self._past(b, res))
        if refused:
            which = "long runs" if runs.rep == LONG_REP else "runs under the SLOs"
            console.print(f"  {res} x: the time budget ended the {which}", highlight=False)
            out = held_unchecked(b, out)
            if runs.rep == LONG_REP:
                out["ends_out_of_time"] = True
        if runs.rep == SLO_REP:
            out = self._past_disputed(out, res, verdict, whole)
        said = "the ends hold" if out["long_confirmed"] else "decided anew"
        held = "none" if out["held"] is None else f"{out['held']:,.0f}"
        upper = "none" if out["failed"] is None else f"{out['failed']:,.0f}"
        upper = f"{'stayed undecided at' if out['failed_undecided'] else 'failed'} {upper}"
        console.print(f"  {res} x: {said}: held {held}, {upper}", highlight=False)
        verdicts = {f"{k:g}": v for k, v in sorted(out.pop("long").items())}
        if runs.rep == LONG_REP:
            return {**out, "long_s": st.confirm_s, "long": verdicts}
        # the loads whose verdict under the SLO is the search's failure, not a run of their own
        taken = sorted(f"{x:g}" for x in failed if f"{x:g}" in verdicts)
        return {**out, "slo_runs": verdicts, **({"slo_runs_from_search": taken} if taken else {})}

    def _say_ends(self, b: dict, to_run: list[str], ends: int) -> None:
        """Which of bracket ``b``'s ``ends`` are run now (``to_run``), and how."""
        res, st = b["resources"], self.runs.strategy
        how = f"over {st.confirm_s:g} s each" if self.ends.rep == LONG_REP else "under the SLOs"
        if to_run:
            which = "ends" if len(to_run) > 1 else "end"
            console.print(f"  {res} x: the bracket's {which} ({', '.join(to_run)}) {how}", highlight=False)
        if len(to_run) < ends:
            console.print(
                f"  {res} x: failed {b['failed']:g} stands (it failed the search's looser rule)", highlight=False
            )

    def _said_at(self, x: float, res) -> tuple[int, int]:
        """(how many runs held, how many failed) load ``x`` on ``res`` in the configuration searched."""
        said = [r.verdict for r in self._runs_at(x, res)]
        return said.count("pass"), said.count("fail")

    def _past(self, b: dict, res):
        """Under the SLOs, how an end where runs disagreed moves past that load once the ends are
        decided (:meth:`_past_disputed`), and the loads of bracket ``b`` where they disagree so far
        (streamscale.benchmark.confirm.Past); None under strategy.confirm's long runs."""
        from streamscale.benchmark.confirm import Past

        if self.ends is None or self.ends.rep != SLO_REP:
            return None
        disputed = frozenset(x for x in map(float, b.get("verdicts") or {}) if all(self._said_at(x, res)))
        return Past(self._step_past, disputed)

    @property
    def _step_past(self) -> float:
        """How far an end where runs disagreed moves past that load: half the resolution."""
        return self.runs.strategy.resolution / 2

    def _past_disputed(self, out: dict, res, verdict, whole: bool) -> dict:
        """``out``, a bracket whose ends runs under the SLOs decided, with each end where this
        execution's runs at it disagreed moved past it half a resolution outward, where a run there
        (within the time budget) agrees (streamscale.benchmark.confirm.past_disputed)."""
        from streamscale.benchmark.bracket import between
        from streamscale.benchmark.confirm import past_disputed

        def disputed(x: float, end: str) -> bool:
            held, failed = self._said_at(x, res)
            if held and failed:
                console.print(
                    f"  {res} x: of the runs at {x:,.0f}, {held} held it and {failed} failed it: "
                    f"the {end} end moves past it",
                    highlight=False,
                )
            return bool(held and failed)

        def run(x: float, end: str) -> str | None:
            if self._budget_refuses(1):
                console.print(f"  {res} x: the time budget held no run past it", highlight=False)
                return None
            return verdict(x, end)

        middle = functools.partial(between, whole=whole)
        return past_disputed(out, disputed, run, self._step_past, middle)

    def _key(self, load, res, rep: int) -> tuple[float, int, int, str]:
        """A run's key among those done (ExperimentResult.key), in the configuration searched."""
        return float(load), int(res), rep, self.config

    def _recalled(self, load, res, rep: int) -> bool:
        """Whether that run is done already (run before, or read back on resume)."""
        return self._key(load, res, rep) in self.done

    def _long_reserve(self) -> float:
        """What a configuration's time budget keeps beside its search for strategy.confirm's long
        runs (0 without them)."""
        if self.ends is None or self.ends.rep != LONG_REP:
            return 0.0
        return long_runs_kept_s(self.ends.longest_s, len(self.runs.resource_values))

    def _budget_refuses(self, runs: int) -> bool:
        """Whether the time budget (none: never) refuses ``runs`` more runs that decide ends: runs
        under the SLOs each at its shortest (the budget ends one still undecided at its share of it:
        :meth:`_limit`); strategy.confirm's long runs whole, with two kept for each later bracket's
        ends."""
        from streamscale.benchmark.bracket import run_cost

        if self.ends is None or self.deadline is None:
            return False
        if self.ends.rep == SLO_REP:
            shortest = self.runs.repetitions * run_cost(self.runs.duration_s, self.overheads)
            return time.monotonic() + runs * shortest > self.deadline
        long = run_cost(self.ends.longest_s, self.overheads)
        return time.monotonic() + (runs + 2 * self.later) * long > self.long_deadline

    def _summary(self, metric: dict, assumed: set | frozenset = frozenset(), brackets=None) -> dict:
        ex = self.runs
        kx, ky = self._keys()
        rows = [{kx: k, ky: v} for k, v in metric.items()]
        if brackets is not None:
            keys = ("resources", "held", "failed", "width", "failed_undecided", "held_assumed", "runs")
            keys = (("config",) if any("config" in b for b in brackets) else ()) + keys
            rows = [{k: b[k] for k in keys} for b in brackets]
        cpu = [r.sampler_cpu_pct for r in self.done.values()]
        axes = self.plan.axes
        sut = display_name(self.plan.sut)
        if brackets is not None:
            said = bracket_answer(brackets, axes, sut, list(self.done.values()))
        else:
            said = answer(metric, ex.metric, axes, sut, max(ex.resource_values), assumed, self.done.values())
        summary = {
            "name": self.plan.name,
            "sut": self.plan.sut,
            "connector": self.plan.connector,
            "metric": ex.metric,
            "answer": said,
            "load_label": axes.load_label,
            "resource_label": axes.resource_label,
            "load_type": ex.load_type,
            "resource_type": ex.resource_type,
            "strategy": ex.strategy.name,
            "lower_bound": ex.strategy.lower_bound,
            "results": rows,
            "experiments_run": self.ran,
            "experiments_resumed": self.resumed,
            "invalid_experiments": sum(1 for r in self.done.values() if not r.valid),
            "undecided_experiments": sum(1 for r in self.done.values() if r.verdict == "undecided"),
            "drifted_experiments": sum(1 for r in self.done.values() if r.drifted),
            "max_sampler_cpu_pct": max(cpu) if cpu else None,
        }
        if self.runs.configs:
            summary["configs"] = dict(self.runs.configs)
        summary["fault_experiments"] = sorted(r.exp_id for r in self.done.values() if r.fault)
        said["sentence"] += self._fault_words()
        return summary

    def _fault_words(self) -> str:
        """What the answer says of the runs a broker fault touched ("" when none did)."""
        faults = sorted(r.exp_id for r in self.done.values() if r.fault)
        if not faults:
            return ""
        runs = f"{len(faults)} run{'s' if len(faults) > 1 else ''}"
        return f" ({runs} invalid where a broker node died, each run again: {', '.join(faults)})"

    def _config_summary(self, outcomes: dict[str, Outcome]) -> dict:
        """The summary of a linear, binary or full search run per configuration: the rows and the
        answer's capacity (or demand) entries carry their configuration's name."""
        ex = self.runs
        axes, sut, most = self.plan.axes, display_name(self.plan.sut), max(ex.resource_values)
        rows, capacity, demand, parts = [], [], [], []
        kx, ky = self._keys()
        for name, o in outcomes.items():
            rows += [{"config": name, kx: k, ky: v} for k, v in o.metric.items()]
            said = answer(o.metric, ex.metric, axes, sut, most, o.assumed, self.done.values(), name)
            capacity += [{"config": name, **c} for c in said["capacity"]]
            demand += [{"config": name, **d} for d in said["demand"]]
            parts.append(f"with {name}: {said['sentence'].removesuffix(' on this machine')}")
        summary = self._summary({}, set())
        sentence = "; ".join(parts) + " on this machine" + self._fault_words()
        summary.update(results=rows)
        summary["answer"] = {"sentence": sentence, "capacity": capacity, "demand": demand}
        return summary


def _ends_runner(plan: Plan, runner: ExperimentRunner) -> ExperimentRunner | None:
    """The runner of the runs that decide a bracket's ends: strategy.confirm's long runs, or runs
    under the SLO where the search's runs judged a looser lag threshold (None: neither); the same
    Kafka, sessions, broker processes, watch and readings of the machine's speed as the search's
    runner."""
    if plan.runs.strategy.confirm:
        ends = plan.long()
    elif plan.ends_rejudged:
        ends = plan
    else:
        return None
    other = ExperimentRunner(
        ends, runner.out_dir, runner.bootstrap, runner.sessions, runner.broker_pids, runner.replication_factor
    )
    other.watch, other.preflown, other.executor_parents = runner.watch, True, runner.executor_parents
    other.speeds = runner.speeds  # its runs' machine speed is judged against the whole execution's
    return other


def _duration(seconds: float) -> str:
    """A span as a person reads it: 45 s, 3 min 05 s, 1 h 02 min."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def run_execution(
    plan: Plan | Spec,
    out_dir: Path,
    bootstrap: KafkaConnection | str | None = None,
    live=None,
    properties: dict | None = None,
    sessions=None,
    broker_pids: list[int] | None = None,
    extra: Callable[[], dict] | None = None,
) -> dict:
    """Run the execution of ``plan`` (or of a spec, resolved here once), then write report.html
    (streamscale.benchmark.report) next to its results.

    ``bootstrap``: a connection or bootstrap servers, else an embedded broker; ``properties``: Kafka
    client properties for every client of the run. Neither given: both from the spec's ``kafka:``
    section (a caller that gives either has read the section itself, as the command line does).
    ``sessions``: the caller's :class:`~streamscale.experiment.sessions.SparkSessions` (the demo's
    holds the probe's session for the first experiment); default: the runner's own. ``broker_pids``: the
    broker's processes (an embedded one's), whose CPU runs report. ``extra()``: more for summary.json."""
    from contextlib import ExitStack

    from streamscale.benchmark.report import write_report

    plan = as_plan(plan)
    spec = plan.spec
    plan.check()  # before a broker starts: a load value its pipeline refuses is one line
    with ExitStack() as stack:
        if bootstrap is None and properties is None:  # the section (the environment is the CLI's)
            bootstrap, properties = build_connection(section=spec.kafka_section(), use_env=False)
        plan, bootstrap, broker_pids, hosts = _on_hosts(stack, plan, out_dir, bootstrap, broker_pids)
        embedded = bootstrap is None
        broker = stack.enter_context(embedded_kafka(spec, out_dir / "logs")) if embedded else None
        if broker is not None:
            bootstrap, broker_pids = broker.connection, broker.pids()
        conn = KafkaConnection.of(bootstrap, properties)
        if note := short_for_windows(plan):
            console.print(f"note: {note}", highlight=False)
        factor = spec.replication_factor(embedded)
        runner = ExperimentRunner(plan.search(), out_dir, conn, sessions, broker_pids, factor)
        runner.executor_parents, runner.watch = hosts.worker_pids if hosts else (), _watch(hosts, broker)
        ends = _ends_runner(plan, runner)
        stack.callback(runner.close)  # a kept session stops before the broker it reads
        # the execution takes the one its spec decides the ends with (long runs or runs under the SLO)
        execution = Execution(
            plan, out_dir, runner, live=live, long_experiment=ends, extra=extra, slo_experiment=ends, drain=runner.drain
        )
        env = _environment(plan, conn, embedded, runner.replication_factor)
        changed = broker_change_note(out_dir, env)
        if changed and execution.done:
            console.print(f"note: {changed}", highlight=False)
        (out_dir / "environment.json").write_text(json.dumps(env, indent=2))
        summary = execution.run()
    summary["report"] = str(write_report(out_dir))
    return summary


def _on_hosts(stack, plan: Plan, out_dir: Path, bootstrap, broker_pids) -> tuple:
    """A spec's ``cluster:`` entered on ``stack``: (the plan on its master and shared folder, its
    brokers, their processes, the hosts: streamscale.benchmark.setting.OnHosts); without one, what
    was given and None."""
    from streamscale.benchmark.setting import hosts_cluster

    if plan.spec.cluster is None:
        return plan, bootstrap, broker_pids, None
    if bootstrap is not None:
        raise ConfigError("cluster: brings its own brokers; leave out -b and $STREAMSCALE_BOOTSTRAP_SERVERS")
    hosts = stack.enter_context(hosts_cluster(plan.spec, out_dir / "logs" / "hosts"))
    console.print(f"on {hosts.said}", highlight=False)
    plan = plan.on_cluster(hosts.master, str(Path(hosts.shared) / "checkpoints"))
    return plan, hosts.bootstrap, hosts.broker_pids, hosts


def _watch(hosts, broker):
    """What watches a run's brokers and hosts for a fault: the embedded Kafka's, or the hosts this
    execution started (a cluster `cluster start` started is not watched: a lost executor is seen in
    Spark's list); None."""
    from streamscale.benchmark.faults import BrokerWatch, HostsWatch

    if hosts is not None:
        return HostsWatch(hosts.started) if hosts.started is not None else None
    return BrokerWatch(broker) if broker is not None else None


def _environment(plan: Plan, conn: KafkaConnection, embedded: bool, replication_factor: int) -> dict:
    """What environment.json says of an execution: versions, machine, broker, topics, security."""
    from streamscale.benchmark.environment import environment

    spec = plan.spec  # the environment it sets up: its broker and cluster sections
    env = environment(plan.runs, conn.bootstrap, embedded)
    env["topics"] = f"{plan.partitions} partitions, replication factor {replication_factor}"
    props = dict(conn.properties)
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    mechanism = props.get("sasl.mechanism") if "SASL" in protocol else None
    env["security"] = f"{protocol} ({mechanism})" if mechanism else protocol
    if embedded and spec.broker.brokers > 1:
        env["broker"] = f"embedded cluster of {spec.broker.brokers} nodes: " + env["broker"]
    if spec.cluster is not None:
        c = spec.cluster
        env["broker"] = f"{c.brokers} brokers on hosts of their own at {conn.bootstrap}"
        env["spark_master"] = f"a master and {c.workers} workers of {c.worker_cores} cores, each on a host of its own"
    return env
