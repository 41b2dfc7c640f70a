"""Spark 4.2's rules for real-time mode, checked before any load so that a query it cannot run is
one line naming the rule, not a query that dies after the load started.

The rules (Spark's documentation of real-time mode, and its ``RealTimeModeAllowlist``): Kafka as
the source (Spark's own connector) and Kafka as the sink (Spark also has console and foreach; a
run reads each record's latency at the output topic), so no foreachBatch, file or noop sink;
update output mode; stateless operators only (projections, filters, explode, broadcast joins with
static data; no aggregation, deduplication, stream-stream join or arbitrary state, and no Python
UDF); a checkpoint interval of at least ``spark.sql.streaming.realTimeMode.minBatchDuration`` (5 s
by default); and at least one task slot per input partition, since each partition's task runs for
the whole interval.
"""

from __future__ import annotations

import re

from streamscale.errors import ConfigError
from streamscale.pipelines.trigger import parse_duration

MIN_BATCH_KEY = "spark.sql.streaming.realTimeMode.minBatchDuration"
ALLOWLIST_KEY = "spark.sql.streaming.realTimeMode.allowlistCheck"
MIN_BATCH_S = 5.0  # Spark's default of MIN_BATCH_KEY
SINKS = ("kafka",)  # Spark's also console and foreach; a run reads its latencies at the output topic

# Physical operators Spark's allowlist has (RealTimeModeAllowlist, Spark 4.2), by the names a plan
# shows them with; the streaming source is planned as StreamingRelation until the query runs.
ALLOWED_OPERATORS = frozenset(
    {
        "AppendColumns",
        "CollectMetrics",
        "ColumnarToRow",
        "DeserializeToObject",
        "Expand",
        "FileScan",
        "Filter",
        "Generate",
        "InputAdapter",
        "LocalTableScan",
        "MapElements",
        "MapPartitions",
        "Project",
        "Range",
        "SerializeFromObject",
        "Union",
        "WholeStageCodegen",
        "BroadcastExchange",
        "ReusedExchange",
        "BroadcastHashJoin",
        "EventTimeWatermark",
        "StreamingRelation",
        "AdaptiveSparkPlan",
    }
)
# what an operator outside it usually is, said beside its name
WHY = {
    "ArrowEvalPython": "a Python UDF",
    "BatchEvalPython": "a Python UDF",
    "HashAggregate": "an aggregation",
    "StateStoreSave": "state",
    "StreamingDeduplicate": "a deduplication",
    "StreamingSymmetricHashJoin": "a stream-stream join",
    "Exchange": "a shuffle",
    "TransformWithState": "arbitrary state",
    "TransformWithStateInPySpark": "arbitrary state",
    "FlatMapGroupsWithState": "arbitrary state",
}


def min_batch_s(spark_conf: dict | None) -> float:
    given = (spark_conf or {}).get(MIN_BATCH_KEY)
    if given is None:
        return MIN_BATCH_S
    text = str(given).strip()
    return parse_duration(text if not text.isdigit() else f"{text} ms")[1]


def session_conf(spark) -> dict:
    """The session's setting of the rules' one setting (the minimum interval), where it has one."""
    return {MIN_BATCH_KEY: spark.conf.get(MIN_BATCH_KEY, None)}


def check_setup(pipe, spark_conf: dict | None = None) -> None:
    """The rules a pipeline's settings must keep in real-time mode (no Spark needed)."""
    trigger = pipe.trigger()
    if not trigger.real_time:
        return
    from streamscale.sparkio.io import kafka_impl

    problem = sink_problem(pipe)
    if pipe.windowed:
        problem = f"{pipe.name} aggregates over event-time windows: real-time mode runs stateless queries only"
    elif kafka_impl(pipe.params.connector) != "spark":
        problem = "real-time mode reads with Spark's own Kafka connector: set connector: spark"
    elif pipe.params.dead_letter_topic:
        problem = "dead_letter_topic starts a second query beside the real-time one: leave it out"
    elif trigger.seconds < min_batch_s(spark_conf):
        problem = (
            f"the checkpoint interval {trigger.duration} is below {MIN_BATCH_KEY} "
            f"({min_batch_s(spark_conf):g} s): use at least that, or set it lower"
        )
    if problem:
        raise ConfigError(f"trigger {trigger}: {problem}")


