"""A validated spec resolved once into what its experiments run: the load and resource dimensions
(:mod:`.units`: how a value applies, Theodolite's load and resource patchers), each configuration's
settings, and per experiment the pipeline's facts (windowed or not, its window period, the
processing-latency limit) read from the one pipeline built for it. Nothing downstream reads a spec
field by name or switches on a load type or a SUT's name.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property

from streamscale.benchmark.spec import (
    PROCESSING_P95_MAX_MS,
    PROCESSING_P95_TRIGGERS,
    ExecutionSpec,
    SLOSpec,
    Spec,
    StrategySpec,
)
from streamscale.benchmark.units import (
    RESOURCES,
    Axes,
    LoadDimension,
    ResourceDimension,
    load_dimension,
)
from streamscale.errors import ConfigError


@dataclass(frozen=True)
class Point:
    """One experiment's settings: what the generator sends, what the pipeline runs with, where
    Spark runs, and the pipeline's facts the SLOs need."""

    load: float
    resources: int
    config: str
    sut: str  # the configuration's (streamscale.benchmark.spec.Spec.sut_of)
    params: dict
    sensors: int  # the generator's keys
    rate: float  # records/s the load sends
    read_rate: float  # of those, what the job reads (inputs it does not read left out): the lag's limit
    load_rate: float | None  # the load itself where it is a rate (records/s), else None
    master: str
    spark_conf: dict
    cpus: int | None  # a local master confined to that many CPUs
    drops_late: bool  # the pipeline may drop records behind a watermark: its dropped-records SLO applies
    period_s: float | None  # how often its windows close (their slide); None without event-time windows
    processing_limit_ms: float | None  # the processing-latency SLO's limit on the p95 (None: no such SLO)
    lateness_s: float = 0.0  # how far behind the latest event time its windows close (its watermark's lateness)


@dataclass(frozen=True)
class Runs:
    """How an execution's experiments run and are judged, resolved once from the spec: what the
    execution, its runner, the SLOs' looks and the probes read."""

    duration_s: float
    warmup_s: float
    longest_s: float  # how long a run still undecided may go on
    shortest_s: float | None  # when a run may stop once decided (None: it lasts duration_s)
    judged_as_it_goes: bool  # looked at as it goes: it may stop once decided, or go on past duration_s
    repetitions: int
    extra_repetitions: int
    stop_at_majority: bool
    metric: str  # capacity | demand
    reuse_spark: bool
    load_values: tuple[float, ...]
    resource_values: tuple[int, ...]
    strategy: StrategySpec
    slos: SLOSpec
    configs: dict  # name: its settings as the spec gives them (empty: the spec names none)
    load_type: str
    resource_type: str
    master: str | None  # the spec's Spark master (None: as each resource amount places it)
    time_budget_s: float | None = None  # the whole search's (ExecutionSpec.time_budget; None: none)

    @classmethod
    def of(cls, ex: ExecutionSpec) -> Runs:
        return cls(
            duration_s=ex.duration_s,
            warmup_s=ex.warmup_s,
            longest_s=ex.longest_s,
            shortest_s=ex.shortest_s,
            judged_as_it_goes=ex.judged_as_it_goes,
            repetitions=ex.repetitions,
            extra_repetitions=ex.extra_repetitions,
            stop_at_majority=ex.stop_at_majority,
            metric=ex.metric,
            reuse_spark=ex.reuse_spark,
            load_values=tuple(float(v) for v in ex.load.values),
            resource_values=tuple(int(v) for v in ex.resources.values),
            strategy=ex.strategy,
            slos=ex.slos,
            configs=dict(ex.configs),
            time_budget_s=ex.time_budget(max(1, len(ex.configs))),
            load_type=ex.load.type,
            resource_type=ex.resources.type,
            master=ex.master,
        )


