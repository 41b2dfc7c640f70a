"""The benchmark spec's reference, generated from its pydantic models: every field with its type,
default, unit and meaning (``streamscale benchmark reference``; ``docs/benchmarking.md`` holds the
same text and a test keeps the two equal, so the page cannot drift from the code)."""

from __future__ import annotations

import types
import typing
from typing import Literal

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

# What a field means, where its model gives no description (or another wording), and its unit:
# (meaning, unit); an empty meaning is the model's description
_MEANING: dict[str, tuple[str, str]] = {
    "name": ("name of the benchmark; its results directory is named after it by default", ""),
    "benchmark.sut": ("", ""),  # the model's description
    "benchmark.params": ("the pipeline's parameters (see the pipelines' parameters below)", ""),
    "benchmark.loadgen.workers": ("load generator processes", ""),
    "benchmark.loadgen.period_s": ("each simulated sensor sends one record per period", "s"),
    "benchmark.loadgen.encoding": (
        "the task samples' sensor readings are JSON (your job's records: records.encoding)",
        "",
    ),
    "benchmark.loadgen.distribution": ("distribution of the simulated power values, kind:low,high", "W"),
    "benchmark.topics.partitions": ("partitions of the input topic", ""),
    "benchmark.sink.options": ("the format's options (DataStreamWriter.option), e.g. path", ""),
    "execution.load.type": (
        "what a load value counts: sensors (records/s at period 1 s), rate (records/s, any SUT), nested "
        "groups of UC4's registry (4^n sensors; UC4 also takes sensors, any number) or UC3's window",
        "",
    ),
    "execution.load.values": ("the loads to test", "per load.type"),
    "execution.resources.type": (
        "what a resource value counts: Spark cores on a local master, or executors on a cluster master",
        "",
    ),
    "execution.resources.values": ("the resource amounts to test", "cores or executors"),
    "execution.slos.lag_trend_threshold": ("max consumer-lag trend, as a fraction of the load's rate", "fraction"),
    "execution.slos.dropped_records_threshold": ("max fraction of records dropped as late", "fraction"),
    "execution.executor_cores": ("cores per executor (resource type executors)", ""),
    "execution.executor_memory": ("memory per executor (resource type executors)", "Java size"),
    "execution.duration_s": (
        "planned length of one experiment, load generated throughout (sequential testing stops a decided one "
        "sooner; an undecided one goes on up to max_duration_s)",
        "s",
    ),
    "execution.min_duration_s": (
        "sequential testing: from this length on an experiment stops as soon as its lag trend's interval, "
        "at the confidence its look may spend, clears the limit; auto: warmup_s + a quarter of the rest, "
        "at least 10 s; null: first looked at when duration_s ends",
        "s",
    ),
    "execution.slos.processing_latency_p95_ms": ("", "ms"),  # the model's description, with its unit
    "execution.strategy.resolution": ("bracket: how far apart held and failed loads may end", "fraction"),
    "execution.strategy.confirm_s": ("", "s"),
    "execution.strategy.confirm_warmup_s": ("", "s"),
    "execution.strategy.factor": ("bracket: the load's step while the search goes outwards", "factor"),
    "execution.warmup_s": ("start of an experiment left out of its SLO checks", "s"),
    "execution.repetitions": (
        "runs per (load, resources) point; a strict majority decides, runs that disagree leave it undecided",
        "",
    ),
    "execution.strategy.name": (
        "search: full, linear or binary over the given loads; bracket: per resource amount the highest load "
        "held and the lowest failed, the given loads being the first tried and the highest allowed "
        "(metric capacity)",
        "",
    ),
    "execution.strategy.lower_bound": ("start a load's search at the resources the previous load needed", ""),
    "execution.metric": ("demand: resources needed per load; capacity: load held per resource amount", ""),
    "execution.bootstrap_servers": ("an external Kafka cluster, as kafka.bootstrap_servers (which wins)", ""),
    "kafka.bootstrap_servers": ("an external Kafka cluster instead of the embedded broker", "HOST:PORT,..."),
    "kafka.properties": ("Kafka client properties for every client of the run", ""),
    "kafka.config_file": ("a Kafka client properties file (as --kafka-config)", "path"),
}

