"""Run one SUT (a UC pipeline) against generated load, sampling consumer lag every second.

This is one isolated experiment: fresh topics, the load generator, the pipeline on the given
Spark master, a lag sampler (exact end offsets minus what the SUT has committed), then everything
stopped and the topics deleted (after the Spark application that used them has stopped: see
``streamscale.broker.access`` on why).
"""

from __future__ import annotations

import contextlib
import csv
import functools
import json
import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ConfigError, SparkDied, SparkError
from streamscale.experiment.cpus import busy_pct, jvm_pid, machine_ticks
from streamscale.experiment.lagsampler import LagSample, LagSampler
from streamscale.experiment.noise import CpuMeter
from streamscale.experiment.outlatency import OutputLatency
from streamscale.experiment.sessions import SparkSessions
from streamscale.loadgen import GeneratorConfig
from streamscale.loadgen.generator import LoadGenerators
from streamscale.observe import prometheus
from streamscale.pipelines import make_pipeline, realtime
from streamscale.pipelines.base import Reading
from streamscale.pipelines.run import remove_checkpoint, run_checkpoint
from streamscale.sparkio.executors import executor_list

log = logging.getLogger(__name__)

CHECK_EVERY_S = 2.0  # how often a judged run is looked at once it may stop
BACKLOG_TIMEOUT_S = 300.0  # the most a drain probe's backlog may take to write
BACKLOG_LEAD_MS = 100  # a backlog starts this long before a window ends


@dataclass
class SutResult:
    uc: str
    sensors: int
    target_rate: float
    generated: int
    generator_rate: float
    generator_reached_target: bool
    processed_records: int
    processed_rate: float
    dropped_late: int
    malformed: int
    final_lag: int
    max_avg_latency_ms: float | None
    shuffle_stages: int | None
    sampler_cpu_s: float = 0.0  # lag sampler thread + the controlling loop: the harness overhead
    wall_s: float = 0.0
    unregistered: int = 0  # UC4: readings of sensors the registry does not know (not late)
    t0_wall: float = 0.0  # wall-clock time of the first lag sample (its t_s = 0)
    lag_samples_missed: int = 0  # seconds whose sample failed (the broker did not answer in time)
    input_topic: str = ""
    generator_cpu_s: float = 0.0  # the load generator's processes: its share of the machine
    machine_cpu_pct: float = float("nan")  # all CPUs busy (every process) while the load ran
    connector: str = ""  # the Kafka connector the SUT read with: python or spark
    late_counted: bool = True  # False: Spark's connector, whose rows carry no watermark to count with
    ran_s: float = 0.0  # how long the load ran: the duration, or less where the judge decided early
    decided_s: float = float("nan")  # when a look found the run decided and stopped it (NaN: none did)
    generator_error: str | None = None  # the load generator's first error (a worker's failure)
    spark_cpu_pct: float = float("nan")  # the Spark application's processes while the load ran, % of one CPU
    broker_cpu_pct: float = float("nan")  # the broker's processes (an embedded broker's), % of one CPU
    steal_pct: float = float("nan")  # the machine's steal time while the load ran, % of all CPUs
    read_share: float = 1.0  # of the load, what the query reads (the lag's topics): unread inputs left out
    undrained: int = 0  # a drained run: records of the input the query had not processed when it stopped
    fault: str = ""  # what of the environment failed during the run (a partition left without a leader)
    # where each record's processing latency ends: "commit" (its micro-batch's) or "output" (the output
    # record's timestamp: real-time mode, streamscale.experiment.outlatency)
    latency_at: str = "commit"
    output_unreadable: int = 0  # output records read for their latency without a send time in them
    processing_ms: dict = field(default_factory=dict)  # p50, p95, p99 of every record's, the whole run
    # the application's live executors as Spark listed them when the load ended (id, host, cores);
    # empty on a local master
    executors: list = field(default_factory=list)
    lag: list[LagSample] = field(default_factory=list)
    batches: list[dict] = field(default_factory=list)
    # a drain's first batch (of those that read records) its rate may count, where its runner
    # knows (a JVM confined to its CPUs only from then on); None: drainprobe.drain_of's own rule
    rated_from: int | None = None

    def summary(self) -> dict:
        d = asdict(self)
        d.pop("lag")
        d.pop("rated_from")
        d.pop("batches")
        return d


