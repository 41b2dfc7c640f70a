"""Declarative benchmark and execution specs (YAML), validated with clear errors naming the field."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from streamscale.broker.connection import KafkaSection
from streamscale.errors import ConfigError
from streamscale.specs import StrictModel, read_yaml, validate

_Model = StrictModel


class LoadGenSpec(_Model):
    workers: int = Field(2, ge=1)
    period_s: float = Field(1.0, gt=0)
    encoding: Literal["json", "csv"] = "json"
    distribution: str = "uniform:0,100"


class TopicSpec(_Model):
    partitions: int = Field(4, ge=1)


class BenchmarkSpec(_Model):
    sut: Literal["uc1", "uc2", "uc3", "uc4"]
    params: dict = Field(default_factory=dict)
    loadgen: LoadGenSpec = Field(default_factory=LoadGenSpec)
    topics: TopicSpec = Field(default_factory=TopicSpec)

    @model_validator(mode="after")
    def _params_valid(self):
        from streamscale.pipelines import make_pipeline

        try:
            make_pipeline(self.sut, self.params)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return self


class LoadSpec(_Model):
    type: Literal["sensors", "nested_groups", "window_s"] = "sensors"
    values: list[float] = Field(min_length=1)
    sensors: int = Field(1000, ge=1, description="fixed number of sensors when the load is window_s")

    @field_validator("values")
    @classmethod
    def _positive_sorted(cls, v):
        if any(x <= 0 for x in v):
            raise ValueError("load values must be positive")
        if len(set(v)) != len(v):
            raise ValueError("load values must be distinct")
        return sorted(v)


class ResourceSpec(_Model):
    type: Literal["cores", "executors"] = "cores"
    values: list[int] = Field(min_length=1)
    confine: bool = Field(
        True,
        description="cores on a local master: the Spark application runs on that many "
        "CPUs (Linux CPU affinity), not only that many task slots",
    )

    @field_validator("values")
    @classmethod
    def _positive_sorted(cls, v):
        if any(x < 1 for x in v):
            raise ValueError("resource values must be at least 1")
        if len(set(v)) != len(v):
            raise ValueError("resource values must be distinct")
        return sorted(v)


class SLOSpec(_Model):
    lag_trend_threshold: float = Field(0.01, ge=0, description="max lag slope as a fraction of records/s")
    dropped_records_threshold: float | None = Field(0.01, ge=0, description="windowed UCs: max dropped fraction")
    latency_p95_ms: float | None = Field(
        None,
        gt=0,
        description="windowed UCs: max 95th percentile of the output "
        "latency (event time to output) after the warm-up; reported always",
    )


class StrategySpec(_Model):
    name: Literal["full", "linear", "binary"] = "linear"
    lower_bound: bool = True


class ExecutionSpec(_Model):
    load: LoadSpec
    resources: ResourceSpec
    master: str | None = Field(None, description="Spark master for resource type 'executors'")
    executor_cores: int = Field(1, ge=1)
    executor_memory: str = "1g"
    slos: SLOSpec = Field(default_factory=SLOSpec)
    duration_s: float = Field(60.0, gt=0)
    warmup_s: float = Field(20.0, ge=0)
    repetitions: int = Field(1, ge=1)
    extra_repetitions: int = Field(
        2,
        ge=0,
        le=10,
        description="runs added per load and resources when a lag trend's 95 % interval straddles the limit",
    )
    stop_at_majority: bool = Field(
        True,
        description="stop a point's repetitions once a majority agrees (seed 002); false runs all of "
        "them, to see whether they agree",
    )
    strategy: StrategySpec = Field(default_factory=StrategySpec)
    metric: Literal["demand", "capacity"] = "demand"
    reuse_spark: bool = Field(
        False,
        description="keep an experiment's Spark session (its JVM context and Python workers) for the "
        "next experiment with the same resources instead of starting each afresh: saves the workers' "
        "start (~10 s an experiment on a small machine) but the experiments no longer start alike",
    )
    bootstrap_servers: str | None = None

    @model_validator(mode="after")
    def _check(self):
        if self.warmup_s >= self.duration_s:
            raise ValueError(f"warmup_s ({self.warmup_s:g}) must be shorter than duration_s ({self.duration_s:g})")
        if self.resources.type == "executors" and not self.master:
            raise ValueError("resource type 'executors' needs a master (spark://host:port or k8s://...)")
        if self.master and not self.master.startswith(("spark://", "k8s://", "local")):
            raise ValueError(f"master '{self.master}': use local[k], spark://host:port or k8s://https://host:port")
        return self


class Spec(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    benchmark: BenchmarkSpec
    execution: ExecutionSpec
    kafka: KafkaSection = Field(default_factory=KafkaSection)

    def kafka_section(self) -> dict:
        """The spec's Kafka connection section (execution.bootstrap_servers is the older place)."""
        section = self.kafka.model_dump()
        section["bootstrap_servers"] = self.kafka.bootstrap_servers or self.execution.bootstrap_servers
        return section

    @model_validator(mode="after")
    def _load_type_fits(self):
        lt, sut = self.execution.load.type, self.benchmark.sut
        if lt == "nested_groups" and sut != "uc4":
            raise ValueError("load type 'nested_groups' applies to uc4 only")
        if lt == "window_s" and sut != "uc3":
            raise ValueError("load type 'window_s' applies to uc3 only")
        if sut == "uc4" and lt == "sensors":
            raise ValueError("uc4's load is set by 'nested_groups' (4^n sensors), not 'sensors'")
        if lt == "nested_groups" and any(v != int(v) or v > 10 for v in self.execution.load.values):
            raise ValueError("nested_groups must be whole numbers up to 10")
        if self.execution.slos.latency_p95_ms is not None and sut == "uc1":
            raise ValueError("slos.latency_p95_ms: UC1 writes no windows, so it has no output latency to judge")
        return self


def load_spec(path: str | Path) -> Spec:
    return parse_spec(read_yaml(path), str(path))


def parse_spec(data, source: str = "spec") -> Spec:
    return validate(Spec, data, source, "name, benchmark and execution")
