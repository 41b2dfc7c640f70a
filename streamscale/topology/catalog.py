"""The logical plan of the two-aggregation example of Bejeck and Wang's *Optimizing Kafka Streams
Applications*, and the window helper plans share.

The plans of UC1-UC4 live with their pipelines (:mod:`streamscale.pipelines.plans`): topology knows
nothing of pipelines.
"""

from __future__ import annotations

from streamscale.topology.plan import LogicalPlan


def window_column(window_ms: int, slide_ms: int | None = None):
    def make():
        from pyspark.sql import functions as F

        if slide_ms:
            return F.window("event_time", f"{window_ms} milliseconds", f"{slide_ms} milliseconds")
        return F.window("event_time", f"{window_ms} milliseconds")

    return make


def blog_plan(window_s: float = 5.0) -> LogicalPlan:
    """selectKey(value[0:5]), then count per key and count per key and 5 s window."""

    def new_key(df):
        from pyspark.sql import functions as F

        return df.withColumn("newKey", F.substring("value", 1, 5))

    def event_time(df):
        from pyspark.sql import functions as F

        return df.withColumn("event_time", F.timestamp_millis(F.col("timestamp")))

    def count(df, keys, window):
        from pyspark.sql import functions as F

        if window is None:
            return df.groupBy(*keys).agg(F.count("*").alias("count"))
        agg = df.groupBy(window, *keys).agg(F.count("*").alias("count"))
        return agg.select(*keys, F.unix_millis(F.col("window.start")).alias("windowStartMs"), "count")

    plan = LogicalPlan("blog")
    rekeyed = (
        plan.stream("inputTopic", ["key"])
        .map_values(event_time, label="event time")
        .select_key(["newKey"], new_key, label="key = value[0:5]")
    )
    rekeyed.group_by_key().aggregate(count, "count-store", label="count").to("count-topic")
    (
        rekeyed.group_by_key()
        .windowed_by(window_column(int(window_s * 1000)), label=f"tumbling {window_s:g} s")
        .aggregate(count, "windowed-count-store", label="windowed count")
        .to("windowed-count")
    )
    return plan