def _export(b) -> None:
    """A finished micro-batch into the Prometheus metrics."""
    prometheus.processed_total.inc(b.input_rows)
    prometheus.processed_rate.set(b.processed_rate)
    prometheus.batch_duration.set(b.batch_ms / 1000)
    prometheus.dropped_total.inc(b.dropped_late)


def _delete_topics(bootstrap, topics: list[str]) -> None:
    with BrokerAccess(bootstrap) as access:
        access.delete_topics(topics)


@dataclass(frozen=True)
class Workload:
    """What a run generates and runs: the pipeline (``uc``: uc1-uc4 or a user's job) with its
    parameters, and the load: ``sensors`` records per ``period_s`` or ``rate`` records/s of
    ``records`` (a RecordsSpec; None: sensor readings; a job's several inputs: their
    streamscale.loadgen.inputs.Inputs, the rate split by their shares)."""

    uc: str
    params: dict | None = None
    sensors: int = 1000
    rate: float | None = None
    period_s: float = 1.0
    records: object = None
    job: object = None  # a user's job: what it is fed and where it writes (pipelines.jobsetup.JobSetup)
    distribution: str = "uniform:0,100"
    gen_workers: int = 1
    partitions: int = 8  # of the input and output topics
    # the generators' producer settings over their defaults (streamscale.loadgen.config), e.g. a
    # linger.ms that sends records as they are due instead of in 200 ms batches
    producer_config: dict | None = None
    # the pipeline of uc, params, records and job, where the caller built it (to describe and check
    # it before any load); None: the run builds it
    pipeline: object = None


@dataclass(frozen=True)
class Placement:
    """Where the query runs: its Spark master and settings, and a local master confined to
    ``cpus`` CPUs (streamscale.experiment.cpus), so that 1 and 2 cores differ on a small machine."""

    master: str = "local[2]"
    spark_conf: dict | None = None
    cpus: int | None = None


@dataclass(frozen=True)
class StopPolicy:
    """When the load stops: after ``duration_s``, or from ``min_duration_s`` on at the first look
    (every :data:`CHECK_EVERY_S`) at which ``judge(lag_samples, batches, t0_wall, topic)`` says the
    run is decided (sequential testing); a judged run still undecided at ``duration_s`` goes on,
    looked at as before, up to ``max_duration_s`` (None: it stops at ``duration_s``). ``drain_s``:
    then stop the generator first and let the query process the whole input (for at most this
    long), so that the output holds its answer. ``backlog``: a drain probe's run: the generator
    writes this many records as fast as it goes before the query starts, which then reads them
    (for at most ``drain_s``) with no load arriving meanwhile."""

    duration_s: float = 60.0
    judge: Callable[..., bool] | None = None
    min_duration_s: float | None = None
    drain_s: float | None = None
    max_duration_s: float | None = None
    backlog: int | None = None

    @property
    def longest_s(self) -> float:
        """When the load stops whatever the looks say."""
        if self.judge is None or self.max_duration_s is None:
            return self.duration_s
        return max(self.duration_s, self.max_duration_s)


