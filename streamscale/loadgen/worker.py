"""The load generator's worker process: its share of the sensors, paced against the schedule.

Sensor i goes to worker i mod W. Record k of a worker is due at ``t0 + k / rate_w`` and carries
that instant as its event timestamp; a worker that falls behind sends what is overdue at once.
Its counters (sent, delivered, failed) are shared with the parent, which reports the shortfall.

What is due is sent in bulk (:func:`_bulk_sender`, the default): the values and timestamps of a
whole chunk are drawn and formatted at once, the records grouped by partition and handed to
librdkafka in one call per partition, and librdkafka reports failures only (what was delivered
is what was sent, less the failures and what is still queued). The records, their keys, event
times and partitions are those of the per-record way (``GeneratorConfig.bulk=False``, kept for
comparison), at half its CPU per record (``benchmarks/loadgen_throughput.py``).
"""

from __future__ import annotations

import os
import signal
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from streamscale.loadgen.config import PRODUCER_DEFAULTS, GeneratorConfig
from streamscale.loadgen.records import Encoder, ValueDistribution, sensor_id

MIN_SLEEP_S = 0.001
BULK_SLEEP_S = 0.05
CHUNK = 10_000  # records formatted and handed over per step, at most
CATCH_UP_S = 1.0  # past its duration, how long a worker behind its schedule may still send


def worker_sensors(cfg: GeneratorConfig, w: int) -> list[int]:
    return list(range(w, cfg.sensors, cfg.workers))


@dataclass
class Shared:
    """What a worker shares with its parent: the stop event, its counters (sent, delivered, failed,
    the instant it was done, its CPU seconds), its readiness, the schedule's origin, the error queue
    and the parent's pid."""

    stop: Any
    sent: Any
    ok: Any
    failed: Any
    done: Any
    cpu: Any
    ready: Any  # set once it can send
    schedule: Any  # the parent's (t0, t0_wall_ms), t0 set once every worker is ready
    errors: Any
    parent_pid: int


def worker_process(cfg: GeneratorConfig, w: int, shared: Shared) -> None:
    """A worker process: once it is ready and the parent has set the schedule's origin, record k of
    worker ``w`` is due at ``t0 + k / rate_w`` (monotonic) and is stamped ``t0_wall_ms + k * 1000 /
    rate_w``. Its failure is reported as one line on the error queue and its exit code, not a
    traceback on the user's console; the run sees the worker gone (LoadGenerator.worker_failure)."""
    try:
        _Worker(cfg, w, shared).run()
    except Exception as e:  # noqa: BLE001 - reported, and the process ends with it
        shared.errors.put(f"load generator worker {w} failed: {type(e).__name__}: {e}")
        raise SystemExit(1) from None


