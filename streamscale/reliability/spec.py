"""Reliability specs (YAML): which semantics, which faults, how many messages of which size."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from streamscale.broker.connection import KafkaSection
from streamscale.specs import StrictModel, read_yaml, validate

SEMANTICS = ("at-most-once", "at-least-once", "exactly-once")
Semantics = Literal["at-most-once", "at-least-once", "exactly-once"]


_Model = StrictModel


class NoFault(_Model):
    kind: Literal["none"] = "none"

    def label(self) -> str:
        return "none"


class Cut(_Model):
    at_s: float = Field(ge=0, description="seconds after sending starts")
    for_s: float = Field(gt=0)


class ProxyFault(_Model):
    kind: Literal["proxy"]
    delay_ms: float = Field(0, ge=0, le=60_000)
    jitter_ms: float = Field(0, ge=0)
    reset_pct: float = Field(0, ge=0, le=100, description="% of forwarded chunks that reset the connection")
    drop_pct: float = Field(0, ge=0, le=100, description="% of chunks that black-hole the connection")
    cut: Cut | None = None

    @model_validator(mode="after")
    def _jitter(self):
        if self.jitter_ms > self.delay_ms:
            raise ValueError("jitter_ms must not exceed delay_ms")
        return self

    def label(self) -> str:
        parts = [
            f"{k}={v:g}"
            for k, v in (
                ("delay_ms", self.delay_ms),
                ("jitter_ms", self.jitter_ms),
                ("reset_pct", self.reset_pct),
                ("drop_pct", self.drop_pct),
            )
            if v
        ]
        if self.cut:
            parts.append(f"cut@{self.cut.at_s:g}s+{self.cut.for_s:g}s")
        return "proxy " + (", ".join(parts) or "passthrough")


class BrokerRestart(_Model):
    kind: Literal["broker-restart"]
    at_s: float = Field(ge=0)

    def label(self) -> str:
        return f"broker restart@{self.at_s:g}s"


class NetemFault(_Model):
    kind: Literal["netem"]
    delay_ms: float = Field(0, ge=0)
    jitter_ms: float = Field(0, ge=0)
    loss_pct: float = Field(0, ge=0, le=100)

    def label(self) -> str:
        return f"netem delay={self.delay_ms:g}ms loss={self.loss_pct:g}%"


Fault = Annotated[NoFault | ProxyFault | BrokerRestart | NetemFault, Field(discriminator="kind")]


class Sweep(_Model):
    """Expands into one fault per value, like the paper's x axes (delay 1-300 ms, loss 1-10 %)."""

    kind: Literal["proxy", "netem"] = "proxy"
    delay_ms: list[float] = []
    reset_pct: list[float] = []
    loss_pct: list[float] = []

    @model_validator(mode="after")
    def _fits_kind(self):
        if self.kind == "proxy" and self.loss_pct:
            raise ValueError("loss_pct is packet loss and needs kind: netem; the proxy sweeps reset_pct")
        if self.kind == "netem" and self.reset_pct:
            raise ValueError("reset_pct is a proxy fault; netem sweeps loss_pct")
        return self

    def faults(self) -> list:
        if self.kind == "proxy":
            return [ProxyFault(kind="proxy", delay_ms=d) for d in self.delay_ms] + [
                ProxyFault(kind="proxy", reset_pct=r) for r in self.reset_pct
            ]
        return [NetemFault(kind="netem", delay_ms=d) for d in self.delay_ms] + [
            NetemFault(kind="netem", loss_pct=loss) for loss in self.loss_pct
        ]


class ReliabilitySpec(_Model):
    name: str = Field(min_length=1)
    messages: int = Field(ge=1, le=100_000_000)
    sizes: list[int] = Field([100], min_length=1, description="message value sizes in bytes")
    partitions: int = Field(1, ge=1)
    rate: float = Field(0, ge=0, description="messages/s; 0 = as fast as possible")
    repetitions: int = Field(1, ge=1)
    semantics: list[Semantics] = Field(list(SEMANTICS), min_length=1)
    faults: list[Fault] = Field(default_factory=lambda: [NoFault()])
    sweep: Sweep | None = None
    transaction_messages: int = Field(10_000, ge=1, description="messages per transaction (exactly-once)")
    receive_timeout_s: float = Field(60, gt=0, description="longest wait for the receiver to drain")
    send_timeout_s: float = Field(300, gt=0, description="producer message.timeout.ms, in seconds")
    kafka: KafkaSection = Field(default_factory=KafkaSection)

    @model_validator(mode="after")
    def _sizes(self):
        if any(s < 16 for s in self.sizes):
            raise ValueError("every size must be at least 16 bytes (the value carries the message id)")
        return self

    def all_faults(self) -> list:
        return list(self.faults) + (self.sweep.faults() if self.sweep else [])


def parse_spec(data, source: str = "spec") -> ReliabilitySpec:
    return validate(ReliabilitySpec, data, source, "name, messages, semantics, faults")


def load_spec(path: str | Path) -> ReliabilitySpec:
    return parse_spec(read_yaml(path), str(path))