@dataclass(frozen=True)
class Context:
    """What a run runs in. ``bootstrap``: a connection or bootstrap servers (None: an embedded
    broker), ``properties`` Kafka client properties added to it; ``sessions`` where the Spark
    session comes from unless ``spark`` is given (default: one afresh, stopped after the run);
    ``broker_pids``: the broker's processes, whose CPU the result reports; ``topics``: (input,
    output) named by the user, created when missing and kept (default: fresh ones, deleted; a job
    of several inputs reads INPUT.NAME, one topic per input);
    ``replication_factor`` and ``topic_config`` of the topics; ``out_dir``: where the run's
    figures are written; ``on_batch`` and ``on_lag``: called with each batch and lag sample."""

    bootstrap: KafkaConnection | str | None = None
    properties: dict | None = None
    sessions: SparkSessions | None = None
    spark: object = None
    broker_pids: tuple[int, ...] = ()
    topics: tuple[str | None, str | None] = (None, None)
    replication_factor: int = 1
    topic_config: dict | None = None
    out_dir: Path | None = None
    on_batch: Callable[[dict], None] | None = None
    on_lag: Callable[[LagSample], None] | None = None
    # (name, pipeline, Spark settings) of other configurations, each built and checked in this
    # run's session before its load starts (a benchmark's first run: streamscale.benchmark.plan)
    preflight: tuple = ()
    # where the query's checkpoint goes (a folder or Hadoop URI every host of a cluster reads:
    # streamscale.pipelines.run.run_checkpoint); None: a temporary folder on the driver
    checkpoint_root: str | None = None
    # a cluster's worker daemons on this machine (hosts of their own): their descendants, the
    # executors, count in the run's Spark CPU
    executor_parents: tuple = ()


def run_sut(
    workload: Workload, placement: Placement = Placement(), policy: StopPolicy = StopPolicy(), context=Context()
) -> SutResult:
    """One isolated run (see the module's notes), in its phases: :class:`SutRun`."""
    return SutRun(workload, placement, policy, context).run()


