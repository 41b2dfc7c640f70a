"""UC2 downsampling: per-sensor statistics over tumbling event-time windows.

Records whose window has closed (window end <= the batch's watermark: max event time seen so far
- lateness) are discarded by Spark's watermark and counted exactly on the executors
(streamscale.pipelines.accounting): the dropped-records SLO.
"""

from __future__ import annotations

from streamscale.pipelines.base import WINDOW_STATS, Pipeline, TumblingWindowParams


class UC2Params(TumblingWindowParams):
    """UC2's parameters are its tumbling window's."""


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
