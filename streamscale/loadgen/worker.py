"""The load generator's worker process: its share of the sensors, paced against the schedule.

Sensor i goes to worker i mod W. Record k of a worker is due at ``t0 + k / rate_w`` and carries
that instant as its event timestamp; a worker that falls behind sends what is overdue at once.
Its counters (sent, delivered, failed) are shared with the parent, which reports the shortfall.
"""

from __future__ import annotations

import os
import signal
import time

import numpy as np

from streamscale.loadgen.config import PRODUCER_DEFAULTS, GeneratorConfig
from streamscale.loadgen.records import Encoder, ValueDistribution, sensor_id

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
