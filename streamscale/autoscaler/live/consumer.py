"""One consumer of the autoscaled group (Landau et al., §V-B), run as its own process.

Cycle: (1) fetch up to ``batch_size`` bytes or until ``wait_time_secs`` passed; (2) group the
records by source topic; (3) write them to the sink together with the next offsets (one
transaction) and only then commit the offsets to Kafka; (4) read the metadata partition and apply
the controller's messages (start/stop partitions, sync, shutdown), persisting the new state before
acknowledging on partition 0. A stop is acknowledged only after everything read from the partition
has been written, and the next owner starts from the sink's stored offset, so a partition never has
two readers and no record is lost or written twice.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaError, TopicPartition

from streamscale.autoscaler.live.protocol import (
    CONTROLLER_PARTITION,
    LiveConfig,
    decode,
    encode,
    meta_partition,
    parse_tp,
)
from streamscale.autoscaler.live.sink import ConsumerState, SQLiteSink
from streamscale.broker.access import BrokerAccess
from streamscale.broker.connection import close_clients
from streamscale.errors import AutoscalerError, KafkaClientError

log = logging.getLogger("streamscale.autoscaler.consumer")

BROKER_DOWN_EXIT_SECS = 120


class GroupConsumer:
    def __init__(self, cfg: LiveConfig, consumer_id: int):
        self.cfg = cfg
        self.id = consumer_id
        self.sink = SQLiteSink(cfg.sink)
        self.stopping = False
        self.broker_down_since: float | None = None
        conn = cfg.connection
        self.data = conn.consumer(
            conn.reader_settings(cfg.group, **{"auto.offset.reset": cfg.start_from}, error_cb=self._on_error)
        )
        self.meta = conn.consumer(conn.reader_settings(f"{cfg.group}-meta-{consumer_id}"))
        self.producer = conn.producer({"enable.idempotence": True, "linger.ms": 0})
        self.state = self.sink.load_state(consumer_id) or ConsumerState()
        self.assignment: set[str] = set()

    def _on_error(self, err) -> None:
        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.broker_down_since = self.broker_down_since or time.monotonic()
            log.warning("consumer %d: all brokers down", self.id)

    def _broker_reachable(self) -> bool:
        try:
            self.data.list_topics(self.cfg.metadata_topic, timeout=2)
            return True
        except Exception:  # noqa: BLE001 - any failure means: not reachable now
            return False

    # -- start-up ---------------------------------------------------------------------------
    def start(self) -> None:
        part = meta_partition(self.id)
        with BrokerAccess(self.cfg.connection) as access:
            end = access.end_offsets(self.cfg.metadata_topic).get(part)
        if end is None:
            raise SystemExit(f"{self.cfg.metadata_topic} has no partition {part} for consumer {self.id}")
        if self.state.meta_offset is None or self.state.meta_offset > end:
            # first start (old messages on this partition belong to earlier groups), or a sink
            # that outlived the broker's data: start at the partition's end
            self.state.meta_offset = end
            self.sink.save_state(self.id, self.state)
        self.meta.assign([TopicPartition(self.cfg.metadata_topic, part, self.state.meta_offset)])
        self._assign(self.state.assignment)  # resume what a previous incarnation owned
        self._reply({"type": "hello", "last_msg_id": self.state.last_msg_id, "pid": os.getpid()})
        log.info(
            "consumer %d up: metadata offset %d, assignment %s",
            self.id,
            self.state.meta_offset,
            sorted(self.assignment),
        )

    def _assign(self, keys) -> None:
        keys = [k for k in keys if k not in self.assignment]
        if not keys:
            return
        tps = [parse_tp(k) for k in keys]
        stored = self.sink.next_offsets(tps)
        committed = {}
        missing = [TopicPartition(t, p) for t, p in tps if (t, p) not in stored]
        if missing:
            committed = {
                (tp.topic, tp.partition): tp.offset for tp in self.data.committed(missing, timeout=15) if tp.offset >= 0
            }
        # the sink is authoritative; Kafka's committed offset only for partitions never written here
        fallback = OFFSET_END if self.cfg.start_from == "latest" else OFFSET_BEGINNING
        self.data.incremental_assign(
            [TopicPartition(t, p, stored.get((t, p), committed.get((t, p), fallback))) for t, p in tps]
        )
        self.assignment.update(keys)

    def _unassign(self, keys) -> None:
        keys = [k for k in keys if k in self.assignment]
        if keys:
            self.data.incremental_unassign([TopicPartition(*parse_tp(k)) for k in keys])
            self.assignment.difference_update(keys)

    # -- the cycle --------------------------------------------------------------------------
    def fetch(self) -> dict[tuple[str, int], list]:
        batches: dict[tuple[str, int], list] = {}
        if not self.assignment:
            time.sleep(min(self.cfg.wait_time_secs, 0.1))
            return batches
        size, deadline = 0, time.monotonic() + self.cfg.wait_time_secs
        while size < self.cfg.batch_size and not self.stopping:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for m in self.data.consume(num_messages=1000, timeout=min(remaining, 0.2)):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise KafkaClientError(f"fetch error on {m.topic()}[{m.partition()}]: {err.str()}")
                key, value = m.key(), m.value()
                batches.setdefault((m.topic(), m.partition()), []).append((m.offset(), key, value, m.timestamp()[1]))
                size += len(key or b"") + len(value or b"")
        return batches

    def write(self, batches) -> None:
        if not batches:
            return
        nexts = self.sink.write(self.id, batches)
        # Kafka's committed offsets only make lag visible; the sink already holds the truth
        self.data.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in nexts.items()], asynchronous=False)

    def check_metadata(self) -> None:
        for m in self.meta.consume(num_messages=100, timeout=0.01):
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise KafkaClientError(f"metadata fetch error: {m.error().str()}")
            self.handle(decode(m.value()), m.offset() + 1)

    def handle(self, msg: dict, next_meta_offset: int) -> None:
        kind, parts = msg.get("type"), msg.get("partitions", [])
        started: list[str] = []
        stopped: list[str] = []
        if kind == "start":
            started = [k for k in parts if k not in self.assignment]
            self._assign(started)
        elif kind in ("stop", "shutdown"):
            stopped = [k for k in (parts if kind == "stop" else list(self.assignment)) if k in self.assignment]
            self._unassign(stopped)
        elif kind != "sync":
            log.warning("consumer %d ignores unknown message %r", self.id, msg)
        self.state = ConsumerState(next_meta_offset, msg.get("msg_id"), sorted(self.assignment))
        self.sink.save_state(self.id, self.state, started=started, stopped=stopped)
        self._reply({"type": "ack", "msg_id": msg.get("msg_id"), "of": kind})
        if kind == "shutdown":
            self.stopping = True

    def _reply(self, msg: dict) -> None:
        msg = {**msg, "consumer": self.id, "assignment": sorted(self.assignment), "t": time.time()}
        self.producer.produce(self.cfg.metadata_topic, encode(msg), partition=CONTROLLER_PARTITION)
        if self.producer.flush(15) != 0:
            raise AutoscalerError("could not deliver a reply to the controller")

    def lease_expired(self) -> bool:
        """The controller that leased this group stopped renewing (killed outright, its machine
        gone): nobody will ever stop this consumer otherwise. No lease file: none in force (a
        controller that exits cleanly, or one run with --keep-consumers, removes it)."""
        try:
            age = time.time() - self.cfg.lease_path.stat().st_mtime
        except OSError:
            return False
        return age > self.cfg.controller_lease_secs

    def run(self) -> None:
        self.start()
        while not self.stopping:
            self.write(self.fetch())
            self.check_metadata()
            if self.lease_expired():
                log.warning(
                    "consumer %d: the controller's lease expired (%g s): stopping",
                    self.id,
                    self.cfg.controller_lease_secs,
                )
                self.stopping = True  # the cycle's records are written; the partitions released
                break
            if self.broker_down_since and self._broker_reachable():
                self.broker_down_since = None
            if self.broker_down_since and time.monotonic() - self.broker_down_since > BROKER_DOWN_EXIT_SECS:
                # nobody can reach this process any more (the broker is its only channel): don't linger
                raise SystemExit(f"consumer {self.id}: broker unreachable for {BROKER_DOWN_EXIT_SECS} s, exiting")
        log.info("consumer %d stopping with assignment %s", self.id, sorted(self.assignment))

    def close(self) -> None:
        close_clients((self.data, self.meta), self.producer)
        self.sink.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="one consumer of a streamscale-autoscaled group")
    ap.add_argument("--state-dir", required=True, type=Path)
    ap.add_argument("--consumer-id", required=True, type=int)
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    cfg = LiveConfig.load(args.state_dir)
    consumer = GroupConsumer(cfg, args.consumer_id)

    def _term(*_):
        consumer.stopping = True  # finish the cycle: what was read gets written

    signal.signal(signal.SIGTERM, _term)
    signal.signal(signal.SIGINT, _term)
    try:
        consumer.run()
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
