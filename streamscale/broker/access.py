"""The one place that talks to the broker's admin side and works around broker gaps.

Known gaps of the embedded broker (Tansu, measured with confluent-kafka 2.16):

* ListOffsets(latest) answers the base offset of the partition's *last batch* + 1,
  not the log end: a partition holding 25,005 records answered 25,001. The high
  watermark that Fetch responses carry is right. :meth:`BrokerAccess.end_offsets`
  therefore starts from ListOffsets and then fetches from that offset to read
  the high watermark; the answer is exact on Tansu and on Apache Kafka alike.
* ListOffsets(earliest) sometimes answers an offset inside the log: a partition whose records
  start at 0 answered 1,345 (seen on about one 8-partition topic in ten, 600,000 records from
  two producers; a consumer assigned at 0 reads records 0..1,344 all right). A query starting
  from "earliest" silently skipped them. :meth:`BrokerAccess.start_offsets` therefore fetches
  from offset 0 wherever the answer is above 0 and takes the first record's offset when it is
  lower (on Apache Kafka the fetch says out of range, and the listed offset stands).
* A metadata request naming a topic creates it. Existence checks here list all
  topics instead, so asking about a topic never creates it.
* CreatePartitions is unsupported (raises :class:`UnsupportedByBroker`).
* Deleting a topic crashes any librdkafka client (2.16) that still knows the topic: its next
  metadata answer names the topic with a null name and librdkafka dereferences it
  (strcmp(NULL) in rd_kafka_metadata_cache_find; gdb backtrace). So no client here outlives
  the call that needed it (the end-offset probe is closed after every use), and topics are
  deleted only after the processes that read or wrote them (Spark workers, generators) are gone.
* read_committed fetches are not filtered: records of aborted transactions are delivered (the
  fetch response carries no aborted-transaction list; measured with 4 transactions, 2 aborted).
  Transaction markers are skipped as usual. Tests that read transactional logs compare with a
  plain read_committed consumer's read, so they hold on this broker and on Kafka alike.
* DescribeLogDirs cannot be asked through confluent-kafka at all, so per-partition
  log sizes are not available; :meth:`supports_log_dirs` says so and callers
  estimate bytes from offset deltas times measured record sizes.
"""

from __future__ import annotations

import os
import re
import time
import uuid
from collections.abc import Iterable

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic, OffsetSpec

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import (
    BrokerUnreachable,
    ConfigError,
    KafkaClientError,
    TopicNotFound,
    UnsupportedByBroker,
)
from streamscale.waiting import wait_for

_OFFSET_INVALID = -1001

CONNECT_TIMEOUT_ENV = "STREAMSCALE_CONNECT_TIMEOUT"


def connect_timeout() -> float:
    """Seconds a command waits for the broker before giving up ($STREAMSCALE_CONNECT_TIMEOUT, 10)."""
    raw = os.environ.get(CONNECT_TIMEOUT_ENV, "10")
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (value > 0 and value < 3600):
        raise ConfigError(f"${CONNECT_TIMEOUT_ENV} must be a number of seconds in (0, 3600), not {raw!r}")
    return value


def ensure_reachable(target: KafkaConnection | str, timeout: float | None = None) -> None:
    """One metadata request, answered within ``timeout``, or one clear error (librdkafka's own
    connection complaints are silenced: they would be hundreds of lines for one fact)."""
    conn = KafkaConnection.of(target)
    bootstrap = conn.bootstrap
    timeout = connect_timeout() if timeout is None else timeout
    admin = conn.admin({"log_level": 0, "socket.connection.setup.timeout.ms": max(1000, int(timeout * 1000))})
    try:
        admin.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise BrokerUnreachable(
            f"cannot reach the Kafka broker at {bootstrap} within {timeout:g} s "
            f"({exc.args[0].str() if exc.args else exc}); is it running? "
            f"(wait longer with ${CONNECT_TIMEOUT_ENV})"
        ) from None
    finally:
        del admin


_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def check_topic_name(name: str, what: str = "topic") -> str:
    """Kafka's rule for topic names (as kafka-topics checks it), as one clear error."""
    if not isinstance(name, str) or not _TOPIC_NAME.fullmatch(name) or name in (".", ".."):
        raise ConfigError(
            f"{what} name {name!r} is not a valid Kafka topic name: use 1-249 characters "
            "from a-z, A-Z, 0-9, '.', '_' and '-'"
        )
    return name


