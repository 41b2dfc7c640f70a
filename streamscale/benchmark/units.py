"""Units of a spec's values as users read them: the load as records/s where the load type is a
rate, resources as whole cores or executors. Shared by the plots, the answer and the report."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class Applied:
    """What a load value sets for one experiment: the pipeline's parameters, the generator's keys
    ("sensors") and its rate, records/s (``load_rate``: the load itself where it is a rate)."""

    params: dict
    sensors: int
    rate: float
    load_rate: float | None = None


@dataclass(frozen=True)
class LoadDimension:
    """A load type (Theodolite's load patcher): its unit, its rate, how a value applies, and which
    specs it fits. A new one subclasses this, sets ``type`` and registers (:func:`register_load`):
    the spec accepts it as ``execution.load.type`` from then on."""

    type: ClassVar[str] = ""
    suts: ClassVar[tuple[str, ...] | None] = None  # the task samples it applies to (None: any)
    for_jobs: ClassVar[bool] = False  # it loads a user's job (whose load is records/s)
    takes_records: ClassVar[bool] = False  # it loads described or replayed records (a rate)
    unit: ClassVar[str] = "records/s"  # of the load axis
    count_unit: ClassVar[str] = "sensors"  # of a load value as written in a spec
    label: ClassVar[str] = "load (records/s)"
    whole: ClassVar[bool] = False  # values are whole steps (UC4's levels)
    sets_window: ClassVar[bool] = False  # the value is the pipeline's window: no one window period
    # each value sets a pipeline parameter that the pipeline may refuse: every value is checked up front
    checked: ClassVar[bool] = False
    # a value is records/s of the job's input (load_of inverts rate): a drain probe can give a search its start
    probed: ClassVar[bool] = True
    period_s: float = 1.0

    def rate(self, load: float) -> float:
        """A load value in the unit of the load axis."""
        return load / self.period_s

    def load_of(self, rate: float) -> float:
        """The load value that sends ``rate`` records/s (where the type is ``probed``)."""
        return rate * self.period_s

    def amount(self, load: float) -> str:
        """A load value for a sentence."""
        return f"~{approx(self.rate(load))} records/s"

    def search_range(self, values: list[float]) -> tuple[float, float]:
        """The loads a bracket search may try: down to a 64th of the lowest value, up to the highest
        (or 64 times the only one)."""
        return values[0] / 64, values[-1] if len(values) > 1 else values[0] * 64

    @classmethod
    def refusal(cls, sut: str, values: list[float], described: bool, job: bool) -> str | None:
        """Why a spec of ``sut`` (``job``: a user's job; ``described``: its records described or
        replayed) cannot be loaded by this type at ``values``; None where it can."""
        if described and not cls.takes_records:
            return "described or replayed records are loaded by rate: set execution.load.type: rate"
        if cls.suts is not None and sut not in cls.suts:
            return f"load type '{cls.type}' applies to {' and '.join(cls.suts)} only"
        if job and not cls.for_jobs:
            return f"load type '{cls.type}' applies to the task samples only: your job's load is a rate"
        return cls.values_refusal(values)

    @classmethod
    def values_refusal(cls, values: list[float]) -> str | None:
        """Why these load values cannot be this type's (None: they can)."""
        return None

    def apply(self, load: float, params: dict, pipeline: type) -> Applied:
        """One experiment's settings at ``load`` for ``pipeline`` (its class)."""
        sensors = int(load)
        if pipeline.sized_by:
            params = {**params, pipeline.sized_by: sensors}
        return Applied(params, sensors, sensors / self.period_s)


LOADS: dict[str, type[LoadDimension]] = {}


def register_load(cls: type[LoadDimension]) -> type[LoadDimension]:
    """Register a load type under its ``type`` (a class decorator)."""
    if not cls.type:
        raise ValueError(f"{cls.__name__}: a load type needs its type, the word a spec names it by")
    LOADS[cls.type] = cls
    return cls


@register_load
@dataclass(frozen=True)
class SensorsLoad(LoadDimension):
    type: ClassVar[str] = "sensors"
    for_jobs: ClassVar[bool] = True


@register_load
@dataclass(frozen=True)
class RateLoad(LoadDimension):
    type: ClassVar[str] = "rate"
    for_jobs: ClassVar[bool] = True
    takes_records: ClassVar[bool] = True
    count_unit: ClassVar[str] = "records/s"
    described: bool = False  # a user's records: one key per record a second

    def rate(self, load: float) -> float:
        return float(load)

    def load_of(self, rate: float) -> float:
        return float(rate)

    def apply(self, load: float, params: dict, pipeline: type) -> Applied:
        sensors = int(round(load)) if self.described else max(1, round(load * self.period_s))
        return Applied(dict(params), sensors, float(load), float(load))


@register_load
@dataclass(frozen=True)
class NestedGroupsLoad(LoadDimension):
    type: ClassVar[str] = "nested_groups"
    suts: ClassVar[tuple[str, ...] | None] = ("uc4",)
    count_unit: ClassVar[str] = "levels"
    whole: ClassVar[bool] = True
    probed: ClassVar[bool] = False  # a level is no rate: the search starts at the spec's first value
    children: int = 4  # sensors = children ** levels

    @property
    def label(self) -> str:  # type: ignore[override]
        return f"load (records/s; {self.children}^n sensors)"

    def rate(self, load: float) -> float:
        return self.children**load / self.period_s

    def search_range(self, values: list[float]) -> tuple[float, float]:
        return 1.0, values[-1] if len(values) > 1 else 10.0

    @classmethod
    def values_refusal(cls, values: list[float]) -> str | None:
        if any(v != int(v) or v > 10 for v in values):
            return "nested_groups must be whole numbers up to 10"
        return None

    def apply(self, load: float, params: dict, pipeline: type) -> Applied:
        children = int(params.get("children", self.children))
        params = {**params, "levels": int(load), "children": children}
        sensors = children ** int(load)
        return Applied(params, sensors, sensors / self.period_s)


@register_load
@dataclass(frozen=True)
class WindowLoad(LoadDimension):
    type: ClassVar[str] = "window_s"
    suts: ClassVar[tuple[str, ...] | None] = ("uc3",)
    unit: ClassVar[str] = "s of window"
    count_unit: ClassVar[str] = "s windows"
    label: ClassVar[str] = "window size (s)"
    sets_window: ClassVar[bool] = True
    checked: ClassVar[bool] = True
    probed: ClassVar[bool] = False  # a window size is no rate
    sensors: int = 1000  # fixed: the window grows, the records/s do not

    def rate(self, load: float) -> float:
        return float(load)

    def amount(self, load: float) -> str:
        return f"~{approx(load)} s windows"

    def apply(self, load: float, params: dict, pipeline: type) -> Applied:
        return Applied({**params, "window_s": float(load)}, self.sensors, self.sensors / self.period_s)


def load_dimension(
    load_type: str, period_s: float = 1.0, children: int = 4, sensors: int = 1000, described: bool = False
) -> LoadDimension:
    """The load type ``load_type`` with its spec's figures."""
    cls = LOADS[load_type]
    given = {"period_s": period_s, "children": children, "sensors": sensors, "described": described}
    return cls(**{f.name: given[f.name] for f in dataclasses.fields(cls)})


@dataclass(frozen=True)
class Placed:
    """Where one experiment's Spark application runs: its master, session settings and, on a local
    master confined to its cores, the CPUs it may use."""

    master: str
    spark_conf: dict
    cpus: int | None = None


@dataclass(frozen=True)
class ResourceDimension:
    """A resource type (Theodolite's resource patcher): its word and how an amount applies."""

    type: ClassVar[str] = "cores"
    word: ClassVar[str] = "core"
    label: ClassVar[str] = "Spark cores"
    cpus_per_amount: ClassVar[bool] = True  # an amount is that many CPUs (Spark's own use is worth saying)
    needs_master: ClassVar[bool] = False  # a cluster's master must be given (execution.master)
    master: str | None = None
    executor_cores: int = 1
    executor_memory: str = "1g"
    confine: bool = True

    def amount(self, n) -> str:
        return f"{n} {self.word}{'' if n == 1 else 's'}"

    def cluster_conf(self, executors: int, cores: int) -> dict:
        return {
            "spark.executor.instances": executors,
            "spark.executor.cores": cores,
            "spark.cores.max": executors * cores,
            "spark.executor.memory": self.executor_memory,
            "spark.dynamicAllocation.enabled": "false",
        }

    def apply(self, n: int) -> Placed:
        raise NotImplementedError


RESOURCES: dict[str, type[ResourceDimension]] = {}


def register_resource(cls: type[ResourceDimension]) -> type[ResourceDimension]:
    """Register a resource type under its ``type`` (a class decorator): the spec accepts it as
    ``execution.resources.type`` from then on."""
    RESOURCES[cls.type] = cls
    return cls


@register_resource
@dataclass(frozen=True)
class Cores(ResourceDimension):
    def apply(self, n: int) -> Placed:
        """A local master of ``n`` task slots (confined to ``n`` CPUs), or ``n`` cores of the given
        local master (the spec refuses cores on a cluster master: its resource is executors)."""
        if not self.master:
            return Placed(f"local[{n}]", {}, n if self.confine else None)
        confined = self.master.startswith("local") and self.confine
        return Placed(self.master, self.cluster_conf(1, n), n if confined else None)


@register_resource
@dataclass(frozen=True)
class Executors(ResourceDimension):
    type: ClassVar[str] = "executors"
    needs_master: ClassVar[bool] = True
    word: ClassVar[str] = "executor"
    label: ClassVar[str] = "Spark executors"
    cpus_per_amount: ClassVar[bool] = False

    def apply(self, n: int) -> Placed:
        return Placed(self.master or "local[*]", self.cluster_conf(n, self.executor_cores))


@dataclass(frozen=True)
class Axes:
    """How a plan's load and resource values are shown: the load as records/s where it is a rate.
    A plan gives its own (:attr:`streamscale.benchmark.plan.Plan.axes`); :meth:`of_types` makes one
    from the words of a spec, for what has no plan."""

    load: LoadDimension = SensorsLoad()
    resource: ResourceDimension = Cores()

    @classmethod
    def of_types(
        cls, load_type: str = "sensors", resource_type: str = "cores", period_s: float = 1.0, children: int = 4
    ) -> Axes:
        return cls(load_dimension(load_type, period_s, children), RESOURCES[resource_type]())

    @property
    def load_label(self) -> str:
        return self.load.label

    @property
    def resource_label(self) -> str:
        return self.resource.label

    @property
    def unit(self) -> str:
        return self.load.unit

    def rate(self, load: float) -> float:
        """A load value in the unit of the load axis."""
        return self.load.rate(load)

    def amount(self, load: float) -> str:
        return self.load.amount(load)

    def resources(self, n) -> str:
        return self.resource.amount(n)


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
