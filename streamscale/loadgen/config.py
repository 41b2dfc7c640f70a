"""What a load generator run is asked to do (:class:`GeneratorConfig`), what it achieved
(:class:`GeneratorResult`), its producers' settings, and how a shortfall is judged."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ConfigError
from streamscale.loadgen.records import Encoder, ValueDistribution
from streamscale.loadgen.recordspec import RecordsSpec

MAX_SENSORS = 100_000_000  # each simulated sensor is state in a worker: beyond this memory, not load, runs out
SHORTFALL_TOLERANCE = 0.05  # achieved below 95 % of the target counts as "not reaching it"
# The records sent but not yet acknowledged: ~0.2-0.3 s of the rate while the broker keeps up (the
# producers batch for 200 ms); more than this many seconds' worth is shown as the broker being behind.
IN_FLIGHT_LIMIT_S = 1.0
# Whether the broker kept up is judged from the trend of the records in flight over the run's full
# seconds (growth = acknowledged slower than sent); fewer samples than this cannot tell it from the
# 200 ms steps of the acknowledgements, so shorter runs are judged on the rate sent alone.
MIN_TREND_SAMPLES = 10


def delivery_kept_up(times_s: list[float], in_flight: list[int], target_rate: float) -> bool:
    """True unless the records in flight grew by more than the shortfall tolerance of the target rate
    per second: then the broker acknowledged less than 95 % of what was sent on schedule."""
    if len(in_flight) < MIN_TREND_SAMPLES:
        return True
    slope = float(np.polyfit(np.asarray(times_s, float), np.asarray(in_flight, float), 1)[0])
    return slope <= SHORTFALL_TOLERANCE * target_rate


# The workers' producer settings (a user's producer_config overrides them). linger.ms 200: on a
# small machine the generator and the broker share the CPUs with the Spark job under test, and
# fewer, larger batches cost both of them less per record (one produce request and one log append
# per batch). Records wait up to 200 ms in the producer (their event time is their scheduled time,
# so the output latency includes that wait); 10,000 per batch leaves room for 50,000 records/s per
# partition.
PRODUCER_DEFAULTS = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 200,
    "batch.num.messages": 10000,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1024 * 1024,
    "allow.auto.create.topics": False,
}


@dataclass(frozen=True)
class GeneratorConfig:
    bootstrap: KafkaConnection | str  # a connection: the user's client properties reach the workers
    topic: str = "input"
    sensors: int = 1000
    period_s: float = 1.0
    workers: int = 1
    encoding: str = "json"
    distribution: str = "uniform:0,100"
    seed: int = 42
    records: int | None = None  # finite mode: stop after this many records in total
    duration_s: float | None = None  # or after this long; neither = endless
    throttle: bool = True  # False: as fast as possible (timestamps still follow the schedule)
    start_time_ms: int | None = None  # event time of the first record (default: now)
    bulk: bool = True  # values formatted and records handed to librdkafka in bulk (False: one by one)
    producer_config: dict = field(default_factory=dict)
    # the records written: None, Theodolite's sensor readings (sensors / period_s a second); else a
    # RecordsSpec (streamscale.loadgen.recordspec) at sensors / period_s records a second
    records_spec: RecordsSpec | None = None
    # ref: generators' inputs -> when each of their records is sent (fields.RefClock, LoadGenerator.clock;
    # None until that input's generator has started: LoadGenerators binds it)
    refs: dict = field(default_factory=dict)

    def __post_init__(self):
        from streamscale.broker.access import check_topic_name

        check_topic_name(self.topic)
        if not isinstance(self.sensors, int) or not 1 <= self.sensors <= MAX_SENSORS:
            raise ConfigError(f"sensors must be a whole number from 1 to {MAX_SENSORS:,}, not {self.sensors}")
        if not (isinstance(self.period_s, (int, float)) and math.isfinite(self.period_s) and self.period_s > 0):
            raise ConfigError(f"period must be a positive finite number of seconds, not {self.period_s}")
        if not isinstance(self.workers, int) or not 1 <= self.workers <= 256:
            raise ConfigError(f"workers must be a whole number from 1 to 256, not {self.workers}")
        if self.workers > self.sensors:
            object.__setattr__(self, "workers", self.sensors)
        if self.records is not None and (not isinstance(self.records, int) or self.records < 0):
            raise ConfigError(f"records must be a whole number >= 0, not {self.records}")
        if self.duration_s is not None and not (math.isfinite(self.duration_s) and self.duration_s > 0):
            raise ConfigError(f"duration must be a positive finite number of seconds, not {self.duration_s}")
        Encoder(self.encoding)
        ValueDistribution.parse(self.distribution)
        for name, (inp, fld, _) in (self.records_spec.refs() if self.records_spec is not None else {}).items():
            if inp not in self.refs:
                raise ConfigError(
                    f"field {name}: ref:{inp}.{fld} names the input {inp}, which this load does not send: "
                    "ref: refers between the inputs of one spec (benchmark.inputs)"
                )

    def worker_rate(self, w: int) -> float:
        """Worker ``w``'s share of the rate: its sensors (records) per period."""
        return len(range(w, self.sensors, self.workers)) / self.period_s

    def worker_quota(self, w: int) -> int | None:
        """Worker ``w``'s part of a count of records (None: no count)."""
        if self.records is None:
            return None
        return self.records // self.workers + (1 if w < self.records % self.workers else 0)

    def worker_limit(self, w: int) -> int | None:
        """The most records worker ``w`` sends (a count or a throttled duration; None: until stopped)."""
        limits = [] if self.records is None else [self.worker_quota(w)]
        if self.duration_s and self.throttle:
            limits.append(int(self.duration_s * self.worker_rate(w)))
        return min(limits) if limits else None

    @property
    def connection(self) -> KafkaConnection:
        return KafkaConnection.of(self.bootstrap)

    @property
    def target_rate(self) -> float:
        return self.sensors / self.period_s


@dataclass
class GeneratorResult:
    target_rate: float
    sent: int
    delivered: int
    failed: int
    duration_s: float
    achieved_rate: float
    reached_target: bool
    per_second: list[float]  # records sent (handed to the producers on schedule) per second
    first_error: str | None = None
    cpu_s: float = 0.0  # CPU time of the worker processes (all their threads) from the schedule's start
    max_in_flight: int = 0  # most records sent but not yet acknowledged at a one-second sample

    def as_dict(self) -> dict:
        return asdict(self)
