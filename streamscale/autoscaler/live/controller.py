"""The controller (Landau et al., §V-C): Sentinel → Reassign → Group management, with Synchronize on start.

* **Synchronize** rebuilds the controller's view from the consumers themselves: every running
  consumer (and every consumer whose persisted state still owns partitions, restarted if dead) is
  asked for its assignment. Messages on a consumer's metadata partition are processed in order, so
  a stop or start that a crashed controller sent is applied before the sync reply is sent.
* **Sentinel** waits for the monitor's next measurement and decides whether to reassign: some
  partition is unassigned, some consumer is over the bin capacity C, or fewer consumers would do
  (⌈Σ s_j / C⌉ is below the group size and the algorithm's answer really is smaller).
* **Reassign** runs the chosen bin-packing algorithm with the current assignment as X(t_{k-1}).
* **Group management** creates missing consumers and waits until each says hello, sends every
  *stop* and waits for all acknowledgements, only then sends the *starts* (so no partition ever
  has two readers), and finally shuts down and deletes consumers left without partitions.

Each iteration is appended to ``<state_dir>/iterations.csv`` with the paper's timings Δt2
(decision and create requests), Δt3 (new consumers ready) and Δt4 (stop+start acknowledged).
"""

from __future__ import annotations

import csv
import logging
import math
import os
import threading
import time
from dataclasses import asdict, dataclass, fields

from confluent_kafka import TopicPartition

from streamscale.autoscaler.binpacking import ALGORITHMS, CapacityError
from streamscale.autoscaler.live.backend import ConsumerBackend, LocalProcessBackend
from streamscale.autoscaler.live.protocol import (
    CONTROLLER_PARTITION,
    LiveConfig,
    decode,
    encode,
    meta_partition,
    new_id,
)
from streamscale.autoscaler.live.sink import SQLiteSink
from streamscale.broker.access import BrokerAccess
from streamscale.broker.connection import close_clients
from streamscale.errors import AutoscalerError
from streamscale.observe import prometheus

log = logging.getLogger("streamscale.autoscaler.controller")

CRASH_EXIT_CODE = 17


ControllerError = AutoscalerError  # the name it had


@dataclass
class Iteration:
    time: float
    measured_at: float
    total_bytes_per_s: float
    reason: str
    consumers_before: int
    consumers_after: int
    moved: int
    rscore: float
    decision_ms: float = 0.0
    create_ms: float = 0.0
    ready_ms: float = 0.0
    reassign_ms: float = 0.0


