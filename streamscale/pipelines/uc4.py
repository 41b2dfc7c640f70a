"""UC4 hierarchical aggregation (simplified, no feedback loop, as in the paper's evaluation).

A sensor registry of nested groups (``levels`` levels, ``children`` per group, so children^levels
sensors; or ``sensors`` of them, the last groups partly filled) is joined to the stream
(broadcast, no shuffle); each reading contributes to every
ancestor group; per group and tumbling window: count, sum, mean, min, max, population variance.
With ``emit: final`` (default) each group and window produces one output record, when the
watermark closes the window.
"""

from __future__ import annotations

from pydantic import Field

from streamscale.loadgen.feed import Feed
from streamscale.loadgen.registry import SensorRegistry
from streamscale.pipelines.base import WINDOW_STATS, Pipeline, TumblingWindowParams


class UC4Params(TumblingWindowParams):
    levels: int = Field(2, ge=1, le=10)
    children: int = Field(4, ge=1)
    sensors: int | None = Field(None, ge=1, le=10_000_000)  # any number: the last groups partly filled
    registry_path: str | None = None


class UC4(Pipeline):
    name = "uc4"
    params_model = UC4Params
    sized_by = "sensors"  # a registry of that many: groups of four, the last partly filled
    key_cols = ["groupId"]
    value_cols = ["groupId", *WINDOW_STATS]

    def __init__(self, params=None):
        super().__init__(params)
        p = self.params
        self.registry = (
            SensorRegistry.load(p.registry_path)
            if p.registry_path
            else SensorRegistry.build(p.levels, p.children, p.sensors)
        )

    def feeds(self) -> tuple[Feed, ...]:
        """Readings of its registry's sensors: the rate sets how often each sends."""
        return (Feed(keys=self.registry.num_sensors),)

    def describe(self) -> str:
        p, r = self.params, self.registry
        return "\n".join(
            [
                f"UC4 hierarchical aggregation ({r.num_sensors:,} sensors in {len(r.groups()):,} groups, "
                f"up to {r.levels} levels; one shuffle: by group)",
                "  Source: Kafka input topic -> decode ActivePowerRecord (malformed -> dead-letter topic)",
                "  --> filter malformed, event time = timestamp (ms)",
                "  --> join sensor registry (broadcast): one row per ancestor group   [flatMap, key change]",
                "      (readings of unregistered sensors counted as such, not aggregated)",
                f"  --> watermark: lateness {p.lateness_s:g} s (later records dropped and counted)",
                f"  --> groupByKey(group) x tumbling window {p.window_s:g} s   [repartition by key]",
                "  --> aggregate count, sum, mean, min, max, population variance",
                "  --> to: output topic, key = group "
                + ("(one record per group and window)" if p.emit == "final" else "(updates)"),
            ]
        )

    def registry_frame(self, spark):
        from pyspark.sql import functions as F

        rows = [(s, g, i == 0) for s, groups in self.registry.ancestors().items() for i, g in enumerate(groups)]
        return F.broadcast(spark.createDataFrame(rows, "identifier STRING, groupId STRING, firstAncestor BOOLEAN"))

    def logical_plan(self):
        from streamscale.pipelines.plans import uc4_plan

        return uc4_plan(self.registry_frame, self.params.window_s, self.params.lateness_s)
