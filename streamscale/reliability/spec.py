"""Reliability specs (YAML): which semantics, which faults, how many messages of which size."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, model_validator

from streamscale.broker.connection import KafkaSection
from streamscale.specs import StrictModel, read_yaml, validate

SEMANTICS = ("at-most-once", "at-least-once", "exactly-once")
Semantics = Literal["at-most-once", "at-least-once", "exactly-once"]


class NoFault(StrictModel):
    kind: Literal["none"] = "none"

    def label(self) -> str:
        return "none"


class Cut(StrictModel):
    at_s: float = Field(ge=0, description="seconds after sending starts")
    for_s: float = Field(gt=0)


class ProxyFault(StrictModel):
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


class BrokerRestart(StrictModel):
    kind: Literal["broker-restart"]
    at_s: float = Field(ge=0)

    def label(self) -> str:
        return f"broker restart@{self.at_s:g}s"


class NetemFault(StrictModel):
    kind: Literal["netem"]
    delay_ms: float = Field(0, ge=0)
    jitter_ms: float = Field(0, ge=0)
    loss_pct: float = Field(0, ge=0, le=100)

    def label(self) -> str:
        return f"netem delay={self.delay_ms:g}ms loss={self.loss_pct:g}%"


class ClusterStep(StrictModel):
    """One thing done to the cluster's nodes at a time of the trial (and undone ``for_s`` later)."""

    at_s: float = Field(ge=0, description="seconds after sending starts")
    do: Literal["kill", "stop", "start", "restart", "rolling-restart", "isolate", "heal"] = Field(
        description="kill: SIGKILL; stop: a clean stop (SIGTERM); start: up again on its storage; restart: a "
        "clean stop, then up; rolling-restart: every node in turn, each once its partitions are in sync again; "
        "isolate: cut off from the other nodes and the clients (network namespaces); heal: joined again"
    )
    target: Literal["leader", "followers", "controller", "down", "isolated", "all"] | int = Field(
        "leader",
        description="leader: of the trial topic's partition 0 (at that moment); followers: its other replicas; "
        "controller: the active controller; down, isolated: the nodes earlier steps took down or cut off; a node id",
    )
    for_s: float | None = Field(
        None,
        gt=0,
        description="kill, stop, isolate: start (or heal) the same nodes again this many seconds later; "
        "null: they stay down until the trial's sending ends",
    )

    @model_validator(mode="after")
    def _fits(self):
        if self.for_s is not None and self.do not in ("kill", "stop", "isolate"):
            raise ValueError(f"for_s applies to kill, stop and isolate, not to {self.do}")
        if self.do in ("start", "heal") and self.target in ("leader", "followers", "controller"):
            raise ValueError(f"{self.do} acts on nodes that are down or cut off: target down, isolated, all or an id")
        if self.do == "rolling-restart" and "target" not in self.model_fields_set:
            self.target = "all"
        if self.do == "rolling-restart" and self.target != "all":
            raise ValueError("a rolling restart restarts every node: target all")
        return self

    def label(self) -> str:
        return f"{self.do} {self.target}@{self.at_s:g}s" + (f"+{self.for_s:g}s" if self.for_s else "")


class ClusterFault(StrictModel):
    """Faults of an embedded cluster (``cluster:``): steps at times of the trial."""

    kind: Literal["cluster"]
    name: str | None = None
    steps: list[ClusterStep] = Field(min_length=1)

    def label(self) -> str:
        return self.name or ", ".join(s.label() for s in self.steps)

    def isolates(self) -> bool:
        return any(s.do in ("isolate", "heal") for s in self.steps)


Fault = Annotated[NoFault | ProxyFault | BrokerRestart | NetemFault | ClusterFault, Field(discriminator="kind")]


class BrokerSettings(StrictModel):
    security: Literal["plaintext", "sasl_ssl"] = Field(
        "plaintext",
        description="the embedded Kafka's listeners: sasl_ssl is TLS (a CA made at start), SCRAM-SHA-512 "
        "users and ACLs, every client of a trial authenticated",
    )


class ClusterSpec(StrictModel):
    brokers: int = Field(3, ge=1, le=9, description="nodes of the embedded cluster, each broker and controller")
    isolation: bool | None = Field(
        None,
        description="nodes in network namespaces of their own, so that one can be cut off; null: when a fault isolates",
    )


class TopicSettings(StrictModel):
    """The trial topic's replication; every value of a list is an axis of the campaign."""

    replication_factor: int | None = Field(None, ge=1, description="null: the cluster's nodes, up to 3")
    min_insync_replicas: list[int] = Field([1], min_length=1)
    unclean_leader_election: list[bool] = Field([False], min_length=1)