@dataclass(frozen=True)
class Plan:
    """A spec resolved: :meth:`point` gives each experiment's settings, :attr:`runs` how they run."""

    spec: Spec
    load: LoadDimension
    resource: ResourceDimension
    configs: dict[str, tuple[dict, dict]] = field(default_factory=dict)  # name: (Spark settings, parameters)
    _drivers: dict = field(default_factory=dict, compare=False, repr=False)  # master: its driver settings
    shared_checkpoints: str | None = None  # on a cluster of hosts: the folder every host mounts

    @cached_property
    def runs(self) -> Runs:
        return Runs.of(self.spec.execution)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def sut(self) -> str:
        """The benchmark's SUT (a configuration may run another: :attr:`Point.sut`)."""
        return self.spec.benchmark.sut

    @property
    def config_names(self) -> list[str]:
        """The configurations searched ("" alone: the spec names none)."""
        return list(self.configs) or [""]

    @property
    def partitions(self) -> int:
        return self.spec.benchmark.topics.partitions

    @property
    def topic_config(self) -> dict:
        """The topics' own settings (retention and such)."""
        return self.spec.benchmark.topics.config()

    def replication_factor(self, embedded: bool) -> int:
        return self.spec.replication_factor(embedded)

    @property
    def connector(self) -> str:
        """The Kafka connector the runs use: the ``connector`` parameter, else the default."""
        from streamscale.sparkio.io import kafka_impl

        return kafka_impl(self.spec.benchmark.params.get("connector"))

    @property
    def checkpoint_root(self) -> str | None:
        """Where each run's checkpoint goes: the spec's checkpoint_dir, else a cluster's shared
        folder, else (None) a temporary folder of the driver's."""
        return self.spec.execution.checkpoint_dir or self.shared_checkpoints

    def on_cluster(self, master: str, shared: str) -> Plan:
        """This plan run on a cluster of hosts whose master is ``master`` and whose shared folder is
        ``shared`` (known once the cluster runs)."""
        return replace(self, resource=replace(self.resource, master=master), shared_checkpoints=shared, _drivers={})

    @property
    def axes(self) -> Axes:
        """How its load and resource values are shown."""
        return Axes(self.load, self.resource)

    def search(self) -> Plan:
        """The plan of a search's runs: the lag judged at the search's threshold (a bracket's
        ``strategy.search_lag_threshold``); the plan itself where that is the SLO's own."""
        ex = self.spec.execution
        if not self.ends_rejudged:
            return self
        slos = ex.slos.model_copy(update={"lag_trend_threshold": ex.search_threshold})
        spec = self.spec.model_copy(update={"execution": ex.model_copy(update={"slos": slos})})
        return replace(self, spec=spec, _drivers={})

    @property
    def probed(self) -> bool:
        """Whether each resource amount's search starts from a drain probe (a bracket's
        ``strategy.probe``, where a load value is a rate: streamscale.benchmark.drainprobe)."""
        st = self.spec.execution.strategy
        return st.name == "bracket" and st.probe and self.load.probed

    @property
    def ends_rejudged(self) -> bool:
        """Whether a bracket's ends are run again under the SLO (its search judged a looser one)."""
        ex = self.spec.execution
        return ex.search_threshold != ex.slos.lag_trend_threshold

    def long(self) -> Plan:
        """The plan of its long runs (strategy.confirm): the same dimensions and configurations, the
        execution as :func:`long_execution` says."""
        return replace(self, spec=long_execution(self.spec), _drivers={})

    def point(self, load: float, resources: int, config: str = "") -> Point:
        from streamscale.pipelines import PIPELINES, Pipeline, make_pipeline

        bm = self.spec.benchmark
        conf, params = self.configs.get(config, ({}, {}))
        sut = self.spec.sut_of(config)
        kind = PIPELINES.get(sut, Pipeline)  # a user's job: the base's facts (sized by nothing)
        applied = self.load.apply(float(load), {**bm.params, **params}, kind)
        placed = self.resource.apply(int(resources))
        pipe = make_pipeline(sut, applied.params, records=bm.feed(), job=bm.job_setup())
        spark_conf = {**placed.spark_conf, **self.spec.execution.spark_conf, **conf}
        check_trigger(pipe, placed.master, spark_conf, bm.topics.partitions)
        grid = pipe.window_grid_ms()
        return Point(
            load=load,
            resources=resources,
            config=config,
            sut=sut,
            params=applied.params,
            sensors=applied.sensors,
            rate=applied.rate,
            read_rate=applied.rate * pipe.read_share,
            load_rate=applied.load_rate,
            master=placed.master,
            spark_conf=spark_conf,
            cpus=placed.cpus,
            drops_late=bool(pipe.drops_late),
            period_s=grid[1] / 1000 if grid else None,
            lateness_s=pipe.lateness_ms() / 1000 if grid else 0.0,
            processing_limit_ms=self._processing_limit_ms(pipe),
        )

    def session_conf(self, point: Point) -> dict:
        """The Spark settings a point's session starts with: on a cluster master, where its executors
        reach the driver (streamscale.sparkio.address, asked once per master when a run starts: a
        spec names hosts only its runs must reach), then the point's own."""
        if point.master not in self._drivers:
            from streamscale.sparkio.address import driver_conf

            self._drivers[point.master] = driver_conf(point.master, self.spec.execution.driver_host)
        return {**self._drivers[point.master], **point.spark_conf}

    def pipeline(self, point: Point, output_dir: str | None = None):
        """The pipeline a point runs (a user's job writing its own sink under ``output_dir``)."""
        from streamscale.pipelines import make_pipeline

        bm = self.spec.benchmark
        return make_pipeline(point.sut, point.params, records=bm.feed(), job=bm.job_setup(output_dir))

    def workload(self, sut: str, params: dict, sensors: int, rate: float | None, output_dir: str | None = None):
        """What a run of ``sut`` with ``params`` generates and runs: the spec's records or inputs,
        its generators' settings and topics, at ``sensors`` keys or ``rate`` records/s (a user's job
        writing its own sink under ``output_dir``)."""
        from streamscale.experiment.sut import Workload

        bm = self.spec.benchmark
        return Workload(
            sut,
            params,
            sensors=sensors,
            rate=rate,
            period_s=bm.loadgen.period_s,
            records=bm.feed(),
            job=bm.job_setup(output_dir),
            distribution=bm.loadgen.distribution,
            gen_workers=bm.loadgen.workers,
            partitions=bm.topics.partitions,
        )

    def preflight(self, config: str) -> tuple:
        """(name, pipeline, Spark settings) of every configuration but ``config``, at the first load
        and resource amount: what a first run checks in its session before any load, so that a
        configuration searched later cannot fail only when its turn comes."""
        ex = self.spec.execution
        points = [self.point(ex.load.values[0], ex.resources.values[0], n) for n in self.configs if n != config]
        return tuple((p.config, self.pipeline(p), p.spark_conf) for p in points)

    def check(self) -> None:
        """Every load value of every configuration builds its pipeline (where a value sets one of its
        parameters); ConfigError naming the value and the configuration otherwise."""
        for name in self.configs:  # each configuration's trigger on each resource
            for resources in self.spec.execution.resources.values:
                try:
                    self.point(self.spec.execution.load.values[0], resources, name)
                except TriggerError as exc:  # a load value's own error is said by the loop below
                    where = f"execution.configs.{name}" if name else "benchmark.params"
                    raise ConfigError(f"{where}: {exc}") from None
                except ConfigError:
                    pass
        if not self.load.checked:
            return
        for name in self.configs:
            for load in self.spec.execution.load.values:
                try:
                    self.point(load, self.spec.execution.resources.values[0], name)
                except ConfigError as exc:
                    where = f" with configuration {name}" if name else ""
                    raise ConfigError(f"execution.load.values: {load:g}{where}: {exc}") from None

    @cached_property
    def window_period_s(self) -> float | None:
        """How often the spec's pipeline's windows close, s, with its own parameters (None: no
        event-time windows)."""
        from streamscale.pipelines import make_pipeline

        bm = self.spec.benchmark
        grid = make_pipeline(bm.sut, dict(bm.params), records=bm.feed(), job=bm.job_setup()).window_grid_ms()
        return grid[1] / 1000 if grid else None

    def _processing_limit_ms(self, pipe) -> float | None:
        given = self.spec.execution.slos.processing_latency_p95_ms
        if given is None:
            return None
        if given == "auto":  # a micro-batch's interval (real-time mode's batches span their checkpoint interval)
            trigger = pipe.trigger()
            timed = trigger.kind == "processing_time" and trigger.seconds > 0
            interval_ms = (trigger.seconds if timed else pipe.params.trigger_interval_s) * 1000
            return min(PROCESSING_P95_TRIGGERS * interval_ms, PROCESSING_P95_MAX_MS)
        return float(given)