class _Worker:
    def __init__(self, cfg: GeneratorConfig, w: int, shared: Shared):
        self.cfg, self.w, self.shared = cfg, w, shared
        self.t0, self.t0_wall_ms = 0.0, 0  # the schedule's origin, once the parent sets it
        self.rate_w = cfg.worker_rate(w)  # its sensors per period: its share of the rate
        self.quota = cfg.worker_quota(w)
        self.limit = cfg.worker_limit(w)  # the quota, or what a throttled duration lets it send
        self.in_bulk = cfg.bulk or cfg.records_spec is not None
        self.counters = {"ok": 0, "failed": 0}
        self.k = 0

    def orphaned(self) -> bool:
        # a SIGKILLed parent never sets `stop`: a worker that outlives it would produce forever
        return os.getppid() != self.shared.parent_pid

    def on_delivery(self, err, _msg) -> None:
        if err is None:
            self.counters["ok"] += 1
        else:
            self.counters["failed"] += 1
            if self.counters["failed"] == 1:
                self.shared.errors.put(f"worker {self.w}: {err.str()}")

    def run(self) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when to stop
        producer = self._producer()
        maker = self._maker()
        self.shared.ready.value = 1
        self._await_schedule()
        if maker is not None and self.cfg.refs:  # ref: clocks that wait for this schedule's origin
            maker.bind_origin(self.t0_wall_ms)
        cpu0 = time.process_time()  # the process's CPU (librdkafka's threads included) from here
        send, nap = self._sender(producer, maker)
        try:
            self._pace(producer, send, nap)
        finally:
            self._finish(producer, cpu0)

    def _await_schedule(self) -> None:
        """Until the schedule's t0 (the parent sets it once every worker is ready), or a stop."""
        schedule, stop = self.shared.schedule, self.shared.stop
        while not schedule[0] and not stop.is_set() and not self.orphaned():
            time.sleep(0.005)
        self.t0, self.t0_wall_ms = schedule[0], int(schedule[1])
        # CLOCK_MONOTONIC is system-wide, so all workers share the parent's schedule origin t0.
        while time.monotonic() < self.t0 and not stop.is_set() and not self.orphaned():
            # t0 may pass between the check and the sleep on a busy machine (a negative sleep raised)
            time.sleep(max(0.0, min(0.01, self.t0 - time.monotonic() + 1e-4)))

    def _maker(self):
        """Described records' maker (its pools and draws made before the schedule starts), else None."""
        cfg = self.cfg
        return cfg.records_spec.maker(self.w, cfg.workers, cfg.refs) if cfg.records_spec is not None else None

    def _producer(self):
        settings = dict(self.cfg.producer_config)
        if self.in_bulk:
            # reports of failures only, to one callback of the producer's: a callback given with each
            # produce_batch call is kept per record until its report, which never comes for a
            # delivered one (600,000 records: +172 MB)
            settings.setdefault("delivery.report.only.error", True)
            settings["on_delivery"] = self.on_delivery
        return self.cfg.connection.producer(settings, defaults=PRODUCER_DEFAULTS)

    def _sender(self, producer, maker) -> tuple[Callable[[int, int], int], float | None]:
        """How records k..due-1 are sent, and how long to nap when nothing is due (None: until the
        next record is)."""
        cfg, w = self.cfg, self.w
        if maker is not None:
            return _records_sender(cfg, producer, maker, self.t0_wall_ms, self.rate_w), BULK_SLEEP_S
        sensors = worker_sensors(cfg, w)
        enc = Encoder(cfg.encoding)
        values = _Values(
            [sensor_id(i).encode() for i in sensors],
            [enc.prefix(sensor_id(i)) for i in sensors],
            ValueDistribution.parse(cfg.distribution),
            np.random.default_rng([cfg.seed, w]),
        )
        if cfg.bulk:
            return _bulk_sender(cfg, producer, values, self.t0_wall_ms, self.rate_w), BULK_SLEEP_S
        return _each_sender(cfg, producer, values, (self.t0_wall_ms, self.rate_w), self.on_delivery), None

    def _due(self, now: float) -> int:
        cfg, rate_w = self.cfg, self.rate_w
        due = int((now - self.t0) * rate_w) + 1 if cfg.throttle else self.k + CHUNK
        return due if self.limit is None else min(due, self.limit)

    def _gathering(self, due: int, final: bool) -> bool:
        # in bulk, a step's worth is gathered before it is sent: sending whatever was due after
        # the last step made ~900 small steps a second at 60,000 records/s
        k, quota = self.k, self.quota
        return (
            self.cfg.throttle
            and self.in_bulk
            and k < due < k + self.rate_w * BULK_SLEEP_S
            and not final
            and (quota is None or due < quota)
        )

    def _pace(self, producer, send, nap: float | None) -> None:
        cfg, t0, rate_w, shared = self.cfg, self.t0, self.rate_w, self.shared
        deadline = t0 + cfg.duration_s if cfg.duration_s else None
        final = False
        while not shared.stop.is_set() and not self.orphaned():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                # Send what the schedule made due within the duration, then stop; a worker far
                # behind gets one more second, and what it still owes is its reported shortfall.
                if not cfg.throttle or now >= deadline + CATCH_UP_S:
                    break
                final = True
            due = self._due(now)
            if self._gathering(due, final):
                time.sleep(BULK_SLEEP_S)
                continue
            if due <= self.k:
                if (self.quota is not None and self.k >= self.quota) or final:
                    break
                # Sleep at least 1 ms: waking for each record when the next is due (0.1 ms apart at
                # 10,000/s) cost ~15 % of a CPU in wake-ups alone; records keep their scheduled
                # timestamps, they only leave in bursts (of BULK_SLEEP_S when sent in bulk: the
                # producer holds them for linger.ms, 200 ms, anyway).
                time.sleep(nap or min(0.005, max(MIN_SLEEP_S, (self.k - (now - t0) * rate_w) / rate_w)))
                continue
            self.k = send(self.k, min(due, self.k + CHUNK))
            producer.poll(0)
            self._report(producer)

    def _report(self, producer) -> None:
        shared, k, failed = self.shared, self.k, self.counters["failed"]
        shared.sent.value = k
        # in bulk, no report per delivered record: delivered = sent - failed - still queued
        shared.ok.value = max(0, k - failed - len(producer)) if self.in_bulk else self.counters["ok"]
        shared.failed.value = failed

    def _finish(self, producer, cpu0: float) -> None:
        shared = self.shared
        remaining = producer.flush(1 if self.orphaned() else 60)
        if remaining:
            self.counters["failed"] += remaining
            shared.errors.put(f"worker {self.w}: {remaining} records not delivered within 60 s")
        shared.sent.value = self.k
        shared.ok.value = self.k - self.counters["failed"] if self.in_bulk else self.counters["ok"]
        shared.failed.value = self.counters["failed"]
        shared.cpu.value = time.process_time() - cpu0
        shared.done.value = time.monotonic()


