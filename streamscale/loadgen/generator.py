"""Theodolite's load generator: simulated sensors, one ActivePowerRecord per sensor and period.

Sensors are split over worker processes (sensor i goes to worker i mod W). Each worker
paces itself against the schedule: record k of a worker is due at ``t0 + k / rate_w`` and
carries that instant as its event timestamp, so every sensor emits exactly once per period
and the total rate is exactly ``sensors / period`` for as long as the machine keeps up. A
worker that falls behind sends what is overdue at once, and the parent reports the shortfall.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import ConfigError, TopicNotFound
from streamscale.loadgen.records import Encoder, ValueDistribution, sensor_id
from streamscale.observe import prometheus

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


# The workers' producer settings (a user's producer_config overrides them). linger.ms 200: the
# embedded broker (Tansu 0.6, memory storage) lists every batch stored in a partition on each
# fetch that finds data, and a reader at the log end fetches whenever a batch lands, so its work
# grows with (batches landing per second) x (batches stored). With 20 ms its CPU climbed from 17 %
# to 103 % of a CPU over a 150 s run at 16,384 records/s and starved Spark after ~95 s (the failing
# runs of capacity searches); with 200 ms it stays at 4-6 % (benchmarks/embedded_broker_fetch.py).
# Records wait up to 200 ms in the producer (their event time is their scheduled time, so the
# output latency includes that wait); 10,000 per batch leaves room for 50,000 records/s per partition.
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
    producer_config: dict = field(default_factory=dict)

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


MIN_SLEEP_S = 0.001


def _worker_sensors(cfg: GeneratorConfig, w: int) -> list[int]:
    return list(range(w, cfg.sensors, cfg.workers))


def _worker_quota(cfg: GeneratorConfig, w: int) -> int | None:
    if cfg.records is None:
        return None
    return cfg.records // cfg.workers + (1 if w < cfg.records % cfg.workers else 0)


def _worker(
    cfg: GeneratorConfig,
    w: int,
    t0_wall_ms: int,
    t0: float,
    stop,
    sent_v,
    ok_v,
    failed_v,
    done_v,
    err_q,
    parent_pid: int,
    cpu_v,
) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop

    def orphaned() -> bool:
        # a SIGKILLed parent never sets `stop`: a worker that outlives it would produce forever
        return os.getppid() != parent_pid

    sensors = _worker_sensors(cfg, w)
    n = len(sensors)
    rate_w = n / cfg.period_s
    quota = _worker_quota(cfg, w)
    keys = [sensor_id(i).encode() for i in sensors]
    idents = [sensor_id(i) for i in sensors]
    enc = Encoder(cfg.encoding)
    prefixes = [enc.prefix(i) for i in idents]
    json_mode = cfg.encoding == "json"
    dist = ValueDistribution.parse(cfg.distribution)
    rng = np.random.default_rng([cfg.seed, w])
    counters = {"ok": 0, "failed": 0}

    def on_delivery(err, _msg):
        if err is None:
            counters["ok"] += 1
        else:
            counters["failed"] += 1
            if counters["failed"] == 1:
                err_q.put(f"worker {w}: {err.str()}")

    producer = cfg.connection.producer(cfg.producer_config, defaults=PRODUCER_DEFAULTS)
    produce = producer.produce
    topic = cfg.topic
    # CLOCK_MONOTONIC is system-wide, so all workers share the parent's schedule origin t0.
    while time.monotonic() < t0 and not stop.is_set() and not orphaned():
        time.sleep(min(0.01, t0 - time.monotonic() + 1e-4))
    cpu0 = time.process_time()  # the process's CPU (librdkafka's threads included) from here
    k = 0
    chunk = 2000
    values: list[float] = []
    vi = 0
    deadline = t0 + cfg.duration_s if cfg.duration_s else None
    try:
        final = False
        while not stop.is_set() and not orphaned():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                # Send what the schedule made due within the duration, then stop; a worker far
                # behind gets one more second, and what it still owes is its reported shortfall.
                if not cfg.throttle or now >= deadline + 1.0:
                    break
                final = True
            due = int((now - t0) * rate_w) + 1 if cfg.throttle else k + chunk
            if deadline is not None and cfg.throttle:
                due = min(due, int(cfg.duration_s * rate_w))
            if quota is not None:
                due = min(due, quota)
            if due <= k:
                if (quota is not None and k >= quota) or final:
                    break
                # Sleep at least 1 ms: waking for each record when the next is due (0.1 ms apart at
                # 10,000/s) cost ~15 % of a CPU in wake-ups alone; records keep their scheduled
                # timestamps, they only leave in bursts of ~1 ms.
                time.sleep(min(0.005, max(MIN_SLEEP_S, (k - (now - t0) * rate_w) / rate_w)))
                continue
            for kk in range(k, min(due, k + chunk)):
                if vi >= len(values):
                    values = dist.sample(rng, chunk)
                    vi = 0
                j = kk % n
                ts = t0_wall_ms + int(kk * 1000.0 / rate_w)
                v = values[vi]
                vi += 1
                if json_mode:
                    payload = prefixes[j] + b'%d,"valueInW":%s}' % (ts, repr(v).encode())
                else:
                    payload = prefixes[j] + b"%d,%s" % (ts, repr(v).encode())
                while True:
                    try:
                        produce(topic, payload, keys[j], on_delivery=on_delivery)
                        break
                    except BufferError:
                        producer.poll(0.01)
                k = kk + 1
            producer.poll(0)
            sent_v.value = k
            ok_v.value = counters["ok"]
            failed_v.value = counters["failed"]
    finally:
        remaining = producer.flush(1 if orphaned() else 60)
        if remaining:
            counters["failed"] += remaining
            err_q.put(f"worker {w}: {remaining} records not delivered within 60 s")
        sent_v.value = k
        ok_v.value = counters["ok"]
        failed_v.value = counters["failed"]
        cpu_v.value = time.process_time() - cpu0
        done_v.value = time.monotonic()


class LoadGenerator:
    """Start/stop the worker processes; samples the rate sent and the records in flight every second.

    Use ``run()`` for a blocking run, or ``start()`` / ``stop()`` around other work.
    """

    def __init__(self, cfg: GeneratorConfig, on_second: Callable[[dict], None] | None = None):
        self.cfg = cfg
        self.on_second = on_second
        self._ctx = mp.get_context("spawn")
        self._stop = self._ctx.Event()
        self._procs: list = []
        self._sent = [self._ctx.Value("q", 0, lock=False) for _ in range(cfg.workers)]
        self._ok = [self._ctx.Value("q", 0, lock=False) for _ in range(cfg.workers)]
        self._failed = [self._ctx.Value("q", 0, lock=False) for _ in range(cfg.workers)]
        self._done = [self._ctx.Value("d", 0.0, lock=False) for _ in range(cfg.workers)]
        self._cpu = [self._ctx.Value("d", 0.0, lock=False) for _ in range(cfg.workers)]
        self._errors = self._ctx.Queue()
        self._per_second: list[float] = []
        self._in_flight: list[int] = []
        self._sample_t: list[float] = []
        self._monitor: threading.Thread | None = None
        self._t0 = 0.0
        self._t_end: float | None = None
        self._first_error: str | None = None

    # counters --------------------------------------------------------------------------
    def sent(self) -> int:
        return sum(v.value for v in self._sent)

    def delivered(self) -> int:
        return sum(v.value for v in self._ok)

    def failed(self) -> int:
        return sum(v.value for v in self._failed)

    def running(self) -> bool:
        return any(p.is_alive() for p in self._procs)

    # lifecycle ---------------------------------------------------------------------------
    def start(self) -> LoadGenerator:
        from streamscale.broker.access import BrokerAccess

        with BrokerAccess(self.cfg.connection) as access:
            if not access.topic_exists(self.cfg.topic):
                raise TopicNotFound(
                    f"topic '{self.cfg.topic}' does not exist on {self.cfg.bootstrap}: "
                    "create it first (streamscale topic create)"
                )
        t0_wall_ms = self.cfg.start_time_ms if self.cfg.start_time_ms is not None else int(time.time() * 1000)
        # The schedule starts a moment ahead, once the spawned workers have imported their code.
        self._t0 = time.monotonic() + 1.0
        for w in range(self.cfg.workers):
            p = self._ctx.Process(
                target=_worker,
                name=f"streamscale-loadgen-{w}",
                daemon=True,
                args=(
                    self.cfg,
                    w,
                    t0_wall_ms,
                    self._t0,
                    self._stop,
                    self._sent[w],
                    self._ok[w],
                    self._failed[w],
                    self._done[w],
                    self._errors,
                    os.getpid(),
                    self._cpu[w],
                ),
            )
            p.start()
            self._procs.append(p)
        self._monitor = threading.Thread(target=self._watch, daemon=True)
        self._monitor.start()
        return self

    def _watch(self) -> None:
        while time.monotonic() < self._t0 and self.running():
            time.sleep(0.01)
        # The rate per second counts records sent, not acknowledged: the producers batch for
        # 200 ms, so acknowledgements arrive in bursts and a one-second count of them swings by a
        # fifth either way at a steady rate. Whether delivery keeps up is the records in flight.
        last_n, last_t = self.sent(), time.monotonic()
        while self.running():
            while self.running() and time.monotonic() - last_t < 1.0:
                time.sleep(0.02)
            if not self.running():
                break  # a partial last second would read as a shortfall
            t = time.monotonic()
            n, delivered, failed = self.sent(), self.delivered(), self.failed()
            rate = (n - last_n) / (t - last_t) if t > last_t else 0.0
            in_flight = max(0, n - delivered - failed)
            self._per_second.append(rate)
            self._in_flight.append(in_flight)
            self._sample_t.append(t)
            last_n, last_t = n, t
            prometheus.generated_total.set(delivered)
            prometheus.generated_rate.set(rate)
            prometheus.generated_target.set(self.cfg.target_rate)
            if self.on_second:
                self.on_second(
                    {
                        "elapsed_s": t - self._t0,
                        "rate": rate,
                        "target_rate": self.cfg.target_rate,
                        "sent": n,
                        "delivered": delivered,
                        "in_flight": in_flight,
                        "failed": failed,
                        "behind": self.behind(),
                    }
                )
        ends = [v.value for v in self._done if v.value > 0]
        self._t_end = max(ends) if len(ends) == len(self._done) else time.monotonic()

    def behind(self) -> int:
        """Records the schedule says should have been sent by now but were not."""
        if not self.cfg.throttle:
            return 0
        elapsed = time.monotonic() - self._t0
        if self.cfg.duration_s is not None:
            elapsed = min(elapsed, self.cfg.duration_s)
        due = int(elapsed * self.cfg.target_rate)
        if self.cfg.records is not None:
            due = min(due, self.cfg.records)
        return max(0, due - self.sent())

    def stop(self, timeout: float = 90.0) -> GeneratorResult:
        self._stop.set()
        return self.wait(timeout)

    def wait(self, timeout: float | None = None) -> GeneratorResult:
        deadline = None if timeout is None else time.monotonic() + timeout
        for p in self._procs:
            p.join(None if deadline is None else max(0.1, deadline - time.monotonic()))
        for p in self._procs:
            if p.is_alive():
                p.kill()
                p.join(5)
        if self._monitor is not None:
            self._monitor.join(5)
        while not self._errors.empty():
            msg = self._errors.get_nowait()
            self._first_error = self._first_error or msg
        return self.result()

    def result(self) -> GeneratorResult:
        end = self._t_end or time.monotonic()
        dur = max(end - self._t0, 1e-9)
        delivered = self.delivered()
        achieved = delivered / dur
        # The last second is often partial; judge the steady state on the full seconds: sent on
        # schedule, and acknowledged as fast as sent (the records in flight do not grow).
        steady = self._per_second[1:] if len(self._per_second) > 2 else self._per_second
        if self.cfg.throttle:
            on_schedule = (
                float(np.median(steady)) >= (1 - SHORTFALL_TOLERANCE) * self.cfg.target_rate if steady else False
            )
            kept_up = delivery_kept_up(self._sample_t[1:], self._in_flight[1:], self.cfg.target_rate)
            reached = on_schedule and kept_up
            if self.cfg.records is not None and not steady:
                reached = True  # finished within its first second
        else:
            reached = True
        return GeneratorResult(
            self.cfg.target_rate,
            self.sent(),
            delivered,
            self.failed(),
            dur,
            achieved,
            reached and self.failed() == 0,
            list(self._per_second),
            self._first_error,
            sum(v.value for v in self._cpu),
            max(self._in_flight, default=0),
        )

    def run(self) -> GeneratorResult:
        self.start()
        try:
            return self.wait()
        except KeyboardInterrupt:
            return self.stop()

    def __enter__(self) -> LoadGenerator:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def generate(cfg: GeneratorConfig, on_second=None) -> GeneratorResult:
    return LoadGenerator(cfg, on_second).run()