class SutRun:
    """One run's phases: provision the topics, start the query and warm its workers, start the
    load and the lag sampler, poll and look until the stop policy ends the load, drain, tear down."""

    def __init__(self, workload: Workload, placement: Placement, policy: StopPolicy, context: Context):
        self.w, self.placement, self.policy, self.ctx = workload, placement, policy, context
        self.pipe = workload.pipeline
        if self.pipe is None:
            self.pipe = make_pipeline(workload.uc, workload.params, records=workload.records, job=workload.job)
        # each feed's (keys, period) at the load's rate: a rate it cannot send fails before any broker
        self.feeds = [(f, f.shape(workload.rate, workload.sensors, workload.period_s)) for f in self.pipe.feeds()]
        self.run_id = uuid.uuid4().hex[:8]
        self.t_start = time.monotonic()
        self.named = any(context.topics)
        self.input_topic = context.topics[0] or f"input-{self.run_id}"
        self.output_topic = context.topics[1] or f"output-{self.run_id}"
        # what the pipeline reads: the input topic, or one topic per input named after it
        self.in_topics = {t: n or workload.partitions for t, n in self.pipe.input_topics(self.input_topic).items()}
        # the lag sampler, the drain and the SLOs sum over the topics the query reads (an input
        # the spec says the job does not read is generated, not waited for)
        self.lag_topic = ",".join(self.pipe.read_topics(self.input_topic))
        self.group = f"sut-{self.pipe.name}-{self.run_id}"
        self.sessions = context.sessions if context.sessions is not None else SparkSessions()
        self.gen = self.query = self.sampler = self.gres = self.outlat = None
        self.undrained, self.warmed, self.shuffles, self.fault = 0, False, None, ""
        self.figures: dict = {}

    def run(self) -> SutResult:
        with contextlib.ExitStack() as stack:
            self.provision(stack)
            own = self.ctx.spark is None
            session = (
                self.sessions.session(
                    self.placement.master, f"streamscale-{self.w.uc}", self.placement.spark_conf, self.placement.cpus
                )
                if own
                else contextlib.nullcontext(self.ctx.spark)
            )
            with session as spark:
                try:
                    self.start(spark, own)
                    self.load()
                finally:
                    self.stop()
            if own:
                self.tear_down()
        result = self.result()
        if self.ctx.out_dir is not None:
            write_result(result, self.ctx.out_dir)
        return result

    def provision(self, stack: contextlib.ExitStack) -> None:
        """The broker (an embedded one unless given) and the run's topics."""
        bootstrap = self.ctx.bootstrap
        if bootstrap is None:
            out_dir = self.ctx.out_dir
            broker = stack.enter_context(EmbeddedBroker(log_dir=(out_dir / "logs") if out_dir else None))
            bootstrap = broker.bootstrap
        self.bootstrap = KafkaConnection.of(bootstrap, self.ctx.properties)
        self.access = access = stack.enter_context(BrokerAccess(self.bootstrap))
        topics = {**self.in_topics, self.output_topic: self.w.partitions}
        wanted = {t: n for t, n in topics.items() if not (self.named and access.topic_exists(t))}
        if wanted:
            access.create_topics(wanted, self.ctx.replication_factor, self.ctx.topic_config)

    def start(self, spark, own: bool) -> None:
        """Check the job builds, warm the session's workers once, start the load, the query, the
        lag sampler and the CPU meters."""
        trigger = self.pipe.trigger()  # checked with the plan (realtime.check_run), but for what only Spark knows
        realtime.check_started(spark, self.placement.master, sum(self.in_topics.values()), trigger)
        self.pipe.check(spark, self.bootstrap, self.input_topic)  # a user's job that does not build fails now
        for name, pipe, conf in self.ctx.preflight:
            try:
                pipe.check(spark, self.bootstrap, self.input_topic, conf)
            except ConfigError as exc:
                raise ConfigError(f"execution.configs.{name}: {exc}") from None
        if trigger.real_time:
            topics, field = (self.input_topic, self.output_topic), self.pipe.send_time_field()
            self.outlat = OutputLatency(self.bootstrap, topics, field, getattr(self.pipe, "raw", False)).start()
        if own and not self.sessions.warmed:
            warm_up_workers(spark, self.access, self.bootstrap, self.run_id, self.pipe.params.connector)
            self.sessions.warmed = self.warmed = True
        self.gen = self.generators().start()
        if self.policy.backlog:  # the whole backlog is in the topics before the query reads any of it
            self.gres = self.gen.wait(BACKLOG_TIMEOUT_S)
        root = self.ctx.checkpoint_root
        checkpoint = run_checkpoint(f"streamscale-{self.pipe.name}-", root) if root else None
        self.query = self.pipe.start(
            spark,
            self.bootstrap,
            self.input_topic,
            self.output_topic,
            checkpoint=checkpoint,
            reading=Reading("earliest", self.group),
        )
        self.sampler = LagSampler(self.bootstrap, self.group, self.lag_topic, on_sample=self.ctx.on_lag).start()
        self.ticks0 = machine_ticks()
        self.meter = CpuMeter(jvm_pid(spark), list(self.ctx.broker_pids), self.ctx.executor_parents).start()
        self.spark = spark

    def generators(self) -> LoadGenerators:
        """The load: one generator per feed (its share of the rate, into its topic), launched
        after the feeds its records refer to, all on one schedule."""
        w, backlog = self.w, self.policy.backlog
        # a judged run ends when it is decided: the generator runs until stopped; a backlog is a count
        duration = None if self.policy.judge is not None or backlog else self.policy.duration_s
        configs = []
        for feed, (sensors, period_s) in self.feeds:
            config = GeneratorConfig(
                self.bootstrap,
                feed.topic(self.input_topic),
                sensors=sensors,
                period_s=period_s,
                workers=w.gen_workers,
                distribution=w.distribution,
                duration_s=duration,
                throttle=not backlog,
                producer_config=dict(w.producer_config or {}),
                records_spec=feed.records,
                refs=dict.fromkeys(feed.refs),  # bound as the generators start
                records=feed.backlog(backlog) if backlog else None,
                start_time_ms=backlog_start_ms(self.pipe.window_grid_ms()) if backlog else None,
            )
            configs.append((feed.name, config))
        return LoadGenerators(configs)

    def load(self) -> None:
        """Poll the query while the load runs, looking at it as the stop policy says; then drain (a
        drain probe's run only drains: its load was written before the query started)."""
        policy = self.policy
        t_load = time.monotonic()  # lag is sampled while load is generated; after that it only shows the drain
        ctl0 = time.thread_time()
        if policy.backlog is None:
            self.run_load(t_load)
        if policy.drain_s is not None:
            if self.gres is None:
                self.gres = self.gen.stop()  # the generator first: the query then reads to the end
            self.undrained = drain(self.query, self.access, self.lag_topic, policy.drain_s, self.ctx.on_batch)
        self.figures.setdefault("ran_s", time.monotonic() - t_load)  # a drain probe's: its drain
        if not self.placement.master.startswith("local"):
            self.figures["executors"] = executor_list(self.spark)
        self.figures["share"] = self.meter.stop()
        self.figures["controller_cpu"] = time.thread_time() - ctl0
        self.figures["machine"] = busy_pct(self.ticks0, machine_ticks())
        self.figures["lag"] = self.sampler.stop()
        with contextlib.suppress(Exception):
            self.shuffles = self.query.shuffle_stages()

    def run_load(self, t_load: float) -> None:
        """Poll the query while the load runs, until the stop policy ends it."""
        policy = self.policy
        deadline = t_load + policy.longest_s
        next_check = t_load + (policy.min_duration_s if policy.min_duration_s is not None else policy.duration_s)
        next_env = t_load + CHECK_EVERY_S
        # a judge may hold the run past its longest (a host's fault: streamscale.benchmark.faults.Recovery)
        while time.monotonic() < max(deadline, getattr(policy.judge, "holds_until", 0.0)):
            time.sleep(0.25)
            self.poll()
            if self.gen.worker_failure():  # no load to judge the query by: the run ends, invalid
                break
            if time.monotonic() >= next_env:  # what follows a lost leader measures the fault, not the job
                self.fault, next_env = self.leaderless(time.monotonic() - t_load), time.monotonic() + CHECK_EVERY_S
                if self.fault:
                    break
            if policy.judge is not None and time.monotonic() >= next_check:
                if policy.judge(
                    list(self.sampler.samples), list(self.query.batches), self.sampler.t0_wall, self.lag_topic
                ):
                    self.figures["decided_s"] = time.monotonic() - t_load
                    break
                next_check = time.monotonic() + CHECK_EVERY_S
        else:  # the whole duration ran: the generators send their schedule to its end
            self.figures["ran_s"] = time.monotonic() - t_load
            self.gen.finish()
        self.figures.setdefault("ran_s", time.monotonic() - t_load)

    def leaderless(self, at_s: float) -> str:
        """The run's topics' partitions without a leader, said as a fault ("" when every one has one
        or the metadata did not come: a broker too busy to answer is no fault of its own)."""
        try:
            layout = self.access.partition_layout([*self.in_topics, self.output_topic])
        except Exception:  # noqa: BLE001 - metadata refused or late: the next check asks again
            return ""
        lost = [
            f"{t} partition {p}"
            for t, parts in sorted(layout.items())
            for p, (leader, *_) in sorted(parts.items())
            if leader < 0
        ]
        return f"{', '.join(lost)} without a leader {at_s:.0f} s into the run" if lost else ""

    def poll(self) -> None:
        new = self.query.poll()
        if new and self.outlat is not None:
            self.outlat.attach(self.query.batches)
        for b in new:
            _export(b)
            if self.ctx.on_batch:
                self.ctx.on_batch(asdict(b))
        if self.query.exception() is not None:
            raise query_failure(self.w.uc, self.query.exception())

    def stop(self) -> None:
        """The sampler, the query and the generator, whatever happened before."""
        if self.sampler is not None:
            self.sampler.stop(raise_error=False)  # raised in load() when the run got that far
        try:
            if self.query is not None:
                run = self.query
                n_seen = len(run.batches)
                uncounted = {b.batch_id for b in run.batches if not b.late_counted}
                run.stop()  # raises when Spark's JVM died: the generator stops all the same
                for b in run.batches[n_seen:]:  # batches that finished while the query stopped
                    _export(b)
                for b in run.batches[:n_seen]:  # late records counted at the end (Spark's connector)
                    if b.batch_id in uncounted and b.late_counted:
                        prometheus.dropped_total.inc(b.dropped_late)
        finally:
            if self.gen is not None and self.gres is None:
                self.gres = self.gen.stop()
            if self.outlat is not None:
                self.outlat.stop()

    def tear_down(self) -> None:
        """The run's own topics go (a user's named ones stay)."""
        topics = [] if self.named else [*self.in_topics, self.output_topic]
        topics += [f"warmup-{self.run_id}"] if self.warmed else []
        if self.sessions.kept:
            # a task of a stopped query may still read them: deleted, a topic is retried for
            # a minute in a task slot that the next run on the kept session needs
            self.sessions.after_close(functools.partial(_delete_topics, self.bootstrap, topics))
        else:
            self.access.delete_topics(topics)

    def result(self) -> SutResult:
        run, gres, sampler, f = self.query, self.gres, self.sampler, self.figures
        if self.outlat is not None:
            self.outlat.attach(run.batches)
        steady = [b for b in run.batches[1:] if b.input_rows]
        busy_s = max(sum(b.batch_ms for b in steady) / 1000, 1e-9)
        rate = sum(b.input_rows for b in steady) / busy_s if steady else 0.0
        lats = [b.avg_latency_ms for b in run.batches if b.avg_latency_ms is not None]
        lag, share = f["lag"], f["share"]
        return SutResult(
            uc=self.pipe.name,
            undrained=self.undrained,
            fault=self.fault,
            latency_at="output" if self.outlat is not None else "commit",
            processing_ms=percentiles(run.batches),
            output_unreadable=self.outlat.unreadable if self.outlat is not None else 0,
            sensors=sum(keys for _, (keys, _) in self.feeds),
            target_rate=gres.target_rate,
            generated=gres.delivered,
            generator_rate=gres.achieved_rate,
            read_share=self.pipe.read_share,
            generator_reached_target=gres.reached_target,
            generator_error=gres.first_error,
            processed_records=sum(b.input_rows for b in run.batches),
            processed_rate=rate,
            dropped_late=sum(b.dropped_late for b in run.batches),
            malformed=sum(b.malformed for b in run.batches),
            # drained: what the query had not read when it stopped (the last sample predates its last commit)
            final_lag=self.undrained if self.policy.drain_s is not None else (lag[-1].lag if lag else -1),
            max_avg_latency_ms=max(lats) if lats else None,
            shuffle_stages=self.shuffles,
            sampler_cpu_s=sampler.cpu_s + f["controller_cpu"],
            wall_s=time.monotonic() - self.t_start,
            unregistered=sum(b.unregistered for b in run.batches),
            t0_wall=sampler.t0_wall,
            lag_samples_missed=sampler.missed,
            input_topic=self.lag_topic,
            generator_cpu_s=gres.cpu_s,
            machine_cpu_pct=f["machine"],
            connector=run.connector,
            late_counted=all(b.late_counted for b in run.batches),
            ran_s=f["ran_s"],
            decided_s=f.get("decided_s", float("nan")),
            spark_cpu_pct=share.spark_cpu_pct,
            broker_cpu_pct=share.broker_cpu_pct,
            steal_pct=share.steal_pct,
            lag=lag,
            batches=[asdict(b) for b in run.batches],
            executors=[asdict(e) for e in f.get("executors", [])],
        )


