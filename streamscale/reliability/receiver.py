"""The reliability tester's receiving side: every id a topic holds, read from the start to its end
offsets over a clean link, and the accounting of Wu, Shang and Wolter, §V:

    L = N - M',  D = M - M',  alpha = L / N,  beta = D / N

where M is the number of messages received and M' the number of distinct ids among them.
"""

from __future__ import annotations

import logging
import time
import uuid

import numpy as np
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from streamscale.broker.access import BrokerAccess
from streamscale.broker.connection import KafkaConnection
from streamscale.errors import KafkaClientError, WaitTimeout
from streamscale.reliability.sender import ID_DIGITS
from streamscale.waiting import wait_for

log = logging.getLogger(__name__)


def account(ids: np.ndarray, n: int) -> tuple[int, int, int, int]:
    """(M, M', L, D) from the received ids; ids outside [0, N) are not messages of this trial."""
    valid = ids[(ids >= 0) & (ids < n)]
    m = int(valid.size)
    distinct = int(np.count_nonzero(np.bincount(valid, minlength=n))) if m else 0
    return m, distinct, n - distinct, m - distinct


def _ends(conn: KafkaConnection, topic: str, isolation: str, timeout_s: float) -> dict[int, int]:
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
    log.debug("end offsets of %s (%s): %s", topic, isolation, ends)
    return ends


def receive(bootstrap: KafkaConnection | str, topic: str, isolation: str, timeout_s: float) -> np.ndarray:
    """Every id in the topic (read from the start up to the end offsets, at ``isolation``).

    The end offsets are asked again, of a new client, once the reading reached them, and the reading
    goes on while they grew: a node that rejoined after a fault may answer from the metadata it had
    when it went, and one answer from it would end the reading early and count as lost what the
    cluster holds."""
    conn = KafkaConnection.of(bootstrap)
    deadline = time.monotonic() + timeout_s
    ends = _ends(conn, topic, isolation, timeout_s)
    c = conn.consumer(
        conn.reader_settings(
            f"trak-{uuid.uuid4().hex[:8]}", **{"isolation.level": isolation, "enable.partition.eof": True}
        )
    )
    ids: list[int] = []
    reached = dict.fromkeys(ends, 0)
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
        while True:
            _read_to(c, topic, ends, reached, ids, deadline, timeout_s)
            again = _ends(conn, topic, isolation, max(1.0, deadline - time.monotonic()))
            new = sorted(set(again) - set(reached))
            if new:  # partitions added meanwhile: read from their start
                c.incremental_assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in new])
                reached.update(dict.fromkeys(new, 0))
            if all(end <= reached[p] for p, end in again.items()):
                return np.asarray(ids, dtype=np.int64)
            log.warning("end offsets of %s moved from %s to %s after reading to them", topic, ends, again)
            ends = again
    finally:
        c.close()


def _read_to(
    c, topic: str, ends: dict[int, int], reached: dict[int, int], ids: list[int], deadline: float, timeout_s: float
) -> None:
    """Consume until every partition's position reached ``ends`` (``reached`` keeps the positions)."""
    pending = {p for p, e in ends.items() if e > reached.get(p, 0)}
    while pending:
        if time.monotonic() > deadline:
            raise WaitTimeout(
                f"receiver did not reach the end of {topic} partitions {sorted(pending)} within {timeout_s} s"
            )
        eofs = False
        got = 0
        for m in c.consume(num_messages=10_000, timeout=0.5):
            err = m.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    eofs = True
                    continue
                raise KafkaClientError(f"receiving {topic}: {err.str()}")
            got += 1
            v = m.value()
            try:
                ids.append(int(v[:ID_DIGITS]))
            except (TypeError, ValueError):
                ids.append(-1)
        if eofs or not got:
            for tp in c.position([TopicPartition(topic, p) for p in pending]):
                if tp.offset >= 0:
                    reached[tp.partition] = max(reached.get(tp.partition, 0), tp.offset)
            pending = {p for p in pending if reached[p] < ends[p]}