class BrokerAccess:
    def __init__(self, target: KafkaConnection | str, client_config: dict | None = None, timeout: float = 15.0):
        self.connection = KafkaConnection.of(target, client_config)
        self.bootstrap = self.connection.bootstrap
        self.timeout = timeout
        self.admin = self.connection.admin()
        self.last_probe_records = 0  # records the last offset probe handed to Python (its cost)

    # -- topics ---------------------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """All topics with their partition counts (never creates a topic)."""
        md = self.admin.list_topics(timeout=self.timeout)
        return {
            name: len(t.partitions) for name, t in md.topics.items() if t.error is None and not name.startswith("__")
        }

    def topic_exists(self, topic: str) -> bool:
        return topic in self.topics()

    def partitions(self, topic: str) -> list[int]:
        md = self.admin.list_topics(timeout=self.timeout)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            raise TopicNotFound(f"topic '{topic}' does not exist on {self.bootstrap}")
        return sorted(t.partitions)

    def create_topic(
        self,
        topic: str,
        partitions: int = 1,
        replication_factor: int = 1,
        config: dict | None = None,
        exist_ok: bool = False,
    ) -> None:
        self.create_topics({topic: partitions}, replication_factor, config, exist_ok)

    def create_topics(
        self, topics: dict[str, int], replication_factor: int = 1, config: dict | None = None, exist_ok: bool = False
    ) -> None:
        if not topics:
            return
        new = [
            NewTopic(check_topic_name(t), num_partitions=p, replication_factor=replication_factor, config=config or {})
            for t, p in topics.items()
        ]
        futures = self.admin.create_topics(new, operation_timeout=self.timeout)
        for name, fut in futures.items():
            try:
                fut.result()
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    if exist_ok:
                        continue
                    raise ConfigError(f"topic '{name}' already exists") from exc
                raise KafkaClientError(f"could not create topic '{name}': {err.str()}") from exc
        self._await(
            lambda: all(self.topics().get(t) == p for t, p in topics.items()), f"topics {sorted(topics)} to appear"
        )

    def delete_topics(self, topics: Iterable[str], missing_ok: bool = True) -> None:
        existing = self.topics()
        names = [t for t in topics if t in existing]
        missing = [t for t in topics if t not in existing]
        if missing and not missing_ok:
            raise TopicNotFound(f"topics {missing} do not exist")
        if not names:
            return
        for name, fut in self.admin.delete_topics(names, operation_timeout=self.timeout).items():
            try:
                fut.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise KafkaClientError(f"could not delete topic '{name}': {exc.args[0].str()}") from exc
        self._await(lambda: not set(names) & set(self.topics()), f"topics {names} to disappear")

    def create_partitions(self, topic: str, total: int) -> None:
        try:
            for fut in self.admin.create_partitions([NewPartitions(topic, total)]).values():
                fut.result()
        except KafkaException as exc:
            if exc.args[0].code() == KafkaError._UNSUPPORTED_FEATURE:
                raise UnsupportedByBroker(
                    f"the broker at {self.bootstrap} does not support CreatePartitions: "
                    f"create the topic with {total} partitions instead"
                ) from exc
            raise KafkaClientError(f"could not add partitions to '{topic}': {exc.args[0].str()}") from exc

    @staticmethod
    def supports_log_dirs() -> bool:
        """DescribeLogDirs is not exposed by confluent-kafka's AdminClient (nor served by Tansu)."""
        return hasattr(AdminClient, "describe_log_dirs")

    # -- offsets --------------------------------------------------------------------------
    def _list_offsets(self, topic: str, parts: list[int], spec, isolation: str) -> dict[int, int]:
        from confluent_kafka import IsolationLevel

        level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
        req = {TopicPartition(topic, p): spec for p in parts}
        res = self.admin.list_offsets(req, isolation_level=level, request_timeout=self.timeout)
        return {tp.partition: fut.result().offset for tp, fut in res.items()}

    def start_offsets(self, topic: str, isolation: str = "read_uncommitted") -> dict[int, int]:
        """Exact log-start offsets (the first offset a consumer can read)."""
        listed = self._list_offsets(topic, self.partitions(topic), OffsetSpec.earliest(), isolation)
        above = {p: o for p, o in listed.items() if o > 0}
        return {**listed, **self._fetch_log_starts(topic, above, isolation)} if above else listed

    def _fetch_log_starts(self, topic: str, listed: dict[int, int], isolation: str) -> dict[int, int]:
        # A fetch from 0 returns the log's first batch, or an out-of-range error when the log
        # really starts later (retention, DeleteRecords): then the listed offset is right.
        def answer(_probe, p, msg):
            return listed[p] if msg.error() is not None else min(listed[p], msg.offset())

        return self._fetch_each(
            topic,
            {p: 0 for p in listed},
            isolation,
            answer,
            (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE),
            "start offsets (records could be skipped)",
            {"auto.offset.reset": "error"},
        )

    def listed_end_offsets(self, topic: str, isolation: str = "read_uncommitted") -> dict[int, int]:
        """What ListOffsets(latest) answers: too low on Tansu; use :meth:`end_offsets`."""
        return self._list_offsets(topic, self.partitions(topic), OffsetSpec.latest(), isolation)

    def end_offsets(self, topic: str, isolation: str = "read_uncommitted") -> dict[int, int]:
        """Exact log-end offsets (high watermark; last stable offset for read_committed)."""
        parts = self.partitions(topic)
        listed = self._list_offsets(topic, parts, OffsetSpec.latest(), isolation)
        return self._fetch_watermarks(topic, listed, isolation)

    def _probe(self, isolation: str, **extra):
        return self.connection.consumer(
            {
                "group.id": f"streamscale-probe-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": isolation,
                "fetch.wait.max.ms": 10,
                "max.partition.fetch.bytes": 1,
                "fetch.max.bytes": 1024 * 1024,
                "queued.max.messages.kbytes": 1024,
                "allow.auto.create.topics": False,
                **extra,
            }
        )

    def _fetch_watermarks(self, topic: str, listed: dict[int, int], isolation: str) -> dict[int, int]:
        # A fetch from the listed offset is always in range (listed <= log end) and its
        # response carries the true high watermark, which librdkafka caches: a partition is
        # answered by its first response, whether or not its records have reached the app.
        def answer(probe, p, _msg):  # _msg: None (cached)
            hi = probe.get_watermark_offsets(TopicPartition(topic, p), cached=True)[1]
            return None if hi == _OFFSET_INVALID else max(hi, listed[p])

        return self._fetch_each(
            topic,
            {p: max(o, 0) for p, o in listed.items()},
            isolation,
            answer,
            (),
            "end offsets (tail records could be lost)",
            cached=True,
        )

    def _fetch_each(
        self,
        topic: str,
        start_at: dict[int, int],
        isolation: str,
        answer,
        tolerated: tuple,
        what: str,
        extra: dict | None = None,
        cached: bool = False,
    ) -> dict[int, int]:
        """Fetch each partition from ``start_at[p]`` with a probe consumer until
        ``answer(probe, p, message)`` gives its value (None: wait for the next response); errors
        other than end-of-partition and ``tolerated`` ones are raised. ``cached``: ``answer(probe, p,
        None)`` reads what librdkafka cached from the fetch responses, so every pending partition
        is asked once after each round (its records need not have come out of the queue), and the
        records are only checked for errors.

        An answered partition is unassigned at once. The probe's one queue holds the records of all
        partitions in the order they came (a fetch answers with whole stored batches, at least one
        whatever ``max.partition.fetch.bytes`` says, and the one holding the listed offset is the
        last): left assigned, the answered partitions kept being fetched, and under load the
        records of the next partition sat behind thousands of theirs —
        at 150,000 records/s into 8 partitions a lag sample consumed ~4,000 records per partition,
        and twice in one capacity run a partition went unanswered for 15 s."""
        probe = self._probe(isolation, **(extra or {}))
        probe.assign([TopicPartition(topic, p, o) for p, o in start_at.items()])
        pending = set(start_at)
        result: dict[int, int] = {}
        deadline = time.monotonic() + self.timeout

        def settle(p, value) -> None:
            if value is not None and p in pending:
                result[p] = value
                pending.discard(p)
                # librdkafka drops the records of an unassigned partition still in the queue
                probe.incremental_unassign([TopicPartition(topic, p)])

        self.last_probe_records = 0
        try:
            while pending and time.monotonic() < deadline:
                msgs = probe.consume(num_messages=4 * len(pending), timeout=0.01)
                self.last_probe_records += len(msgs)
                for msg in msgs:
                    err = msg.error()
                    if err is not None and err.code() not in (KafkaError._PARTITION_EOF, *tolerated):
                        raise KafkaClientError(f"fetching '{topic}' [{msg.partition()}]: {err.str()}")
                    p = msg.partition()
                    if not cached and p in pending:
                        settle(p, answer(probe, p, msg))
                if cached:
                    for p in list(pending):
                        settle(p, answer(probe, p, None))
        finally:
            probe.close()  # see the module notes: a probe that outlives a topic deletion crashes
        if pending:
            raise KafkaClientError(
                f"no fetch response for '{topic}' partitions {sorted(pending)} within {self.timeout} s; "
                f"refusing to guess {what}"
            )
        return dict(sorted(result.items()))

    def committed_offsets(self, group: str, topic: str) -> dict[int, int]:
        """Offsets the consumer group has committed (partitions without a commit are left out)."""
        parts = [TopicPartition(topic, p) for p in self.partitions(topic)]
        futs = self.admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, parts)], request_timeout=self.timeout
        )
        out: dict[int, int] = {}
        for fut in futs.values():
            for tp in fut.result().topic_partitions:
                if tp.error is None and tp.offset >= 0:
                    out[tp.partition] = tp.offset
        return out

    def commit_offsets(self, group: str, topic: str, offsets: dict[int, int]) -> None:
        """Record a consumer group's progress (what a Spark query has processed), for lag monitoring."""
        tps = [TopicPartition(topic, p, o) for p, o in offsets.items()]
        futs = self.admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, tps)], request_timeout=self.timeout
        )
        for fut in futs.values():
            fut.result()

    def lag(self, group: str, topic: str) -> dict[int, int]:
        """Per-partition consumer lag: exact end offset minus committed offset."""
        ends = self.end_offsets(topic)
        committed = self.committed_offsets(group, topic)
        start = self.start_offsets(topic) if len(committed) < len(ends) else {}
        return {p: e - committed.get(p, start.get(p, 0)) for p, e in ends.items()}

    # -- housekeeping ---------------------------------------------------------------------
    def _await(self, cond, what: str) -> None:
        wait_for(cond, self.timeout, what, interval=0.05)

    def close(self) -> None:
        # librdkafka handles destroyed during interpreter shutdown can crash: drop it now
        self.admin = None

    def __enter__(self) -> BrokerAccess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