def percentiles(batches) -> dict:
    """The p50, p95 and p99 of every record's processing latency over the whole run, ms (at each's
    high bound; empty without records)."""
    from streamscale.experiment.processing import processing_percentile_ms

    got = {f"p{round(q * 100)}": processing_percentile_ms(batches, q) for q in (0.5, 0.95, 0.99)}
    return {k: v for k, v in got.items() if v is not None}


def backlog_start_ms(grid: tuple[int, int] | None, now_ms: int | None = None) -> int | None:
    """A backlog's first event time for a pipeline whose windows are ``grid`` (size, slide, ms;
    Spark's from epoch 0): just before the next window end, so that its first windows close a
    lateness into the backlog instead of up to a window period later (a drain probe warms a JVM
    until they have: streamscale.benchmark.experiment_runner); None without windows (now)."""
    if grid is None:
        return None
    size, slide = grid
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return size + slide * math.ceil((now - size) / slide) - BACKLOG_LEAD_MS


def drain(run, access: BrokerAccess, topic: str, timeout_s: float, on_batch=None) -> int:
    """Poll the query until its batches have read the input topic (several: comma-separated) to
    its end (the generator has stopped); the records it had not read when ``timeout_s`` ran out
    (0: drained)."""
    end = {t: access.end_offsets(t) for t in topic.split(",")}
    deadline = time.monotonic() + timeout_s

    def left() -> int:
        done: dict = {}
        for b in run.batches:
            for t in end:
                for p, o in ((b.end_offsets or {}).get(t) or {}).items():
                    done[t, int(p)] = max(done.get((t, int(p)), 0), int(o))
        return sum(max(0, o - done.get((t, p), 0)) for t, parts in end.items() for p, o in parts.items())

    while left() and time.monotonic() < deadline:
        if run.exception() is not None:
            raise query_failure(run.name, run.exception())
        time.sleep(0.25)  # polling Spark's progress, not waiting blindly
        for b in run.poll():
            _export(b)
            if on_batch:
                on_batch(asdict(b))
    return left()


