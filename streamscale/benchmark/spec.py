"""Declarative benchmark and execution specs (YAML), validated with clear errors naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from streamscale.benchmark.units import LOADS, RESOURCES
from streamscale.broker.connection import KafkaSection
from streamscale.errors import ConfigError
from streamscale.loadgen.inputs import InputSpec, resolve_inputs
from streamscale.loadgen.recordspec import RecordsSpec
from streamscale.specs import StrictModel, base_dir, read_yaml, validate

# a configuration's keys that are pipeline parameters under another name (the Kafka source's option)
CONFIG_PARAMS = {"maxOffsetsPerTrigger": "max_offsets_per_trigger"}


class LoadGenSpec(StrictModel):
    workers: int = Field(2, ge=1)
    period_s: float = Field(1.0, gt=0)
    encoding: Literal["json"] = Field(
        "json", description="the task samples' sensor readings are JSON (your job's records: records.encoding)"
    )
    distribution: str = "uniform:0,100"

    @field_validator("encoding", mode="before")
    @classmethod
    def _json_only(cls, v):
        if v != "json":
            raise ValueError(
                f"'{v}': the task samples read JSON sensor readings; a job of your own reads CSV with "
                "benchmark.records.encoding: csv"
            )
        return v


class TopicSpec(StrictModel):
    partitions: int = Field(4, ge=1)
    replication_factor: int | None = Field(
        None, ge=1, description="replicas of the input and output topics; null: up to 3 on an embedded cluster, else 1"
    )
    min_insync_replicas: int | None = Field(
        None, ge=1, description="replicas that must have a record before the generator's acks=all is answered"
    )

    @model_validator(mode="after")
    def _isr(self):
        if self.min_insync_replicas and self.replication_factor and self.min_insync_replicas > self.replication_factor:
            raise ValueError("min_insync_replicas cannot exceed replication_factor")
        return self

    def config(self) -> dict:
        return {} if self.min_insync_replicas is None else {"min.insync.replicas": str(self.min_insync_replicas)}


class BrokerSection(StrictModel):
    brokers: int = Field(
        1, ge=1, le=9, description="the embedded Kafka's nodes: above 1, a cluster (each node broker and controller)"
    )
    security: Literal["plaintext", "sasl_ssl"] = Field(
        "plaintext",
        description="the embedded Kafka's listeners: sasl_ssl is TLS (a CA made at start), SCRAM-SHA-512 "
        "users and ACLs, every client of the run authenticated",
    )


def resolve_sut(v, folder) -> str:
    """A SUT's name: a task sample's in lower case, a job's file resolved from ``folder``;
    ValueError saying what a SUT is otherwise."""
    from streamscale.pipelines import jobref

    v = str(v)
    if jobref.is_job(v):
        try:
            return jobref.resolve(v, folder)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
    if v.lower() not in jobref.BUILT_IN:
        raise ValueError(f"'{v}': use uc1, uc2, uc3, uc4, or your job as FILE.py:FUNCTION or module:FUNCTION")
    return v.lower()


class SinkSpec(StrictModel):
    """Where your job writes instead of the output topic: a format of Spark's DataStreamWriter (with
    its options; a file format's ``path`` defaults into the run's output folder), or your own
    ``foreach_batch`` function, FILE.py:FUNCTION (relative to the spec's folder), called with each
    micro-batch and its id."""

    format: str | None = Field(None, description="kafka, parquet, json, csv, orc, text, noop, console, ...")
    options: dict[str, str | int | float | bool] = Field(default_factory=dict)
    foreach_batch: str | None = Field(None, description="FILE.py:FUNCTION or module:FUNCTION")

    @field_validator("foreach_batch")
    @classmethod
    def _function_there(cls, v: str | None, info: ValidationInfo):
        if v is None:
            return v
        from streamscale.pipelines import jobref
        from streamscale.pipelines.jobsetup import foreach_batch_function

        try:
            ref = jobref.resolve(v, base_dir(info))
            foreach_batch_function(ref)
        except ConfigError as exc:
            raise ValueError(str(exc).removeprefix("sink.foreach_batch: ")) from None
        return ref

    @model_validator(mode="after")
    def _one(self):
        if bool(self.format) == bool(self.foreach_batch):
            raise ValueError("give a format (with its options) or foreach_batch: FILE.py:FUNCTION, one of them")
        if self.foreach_batch and self.options:
            raise ValueError("options are a format's: foreach_batch takes none")
        return self


class BenchmarkSpec(StrictModel):
    sut: str = Field(
        description="uc1, uc2, uc3, uc4, or your job: FILE.py:FUNCTION (relative to the spec's folder) "
        "or package.module:FUNCTION"
    )
    params: dict = Field(default_factory=dict)
    records: RecordsSpec | None = Field(
        None, description="your job's records (fields and generators, or replay: FILE); none: sensor readings"
    )
    inputs: dict[str, InputSpec] | None = Field(
        None,
        description="your job's several inputs by name, each its records, share of the load and partitions "
        "(instead of records): the job gets a dict of them",
    )
    loadgen: LoadGenSpec = Field(default_factory=LoadGenSpec)
    topics: TopicSpec = Field(default_factory=TopicSpec)
    decode: Literal["fields", "raw"] = Field(
        "fields",
        description="your job's input: fields (the records' fields, malformed values counted) or raw "
        "(Spark's Kafka columns: key, value, topic, partition, offset, timestamp, timestampType, headers)",
    )
    sink: SinkSpec | None = Field(None, description="your job's own sink; none: the output topic")
    py_files: list[str] = Field(
        default_factory=list,
        description="modules (.py) or archives (.zip) your job imports, relative to the spec's folder: on the "
        "path here and shipped to Spark's Python workers",
    )

    @field_validator("py_files")
    @classmethod
    def _files_there(cls, v: list[str], info: ValidationInfo):
        found = []
        for f in v:
            path = Path(f).expanduser()
            path = path if path.is_absolute() else (base_dir(info) / path).resolve()
            if not path.is_file() or path.suffix not in (".py", ".zip", ".egg"):
                raise ValueError(f"{f}: no such .py, .zip or .egg file ({path})")
            found.append(str(path))
        return found

    def feed(self):
        """What the job reads: its records (a RecordsSpec; None: sensor readings), or its several
        inputs (streamscale.loadgen.inputs.Inputs, in the order their generators start)."""
        if self.inputs is None:
            return self.records
        try:
            return resolve_inputs(self.inputs, self.decode)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None

    def job_setup(self, output_dir: str | None = None):
        """What the job is fed and where it writes (None for a task sample)."""
        from streamscale.pipelines import jobref
        from streamscale.pipelines.jobsetup import JobSetup

        if not jobref.is_job(self.sut):
            return None
        sink = self.sink
        return JobSetup(
            decode=self.decode,
            sink_format=sink.format if sink else None,
            sink_options=tuple(sorted((k, str(v)) for k, v in sink.options.items())) if sink else (),
            foreach_batch=sink.foreach_batch if sink else None,
            py_files=tuple(self.py_files),
            output_dir=output_dir,
        )

    @field_validator("sut")
    @classmethod
    def _sut(cls, v: str, info: ValidationInfo):
        return resolve_sut(v, base_dir(info))

    @model_validator(mode="after")
    def _params_valid(self):
        from streamscale.pipelines import jobref, make_pipeline

        if not jobref.is_job(self.sut) and (self.decode != "fields" or self.sink or self.py_files):
            raise ValueError(f"{self.sut} is a task sample: decode, sink and py_files are for your own job")
        if not jobref.is_job(self.sut) and self.inputs:
            raise ValueError(f"{self.sut} is a task sample reading one topic: inputs are for your own job")
        if self.inputs is not None and self.records is not None:
            raise ValueError("give records (one input) or inputs (several, each its records), not both")
        if self.records is not None and self.records.refs():
            fld, (inp, ref_field, _) = next(iter(self.records.refs().items()))
            raise ValueError(
                f"records.fields.{fld}: ref:{inp}.{ref_field} refers to another input: name the inputs in "
                "benchmark.inputs (each its records)"
            )
        try:  # feed() checks the inputs: its ConfigError names what is wrong
            make_pipeline(self.sut, self.params, records=self.feed(), job=self.job_setup())
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self


def _registered(kind: str, registry: dict, v):
    """``v`` if ``registry`` holds it (a load or resource type), else ValueError naming them."""
    if v not in registry:
        raise ValueError(f"'{v}': the {kind} types are {', '.join(registry)}")
    return v


class LoadSpec(StrictModel):
    type: str = Field(
        "sensors",
        description="a registered load type (streamscale.benchmark.units.LOADS): sensors (x 1 record per "
        "period), rate (records/s), nested_groups (UC4), window_s (UC3)",
    )
    values: list[float] = Field(min_length=1)
    sensors: int = Field(1000, ge=1, description="fixed number of sensors when the load is window_s")

    @field_validator("type")
    @classmethod
    def _load_type(cls, v):
        return _registered("load", LOADS, v)

    @field_validator("values")
    @classmethod
    def _positive_sorted(cls, v):
        if any(x <= 0 for x in v):
            raise ValueError("load values must be positive")
        if len(set(v)) != len(v):
            raise ValueError("load values must be distinct")
        return sorted(v)


class ResourceSpec(StrictModel):
    type: str = Field("cores", description="a registered resource type (streamscale.benchmark.units.RESOURCES)")
    values: list[int] = Field(min_length=1)
    confine: bool = Field(
        True,
        description="cores on a local master: the Spark application runs on that many "
        "CPUs (Linux CPU affinity), not only that many task slots",
    )

    @field_validator("type")
    @classmethod
    def _resource_type(cls, v):
        return _registered("resource", RESOURCES, v)

    @field_validator("values")
    @classmethod
    def _positive_sorted(cls, v):
        if any(x < 1 for x in v):
            raise ValueError("resource values must be at least 1")
        if len(set(v)) != len(v):
            raise ValueError("resource values must be distinct")
        return sorted(v)


# The default bound on every record's processing latency (its Kafka timestamp to the commit of
# the micro-batch that processed it): 8 trigger intervals at the 95th percentile. A record waits
# for the next batch and then for that batch, so when batches run back to back the p95 is about
# twice a batch's time (docs/benchmarking.md): 8 intervals fail a query whose batches
# take more than ~4 intervals, while one that keeps up (batches within an interval) stays at 1-3.
# At most 10 s whatever the interval: with UC3's 5 s trigger, 8 intervals (40 s) let 13.5 s
# batches pass (UC3 at 160,000 records/s on one core, p95 27.6 s), while a 10 s p95 fails batches
# of ~5 s back to back and passes the ones that keep up (UC3 at 40,000: batches of 2.8 s, p95 8.2 s).
PROCESSING_P95_TRIGGERS = 8.0
PROCESSING_P95_MAX_MS = 10_000.0


class SLOSpec(StrictModel):
    lag_trend_threshold: float = Field(0.01, ge=0, description="max lag slope as a fraction of records/s")
    processing_latency_p95_ms: float | Literal["auto"] | None = Field(
        "auto",
        description="every UC: max 95th percentile after the warm-up and the start-up backlog of every "
        "record's latency from its "
        "Kafka timestamp to its batch's commit; auto: 8 trigger intervals, at most 10 s; "
        "null: no such SLO (reported always)",
    )
    dropped_records_threshold: float | None = Field(
        0.01,
        ge=0,
        description="pipelines that drop late records (UC2-UC4, jobs): most of the generated records dropped",
    )
    latency_p95_ms: float | None = Field(
        None,
        gt=0,
        description="windowed UCs: max 95th percentile of the output "
        "latency (event time to output) after the warm-up; reported always",
    )
    others: dict = Field(
        default_factory=dict,
        description="the settings of SLOs registered beside the built-in ones (streamscale.benchmark.sloregistry), "
        "written as slos.NAME",
    )

    @model_validator(mode="before")
    @classmethod
    def _registered_slos(cls, data):
        """A key that is no field here is a registered SLO's setting (kept in ``others``), or an error
        naming the SLOs there are."""
        from streamscale.benchmark.sloregistry import SLOS

        if not isinstance(data, dict):
            return data
        own = set(cls.model_fields)
        extra = {k: v for k, v in data.items() if k not in own}
        unknown = [k for k in extra if k not in SLOS or SLOS[k].builtin]
        if unknown:
            known = sorted(own - {"others"}) + sorted(k for k, v in SLOS.items() if not v.builtin)
            raise ValueError(f"{unknown[0]}: no such SLO setting (the settings are {', '.join(known)})")
        kept = {k: v for k, v in data.items() if k in own}
        return {**kept, "others": {**kept.get("others", {}), **extra}} if extra else kept


def _auto_or_number(v, fits, what: str):
    """``v`` as a field that is a number, auto or null takes it: None, "auto", or a finite number
    that ``fits``; else a ValueError of one line saying ``what`` it must be."""
    import math

    if v is None or v == "auto":
        return v
    try:
        x = float(v)
    except (TypeError, ValueError):
        x = float("nan")
    if isinstance(v, bool) or not math.isfinite(x) or not fits(x):
        raise ValueError(f"{v!r}: {what}, auto or null")
    return x


# the time budget of a bracket search by default, per resource amount and configuration: the search
# and its ends under the SLOs; with strategy.confirm, the search and each amount's first two long runs
AUTO_BUDGET_S = 720.0
CONFIRMED_BUDGET_S = 1200.0


def long_runs_kept_s(confirm_s: float, amounts: int) -> float:
    """What a configuration's time budget keeps beside its search for strategy.confirm's long
    runs: two per resource amount (its ends), each ``confirm_s`` and what a run takes beyond its
    load before any ran (streamscale.benchmark.bracket.RUN_OVERHEAD_S)."""
    from streamscale.benchmark.bracket import RUN_OVERHEAD_S

    return 2 * (confirm_s + RUN_OVERHEAD_S) * amounts


class StrategySpec(StrictModel):
    name: Literal["full", "linear", "binary", "bracket"] = "linear"
    lower_bound: bool = True
    # bracket (metric capacity): per resource amount the highest load held and the lowest failed,
    # within ``resolution`` of each other (streamscale.benchmark.bracket); load.values give the
    # first load tried (the lowest value) and the range searched (down to a 64th of the lowest, up
    # to the highest, or 64 times the lowest when only one is given)
    resolution: float = Field(0.15, gt=0, le=1, description="bracket: failed / held - 1 to reach")
    factor: float = Field(2.0, gt=1, le=10, description="bracket: load step while searching outwards")
    max_runs: int = Field(12, ge=2, le=50, description="bracket: most experiments per resource amount")
    confirm: bool = Field(
        False,
        description="bracket: decide each end by a long run (confirm_s long after confirm_warmup_s, no early "
        "stop), and where the search's ends do not hold, the bracket anew by long runs (benchmark run --confirm)",
    )
    confirm_s: float = Field(300.0, gt=0, description="confirm: each long run's length")
    confirm_warmup_s: float = Field(60.0, ge=0, description="confirm: each long run's warm-up")
    confirm_runs: int = Field(
        4, ge=0, le=20, description="confirm: most long runs more per resource amount where its ends do not hold"
    )
    probe: bool = Field(
        True,
        description="bracket: start each resource amount's search from a drain probe (the rate at which the job, "
        "on that amount, reads a backlog of its own records; probes.json); false: from load.values",
    )
    search_lag_threshold: Annotated[float, Field(ge=0)] | Literal["auto"] | None = Field(
        "auto",
        description="bracket: the lag trend's threshold the search's runs are judged by (the bracket's ends are "
        "then run under slos.lag_trend_threshold, going on up to max_duration_s); auto: a quarter of the "
        "resolution, at least the SLO's; null: the SLO's own",
    )

    @field_validator("search_lag_threshold", mode="before")
    @classmethod
    def _threshold(cls, v):
        """One line for a value that is no threshold (the union's own error is one line per branch)."""
        return _auto_or_number(v, lambda x: x >= 0, "a share of the load (0 or more)")

    time_budget_s: Annotated[float, Field(gt=0)] | Literal["auto"] | None = Field(
        "auto",
        description="bracket: seconds for the whole search, shared by the resource amounts (one without "
        "both ends or wider than the resolution may use the later ones' shares, leaving each one run); no load "
        "starts whose runs would end after it (a search's run: max_duration_s and the most a run here took "
        "beyond it; one under the SLOs: duration_s and that, ended at its share of what is left), and the answer "
        f"says the resolution reached; auto: {AUTO_BUDGET_S:g} s per resource amount and configuration "
        f"(with confirm: {CONFIRMED_BUDGET_S:g} s less two long runs, which it keeps for each amount's ends; a "
        "long run past them starts only where it ends within both); null: none",
    )

    @field_validator("time_budget_s", mode="before")
    @classmethod
    def _budget(cls, v):
        """One line for a value that is no budget (the union's own error is one line per branch)."""
        return _auto_or_number(v, lambda x: x > 0, "seconds (more than 0)")


# How long a run undecided at its duration_s may go on by default: long enough for the lag trend's
# interval of a micro-batch query's sawtooth to narrow about tenfold against a 40 s run's.
DEFAULT_MAX_DURATION_S = 300.0


class ExecutionSpec(StrictModel):
    load: LoadSpec
    resources: ResourceSpec
    master: str | None = Field(None, description="Spark master for resource type 'executors'")
    executor_cores: int = Field(1, ge=1)
    executor_memory: str = "1g"
    driver_host: str | None = Field(
        None,
        description="on a cluster master: the address its executors reach the driver at (default: this machine's "
        "on the route towards the master)",
    )
    checkpoint_dir: str | None = Field(
        None,
        description="where each run's checkpoint goes: a folder or any Hadoop URI (hdfs://, s3a://); default: a "
        "temporary folder on the driver, removed after the run",
    )
    checkpoint_shared: bool = Field(
        False,
        description="checkpoint_dir is a folder every host of the cluster mounts (needed for a folder on a "
        "cluster master)",
    )
    spark_conf: dict[str, str | int | float | bool] = Field(
        default_factory=dict,
        description="Spark settings every run's session starts with (a configuration's spark.* settings over them)",
    )
    slos: SLOSpec = Field(default_factory=SLOSpec)
    duration_s: float = Field(
        60.0, gt=0, description="a run's planned length (sequential testing may stop it sooner, max_duration_s later)"
    )
    max_duration_s: float | None = Field(
        None,
        gt=0,
        description="a run whose SLOs are still undecided at duration_s goes on (its looks continue) up to this "
        f"length; null: {DEFAULT_MAX_DURATION_S:g} s, or duration_s where that is longer",
    )
    warmup_s: float = Field(20.0, ge=0)
    min_duration_s: float | Literal["auto"] | None = Field(
        "auto",
        description="sequential testing: from this length on, a run stops as soon as its lag trend's "
        "99 % interval clears the limit; auto: warmup_s + a quarter of the rest, at least 10 s after the "
        "warm-up; null: a run is first looked at when duration_s ends",
    )
    repetitions: int = Field(1, ge=1)
    extra_repetitions: int = Field(
        0,
        ge=0,
        le=10,
        description="runs added per load and resources when a lag trend's 95 % interval straddles the limit",
    )
    stop_at_majority: bool = Field(
        True,
        description="stop a point's repetitions once a majority agrees (Henning and Hasselbring); false runs all of "
        "them, to see whether they agree",
    )
    strategy: StrategySpec = Field(default_factory=StrategySpec)
    metric: Literal["demand", "capacity"] = "demand"
    reuse_spark: bool = Field(
        False,
        description="keep an experiment's Spark session (its JVM context and Python workers) for the "
        "next experiment with the same resources instead of starting each afresh: saves the workers' "
        "start (~10 s an experiment on a small machine) but the experiments no longer start alike",
    )
    bootstrap_servers: str | None = None
    configs: dict[str, dict[str, str | int | float | bool]] = Field(
        default_factory=dict,
        description="named configurations, each searched on its own: spark.* keys are Spark session "
        "settings, sut another version of the job (FILE.py:FUNCTION), trigger how the query triggers "
        "(processing_time:DURATION or real_time:DURATION, "
        "Spark's real-time mode), other keys the job's parameters (maxOffsetsPerTrigger: "
        "max_offsets_per_trigger)",
    )

    @field_validator("configs")
    @classmethod
    def _configs(cls, v: dict, info: ValidationInfo):
        import re

        for name, settings in v.items():
            if not re.match(r"^[A-Za-z0-9_.-]+$", name):
                raise ValueError(f"configuration name '{name}': use letters, digits, '.', '_' and '-'")
            if "sut" in settings:  # another version of the job: its path relative to the spec's folder
                try:
                    settings["sut"] = resolve_sut(settings["sut"], base_dir(info))
                except ValueError as exc:
                    raise ValueError(f"configuration {name}: sut {exc}") from None
        return v

    def _check_checkpoint(self, hosts) -> None:
        """On a cluster master the executors, on other hosts, write a stateful query's state into its
        checkpoint: a folder of the driver's will not do unless every host mounts it (a master on
        this machine's loopback has every host here; ``hosts``: the running cluster of hosts whose
        master it is, whose shared folder every host mounts)."""
        from streamscale.sparkio.address import master_host, on_loopback

        master = self.master or "local"
        if master_host(master) is None or on_loopback(master):
            return
        folder = self.checkpoint_dir is None or _is_folder(self.checkpoint_dir)
        if folder and not self.checkpoint_shared and not self._in_shared_folder(hosts):
            where = "a temporary folder on the driver" if self.checkpoint_dir is None else self.checkpoint_dir
            raise ValueError(
                f"master {self.master}: each run's checkpoint would be {where}, which executors on other hosts "
                "cannot write: set execution.checkpoint_dir to storage every host reads (hdfs://..., s3a://...), or "
                "to a folder every host mounts with checkpoint_shared: true"
            )

    def _check_cluster_fit(self) -> None:
        """The checkpoint and the executors fit the master's cluster (the one `streamscale cluster
        start` left running, read once, where the master is its)."""
        from streamscale.hosts.daemon import running_for

        hosts = running_for(self.master) if (self.master or "").startswith("spark://") else None
        self._check_checkpoint(hosts)
        self._check_running_cluster(hosts)

    def _check_running_cluster(self, hosts) -> None:
        """On the cluster `streamscale cluster start` left running (``hosts``): no more executors
        than workers."""
        if hosts is not None and self.resources.type == "executors" and max(self.resources.values) > hosts.workers:
            raise ValueError(
                f"resources: {max(self.resources.values):g} executors on the cluster at {self.master}, which has "
                f"{hosts.workers} workers (one executor each): lower the values or start more workers"
            )

    def _in_shared_folder(self, hosts) -> bool:
        """Whether the master is a running cluster of hosts (``hosts``, `streamscale cluster start`'s)
        and the checkpoint its default or under its shared folder, which every host mounts."""
        from streamscale.pipelines.run import local_folder

        if hosts is None:
            return False
        return self.checkpoint_dir is None or Path(local_folder(self.checkpoint_dir)).is_relative_to(hosts.shared)

    def _check_kubernetes(self) -> None:
        """A Kubernetes master needs the image its executors run, in the spec's or every
        configuration's Spark settings."""
        if not (self.master or "").startswith("k8s://"):
            return
        image = "spark.kubernetes.container.image"
        if image in self.spark_conf or (self.configs and all(image in c for c in self.configs.values())):
            return
        raise ValueError(
            f"master {self.master}: a Kubernetes run needs the container image its executors run (pyspark, Spark's "
            f"Kafka connector's jars, your job): set execution.spark_conf.{image} (docs/clusters.md#kubernetes)"
        )

    @model_validator(mode="after")
    def _check(self):
        if self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s ({self.warmup_s:g}) must be shorter than duration_s ({self.duration_s:g})")
        if self.max_duration_s is not None and self.max_duration_s < self.duration_s:
            raise ValueError(
                f"max_duration_s ({self.max_duration_s:g}) must be at least duration_s ({self.duration_s:g}): a run "
                "goes on past duration_s only while it is undecided"
            )
        if self.master and not self.master.startswith(("spark://", "k8s://", "local")):
            raise ValueError(f"master '{self.master}': use local[k], spark://host:port or k8s://https://host:port")
        if self.resources.type == "cores" and self.master and not self.master.startswith("local"):
            raise ValueError(
                f"resources: cores on the cluster master {self.master}: a cluster's resource is its executors "
                "(resources: {type: executors, values: [...]}, executor_cores: N)"
            )
        bad = [k for k in self.spark_conf if not k.startswith("spark.")]
        if bad:
            raise ValueError(f"execution.spark_conf.{bad[0]}: Spark's settings start with 'spark.'")
        self._check_kubernetes()
        self._check_cluster_fit()
        if self.strategy.name == "bracket" and self.metric != "capacity":
            raise ValueError("strategy 'bracket' searches a capacity per resource amount: set metric: capacity")
        st = self.strategy
        if st.confirm and st.name != "bracket":
            raise ValueError("strategy.confirm decides a bracket's ends: it needs strategy 'bracket'")
        if st.confirm_warmup_s >= st.confirm_s:
            raise ValueError(
                f"strategy.confirm_warmup_s ({st.confirm_warmup_s:g}) must be shorter than confirm_s ({st.confirm_s:g})"
            )
        if isinstance(self.min_duration_s, (int, float)) and not self.warmup_s < self.min_duration_s <= self.duration_s:
            raise ValueError(
                f"min_duration_s ({self.min_duration_s:g}) must lie after warmup_s ({self.warmup_s:g}) "
                f"and at most at duration_s ({self.duration_s:g})"
            )
        return self

    @property
    def search_threshold(self) -> float:
        """The lag threshold a bracket search's runs are judged by (the SLO's own for any other
        strategy): they only tell loads apart at the bracket's resolution, and a load a quarter of
        it over capacity piles up about that share of the load every second."""
        st, own = self.strategy, self.slos.lag_trend_threshold
        if st.name != "bracket" or st.search_lag_threshold is None:
            return own
        if st.search_lag_threshold == "auto":
            return max(own, st.resolution / 4)
        return max(own, float(st.search_lag_threshold))

    def time_budget(self, configs: int = 1) -> float | None:
        """The search's time budget in seconds (None: none): strategy.time_budget_s, or by default a
        bracket search's AUTO_BUDGET_S per resource amount and configuration; with strategy.confirm
        CONFIRMED_BUDGET_S less the long runs the execution keeps beside it for each amount's ends
        (:func:`long_runs_kept_s`), at least half of AUTO_BUDGET_S."""
        st = self.strategy
        if st.time_budget_s != "auto":
            return st.time_budget_s
        if st.name != "bracket":
            return None
        per = AUTO_BUDGET_S
        if st.confirm:
            per = max(AUTO_BUDGET_S / 2, CONFIRMED_BUDGET_S - long_runs_kept_s(st.confirm_s, 1))
        return per * len(self.resources.values) * configs

    @property
    def longest_s(self) -> float:
        """How long a run still undecided may go on (max_duration_s, or its default)."""
        if self.max_duration_s is not None:
            return self.max_duration_s
        return max(DEFAULT_MAX_DURATION_S, self.duration_s)

    @property
    def judged_as_it_goes(self) -> bool:
        """Whether a run is looked at as it goes: it may stop once decided, or go on past duration_s."""
        return self.shortest_s is not None or self.longest_s > self.duration_s

    @property
    def shortest_s(self) -> float | None:
        """When a run may stop once decided (None: runs last duration_s)."""
        if self.min_duration_s is None:
            return None
        if self.min_duration_s == "auto":
            rest = self.duration_s - self.warmup_s
            return min(self.duration_s, self.warmup_s + max(10.0, rest / 4))
        return float(self.min_duration_s)


class ClusterSection(StrictModel):
    """A Spark and a Kafka cluster on hosts of their own on this machine (root only): a master,
    ``workers`` workers of ``worker_cores`` cores each on its own CPUs, ``brokers`` brokers; the one
    `streamscale cluster start` left running where it has this shape, else one started for the run."""

    workers: int = Field(
        2, ge=1, le=16, description="Spark workers, each on a host of its own: at most one executor each"
    )
    worker_cores: int = Field(1, ge=1, description="cores of each worker (its own CPUs)")
    brokers: int = Field(3, ge=1, le=9, description="Kafka brokers, each on a host of its own")
    worker_memory: str = Field("1g", description="memory each worker offers its executor")


class Spec(StrictModel):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    benchmark: BenchmarkSpec
    execution: ExecutionSpec
    kafka: KafkaSection = Field(default_factory=KafkaSection)
    broker: BrokerSection = Field(default_factory=BrokerSection)
    cluster: ClusterSection | None = Field(
        None, description="run on a Spark and a Kafka cluster on hosts of their own here (root only)"
    )

    def replication_factor(self, embedded: bool) -> int:
        """The topics' replicas: as the spec says, else up to 3 on an embedded cluster, else 1."""
        given = self.benchmark.topics.replication_factor
        if given is not None:
            return given
        brokers = self.cluster.brokers if self.cluster else self.broker.brokers
        return min(3, brokers) if embedded or self.cluster else 1

    @model_validator(mode="before")
    @classmethod
    def _one_master(cls, data):
        """A cluster's own master refuses another before the execution's rules judge that one."""
        if isinstance(data, dict) and data.get("cluster") is not None and isinstance(data.get("execution"), dict):
            master = data["execution"].get("master")
            if master:
                raise ValueError(f"cluster: starts its own Spark master; leave out execution.master ({master})")
        return data

    @model_validator(mode="after")
    def _where_it_runs(self):
        ex = self.execution
        if self.cluster is None:
            if RESOURCES[ex.resources.type].needs_master and not ex.master:
                raise ValueError(
                    f"resource type '{ex.resources.type}' needs a master (spark://host:port or k8s://...) or a "
                    "cluster: on hosts of their own"
                )
            return self
        refused = cluster_refusal(self)
        if refused:
            raise ValueError(refused)
        return self

    def kafka_section(self) -> dict:
        """The spec's Kafka connection section (kafka.bootstrap_servers, else execution.bootstrap_servers)."""
        section = self.kafka.model_dump()
        section["bootstrap_servers"] = self.kafka.bootstrap_servers or self.execution.bootstrap_servers
        return section

    def config_names(self) -> list[str]:
        """The configurations searched ("" alone: the spec names none)."""
        return list(self.execution.configs) or [""]

    def sut_of(self, name: str) -> str:
        """The SUT configuration ``name`` runs: its own ``sut`` (another version of the job), else the
        benchmark's."""
        return str((self.execution.configs.get(name) or {}).get("sut") or self.benchmark.sut)

    def config(self, name: str) -> tuple[dict, dict]:
        """(Spark session settings, pipeline parameters) of configuration ``name``."""
        spark_conf, params = {}, {}
        for k, v in (self.execution.configs.get(name) or {}).items():
            if k == "sut":
                continue
            if k.startswith("spark."):
                spark_conf[k] = v
            else:
                params[CONFIG_PARAMS.get(k, k)] = v
        return spark_conf, params

    @model_validator(mode="after")
    def _configs_fit(self):
        from streamscale.pipelines import make_pipeline

        for name in self.execution.configs:
            _, params = self.config(name)
            try:
                make_pipeline(
                    self.sut_of(name),
                    {**self.benchmark.params, **params},
                    records=self.benchmark.feed(),
                    job=self.benchmark.job_setup(),
                )
            except ConfigError as exc:
                raise ValueError(f"execution.configs.{name}: {exc}") from None
        return self

    @model_validator(mode="after")
    def _load_type_fits(self):
        from streamscale.pipelines import jobref

        lt, sut = self.execution.load.type, self.benchmark.sut
        described = self.benchmark.records is not None or self.benchmark.inputs is not None
        values = self.execution.load.values
        refused = LOADS[lt].refusal(sut, values, described, job=jobref.is_job(sut))
        if refused:
            raise ValueError(refused)
        for name, i in (self.benchmark.inputs or {}).items():
            if min(self.execution.load.values) * i.share < 1:
                raise ValueError(
                    f"inputs.{name}: {i.share:g} of a load of {min(self.execution.load.values):g} records/s is "
                    "less than 1 record/s"
                )
        if self.execution.slos.latency_p95_ms is not None and sut == "uc1":
            raise ValueError("slos.latency_p95_ms: UC1 writes no windows, so it has no output latency to judge")
        return self


def cluster_refusal(spec: Spec) -> str | None:
    """Why a spec's ``cluster:`` cannot be, in one line (None: it can)."""
    ex, c = spec.execution, spec.cluster
    if "broker" in spec.model_fields_set:
        return "cluster: brings its own brokers (cluster.brokers); leave out broker:"
    if spec.kafka.bootstrap_servers or ex.bootstrap_servers:
        return "cluster: brings its own brokers; leave out kafka.bootstrap_servers"
    if ex.resources.type != "executors":
        return (
            f"resources: {ex.resources.type} on a cluster: a cluster's resource is its executors "
            "(resources: {type: executors, values: [...]})"
        )
    if max(ex.resources.values) > c.workers:
        return (
            f"resources: {max(ex.resources.values):g} executors on a cluster of {c.workers} workers: each executor "
            "runs on a worker of its own; raise cluster.workers or lower the values"
        )
    if ex.executor_cores > c.worker_cores:
        return f"executor_cores {ex.executor_cores} exceeds cluster.worker_cores {c.worker_cores}"
    if ex.checkpoint_dir is not None and _is_folder(ex.checkpoint_dir) and not ex.checkpoint_shared:
        return (
            f"checkpoint_dir {ex.checkpoint_dir} on a cluster: leave it out (the cluster's shared folder), or give "
            "storage every host reads (hdfs://..., s3a://...)"
        )
    return None


def _is_folder(uri: str) -> bool:
    from streamscale.pipelines.run import local_folder

    return local_folder(uri) is not None


def load_spec(path: str | Path) -> Spec:
    """A spec file; files it names by a relative path (a job, a replay sample) lie beside it."""
    return parse_spec(read_yaml(path), str(path), Path(path).resolve().parent)


def parse_spec(data, source: str = "spec", folder: Path | None = None) -> Spec:
    return validate(Spec, data, source, "name, benchmark and execution", folder)


def with_confirm(spec: Spec) -> Spec:
    """``spec`` with strategy.confirm on (`benchmark run --confirm`); ConfigError where it cannot be."""
    if spec.execution.strategy.name != "bracket":
        raise ConfigError(
            f"--confirm decides a bracket's ends: {spec.name}'s strategy is {spec.execution.strategy.name!r}, "
            "set execution.strategy.name: bracket (with metric: capacity)"
        )
    st = spec.execution.strategy.model_copy(update={"confirm": True})
    return spec.model_copy(update={"execution": spec.execution.model_copy(update={"strategy": st})})