class ProducerSettings(StrictModel):
    """A producer's delivery settings (``producers:`` instead of ``semantics:``)."""

    name: str | None = None
    acks: Literal[0, 1, "all"] = "all"
    idempotence: bool = False
    transactions: bool = False

    @model_validator(mode="after")
    def _fits(self):
        if self.transactions and not self.idempotence:
            raise ValueError("transactions need idempotence: true")
        if self.idempotence and self.acks != "all":
            raise ValueError("an idempotent producer needs acks: all")
        return self

    def label(self) -> str:
        if self.name:
            return self.name
        parts = [f"acks={self.acks}"] + (["idempotent"] if self.idempotence else [])
        return " ".join(parts + (["transactions"] if self.transactions else []))


class Sweep(StrictModel):
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


class ReliabilitySpec(StrictModel):
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
    producers: list[ProducerSettings] | None = Field(
        None, description="delivery settings to test; null: those of semantics"
    )
    cluster: ClusterSpec | None = Field(None, description="an embedded cluster of several brokers (cluster faults)")
    broker: BrokerSettings = Field(default_factory=BrokerSettings)
    topic: TopicSettings = Field(default_factory=TopicSettings)
    receive_timeout_s: float = Field(60, gt=0, description="longest wait for the receiver to drain")
    send_timeout_s: float = Field(300, gt=0, description="producer message.timeout.ms, in seconds")
    kafka: KafkaSection = Field(default_factory=KafkaSection)

    @model_validator(mode="after")
    def _sizes(self):
        if any(s < 16 for s in self.sizes):
            raise ValueError("every size must be at least 16 bytes (the value carries the message id)")
        if self.producers is not None and "semantics" in self.model_fields_set:
            raise ValueError("give producers (delivery settings) or semantics (their names), not both")
        clustered = [f for f in self.all_faults() if isinstance(f, ClusterFault)]
        if clustered and self.cluster is None:
            raise ValueError("faults of kind cluster need an embedded cluster: add cluster: {brokers: 3}")
        single = (ProxyFault, NetemFault, BrokerRestart)
        if self.cluster is not None and any(isinstance(f, single) for f in self.all_faults()):
            raise ValueError(
                "with cluster:, faults are of kind cluster (or none); proxy, netem and broker-restart "
                "faults need the single embedded broker"
            )
        ids = [s.target for f in clustered for s in f.steps if isinstance(s.target, int)]
        if self.cluster is not None and any(not 1 <= i <= self.cluster.brokers for i in ids):
            raise ValueError(f"a step names a node id outside 1..{self.cluster.brokers} (the cluster's brokers)")
        if self.cluster is not None and self.cluster.isolation is False and any(f.isolates() for f in clustered):
            raise ValueError("a fault isolates a node: cluster.isolation must not be false")
        rf = self.replication_factor()
        if self.cluster is not None and rf > self.cluster.brokers:
            raise ValueError(f"topic.replication_factor {rf} exceeds the cluster's {self.cluster.brokers} brokers")
        if any(m > rf for m in self.topic.min_insync_replicas):
            raise ValueError(f"topic.min_insync_replicas cannot exceed the replication factor ({rf})")
        return self

    def replication_factor(self) -> int:
        if self.topic.replication_factor is not None:
            return self.topic.replication_factor
        return min(3, self.cluster.brokers) if self.cluster is not None else 1

    def isolation(self) -> bool:
        """Whether the cluster's nodes run in network namespaces of their own."""
        if self.cluster is None:
            return False
        if self.cluster.isolation is not None:
            return self.cluster.isolation
        return any(isinstance(f, ClusterFault) and f.isolates() for f in self.all_faults())

    def producer_settings(self) -> list[ProducerSettings]:
        """The producers to test: ``producers``, else one per semantics."""
        if self.producers:
            return list(self.producers)
        return [SEMANTICS_PRODUCERS[s] for s in self.semantics]

    def all_faults(self) -> list:
        return list(self.faults) + (self.sweep.faults() if self.sweep else [])


SEMANTICS_PRODUCERS = {
    "at-most-once": ProducerSettings(name="at-most-once", acks=0),
    "at-least-once": ProducerSettings(name="at-least-once", acks="all"),
    "exactly-once": ProducerSettings(name="exactly-once", acks="all", idempotence=True, transactions=True),
}


def parse_spec(data, source: str = "spec") -> ReliabilitySpec:
    return validate(ReliabilitySpec, data, source, "name, messages, semantics, faults")


def load_spec(path: str | Path) -> ReliabilitySpec:
    return parse_spec(read_yaml(path), str(path))