def sink_problem(pipe) -> str:
    """Why the pipeline's sink cannot take real-time mode's output ("" when it can)."""
    setup = getattr(pipe, "setup", None)
    if setup is not None and setup.foreach_batch:
        return "real-time mode has no foreachBatch: write to Kafka (the default) instead"
    if setup is not None and setup.sink_format and setup.sink_format.lower() not in SINKS:
        return f"a real-time run writes to Kafka (its latencies are read at the output topic), not {setup.sink_format}"
    if getattr(pipe.params, "sink", "kafka") != "kafka":
        return f"real-time mode writes to Kafka: sink {pipe.params.sink} cannot take its output"
    return ""


def check_run(pipe, master: str, spark_conf: dict, partitions: int) -> None:
    """The pipeline's trigger can run here, checked before any load: a trigger a stream takes, real
    time mode's setup, and its task slots where the master says them (a cluster's are known only
    once its session runs: :func:`check_started`); ConfigError otherwise."""
    from streamscale.pipelines.trigger import check_streams

    trigger = pipe.trigger()
    check_streams(trigger)
    if trigger.real_time:
        check_setup(pipe, spark_conf)
        slots = slots_of(master, spark_conf)
        if slots is not None:
            check_slots(slots, partitions, trigger)


def check_started(spark, master: str, partitions: int, trigger) -> None:
    """What :func:`check_run` could not know before the session ran: the task slots a cluster
    master gave (Spark's default parallelism once it runs; the executors a spec asks for are a
    request a cluster may not fill). A local master's, its URL says, were checked already."""
    if trigger.real_time and slots_of(master, None) is None:
        check_slots(spark.sparkContext.defaultParallelism, partitions, trigger)


def check_slots(slots: int, partitions: int, trigger) -> None:
    """At least one task slot per input partition: each partition's task runs for the whole interval."""
    if trigger.real_time and slots < partitions:
        raise ConfigError(
            f"trigger {trigger}: real-time mode needs a task slot per input partition: "
            f"{slots} slot(s) for {partitions} partitions (give more cores or fewer partitions)"
        )


def slots_of(master: str, spark_conf: dict | None) -> int | None:
    """Task slots a master gives (None: not known before it runs)."""
    m = re.match(r"^local\[(\d+)(?:,\s*\d+)?\]$", master or "")
    if m:
        return int(m.group(1))
    if master == "local":
        return 1
    conf = spark_conf or {}
    if "spark.executor.instances" in conf and "spark.executor.cores" in conf:
        return int(conf["spark.executor.instances"]) * int(conf["spark.executor.cores"])
    return None


def check_plan(spark, df, trigger) -> None:
    """Every physical operator of ``df``'s plan in real-time mode's allowlist (unless the session
    turned Spark's check off)."""
    if not trigger.real_time:
        return
    if str(spark.conf.get(ALLOWLIST_KEY, "true")).lower() == "false":
        return
    outside = sorted(set(plan_operators(spark, df)) - ALLOWED_OPERATORS)
    if outside:
        said = ", ".join(f"{op} ({WHY[op]})" if op in WHY else op for op in outside)
        raise ConfigError(f"trigger {trigger}: real-time mode runs stateless operators only, and this query has {said}")


_NODE = re.compile(r"^[\s:+\-|]*(?:\*\(\d+\)\s*)?([A-Za-z][A-Za-z0-9]*)")


def plan_operators(spark, df) -> list[str]:
    """The names of the physical operators of a streaming DataFrame's plan (as Spark explains it)."""
    return operators_in(spark.sparkContext._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "simple"))


def operators_in(text: str) -> list[str]:
    """The operators' names of a physical plan as Spark's explain writes it, one a line."""
    names = []
    for line in str(text).splitlines():
        if not line.strip() or line.startswith("=="):
            continue
        m = _NODE.match(line)
        if m:
            names.append(m.group(1))
    return names
