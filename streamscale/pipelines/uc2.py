"""UC2 downsampling: per-sensor statistics over tumbling event-time windows.

Records whose window has closed (window end <= the batch's watermark: max event time seen so far
- lateness) are discarded by Spark's watermark and counted exactly on the executors
(streamscale.pipelines.accounting): the dropped-records SLO.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from streamscale.pipelines.base import WINDOW_STATS, Pipeline, PipelineParams


class UC2Params(PipelineParams):
    window_s: float = Field(60.0, gt=0)
    lateness_s: float = Field(5.0, ge=0)
    # final (Henning and Hasselbring, §5.2: UC2 aggregates over tumbling windows and, unlike UC3, emits no early
    # results): one row per window when the watermark closes it. update: every changed window row
    # of every micro-batch, with its `final` flag (a second pass over each batch's rows).
    emit: Literal["update", "final"] = "final"


class UC2(Pipeline):
    name = "uc2"
    params_model = UC2Params
    key_cols = ["identifier"]
    value_cols = ["identifier", *WINDOW_STATS]

    def describe(self) -> str:
        p = self.params
        return "\n".join(
            [
                "UC2 downsampling (one shuffle: by sensor)",
                "  Source: Kafka input topic -> decode ActivePowerRecord (malformed -> dead-letter topic)",
                "  --> filter malformed, event time = timestamp (ms)",
                f"  --> watermark: lateness {p.lateness_s:g} s (later records dropped and counted)",
                f"  --> groupByKey(identifier) x tumbling window {p.window_s:g} s   [repartition by key]",
                "  --> aggregate count, sum, mean, min, max, population variance",
                "  --> to: output topic, key = identifier, value = JSON "
                + ("(one row per window when it closes)" if p.emit == "final" else "(update mode)"),
            ]
        )

    def logical_plan(self):
        from streamscale.pipelines.plans import uc2_plan

        return uc2_plan(self.params.window_s, self.params.lateness_s)
