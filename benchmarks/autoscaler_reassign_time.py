"""End-to-end reassignment time of the live autoscaler on the embedded broker.

    .venv/bin/python benchmarks/autoscaler_reassign_time.py [--cycles 5] [--wait-time 1.0] [--partitions 4]

The load on every partition alternates between low (all partitions fit one consumer) and high (one
consumer per partition), so each change forces scale-out or scale-in. Per reassignment it prints
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cycles", type=int, default=5, help="low->high->low cycles")
    ap.add_argument("--wait-time", type=float, default=1.0, help="consumer wait_time_secs (paper: 1 s)")
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--phase", type=float, default=12.0, help="seconds per load level")
    args = ap.parse_args()
    P, value_bytes = args.partitions, 200
    record = 8 + value_bytes
    cap = 24_000.0  # C̄; bin capacity C = 20,000 B/s
    low, high = 0.8 * cap * 5 / 6 / P / record, 0.8 * cap * 5 / 6 / record  # records/s per partition

    with EmbeddedBroker() as broker, tempfile.TemporaryDirectory() as tmp:
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
