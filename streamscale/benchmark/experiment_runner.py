"""One experiment for real: the runner that runs a (load, resources) point of the plan
(:mod:`.plan`) in its phases (:class:`~streamscale.experiment.sut.SutRun`) and judges it with the SLO
checkers (:mod:`.slos`, :mod:`.outcome`). Search, repetitions and files are :mod:`.execution`'s job.
"""

from __future__ import annotations

import csv
import time
from collections.abc import Callable
from pathlib import Path

from streamscale.benchmark.faults import Recovery
from streamscale.benchmark.outcome import Speeds, first_look_s, judged, looking
from streamscale.benchmark.plan import Plan, Point, as_plan
from streamscale.benchmark.results import ExperimentResult, exp_id
from streamscale.benchmark.spec import Spec
from streamscale.benchmark.verdict import died_result
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import SparkDied
from streamscale.experiment.noise import SpeedLog
from streamscale.experiment.processing import batch_processing_ms
from streamscale.experiment.slo import lag_limit
from streamscale.experiment.sut import Context
from streamscale.sparkio.executors import Executor, said


def faulted(res: ExperimentResult, fault: str) -> ExperimentResult:
    """A run during which the environment failed: invalid, with the fault as its reason."""
    import dataclasses

    note = f"{fault}: experiment invalid" + (f"; {res.note}" if res.note else "")
    return dataclasses.replace(res, valid=False, passed=False, verdict="invalid", fault=fault, note=note)


def missing_executors(plan: Plan, point: Point, executors: list[Executor]) -> str:
    """What is missing of the executors a run on a cluster asked for, as Spark listed them (``""``
    where none is, or the resource is no count of executors)."""
    if plan.resource.type != "executors" or point.master.startswith("local") or len(executors) >= point.resources:
        return ""
    ran = said(executors) or "none"
    return f"{len(executors)} of the {point.resources} executors asked for were live when the load ended ({ran})"


def _stopping_on_fault(judge: Callable, watch) -> Callable:
    def decided(*args) -> bool:
        return bool(watch.dead()) or judge(*args)

    return decided


