"""End-to-end reassignment time of the live autoscaler on the embedded broker.

    .venv/bin/python benchmarks/autoscaler_reassign_time.py [--cycles 5] [--wait-time 1.0] [--partitions 4]

The load on every partition alternates between low (all partitions fit one consumer) and high (one
consumer per partition), so each change forces scale-out or scale-in. The rates come from what the
monitor measures: it reads the logs' sizes (DescribeLogDirs), which count Kafka's record-batch
headers too, so a calibration first runs each level for a few seconds and measures the log bytes
each record costs (a 208 B record took 270 B of log at the low level, 277 B at the high one). Per reassignment it prints
the paper's Δt2 (decision + create requests), Δt3 (new consumer processes ready) and Δt4 (all
stops then all starts acknowledged; bounded by two consumer cycles, i.e. about 2 × wait_time), and
the time from a load change until the group has the new size. Finally it checks the sink: every
record exactly once.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from streamscale.autoscaler.live.backend import LocalProcessBackend
from streamscale.autoscaler.live.controller import Controller
from streamscale.autoscaler.live.launch import run_monitor, setup
from streamscale.autoscaler.live.load import PartitionLoad
from streamscale.autoscaler.live.protocol import LiveConfig
from streamscale.autoscaler.live.sink import SQLiteSink
from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.waiting import wait_for

# What the phases need of the monitor's figures (bin capacity C = 5/6 C̄): at the low level all
# partitions together well inside one bin; at the high level each partition well over half a bin,
# so no two share a consumer. Margins for the monitor's jitter between windows.
LOW_TOTAL = 0.6
HIGH_EACH = 0.8


def planned_rates(partitions: int, bin_capacity: float, log_bytes_low: float, log_bytes_high: float) -> tuple:
    """Records/s per partition of the low and the high level, from the log bytes a record costs
    at each level (smaller batches at the low rate: more header bytes per record)."""
    return LOW_TOTAL * bin_capacity / partitions / log_bytes_low, HIGH_EACH * bin_capacity / log_bytes_high


def monitor_speeds(bootstrap: str, partitions: int, value_bytes: int, rate: float, seconds: float = 6.0):
    """Records/s sent and each partition's bytes/s as the autoscaler's monitor measures them (its
    window over DescribeLogDirs sizes), at ``rate`` records/s per partition on a topic of its own."""
    from streamscale.autoscaler.live.monitor import WriteSpeedMonitor

    topic = f"calibrate-{uuid.uuid4().hex[:6]}"
    access = BrokerAccess(bootstrap)
    access.create_topic(topic, partitions)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = LiveConfig(
            bootstrap=bootstrap, topics=[topic], state_dir=Path(tmp), consumer_capacity=1.0, window_secs=seconds
        )
        monitor = WriteSpeedMonitor(cfg)
        load = PartitionLoad(bootstrap, topic, partitions, value_bytes)
        load.set_rate(rate)
        try:
            with load:
                time.sleep(1.0)  # the producer's first batches, before the window
                monitor.sample()
                sent0, t0 = load.sent, time.monotonic()
                time.sleep(seconds)  # the measurement window itself
                monitor.sample()
                sent_rate = (load.sent - sent0) / (time.monotonic() - t0)
            speeds = monitor.speeds()
        finally:
            monitor.close()
            access.delete_topics([topic])
            access.close()
    return sent_rate, speeds


def calibrated_rates(
    bootstrap: str, partitions: int, value_bytes: int, cap: float, seconds: float = 6.0
) -> tuple[float, float]:
    """The low and high rates (records/s per partition) from the monitor's own measurements."""
    bin_cap = cap * 5 / 6
    nominal = 8 + value_bytes
    low, high = planned_rates(partitions, bin_cap, nominal, nominal)
    per_record = []
    for rate in (low, high):
        sent, speeds = monitor_speeds(bootstrap, partitions, value_bytes, rate, seconds)
        per_record.append(sum(speeds.values()) / sent)
    low, high = planned_rates(partitions, bin_cap, *per_record)
    print(
        f"calibration: a {nominal} B record takes {per_record[0]:.0f} B of log at the low level and "
        f"{per_record[1]:.0f} B at the high one; rates {low:.1f} and {high:.1f} records/s per partition",
        flush=True,
    )
    return low, high


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=5, help="low->high->low cycles")
    ap.add_argument("--wait-time", type=float, default=1.0, help="consumer wait_time_secs (paper: 1 s)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--phase", type=float, default=12.0, help="seconds per load level")
    args = ap.parse_args()
    P, value_bytes = args.partitions, 200
    cap = 24_000.0  # C̄; bin capacity C = 20,000 B/s

    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
        low, high = calibrated_rates(broker.bootstrap, P, value_bytes, cap)
        topic = f"reassign-{uuid.uuid4().hex[:6]}"
        BrokerAccess(broker.bootstrap).create_topic(topic, P)
        cfg = setup(
            LiveConfig(
                bootstrap=broker.bootstrap,
                topics=[topic],
                state_dir=Path(tmp),
                consumer_capacity=cap,
                window_secs=3,
                sample_interval_secs=0.25,
                publish_interval_secs=1.0,
                wait_time_secs=args.wait_time,
                max_consumers=P + 2,
            )
        )
        stop = threading.Event()
        monitor = threading.Thread(target=run_monitor, args=(cfg, None, stop), daemon=True)
        controller = Controller(cfg, LocalProcessBackend(cfg.state_dir))
        ctl_thread = threading.Thread(target=controller.run, args=(stop,), daemon=True)
        load = PartitionLoad(broker.bootstrap, topic, P, value_bytes)
        converge: list[float] = []
        try:
            load.set_rate(low)
            load.start()
            monitor.start()
            ctl_thread.start()
            wait_for(lambda: len(controller.assignment) == P, 60, "initial assignment")
            for cycle in range(args.cycles):
                for rate, size in ((high, P), (low, 1)):
                    load.set_rate(rate)
                    t0 = time.monotonic()
                    wait_for(
                        lambda size=size: (
                            len(set(controller.assignment.values())) == size and len(controller.assignment) == P
                        ),
                        120,
                        f"{size} consumers",
                    )
                    converge.append(time.monotonic() - t0)
                    time.sleep(max(0.0, args.phase - converge[-1]))
                print(f"cycle {cycle + 1}/{args.cycles} done", flush=True)
            load.stop()
            sink = SQLiteSink(cfg.sink)
            wait_for(lambda: len(sink.rows(topic)) >= len(load.delivered), 60, "the sink to catch up")
            sink.close()
        finally:
            load.stop()
            stop.set()
            ctl_thread.join(timeout=60)
            controller.shutdown_group()
            controller.close()
            monitor.join(timeout=10)
        sink = SQLiteSink(cfg.sink)
        stored = [(p, o) for p, o, _, _ in sink.rows(topic)]
        sink.close()
        moves = [it for it in controller.history if it.moved]

    def stats(name: str, xs: list[float]) -> None:
        xs = sorted(xs)
        print(
            f"{name:<42} median {statistics.median(xs):8.0f} ms   p90 {xs[int(0.9 * (len(xs) - 1))]:8.0f} ms   "
            f"max {xs[-1]:8.0f} ms   (n={len(xs)})"
        )

    print(
        f"\n{P} partitions, consumer wait_time_secs {args.wait_time}, {len(moves)} reassignments that moved partitions"
    )
    stats("Δt2 decision + create requests", [it.create_ms for it in moves])
    stats("Δt3 new consumers ready (scale-out only)", [it.ready_ms for it in moves if it.ready_ms > 1] or [0.0])
    stats("Δt4 stop+start acknowledged", [it.reassign_ms for it in moves])
    stats("load change -> group resized (incl. window)", [c * 1000 for c in converge])
    dup = len(stored) - len(set(stored))
    print(
        f"sink: {len(stored):,} records, {dup} duplicates, {len(load.delivered - set(stored))} missing "
        f"of {len(load.delivered):,} produced"
    )


if __name__ == "__main__":
    from _main import run

    run(main)