@dataclass
class _Values:
    """A worker's sensors (their keys and value prefixes) and the draws of their values."""

    keys: list[bytes]
    prefixes: list[bytes]
    dist: ValueDistribution
    rng: np.random.Generator


def _each_sender(cfg, producer, values: _Values, clock: tuple[int, float], on_delivery):
    """The per-record way: one formatted value and one produce() call (and report) per record."""
    keys, prefixes, dist, rng = values.keys, values.prefixes, values.dist, values.rng
    t0_wall_ms, rate_w = clock
    n = len(keys)
    json_mode = cfg.encoding == "json"
    produce = producer.produce
    topic = cfg.topic
    state = {"values": [], "vi": 0}

    def send(k: int, due: int) -> int:
        values, vi = state["values"], state["vi"]
        for kk in range(k, due):
            if vi >= len(values):
                values, vi = dist.sample(rng, CHUNK), 0
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
        state["values"], state["vi"] = values, vi
        return due

    return send


def _hand_over_with_headers(producer, topic: str, keys, values, headers) -> None:
    """One produce() call per record: librdkafka's batch call takes no headers."""
    produce = producer.produce
    keys = keys if keys is not None else [None] * len(values)
    for key, value, head in zip(keys, values, headers):
        while True:
            try:
                produce(topic, value, key, headers=head)
                break
            except BufferError:
                producer.poll(0.01)


def _partitions(cfg, producer) -> int | None:
    """The topic's partition count, where the records may be placed here as librdkafka's default
    partitioner places them (crc32 of the key, modulo the count); None: leave it to the producer."""
    if str(cfg.producer_config.get("partitioner", "consistent_random")) not in ("consistent_random", "consistent"):
        return None
    if str(cfg.connection.config().get("partitioner", "consistent_random")) not in ("consistent_random", "consistent"):
        return None
    meta = producer.list_topics(cfg.topic, timeout=30).topics.get(cfg.topic)
    return len(meta.partitions) if meta is not None and meta.partitions else None