def warm_up_workers(
    spark, access: BrokerAccess, bootstrap: KafkaConnection | str, run_id: str, connector: str | None = None
) -> None:
    """Start and warm Spark's Python workers (imports, Kafka clients) before the clock runs.

    A cold first micro-batch costs seconds of worker start-up, which would otherwise show up as
    a lag spike at the start of every experiment. The warm-up writes through the Kafka sink too:
    a worker's first idempotent producer waits 500 ms for its producer id, and a short run could
    otherwise end before the first batch with rows was written. ``connector``: the run's (with
    Spark's, its Kafka clients in the JVM warm up instead).
    """
    import tempfile

    from streamscale.sparkio.io import WriteQuery, read_records, write_kafka

    slots = spark.sparkContext.defaultParallelism
    topic = f"warmup-{run_id}"
    access.create_topic(topic, slots)
    p = KafkaConnection.of(bootstrap).producer()
    for part in range(slots):
        p.produce(topic, b'{"identifier":"s_0","timestamp":0,"valueInW":0.0}', b"s_0", partition=part)
    p.flush(30)
    del p
    # removed again at exit (remove_checkpoint): a JVM that a SIGTERM to the process group ended
    # mid-query wrote into it after it was first removed, and left it in the temp directory
    checkpoint = tempfile.mkdtemp(prefix="streamscale-warmup-")
    try:
        records = read_records(spark, bootstrap, topic, starting_offsets="earliest", impl=connector)
        # back into the same topic: availableNow reads only what was there when it started
        value = records.select(records["identifier"].alias("value"))
        q = write_kafka(value, bootstrap, topic, WriteQuery(checkpoint, {"availableNow": True}), impl=connector)
        q.awaitTermination(180)
    finally:
        remove_checkpoint(checkpoint)


