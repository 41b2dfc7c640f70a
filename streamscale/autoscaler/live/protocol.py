"""Configuration shared by monitor, controller and consumers, and the messages they exchange."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from streamscale.autoscaler.binpacking import known_algorithm
from streamscale.autoscaler.latency import CAPACITY_RATIO
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ConfigError

CONFIG_FILE = "config.json"


class LiveConfig(BaseModel):
    """Everything the processes of one autoscaled group agree on (written to ``<state_dir>/config.json``)."""

    bootstrap: str
    kafka_properties: dict[str, str] = Field(
        default_factory=dict,
        description="the user's Kafka client properties (-X, --kafka-config): every process's clients",
    )
    topics: list[str] = Field(min_length=1)
    group: str = "streamscale-autoscaler"
    state_dir: Path
    consumer_capacity: float = Field(gt=0, description="C̄: bytes/s one consumer can read at most")
    algorithm: str = "MWF"
    batch_size: int = Field(5 * 1024 * 1024, gt=0, description="bytes a consumer gathers per cycle")
    wait_time_secs: float = Field(1.0, gt=0, description="longest a consumer waits to gather a batch")
    window_secs: float = Field(30.0, gt=0, description="monitor's sliding window")
    sample_interval_secs: float = Field(1.0, gt=0)
    publish_interval_secs: float = Field(30.0, gt=0, description="one measurement (iteration) every this long")
    max_consumers: int = Field(32, ge=1, description="consumer.metadata has max_consumers + 1 partitions")
    ack_timeout_secs: float = Field(60.0, gt=0)
    controller_lease_secs: float = Field(
        30.0,
        gt=0,
        description="consumers stop when no controller has renewed "
        "its lease (<state_dir>/controller.lease) for this long; a controller "
        "restarted within it adopts them",
    )
    start_from: str = "earliest"
    # per group (a run of another group beside this one has topics of its own); given explicitly
    # they are kept as they are
    speed_topic: str | None = Field(None, description="default <group>.monitor.writeSpeed")
    metadata_topic: str | None = Field(None, description="default <group>.consumer.metadata")
    sink_path: Path | None = None

    @field_validator("algorithm")
    @classmethod
    def _known(cls, v: str) -> str:
        return known_algorithm(v)

    @field_validator("start_from")
    @classmethod
    def _start(cls, v: str) -> str:
        if v not in ("earliest", "latest"):
            raise ValueError("start_from must be 'earliest' or 'latest'")
        return v

    @model_validator(mode="after")
    def _namespaced_topics(self):
        from streamscale.broker.access import check_topic_name

        prefix = re.sub(r"[^a-zA-Z0-9._-]", "_", self.group)[:200]
        self.speed_topic = check_topic_name(self.speed_topic or f"{prefix}.monitor.writeSpeed", "speed topic")
        self.metadata_topic = check_topic_name(self.metadata_topic or f"{prefix}.consumer.metadata", "metadata topic")
        for t in self.topics:
            check_topic_name(t, "source topic")
        return self

    @property
    def connection(self) -> KafkaConnection:
        return KafkaConnection.of(self.bootstrap, self.kafka_properties)

    @property
    def bin_capacity(self) -> float:
        """C = 5/6 C̄: room to catch up with what piled up during a 5 s rebalance (Landau et al., §VI-C)."""
        return self.consumer_capacity * CAPACITY_RATIO

    @property
    def sink(self) -> Path:
        return self.sink_path or self.state_dir / "sink.sqlite"

    @property
    def lease_path(self) -> Path:
        """The controller's lease on the consumers: renewed by the controller (run.Lease), read by
        the consumers (consumer.GroupConsumer.lease_expired)."""
        return self.state_dir / "controller.lease"

    def save(self) -> Path:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        path = self.state_dir / CONFIG_FILE
        path.write_text(self.model_dump_json(indent=2))
        return path

    @classmethod
    def load(cls, state_dir: Path) -> LiveConfig:
        path = Path(state_dir) / CONFIG_FILE
        if not path.exists():
            raise ConfigError(f"{path} not found: start the group with `streamscale autoscale run` first")
        try:
            return cls.model_validate_json(path.read_text())
        except ValidationError as exc:
            raise ConfigError(f"{path}: {exc}") from exc


def tp_key(topic: str, partition: int) -> str:
    return f"{topic}:{partition}"


def parse_tp(key: str) -> tuple[str, int]:
    topic, p = key.rsplit(":", 1)
    return topic, int(p)


def meta_partition(consumer: int) -> int:
    """Partition of consumer.metadata that consumer ``consumer`` (0-based, as in the algorithms) reads."""
    return consumer + 1


CONTROLLER_PARTITION = 0


def new_id() -> str:
    return uuid.uuid4().hex[:12]


def encode(msg: dict) -> bytes:
    return json.dumps(msg, sort_keys=True).encode()


def decode(raw: bytes | None) -> dict:
    try:
        msg = json.loads(raw or b"{}")
    except ValueError:
        return {}
    return msg if isinstance(msg, dict) else {}