# What a pipeline parameter means: (meaning, unit), the same for every UC that has it
_PARAM_MEANING: dict[str, tuple[str, str]] = {
    "max_offsets_per_trigger": (
        "most records a micro-batch reads (Spark's maxOffsetsPerTrigger); null: all there are",
        "records",
    ),
    "connector": (
        'the Kafka connector: spark (Spark\'s own format("kafka"), what production jobs run) or python '
        "(streamscale's source and sink, for clusters without Spark's); null: $STREAMSCALE_KAFKA_IMPL, else spark",
        "",
    ),
    "trigger_interval_s": ("processing-time trigger: a micro-batch starts at most this often", "s"),
    "trigger": (
        "how the query triggers, over trigger_interval_s: processing_time:DURATION (0: as fast as it can) or "
        "real_time:DURATION (Spark's real-time mode: stateless, Kafka to Kafka, a task slot per input "
        "partition; each record's latency read at the output topic); DURATION as Spark writes it (5 seconds)",
        "",
    ),
    "dead_letter_topic": (
        "topic for records that cannot be decoded (Spark's connector: a second query routes them); null: counted",
        "",
    ),
    "optimize_topology": (
        "merge repartitions (Bejeck and Wang, Optimizing Kafka Streams Applications); null: where it pays on Spark",
        "",
    ),
    "sink": ("UC1: log lines, none (noop), SQLite, a JDBC table or a Kafka topic; a job: kafka or noop", ""),
    "log_file": ("UC1's record log (sink log); null: a file in streamscale's log folder; -: stdout", "path"),
    "db_path": ("UC1's SQLite file (sink sqlite)", "path"),
    "jdbc_url": ("UC1's database (sink jdbc); its driver must be on Spark's classpath", ""),
    "table": ("UC1's table (sink sqlite or jdbc)", ""),
    "window_s": ("length of a window (a job: its window, if it has one, so the lag trend fits its closes out)", "s"),
    "lateness_s": ("watermark delay: how late a reading may arrive and still count", "s"),
    "emit": ("final: one row per window when the watermark closes it; update: a row per change", ""),
    "slide_s": ("UC3 (or a job's window): windows start every slide", "s"),
    "emit_interval_s": ("UC3: how often updated windows are written", "s"),
    "levels": ("UC4: depth of the nested groups of the sensor registry", ""),
    "children": ("UC4: children per group (children^levels sensors)", ""),
    "sensors": (
        "UC4: any number of sensors instead of children^levels, in groups of children, the last ones partly "
        "filled (a benchmark with load type sensors sets it per load)",
        "",
    ),
    "registry_path": ("UC4: a registry file (Theodolite's JSON layout) instead of a generated one", "path"),
}

_UNITS = {"_s": "s", "_ms": "ms", "_pct": "%", "_w": "W"}


def _type_name(tp) -> str:
    origin = typing.get_origin(tp)
    if origin is Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(tp))
    if origin in (list, dict):
        args = ", ".join(_type_name(a) for a in typing.get_args(tp))
        return f"{origin.__name__}[{args}]" if args else origin.__name__
    if tp is type(None):
        return "null"
    return getattr(tp, "__name__", str(tp))


def _default(field) -> str:
    if field.default_factory is not None:
        value = field.default_factory()
        return (
            "{}"
            if isinstance(value, dict) and not value
            else "(see below)"
            if isinstance(value, BaseModel)
            else repr(value)
        )
    if field.default is PydanticUndefined:
        return "required"
    return "null" if field.default is None else repr(field.default)


def _names(registry_of) -> typing.Callable[[], str]:
    return lambda: " | ".join(repr(name) for name in registry_of())


def _loads():
    from streamscale.benchmark.units import LOADS

    return LOADS