def _bulk_sender(cfg, producer, values: _Values, t0_wall_ms, rate_w):
    """The bulk way: a chunk's values (one draw, formatted by one repr of the list) and timestamps
    (one numpy expression, the per-record way's arithmetic) at once, then one produce_batch call
    per partition. Values follow the distribution's draws in the same order as the per-record way."""
    keys, prefixes, dist, rng = values.keys, values.prefixes, values.dist, values.rng
    n = len(keys)
    topic = cfg.topic
    parts = _partitions(cfg, producer)
    partition_of = np.array([zlib.crc32(key) % parts for key in keys]) if parts else None
    tail = b'%d,"valueInW":%s}' if cfg.encoding == "json" else b"%d,%s"
    templates = [prefix + tail for prefix in prefixes]
    state = {"values": [], "at": 0}

    def draw(m: int) -> list[bytes]:
        # the per-record way draws CHUNK values at a time: the same draws, in the same order
        out: list[bytes] = []
        while len(out) < m:
            values, at = state["values"], state["at"]
            if at >= len(values):
                state["values"], state["at"] = repr(dist.sample(rng, CHUNK))[1:-1].encode().split(b", "), 0
                continue
            take = min(m - len(out), len(values) - at)
            out += values[at : at + take]
            state["at"] = at + take
        return out

    def send(k: int, due: int) -> int:
        kk = np.arange(k, due, dtype=np.int64)
        stamps = t0_wall_ms + (kk * 1000.0 / rate_w).astype(np.int64)
        sensors = kk % n
        values = draw(due - k)
        if partition_of is None:
            _hand_over(
                producer,
                topic,
                [
                    {"value": templates[j] % (t, v), "key": keys[j]}
                    for j, t, v in zip(sensors.tolist(), stamps.tolist(), values)
                ],
            )
            return due
        # in partition order (stable: each partition's records in schedule order), then one slice
        # of the messages per partition
        where = partition_of[sensors]
        order = np.argsort(where, kind="stable")
        values = [values[i] for i in order.tolist()]
        messages = [
            {"value": templates[j] % (t, v), "key": keys[j]}
            for j, t, v in zip(sensors[order].tolist(), stamps[order].tolist(), values)
        ]
        _hand_over_by_partition(producer, topic, messages, where[order], parts)
        return due

    return send


def _hand_over(producer, topic: str, messages: list[dict], partition: int | None = None) -> None:
    """Records to librdkafka in one call (to ``partition``, or where its partitioner puts them),
    again for those a full queue refused."""
    while messages:
        try:
            if partition is None:
                producer.produce_batch(topic, messages)
            else:
                producer.produce_batch(topic, messages, partition=partition)
            messages = [{f: m[f] for f in ("value", "key") if f in m} for m in messages if "_error" in m]
        except BufferError:
            pass
        if messages:  # the queue is full: let librdkafka send some first
            producer.poll(0.01)


def _hand_over_by_partition(producer, topic: str, messages: list[dict], where: np.ndarray, parts: int) -> None:
    """Records in partition order (``where``: each one's partition, ascending), one call per partition."""
    bounds = np.searchsorted(where, np.arange(parts + 1)).tolist()
    for partition in range(parts):
        if bounds[partition + 1] > bounds[partition]:
            _hand_over(producer, topic, messages[bounds[partition] : bounds[partition + 1]], partition)


def _records_sender(cfg, producer, maker, t0_wall_ms, rate_w):
    """Described or replayed records (streamscale.loadgen.recordspec): a chunk's keys and values made
    at once, grouped by partition as librdkafka's default partitioner places keys (crc32 of the key;
    records without a key spread round the partitions) and handed over one call per partition: a
    batch left for librdkafka to partition cost ~0.5 µs more a record at 60,000 records/s."""
    topic = cfg.topic
    parts = _partitions(cfg, producer)
    if parts:
        maker.place(parts)

    def send(k: int, due: int) -> int:
        kk = np.arange(k, due, dtype=np.int64)
        stamps = t0_wall_ms + (kk * 1000.0 / rate_w).astype(np.int64)
        keys, values = maker.make(k, due, stamps)
        headers = getattr(maker, "headers", None)  # a raw sample's, per record of the chunk
        if headers is not None:
            _hand_over_with_headers(producer, topic, keys, values, headers)
            return due
        if parts is None:
            if keys is None:
                _hand_over(producer, topic, [{"value": v} for v in values])
            else:
                _hand_over(producer, topic, [{"value": v, "key": key} for key, v in zip(keys, values)])
            return due
        if keys is None:
            where = kk % parts
            messages = [{"value": v} for v in values]
        else:
            where = getattr(maker, "where", None)  # known per pool entry (keys:N, zipf, choice)
            if where is None:
                crc = zlib.crc32
                # a raw sample's record without a key: round the partitions, as librdkafka spreads them
                where = (
                    np.fromiter(
                        (crc(key) if key is not None else i for i, key in enumerate(keys, k)), np.int64, len(keys)
                    )
                    % parts
                )
            messages = [{"value": v, "key": key} for key, v in zip(keys, values)]
        order = np.argsort(where, kind="stable")
        _hand_over_by_partition(producer, topic, [messages[i] for i in order.tolist()], where[order], parts)
        return due

    return send
