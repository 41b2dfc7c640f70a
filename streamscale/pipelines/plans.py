"""Logical plans of UC1-UC4 (Bejeck and Wang's DSL over the pipelines' DataFrame steps)."""

from __future__ import annotations

from streamscale.topology.catalog import blog_plan, window_column
from streamscale.topology.plan import LogicalPlan


def _stats(df, keys, window):
    from streamscale.pipelines.base import windowed_stats

    return windowed_stats(df, window, keys)


def _watermark(lateness_s: float, window_s: float | None = None, slide_s: float | None = None):
    """Event time and watermark; with a window, late readings are counted here (per reading)."""

    def fn(df):
        from streamscale.pipelines.accounting import observe_late
        from streamscale.pipelines.base import watermarked

        df = watermarked(df, lateness_s)
        if window_s is None:
            return df
        return observe_late(df, int(window_s * 1000), int(slide_s * 1000) if slide_s else None)

    return fn


def _registry_join(window_s: float):
    """Left join: an unregistered reading is counted as such (never as late) and then dropped."""

    def fn(stream, registry):
        from pyspark.sql import functions as F

        from streamscale.pipelines.accounting import observe_late

        joined = stream.join(registry, "identifier", "left")
        counted = observe_late(
            joined, int(window_s * 1000), registered=F.col("groupId").isNotNull(), first=F.col("firstAncestor")
        )
        return counted.where(F.col("groupId").isNotNull()).drop("firstAncestor")

    return fn


def uc1_plan() -> LogicalPlan:
    plan = LogicalPlan("uc1")
    plan.stream("input", ["identifier"]).map_values(lambda df: df, label="decode ActivePowerRecord").to("output")
    return plan


def uc2_plan(window_s: float = 60.0, lateness_s: float = 5.0) -> LogicalPlan:
    plan = LogicalPlan("uc2")
    (
        plan.stream("input", ["identifier"])
        .map_values(_watermark(lateness_s, window_s), label=f"event time, watermark {lateness_s:g} s")
        .group_by_key()
        .windowed_by(window_column(int(window_s * 1000)), label=f"tumbling {window_s:g} s")
        .aggregate(_stats, "uc2-stats-store", label="count/sum/mean/min/max/variance")
        .to("output")
    )
    return plan


def uc3_plan(window_s: float = 86_400.0, slide_s: float = 3600.0, lateness_s: float = 5.0) -> LogicalPlan:
    def hour_of_day(df):
        from pyspark.sql import functions as F

        return df.withColumn("hourOfDay", F.hour("event_time"))

    plan = LogicalPlan("uc3")
    (
        plan.stream("input", ["identifier"])
        .map_values(_watermark(lateness_s, window_s, slide_s), label=f"event time, watermark {lateness_s:g} s")
        .select_key(["identifier", "hourOfDay"], hour_of_day, label="key = (sensor, hour of day)")
        .group_by_key()
        .windowed_by(
            window_column(int(window_s * 1000), int(slide_s * 1000)), label=f"sliding {window_s:g} s / {slide_s:g} s"
        )
        .aggregate(_stats, "uc3-stats-store", label="count/sum/mean/min/max/variance")
        .to("output")
    )
    return plan


def uc4_plan(registry_frame, window_s: float = 60.0, lateness_s: float = 5.0) -> LogicalPlan:
    """``registry_frame(spark)``: (identifier, groupId, firstAncestor) rows, one per ancestor group,
    firstAncestor true on one row per sensor."""
    plan = LogicalPlan("uc4")
    registry = plan.table("configuration", ["identifier"], registry_frame)
    (
        plan.stream("input", ["identifier"])
        .map_values(_watermark(lateness_s), label=f"event time, watermark {lateness_s:g} s")
        .join(registry, _registry_join(window_s), label="sensor registry (broadcast)")
        .select_key(["groupId"], label="key = group (one row per ancestor)")
        .group_by_key()
        .windowed_by(window_column(int(window_s * 1000)), label=f"tumbling {window_s:g} s")
        .aggregate(_stats, "uc4-stats-store", label="count/sum/mean/min/max/variance")
        .to("output")
    )
    return plan


def plan_for(name: str, **params) -> LogicalPlan:
    """The plan of a use case, with the pipeline's parameters (defaults as in the pipelines)."""
    if name == "blog":
        return blog_plan()
    from streamscale.pipelines import make_pipeline

    return make_pipeline(name, params).logical_plan()
