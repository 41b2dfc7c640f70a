"""Per-partition load with a rate that can change while it runs (tests, benchmarks, demos).

Every record's value is unique (``<partition>-<sequence>`` padded to a fixed size), and the
delivered (partition, offset) pairs are kept, so a sink can be checked for exactly-once delivery.
"""

from __future__ import annotations

import threading
import time

from streamscale.broker.connection import KafkaConnection


class PartitionLoad:
    def __init__(self, bootstrap: KafkaConnection | str, topic: str, partitions: int, value_bytes: int = 200):
        self.topic = topic
        self.partitions = partitions
        self.value_bytes = value_bytes
        self.rates = [0.0] * partitions  # records/s per partition
        self.delivered: set[tuple[int, int]] = set()
        self.errors: list[str] = []
        self.sent = 0
        self._producer = KafkaConnection.of(bootstrap).producer({"enable.idempotence": True, "linger.ms": 5})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="partition-load", daemon=True)
        self._lock = threading.Lock()

    def set_rate(self, records_per_s: float | list[float]) -> None:
        with self._lock:
            self.rates = list(records_per_s) if isinstance(records_per_s, list) else [records_per_s] * self.partitions

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(err.str())
        else:
            self.delivered.add((msg.partition(), msg.offset()))

    def _run(self) -> None:
        seq = [0] * self.partitions
        credit = [0.0] * self.partitions
        last = time.monotonic()
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                rates = list(self.rates)
            for p, r in enumerate(rates):
                credit[p] = min(credit[p] + r * (now - last), max(r, 1.0))  # no catch-up burst after a pause
                while credit[p] >= 1:
                    value = f"{p}-{seq[p]}".encode().ljust(self.value_bytes, b".")
                    self._producer.produce(
                        self.topic, value, key=seq[p].to_bytes(8, "big"), partition=p, on_delivery=self._delivered
                    )
                    seq[p] += 1
                    credit[p] -= 1
                    self.sent += 1
            last = now
            self._producer.poll(0)
            self._stop.wait(0.01)

    def start(self) -> PartitionLoad:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        if self._producer.flush(30) != 0:
            self.errors.append("records still undelivered after 30 s")

    def __enter__(self) -> PartitionLoad:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
