"""UC3 time-attribute aggregation: statistics per (sensor, hour of day) over sliding windows.

Default windows are 3 days sliding by 1 day, so each record contributes to 3 windows; early
(partial) results are emitted every ``emit_interval_s`` seconds in update mode.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from streamscale.pipelines.base import WINDOW_STATS, Pipeline, PipelineParams

DAY_S = 86_400.0


class UC3Params(PipelineParams):
    window_s: float = Field(3 * DAY_S, gt=0)
    slide_s: float = Field(DAY_S, gt=0)
    emit_interval_s: float = Field(5.0, gt=0)
    lateness_s: float = Field(DAY_S, ge=0)
    emit: Literal["update", "final"] = "update"  # final: one row per window when the watermark closes it

    @model_validator(mode="after")
    def _check(self):
        if self.slide_s > self.window_s:
            raise ValueError("slide_s must not exceed window_s")
        self.trigger_interval_s = self.emit_interval_s
        return self


class UC3(Pipeline):
    name = "uc3"
    params_model = UC3Params
    key_cols = ["identifier", "hourOfDay"]
    value_cols = ["identifier", "hourOfDay", *WINDOW_STATS]

    def describe(self) -> str:
        p = self.params
        return "\n".join(
            [
                "UC3 time-attribute aggregation (one shuffle: by sensor and hour of day)",
                "  Source: Kafka input topic -> decode ActivePowerRecord (malformed -> dead-letter topic)",
                "  --> filter malformed, event time = timestamp (ms)",
                "  --> selectKey (identifier, hour of day)   [key change]",
                f"  --> watermark: lateness {p.lateness_s:g} s",
                f"  --> groupByKey x sliding window {p.window_s:g} s every {p.slide_s:g} s "
                f"({p.window_s / p.slide_s:g} windows per record)   [repartition by key]",
                "  --> aggregate count, sum, mean, min, max, population variance",
                f"  --> to: output topic, early results every {p.emit_interval_s:g} s (update mode)",
            ]
        )

    def logical_plan(self):
        from streamscale.pipelines.plans import uc3_plan

        return uc3_plan(self.params.window_s, self.params.slide_s, self.params.lateness_s)