def check_trigger(pipe, master: str, spark_conf: dict, partitions: int) -> None:
    """The pipeline's trigger can run a benchmark's run here (streamscale.pipelines.realtime.check_run);
    TriggerError otherwise."""
    from streamscale.pipelines import realtime

    try:
        realtime.check_run(pipe, master, spark_conf, partitions)
    except ConfigError as exc:
        raise TriggerError(str(exc)) from None


class TriggerError(ConfigError):
    """A configuration's trigger cannot run here (whatever its load)."""


def as_plan(given: Plan | Spec) -> Plan:
    """``given`` if it is a plan, else its spec's: callers that resolved their spec pass the plan on."""
    return given if isinstance(given, Plan) else resolve(given)


def long_execution(spec):
    """``spec`` (a :class:`~streamscale.benchmark.spec.Spec`) as its long runs run: each
    ``confirm_s`` long after ``confirm_warmup_s``, whole (no early stop), once."""
    st = spec.execution.strategy
    ex = spec.execution.model_copy(
        update={
            "duration_s": st.confirm_s,
            "max_duration_s": st.confirm_s,  # a long run is whole: its verdict at its end is its own
            "warmup_s": st.confirm_warmup_s,
            "min_duration_s": None,
            "repetitions": 1,
            "extra_repetitions": 0,
        }
    )
    return spec.model_copy(update={"execution": ex})


def resolve(spec: Spec) -> Plan:
    """The plan of a validated spec."""
    bm, ex = spec.benchmark, spec.execution
    load = load_dimension(
        ex.load.type,
        bm.loadgen.period_s,
        int(bm.params.get("children", 4)),
        ex.load.sensors,
        described=bm.feed() is not None,
    )
    resource = RESOURCES[ex.resources.type](
        master=ex.master,
        executor_cores=ex.executor_cores,
        executor_memory=ex.executor_memory,
        confine=ex.resources.confine,
    )
    configs = {name: spec.config(name) for name in spec.config_names()}
    return Plan(spec, load, resource, configs)
