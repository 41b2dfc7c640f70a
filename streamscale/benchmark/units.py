"""Units of a spec's values as users read them: the load as records/s where the load type is a
rate, resources as whole cores or executors. Shared by the plots, the answer and the report."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Axes:
    """How a spec's load and resource values are shown: the load as records/s where it is a rate."""

    load_type: str = "sensors"
    resource_type: str = "cores"
    period_s: float = 1.0
    children: int = 4  # nested_groups: sensors = children ** levels

    @classmethod
    def of(cls, spec) -> Axes:
        bm, ex = spec.benchmark, spec.execution
        return cls(ex.load.type, ex.resources.type, bm.loadgen.period_s, int(bm.params.get("children", 4)))

    @property
    def load_label(self) -> str:
        if self.load_type == "window_s":
            return "window size (s)"
        if self.load_type == "nested_groups":
            return f"load (records/s; {self.children}^n sensors)"
        return "load (records/s)"

    @property
    def resource_label(self) -> str:
        return "Spark cores" if self.resource_type == "cores" else "Spark executors"

    def rate(self, load: float) -> float:
        """A load value in the unit of the load axis."""
        if self.load_type in ("window_s", "rate"):
            return float(load)
        sensors = self.children**load if self.load_type == "nested_groups" else load
        return sensors / self.period_s

    def resources(self, n) -> str:
        word = "core" if self.resource_type == "cores" else "executor"
        return f"{n} {word}{'' if n == 1 else 's'}"


def round_significant(x: float, digits: int) -> float:
    """``x`` rounded to ``digits`` significant digits (12,345 -> 12,300 with 3)."""
    if x == 0 or not math.isfinite(x):
        return x
    return round(x, digits - int(math.floor(math.log10(abs(x)))) - 1)


def approx(x: float) -> str:
    """A figure for a sentence: three significant digits, thousands separated."""
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    decimals = 3 - int(math.floor(math.log10(abs(x)))) - 1  # negative: rounds to tens, hundreds...
    r = round_significant(x, 3)
    return f"{r:,.0f}" if decimals <= 0 or r == int(r) else f"{r:,.{decimals}f}"