class ExperimentRunner:
    """Runs single experiments for real (broker, generator, Spark pipeline) and judges them."""

    def __init__(
        self,
        plan: Plan | Spec,
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

        self.plan = as_plan(plan)
        self.runs = self.plan.runs
        self.out_dir, self.bootstrap = out_dir, bootstrap
        self.own_sessions = sessions is None
        self.sessions = SparkSessions(keep=self.runs.reuse_spark) if sessions is None else sessions
        self.broker_pids = list(broker_pids or [])
        self.replication_factor = replication_factor or self.plan.replication_factor(embedded=False)
        self.speeds = SpeedLog()  # the machine's speed read before and after each run so far
        self.context = Context(
            bootstrap=bootstrap,
            sessions=self.sessions,
            replication_factor=self.replication_factor,
            topic_config=self.plan.topic_config,
            checkpoint_root=self.plan.checkpoint_root,
        )
        self.watch = None  # the embedded Kafka's BrokerWatch (streamscale.benchmark.faults), if embedded
        self.looks = None  # the running experiment's Looks, when it is looked at as it goes (judge)
        self.preflown = False  # every other configuration checked in a run's session before its load
        self.executor_parents: tuple = ()  # a cluster's worker daemons here: their executors' CPU counts
        self.recovery = None  # the running experiment's Recovery, on a cluster of hosts it watches
        # when a run still undecided stops at the latest, its load's end (time.monotonic(); None: at
        # its longest): a time budget's share for it, never before its duration_s
        self.until: float | None = None

    def close(self) -> None:
        """Stop a session the runner kept (its own sessions only)."""
        if self.own_sessions:
            self.sessions.close()

    def judge(self, point: Point, longest_s: float | None = None) -> Callable:
        """Whether a run so far is decided (:func:`~streamscale.benchmark.outcome.looking`); its
        looks are the running experiment's (``self.looks``), planned up to ``longest_s`` (default:
        the longest a run may go on)."""
        from streamscale.experiment.sequential import Looks
        from streamscale.experiment.sut import CHECK_EVERY_S

        # the looks are planned up to the longest this run may go on (an undecided one goes past
        # duration_s; a time budget may end it sooner): its error is spent by then
        longest = self.runs.longest_s if longest_s is None else longest_s
        self.looks = Looks(longest, first_look_s(self.runs, point), CHECK_EVERY_S)
        return looking(self.runs, point, self.looks)

    def __call__(
        self, load: float, resources: int, repetition: int, on_lag: Callable | None = None, config: str = ""
    ) -> ExperimentResult:
        from streamscale.observe import prometheus

        runs = self.runs
        point = self.plan.point(load, resources, config)
        prometheus.experiment.info(
            {
                "benchmark": self.plan.name,
                "sut": point.sut,
                "load": f"{load:g}",
                "resources": str(resources),
                "repetition": str(repetition),
            }
        )
        self.looks = None
        self._restore_broker()
        if self.own_sessions and self.sessions.keep and not runs.reuse_spark:
            self.sessions.keep = False  # a probe's session: each experiment starts afresh
            self.sessions.close()
        speed_before = self.speeds.before()
        t_run = time.monotonic()
        try:
            r = self._run_sut(point, on_lag)
        except SparkDied as died:
            # a query whose batches outgrow the driver's memory ran out of it: the load was not
            # held; the next experiment starts a new JVM (experiment.sessions)
            limit = lag_limit(point.read_rate, runs.slos.lag_trend_threshold)
            res = died_result(load, resources, repetition, point.rate, limit, str(died), time.monotonic() - t_run)
            res.config, res.exp_id = config, exp_id(load, resources, repetition, config)
            prometheus.experiments_total.labels("fail").inc()
            return res
        ran = [Executor(**e) for e in r.executors]
        fault = (
            (self.watch.fault() if self.watch is not None else "")
            or r.fault
            or missing_executors(self.plan, point, ran)
        )
        reference, speed_after = self.speeds.after()
        speeds = Speeds(reference, speed_before, speed_after)
        res, obs = judged(runs, point, repetition, r, speeds, self._confidence(r.ran_s or runs.duration_s))
        res.executors = said(ran)
        if fault and self.recovery is not None and self.recovery.said():
            res.recovery_s, fault = self.recovery.recovery_s, f"{fault}; {self.recovery.said()}"
        self._write_lag(res, r, obs.trend)
        prometheus.experiments_total.labels(res.verdict).inc()  # pass, fail, undecided or invalid
        return faulted(res, fault) if fault else res

    def _restore_broker(self) -> None:
        """Every embedded node up before a run: one that died in the run before is started again."""
        if self.watch is None:
            return
        started = self.watch.restore()
        if started:
            from streamscale import terminal

            terminal.console().print(f"  {' and '.join(started)} {self.watch.where} started again", highlight=False)

    def _confidence(self, ran_s: float) -> float:
        """The lag verdict's confidence: a run stopped at a look, that look's; one that went the
        whole way, what its looks left (:mod:`streamscale.experiment.sequential`); 95 % without looks."""
        looks = self.looks
        if looks is None or not looks.taken:
            return 0.95
        if ran_s < looks.longest_s - 0.5:
            return 1 - looks.per_look()
        return looks.final_confidence()

    def _run_sut(self, point: Point, on_lag):
        from streamscale.experiment.sut import StopPolicy

        ex, longest = self.runs, self.longest_now()
        judge = self.judge(point, longest) if ex.judged_as_it_goes else None  # sets self.looks
        self.recovery = None
        if judge is not None and self.watch is not None and self.watch.recovers:
            # a host that died: the run goes on to see the job recover (it is invalid all the same)
            judge = self.recovery = Recovery(judge, self.watch, ex.warmup_s)
        elif judge is not None and self.watch is not None:
            # a node that died decides the run at its next look: what follows measures the fault
            judge = _stopping_on_fault(judge, self.watch)
        first = self.looks.first_s if judge is not None else None
        policy = StopPolicy(ex.duration_s, judge, first, max_duration_s=longest)
        return self._sut(point, point.params, policy, on_lag)

    def longest_now(self) -> float:
        """How long a run starting now may go on while undecided: its longest, or less where
        ``until`` comes first (its looks are then planned up to that, and its verdict there takes
        the error they left, as at the longest)."""
        longest = self.runs.longest_s
        if self.until is None:
            return longest
        return max(self.runs.duration_s, min(longest, self.until - time.monotonic()))

    def drain(self, load: float, resources: int, config: str, records: int, batch_records: int):
        """A drain probe's run (:mod:`.drainprobe`): ``records`` of the point's records written
        before the query starts, read in batches of at most ``batch_records`` (the job's own cap
        where lower); its SutResult. A probe's drains share one session (each experiment after it
        starts afresh unless the spec keeps sessions), so that a drain after the first reads on a
        warm JVM."""
        import math

        from streamscale.benchmark.drainprobe import DRAIN_S, warm_first
        from streamscale.experiment.sut import StopPolicy

        point = self.plan.point(load, resources, config)
        batch = min(int(point.params.get("max_offsets_per_trigger") or batch_records), batch_records)
        params = {**point.params, "max_offsets_per_trigger": batch}
        self._restore_broker()
        if self.own_sessions:
            self.sessions.keep = True
        policy = StopPolicy(0.0, drain_s=DRAIN_S, backlog=records)
        batches = math.ceil(records / batch)
        conf = self.plan.session_conf(point)
        if (
            point.cpus is None
            or not warm_first(batches)
            or not self.sessions.would_start(point.master, conf, point.cpus)
        ):
            return self._sut(point, params, policy, None)
        return self._warmed_drain(point, params, policy, batches)

    def _warmed_drain(self, point: Point, params: dict, policy, batches: int):
        """A drain of ``batches`` batches in a fresh session on every CPU, confined to the point's
        CPUs once half of them are done and, for a windowed job, its windows first closed (its
        output's first rows), at the latest after three quarters; rated from the batch after the
        one running then. A JVM confined to one CPU from its start compiles the job's code on that
        CPU too: UC2's first drain on one core read 27 % slower than its runs then held, one batch
        (its windows' first close) taking 5 s against 1.9."""
        import dataclasses

        cpus, inner = point.cpus, self.context.on_batch
        done, closed, confined = 0, point.period_s is None, None  # batches that read records

        def on_batch(b: dict) -> None:
            nonlocal done, closed, confined
            if b["input_rows"]:
                done += 1
                closed = closed or (b.get("output_records") or 0) > 0
            ready = done >= batches // 2 - 1 and closed
            if confined is None and (ready or done >= batches * 3 // 4):
                self.sessions.confine(cpus)
                confined = done + 1  # the batch running now is left out
            if inner is not None:
                inner(b)

        result = self._sut(dataclasses.replace(point, cpus=None), params, policy, None, on_batch)
        if self.sessions.kept and self.sessions.cpus != cpus:
            self.sessions.confine(cpus)  # fewer batches than planned: the session is kept as the point's
        return dataclasses.replace(result, rated_from=confined)

    def _sut(self, point: Point, params: dict, policy, on_lag, on_batch=None):
        """One SutRun of ``point`` with ``params`` under ``policy`` (``on_batch``: called with each
        batch instead of the context's)."""
        import dataclasses

        from streamscale.experiment.sut import Placement, run_sut

        sink = str(self.out_dir / "sink")
        workload = self.plan.workload(point.sut, params, point.sensors, point.load_rate, sink)
        pids = self.watch.pids() if self.watch is not None else self.broker_pids  # a node started again
        preflight = () if self.preflown else self.plan.preflight(point.config)
        self.preflown = True
        context = dataclasses.replace(
            self.context,
            on_lag=on_lag,
            on_batch=on_batch or self.context.on_batch,
            broker_pids=tuple(pids),
            preflight=preflight,
            executor_parents=self.executor_parents,
        )
        return run_sut(workload, Placement(point.master, self.plan.session_conf(point), point.cpus), policy, context)

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
            self.runs.warmup_s,
            res,
            d / f"{res.exp_id}.png",
            trend=trend,
            axes=self.plan.axes,
        )


def _write_csv(path: Path, header: list[str], rows) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