def _resources():
    from streamscale.benchmark.units import RESOURCES

    return RESOURCES


# fields whose values are what a registry holds: shown as the registered names
_REGISTERED = {"execution.load.type": _names(_loads), "execution.resources.type": _names(_resources)}


def _unit(path: str, unit: str) -> str:
    if unit:
        return unit
    return next((u for suffix, u in _UNITS.items() if path.endswith(suffix)), "")


def rows(
    model: type[BaseModel], prefix: str = "", meanings: dict | None = None
) -> list[tuple[str, str, str, str, str]]:
    """(field path, type, default, unit, meaning) of every field, nested models walked."""
    meanings = _MEANING if meanings is None else meanings
    out = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"  # as a spec writes it
        tp = field.annotation
        if typing.get_origin(tp) in (typing.Union, types.UnionType):  # an optional section: its fields
            models = [a for a in typing.get_args(tp) if isinstance(a, type) and issubclass(a, BaseModel)]
            tp = models[0] if len(models) == 1 else tp
        nested = tp if isinstance(tp, type) and issubclass(tp, BaseModel) else None
        meaning, unit = meanings.get(path, ("", ""))
        meaning = meaning or field.description or ""
        if nested is not None:
            out.extend(rows(nested, path + ".", meanings))
            continue
        shown = _REGISTERED[path]() if path in _REGISTERED else _type_name(tp)
        out.append((path, shown, _default(field), _unit(path, unit), meaning))
    return out


def _table(header: tuple, body: list[tuple]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    return lines


def reference_markdown() -> str:
    """The spec file's fields and every pipeline's parameters as Markdown tables."""
    from streamscale.benchmark.spec import Spec
    from streamscale.loadgen.inputs import InputSpec
    from streamscale.loadgen.recordspec import FieldSpec
    from streamscale.pipelines import PIPELINES
    from streamscale.pipelines.job import UserJob

    lines = ["### Spec fields", ""]
    lines += _table(
        ("field", "type", "default", "unit", "meaning"), [(f"`{p}`", t, f"`{d}`", u, m) for p, t, d, u, m in rows(Spec)]
    )
    lines += ["", "### `benchmark.records.fields.NAME`", ""]
    lines += _table(
        ("field", "type", "default", "unit", "meaning"),
        [(f"`{p}`", t, f"`{d}`", u, m) for p, t, d, u, m in rows(FieldSpec)],
    )
    lines += ["", "### `benchmark.inputs.NAME` (records as `benchmark.records`)", ""]
    lines += _table(
        ("field", "type", "default", "unit", "meaning"),
        [(f"`{p}`", t, f"`{d}`", u, m) for p, t, d, u, m in rows(InputSpec) if not p.startswith("records.")],
    )
    for name, cls in [*sorted(PIPELINES.items()), ("your job", UserJob)]:
        lines += ["", f"### `{name}` parameters (`benchmark.params`, `run-sut -p KEY=VALUE`)", ""]
        if cls is UserJob:
            lines += ["streamscale's own; any other parameter is the job's, and the job gets them all.", ""]
        lines += _table(
            ("parameter", "type", "default", "unit", "meaning"),
            [(f"`{p}`", t, f"`{d}`", u, m) for p, t, d, u, m in rows(cls.params_model, meanings=_PARAM_MEANING)],
        )
    return "\n".join(lines) + "\n"


def undocumented() -> list[str]:
    """Spec fields and pipeline parameters with no meaning in the reference (the test requires none)."""
    from streamscale.benchmark.spec import Spec
    from streamscale.pipelines import PIPELINES
    from streamscale.pipelines.job import UserJob

    missing = [p for p, _t, _d, _u, m in rows(Spec) if not m]
    for name, cls in [*PIPELINES.items(), ("job", UserJob)]:
        missing += [f"{name}.{p}" for p, _t, _d, _u, m in rows(cls.params_model, meanings=_PARAM_MEANING) if not m]
    return missing