def write_result(result: SutResult, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "summary.json").write_text(json.dumps(result.summary(), indent=2))
    with open(out_dir / "lag.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["t_s", "lag", "end_total", "committed_total"])
        w.writerows([[s.t_s, s.lag, s.end_total, s.committed_total] for s in result.lag])
    if result.batches:
        with open(out_dir / "batches.csv", "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(result.batches[0]))
            w.writeheader()
            for b in result.batches:
                w.writerow(
                    {**b, "end_offsets": json.dumps(b["end_offsets"]), "latency_cdf": json.dumps(b.get("latency_cdf"))}
                )


# What a query fails with when the load outgrew the memory it has (the driver's heap, a broadcast
# of UC4's registry of every sensor): the load was not held; any other failure is an error.
OUT_OF_MEMORY = ("java.lang.OutOfMemoryError", "Not enough memory to build and broadcast")


def query_failure(uc: str, exc: BaseException) -> SparkError:
    """The error for a failed query, on one line (Spark's message goes on with the whole plan):
    :class:`SparkDied` when it ran out of memory, else :class:`SparkError`."""
    text = str(exc)
    first = next((line.strip() for line in text.splitlines() if line.strip()), type(exc).__name__)
    if any(m in text for m in OUT_OF_MEMORY):
        return SparkDied(f"{uc} ran out of memory: {first[:300]}")
    return SparkError(f"{uc} failed: {first[:500]}")
