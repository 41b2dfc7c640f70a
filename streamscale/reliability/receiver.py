"""The reliability tester's receiving side: every id a topic holds, read from the start to its end
offsets over a clean link, and the accounting of seed 003 §V:

    L = N - M',  D = M - M',  alpha = L / N,  beta = D / N

where M is the number of messages received and M' the number of distinct ids among them.
"""

from __future__ import annotations

import time
import uuid

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from streamscale.broker.access import BrokerAccess
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import KafkaClientError, WaitTimeout
from streamscale.reliability.sender import ID_DIGITS
from streamscale.waiting import wait_for


def account(ids: np.ndarray, n: int) -> tuple[int, int, int, int]:
    """(M, M', L, D) from the received ids; ids outside [0, N) are not messages of this trial."""
    valid = ids[(ids >= 0) & (ids < n)]
    m = int(valid.size)
    distinct = int(np.count_nonzero(np.bincount(valid, minlength=n))) if m else 0
    return m, distinct, n - distinct, m - distinct


def receive(bootstrap: KafkaConnection | str, topic: str, isolation: str, timeout_s: float) -> np.ndarray:
    """Every id in the topic (read from the start up to the end offsets, at ``isolation``)."""
    conn = KafkaConnection.of(bootstrap)
    with BrokerAccess(conn) as access:
        if isolation == "read_committed":
            # the coordinator writes a transaction's markers after its commit (or abort) returned:
            # the last stable offset reaches the log end once every transaction is decided
            wait_for(
                lambda: access.end_offsets(topic, isolation) == access.end_offsets(topic),
                timeout_s,
                f"every transaction in {topic} to be decided",
            )
        ends = access.end_offsets(topic, isolation)
    c = conn.consumer(
        conn.reader_settings(
            f"trak-{uuid.uuid4().hex[:8]}", **{"isolation.level": isolation, "enable.partition.eof": True}
        )
    )
    ids: list[int] = []
    pending = {p for p, e in ends.items() if e > 0}
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        deadline = time.monotonic() + timeout_s
        while pending:
            if time.monotonic() > deadline:
                raise WaitTimeout(
                    f"receiver did not reach the end of {topic} partitions {sorted(pending)} within {timeout_s} s"
                )
            eofs = False
            for m in c.consume(num_messages=10_000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eofs = True
                        continue
                    raise KafkaClientError(f"receiving {topic}: {err.str()}")
                v = m.value()
                try:
                    ids.append(int(v[:ID_DIGITS]))
                except (TypeError, ValueError):
                    ids.append(-1)
            if eofs or not ids:
                positions = c.position([TopicPartition(topic, p) for p in pending])
                pending -= {tp.partition for tp in positions if tp.offset >= ends[tp.partition]}
    finally:
        c.close()
    return np.asarray(ids, dtype=np.int64)