class Controller:
    def __init__(self, cfg: LiveConfig, backend: ConsumerBackend | None = None, crash_after: str | None = None):
        self.cfg = cfg
        self.backend = backend or LocalProcessBackend(cfg.state_dir)
        self.crash_after = crash_after
        self.assignment: dict[str, int] = {}
        self.history: list[Iteration] = []
        self._hello: set[int] = set()
        self._warned: set[str] = set()
        with BrokerAccess(cfg.connection) as access:
            inbox_end = access.end_offsets(cfg.metadata_topic)[CONTROLLER_PARTITION]
            speed_end = access.end_offsets(cfg.speed_topic)[0]
        conn = cfg.connection
        self.inbox = conn.consumer(conn.reader_settings(f"{cfg.group}-controller"))
        self.inbox.assign([TopicPartition(cfg.metadata_topic, CONTROLLER_PARTITION, inbox_end)])
        self.measurements = conn.consumer(conn.reader_settings(f"{cfg.group}-controller-speeds"))
        # the newest measurement already published is the controller's starting point after a restart
        self.measurements.assign([TopicPartition(cfg.speed_topic, 0, max(speed_end - 1, 0))])
        self.producer = conn.producer({"enable.idempotence": True, "linger.ms": 0})
        self.csv_path = cfg.state_dir / "iterations.csv"

    # -- messaging --------------------------------------------------------------------------
    def _send(self, consumer: int, kind: str, partitions=()) -> str:
        if meta_partition(consumer) > self.cfg.max_consumers:
            raise ControllerError(
                f"the group needs consumer {consumer}, beyond --max-consumers {self.cfg.max_consumers}"
            )
        mid = new_id()
        msg = {"type": kind, "msg_id": mid, "partitions": sorted(partitions), "t": time.time()}
        self.producer.produce(self.cfg.metadata_topic, encode(msg), partition=meta_partition(consumer))
        return mid

    def _flush(self) -> None:
        if self.producer.flush(15) != 0:
            raise ControllerError("could not deliver messages to the consumers (broker unreachable?)")

    def _read_inbox(self, timeout: float) -> list[dict]:
        msgs = []
        for m in self.inbox.consume(num_messages=200, timeout=timeout):
            if m.error() is None:
                msg = decode(m.value())
                if msg.get("type") == "hello":
                    self._hello.add(msg.get("consumer"))
                msgs.append(msg)
        return msgs

    def _await(self, pending: dict[str, int], what: str) -> dict[str, dict]:
        """Wait for the acknowledgement of each message id; restart consumers that died meanwhile
        (a restarted consumer's hello names the last message it applied, which counts as its ack)."""
        replies: dict[str, dict] = {}
        deadline = time.monotonic() + self.cfg.ack_timeout_secs
        next_check = time.monotonic() + 1.0
        while pending:
            for msg in self._read_inbox(0.1):
                mid = msg.get("msg_id") if msg.get("type") == "ack" else msg.get("last_msg_id")
                if mid in pending:
                    replies[mid] = msg
                    del pending[mid]
            now = time.monotonic()
            if pending and now >= next_check:
                next_check = now + 1.0
                for c in sorted(set(pending.values())):
                    if not self.backend.alive(c):
                        log.warning("consumer %d died while %s was pending: restarting it", c, what)
                        self.backend.create(c)
            if pending and now >= deadline:
                raise ControllerError(
                    f"consumers {sorted(set(pending.values()))} did not acknowledge {what} "
                    f"within {self.cfg.ack_timeout_secs} s"
                )
        return replies

    def _await_hello(self, consumers: list[int]) -> None:
        deadline = time.monotonic() + self.cfg.ack_timeout_secs
        while not set(consumers) <= self._hello:
            self._read_inbox(0.1)
            if time.monotonic() >= deadline:
                missing = sorted(set(consumers) - self._hello)
                raise ControllerError(
                    f"consumers {missing} did not start within {self.cfg.ack_timeout_secs} s; "
                    f"see {self.cfg.state_dir / 'logs'}"
                )

    # -- Synchronize ------------------------------------------------------------------------
    def synchronize(self) -> dict[str, int]:
        sink = SQLiteSink(self.cfg.sink)
        try:
            owners = {c for c, st in sink.states().items() if st.assignment}
        finally:
            sink.close()
        running = set(self.backend.running())
        for c in sorted(owners - running):
            log.warning("consumer %d owns partitions but is not running: restarting it", c)
            self._hello.discard(c)
            self.backend.create(c)
        members = sorted(owners | running)
        pending = {self._send(c, "sync"): c for c in members}
        self._flush()
        replies = self._await(pending, "sync")
        assignment: dict[str, int] = {}
        for msg in replies.values():
            for key in msg.get("assignment", []):
                if key in assignment:  # cannot happen with this protocol; repair rather than guess
                    log.error("partition %s is owned by consumers %d and %d", key, assignment[key], msg["consumer"])
                    self._await({self._send(msg["consumer"], "stop", [key]): msg["consumer"]}, "repair stop")
                    continue
                assignment[key] = msg["consumer"]
        self.assignment = assignment
        log.info("synchronized: %d consumers, %d partitions assigned", len(members), len(assignment))
        return assignment

    # -- Sentinel ---------------------------------------------------------------------------
    def sentinel(self, timeout: float) -> dict | None:
        """The newest measurement published since the last one (None if none arrived in time)."""
        newest = None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            msgs = [m for m in self.measurements.consume(num_messages=500, timeout=0.2) if m.error() is None]
            if msgs:
                newest = decode(msgs[-1].value())
                continue  # drain: only the newest counts
            if newest is not None:
                break
            self._read_inbox(0)
        self._heal()
        return newest

    def _heal(self) -> None:
        for c in sorted(set(self.assignment.values())):
            if not self.backend.alive(c):
                log.warning("consumer %d is not running: restarting it (it resumes its partitions)", c)
                self._hello.discard(c)
                self.backend.create(c)

    def decide(self, speeds: dict[str, float]) -> tuple[str, dict[str, int]] | None:
        """Sentinel's exit conditions and the Reassign state; None when the group stays as it is."""
        cap = self.cfg.bin_capacity
        for k, s in speeds.items():
            if s > cap and k not in self._warned:
                self._warned.add(k)
                log.warning(
                    "partition %s writes %.0f B/s, more than the bin capacity %.0f B/s: it gets a "
                    "consumer of its own and that consumer will lag",
                    k,
                    s,
                    cap,
                )
        sizes = {k: min(max(s, 0.0), cap) for k, s in speeds.items()}
        loads: dict[int, float] = {}
        for k, c in self.assignment.items():
            loads[c] = loads.get(c, 0.0) + sizes.get(k, 0.0)
        in_use = len(loads)
        reason = None
        if any(k not in self.assignment for k in sizes):
            reason = "unassigned partitions"
        elif any(k not in sizes for k in self.assignment):
            reason = "partitions no longer monitored"
        elif any(load > cap * (1 + 1e-9) for load in loads.values()):
            reason = "consumer over capacity"
        elif sizes and max(1, math.ceil(sum(sizes.values()) / cap - 1e-9)) < in_use:
            reason = "fewer consumers suffice"
        if reason is None:
            return None
        keys = sorted(sizes)
        index = {k: i for i, k in enumerate(keys)}
        previous = {index[k]: c for k, c in self.assignment.items() if k in index}
        try:
            result = ALGORITHMS[self.cfg.algorithm]({index[k]: sizes[k] for k in keys}, cap, previous)
        except CapacityError as exc:  # sizes are clipped to C, so this is a bug
            raise ControllerError(str(exc)) from exc
        new = {keys[i]: c for i, c in result.items()}
        if reason == "fewer consumers suffice" and len(set(new.values())) >= in_use:
            return None  # moving partitions without saving a consumer only costs
        return reason, new

    # -- Group management -------------------------------------------------------------------
    def apply(self, new: dict[str, int], it: Iteration) -> None:
        t0 = time.monotonic()
        stops: dict[int, list[str]] = {}
        starts: dict[int, list[str]] = {}
        for k, c in self.assignment.items():
            if new.get(k) != c:
                stops.setdefault(c, []).append(k)
        for k, c in new.items():
            if self.assignment.get(k) != c:
                starts.setdefault(c, []).append(k)
        create = [c for c in sorted(set(new.values())) if not self.backend.alive(c)]
        for c in create:
            self._hello.discard(c)
            self.backend.create(c)
        t1 = time.monotonic()
        it.create_ms = (t1 - t0) * 1000
        self._await_hello(create)
        t2 = time.monotonic()
        it.ready_ms = (t2 - t1) * 1000
        if stops:
            pending = {self._send(c, "stop", ks): c for c, ks in stops.items()}
            self._flush()
            self._await(pending, "stop")
            for ks in stops.values():
                for k in ks:
                    self.assignment.pop(k, None)
            self._crash_point("stops")
        if starts:
            pending = {self._send(c, "start", ks): c for c, ks in starts.items()}
            self._flush()
            self._await(pending, "start")
            for c, ks in starts.items():
                for k in ks:
                    self.assignment[k] = c
        it.reassign_ms = (time.monotonic() - t2) * 1000
        self.retire_idle()

    def retire_idle(self) -> list[int]:
        idle = [c for c in self.backend.running() if c not in set(self.assignment.values())]
        if idle:
            pending = {self._send(c, "shutdown"): c for c in idle}
            self._flush()
            self._await(pending, "shutdown")
            for c in idle:
                self.backend.delete(c)
        return idle

    def _crash_point(self, where: str) -> None:
        if self.crash_after == where:  # tests: die at the worst moment, without any clean-up
            log.error("crash point '%s' reached: exiting", where)
            logging.shutdown()
            os._exit(CRASH_EXIT_CODE)

    # -- the loop ---------------------------------------------------------------------------
    def iterate(self, timeout: float) -> Iteration | None:
        m = self.sentinel(timeout)
        if m is None or not m.get("speeds"):
            return None
        interest = set(self.cfg.topics)
        speeds = {k: float(v) for k, v in m["speeds"].items() if k.rsplit(":", 1)[0] in interest}
        before = len(set(self.assignment.values()))
        t0 = time.monotonic()
        decision = self.decide(speeds)
        decision_ms = (time.monotonic() - t0) * 1000
        if decision is None:
            it = Iteration(time.time(), m.get("t", 0.0), sum(speeds.values()), "", before, before, 0, 0.0, decision_ms)
        else:
            reason, new = decision
            moved = [k for k, c in new.items() if k in self.assignment and self.assignment[k] != c]
            rscore = sum(min(speeds.get(k, 0.0), self.cfg.bin_capacity) for k in moved) / self.cfg.bin_capacity
            it = Iteration(
                time.time(),
                m.get("t", 0.0),
                sum(speeds.values()),
                reason,
                before,
                len(set(new.values())),
                len(moved),
                rscore,
                decision_ms,
            )
            log.info(
                "%s: %d -> %d consumers, %d partitions move (Rscore %.3f)",
                reason,
                before,
                it.consumers_after,
                len(moved),
                rscore,
            )
            self.apply(new, it)
            it.create_ms += decision_ms
        self._record(it)
        return it

    def _record(self, it: Iteration) -> None:
        self.history.append(it)
        prometheus.consumers.set(it.consumers_after)
        prometheus.write_speed.set(it.total_bytes_per_s)
        prometheus.iterations_total.labels(str(bool(it.reason)).lower()).inc()
        if it.reason:
            prometheus.rscore.set(it.rscore)
            prometheus.moved_total.inc(it.moved)
            prometheus.reassign_seconds.set(it.reassign_ms / 1000)
        new_file = not self.csv_path.exists()
        with open(self.csv_path, "a", newline="") as f:
            w = csv.DictWriter(f, fieldnames=[fl.name for fl in fields(Iteration)])
            if new_file:
                w.writeheader()
            w.writerow({k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(it).items()})

    def run(self, stop: threading.Event, on_iteration=None) -> None:
        self.synchronize()
        timeout = 2 * self.cfg.publish_interval_secs + 5
        while not stop.is_set():
            it = self.iterate(timeout)
            if it is not None and on_iteration is not None:
                on_iteration(it, self)

    def shutdown_group(self) -> list[int]:
        """Stop every consumer cleanly (each writes what it read and releases its partitions)."""
        running = self.backend.running()
        if running:
            pending = {self._send(c, "shutdown"): c for c in running}
            self._flush()
            try:
                self._await(pending, "shutdown")
            finally:
                for c in running:
                    self.backend.delete(c)
        self.assignment = {}
        return running

    def close(self) -> None:
        close_clients((self.inbox, self.measurements), self.producer)
