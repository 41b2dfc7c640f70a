"""Compile a physical plan into PySpark DataFrame operations.

A repartition that feeds a single aggregation compiles to nothing: the aggregation's own Exchange
(hash partitioning by the key) is that repartition. A shared repartition (the optimizer's merged
one) compiles to an explicit ``repartition(n, key)`` whose partitioning every consuming aggregation
reuses, so Spark shuffles the re-keyed stream once instead of once per aggregation. It is persisted so that
Spark cannot prune it differently for each reader (which would make two different shuffles of it),
the Spark counterpart of one repartition topic read by several sub-topologies.
"""

from __future__ import annotations

import re

from streamscale.errors import ConfigError
from streamscale.topology.physical import PhysicalPlan

_EXCHANGE = re.compile(r"(?<![A-Za-z])(Exchange|ShuffleExchange)\s")
_PLAN_ID = re.compile(r"plan_id=(\d+)")


def compile_plan(phys: PhysicalPlan, spark, inputs: dict, shuffle_partitions: int | None = None) -> dict:
    """``inputs``: source topic -> DataFrame. Returns sink topic -> DataFrame."""
    from pyspark.sql import functions as F

    n_parts = shuffle_partitions or int(spark.conf.get("spark.sql.shuffle.partitions"))
    frames: dict[int, object] = {}
    outputs: dict[str, object] = {}
    for n in phys.nodes:
        parent = frames[n.parents[0].id] if n.parents else None
        if n.kind == "source":
            if n.topic not in inputs:
                raise ConfigError(f"no input DataFrame for source topic '{n.topic}'")
            df = inputs[n.topic]
        elif n.kind == "table":
            df = n.fn(spark)
        elif n.kind == "join":
            df = n.fn(parent, frames[n.parents[1].id])
        elif n.kind == "repartition":
            df = parent.repartition(n_parts, *[F.col(k) for k in n.keys]).persist() if n.explicit else parent
        elif n.kind in ("groupByKey", "windowedBy"):
            df = parent
        elif n.kind == "aggregate":
            df = n.fn(parent, n.keys, n.window() if n.window else None)
        elif n.kind == "to":
            df = parent
            outputs[n.topic] = df
        else:
            df = n.fn(parent) if n.fn else parent
        frames[n.id] = df
    return outputs


def combined(outputs: dict):
    """All sinks as one DataFrame (sink, key, value as JSON): one plan, so Spark can reuse a shared exchange."""
    from functools import reduce

    from pyspark.sql import functions as F

    parts = [
        df.select(F.lit(topic).alias("sink"), F.to_json(F.struct(*df.columns)).alias("value"))
        for topic, df in sorted(outputs.items())
    ]
    return reduce(lambda a, b: a.unionByName(b), parts)


def count_distinct_exchanges(plan: str) -> int:
    ids, plain = set(), 0
    skip_deeper_than = None
    for line in plan.splitlines():
        start = len(line) - len(line.lstrip(" "))
        if skip_deeper_than is not None:
            if start > skip_deeper_than:
                continue
            skip_deeper_than = None
        if "== Initial Plan ==" in line:
            skip_deeper_than = start
            continue
        m = _EXCHANGE.search(line)
        if m:
            pid = _PLAN_ID.search(line)
            if pid:
                ids.add(pid.group(1))
            else:
                plain += 1
    return len(ids) + plain
