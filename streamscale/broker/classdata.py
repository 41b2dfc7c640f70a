"""Write the embedded broker's class-data archive (``make install``; see ``kafka_server``).

One broker runs what a benchmark asks of it first (a topic created, records produced idempotently,
a consumer group reading and committing them) and writes the classes it loaded as it stops.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from streamscale.broker import kafka_server


def _workload(bootstrap: str) -> None:
    from streamscale.broker.access import BrokerAccess
    from streamscale.broker.connection import KafkaConnection

    with BrokerAccess(bootstrap) as access:
        access.create_topics({"class-data": 2})
    connection = KafkaConnection.of(bootstrap)
    producer = connection.producer({"enable.idempotence": True})
    for i in range(1000):
        producer.produce("class-data", b"%d" % i, key=b"%d" % (i % 10))
    producer.flush(30)
    consumer = connection.consumer({"group.id": "class-data", "auto.offset.reset": "earliest"})
    consumer.subscribe(["class-data"])
    got, deadline = 0, time.monotonic() + 60
    try:
        while got < 1000 and time.monotonic() < deadline:
            got += sum(m.error() is None for m in consumer.consume(1000, 0.5))
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()


def build_archive() -> int:
    from streamscale.broker.embedded import EmbeddedBroker

    path = kafka_server.kafka_libs() / kafka_server.CLASS_DATA_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    os.environ["STREAMSCALE_KAFKA_CDS"] = "0"  # not the old archive while the new one is made
    os.environ[kafka_server.CLASS_DATA_DUMP_ENV] = str(tmp)
    broker = EmbeddedBroker()
    broker.start()
    try:
        _workload(broker.bootstrap)
    finally:
        proc = broker.proc
        broker.stop()  # SIGTERM: Kafka's shutdown, then the JVM writes the archive as it exits
    if not keep_archive(tmp, path, proc is not None and proc.returncode in (0, 143)):
        print(f"the broker's JVM wrote no class-data archive (exit code {proc and proc.returncode})")
        return 1
    return 0


def keep_archive(tmp: Path, path: Path, clean_exit: bool) -> bool:
    """Move the archive a JVM wrote to ``tmp`` into ``path``, or remove it. A JVM killed while
    writing can leave a truncated file, which crashes the next JVM that maps it: only a whole one
    from a clean exit is kept."""
    if not clean_exit or not tmp.is_file() or tmp.stat().st_size == 0:
        tmp.unlink(missing_ok=True)
        return False
    tmp.replace(path)
    return True


if __name__ == "__main__":
    sys.exit(build_archive())
