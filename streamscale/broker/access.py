"""The one place that talks to the broker's admin side: topics, offsets, consumer-group offsets.

Offsets come from ListOffsets, exact on Apache Kafka: the log-start offset (earliest), the high
watermark (latest, read_uncommitted) and the last stable offset (latest, read_committed).

Topic existence is answered by listing all topics, never by a metadata request naming the topic:
a cluster with ``auto.create.topics.enable=true`` (Kafka's default, though not the embedded
broker's) would create it. Per-partition log sizes (DescribeLogDirs, which librdkafka lacks) are
in :mod:`streamscale.broker.log_dirs`.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic, OffsetSpec

from streamscale.broker.connection import KafkaConnection
from streamscale.errors import (
    AccessDenied,
    AuthenticationFailed,
    BrokerUnreachable,
    ConfigError,
    KafkaClientError,
    TopicNotFound,
    UnsupportedByBroker,
)
from streamscale.waiting import wait_for

_OFFSET_INVALID = -1001

CONNECT_TIMEOUT_ENV = "STREAMSCALE_CONNECT_TIMEOUT"
# answers of a partition whose leader is moving or not yet serving it: ask again. librdkafka
# does not flag them retriable, though Kafka's own clients retry them. The two epoch answers come
# when the client's metadata and the broker's partition state are a moment apart: right after a
# topic is created, about one in 1,500 partitions answers "leader epoch is newer than broker epoch"
_LEADER_ERRORS = (
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.FENCED_LEADER_EPOCH,
    # a new leader still catching up to the high watermark its predecessor had
    KafkaError.OFFSET_NOT_AVAILABLE,
)


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
    connection complaints are silenced: they would be hundreds of lines for one fact).

    librdkafka retries a refused authentication or a failed TLS handshake for ever, as if the
    broker were down: its error callback says which, and that ends the wait at once."""
    conn = KafkaConnection.of(target)
    bootstrap = conn.bootstrap
    timeout = connect_timeout() if timeout is None else timeout
    errors: list = []
    admin = conn.admin(
        {
            "log_level": 0,
            "socket.connection.setup.timeout.ms": max(1000, int(timeout * 1000)),
            "error_cb": errors.append,
        }
    )
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                admin.list_topics(timeout=min(1.0, max(0.1, deadline - time.monotonic())))
                return
            except KafkaException as exc:
                last = exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else str(exc)
            admin.poll(0)  # serves the error callback
            refusal = security_failure(conn, errors)
            if refusal is not None:
                raise refusal
            if time.monotonic() >= deadline:
                hint = ""
                if dict(conn.properties).get("security.protocol", "PLAINTEXT").upper() == "PLAINTEXT":
                    hint = "; a secured cluster also needs its client properties (--kafka-config FILE)"
                raise BrokerUnreachable(
                    f"cannot reach the Kafka broker at {bootstrap} within {timeout:g} s ({last}); "
                    f"is it running?{hint} (wait longer with ${CONNECT_TIMEOUT_ENV})"
                )
    finally:
        del admin


def security_failure(conn: KafkaConnection, errors: Iterable) -> Exception | None:
    """The error to raise for librdkafka errors that say the broker refused the credentials or the
    TLS handshake failed (None: none of those)."""
    props = dict(conn.properties)
    for err in errors:
        code = err.code() if hasattr(err, "code") else None
        text = err.str() if hasattr(err, "str") else str(err)
        named = re.search(r"://([^/\s]+)/", text)  # "sasl_ssl://HOST:PORT/bootstrap: ..."
        broker = named.group(1) if named else conn.bootstrap
        if code == KafkaError._AUTHENTICATION:
            user = props.get("sasl.username", "?")
            mech = props.get("sasl.mechanism", props.get("sasl.mechanisms", "GSSAPI"))
            return AuthenticationFailed(
                f"authentication failed for user {user!r} ({mech}) at broker {broker}: "
                "wrong password or unknown user (check sasl.username / sasl.password)"
            )
        if code == KafkaError._SSL:
            reason = text.split("SSL handshake failed:", 1)[-1].strip().split(":")[-1].strip()
            if "verify failed" in text:
                reason = "the broker's certificate is not signed by a CA this client trusts (ssl.ca.location)"
            return AuthenticationFailed(f"TLS handshake with broker {broker} failed: {reason}")
    return None


def denied(err, operation: str, resource: str, conn: KafkaConnection) -> AccessDenied | None:
    """An :class:`AccessDenied` naming the user, the operation and the resource, when ``err`` is
    an authorization failure (None otherwise)."""
    code = err.code() if hasattr(err, "code") else None
    if code not in (
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    ):
        return None
    return acls_deny(conn, operation, resource)


def acls_deny(conn: KafkaConnection, operation: str, resource: str) -> AccessDenied:
    """The one line for an operation the broker's ACLs deny this connection's user."""
    user = dict(conn.properties).get("sasl.username", "ANONYMOUS")
    return AccessDenied(f"user {user!r} may not {operation} {resource} on {conn.bootstrap}: the broker's ACLs deny it")


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

    # -- topics ---------------------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """All topics with their partition counts (never creates a topic)."""
        md = self.admin.list_topics(timeout=self.timeout)
        return {
            name: len(t.partitions) for name, t in md.topics.items() if t.error is None and not name.startswith("__")
        }

    def partition_layout(self, topics: list[str] | None = None) -> dict[str, dict[int, tuple[int, list, list]]]:
        """{topic: {partition: (leader, replicas, in-sync replicas)}} as the cluster's metadata says
        (leader -1: none); ``topics`` None: every topic but the internal ones."""
        md = self.admin.list_topics(timeout=self.timeout)
        return {
            name: {p: (pm.leader, list(pm.replicas), list(pm.isrs)) for p, pm in t.partitions.items()}
            for name, t in md.topics.items()
            if t.error is None and (name in topics if topics is not None else not name.startswith("__"))
        }

    def topic_exists(self, topic: str) -> bool:
        return topic in self.topics()

    def check_allowed(self, topic: str, operation: str = "describe") -> None:
        """:class:`AccessDenied` when the ACLs deny this user ``operation`` (describe, read, write)
        on ``topic``, else nothing; the topic need not exist. A topic missing from the listing may
        be hidden by the ACLs (a cluster lists only what the user may describe): this tells the two
        apart. Asked with DescribeTopics, which never creates a topic, and the topic's authorized
        operations, which a broker gives from Kafka 2.3."""
        from confluent_kafka import TopicCollection
        from confluent_kafka.admin import AclOperation

        try:
            fut = self.admin.describe_topics(
                TopicCollection([topic]), request_timeout=self.timeout, include_authorized_operations=True
            )[topic]
            allowed = fut.result().authorized_operations
        except KafkaException as exc:
            refused = denied(exc.args[0], operation, f"topic '{topic}'", self.connection)
            if refused is not None:
                raise refused from None
            return
        except Exception:  # noqa: BLE001 - a broker without the call: the operation itself will tell
            return
        wanted = getattr(AclOperation, operation.upper(), None)
        if allowed and wanted is not None and wanted not in allowed and AclOperation.ALL not in allowed:
            raise acls_deny(self.connection, operation, f"topic '{topic}'")

    def partitions(self, topic: str) -> list[int]:
        md = self.admin.list_topics(timeout=self.timeout)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            self.check_allowed(topic)
            raise TopicNotFound(f"topic '{topic}' does not exist on {self.bootstrap}")
        return sorted(t.partitions)

    def _served(self, topics: dict[str, int]) -> bool:
        md = self.admin.list_topics(timeout=self.timeout)
        for name, count in topics.items():
            t = md.topics.get(name)
            if t is None or t.error is not None or len(t.partitions) != count:
                return False
            if any(p.leader < 0 for p in t.partitions.values()):
                return False
        return True

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
                refused = denied(err, "create", f"topic '{name}'", self.connection)
                if refused is not None:
                    raise refused from None
                raise KafkaClientError(f"could not create topic '{name}': {err.str()}") from exc
        # created is not yet served: wait until every partition has a leader, as Kafka's own test
        # harnesses do, or the first ListOffsets or produce right after would be refused
        self._await(lambda: self._served(topics), f"topics {sorted(topics)} to have leaders")

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
                refused = denied(exc.args[0], "delete", f"topic '{name}'", self.connection)
                if refused is not None:
                    raise refused from None
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
        self._await(lambda: self._served({topic: total}), f"topic '{topic}' to have {total} partitions with leaders")

    # -- offsets --------------------------------------------------------------------------
    def _list_offsets(self, topic: str, parts: list[int], spec, isolation: str) -> dict[int, int]:
        from confluent_kafka import IsolationLevel

        level = IsolationLevel.READ_COMMITTED if isolation == "read_committed" else IsolationLevel.READ_UNCOMMITTED
        req = {TopicPartition(topic, p): spec for p in parts}
        deadline = time.monotonic() + self.timeout
        while True:
            res = self.admin.list_offsets(req, isolation_level=level, request_timeout=self.timeout)
            try:
                return {tp.partition: fut.result().offset for tp, fut in res.items()}
            except KafkaException as exc:
                # a leader moving or not yet known (a topic just created, a broker restarting)
                err = exc.args[0]
                if not (err.retriable() or err.code() in _LEADER_ERRORS) or time.monotonic() > deadline:
                    raise KafkaClientError(f"offsets of '{topic}': {exc.args[0].str()}") from exc
                time.sleep(0.05)

    def start_offsets(self, topic: str, isolation: str = "read_uncommitted") -> dict[int, int]:
        """Exact log-start offsets (the first offset a consumer can read)."""
        return dict(sorted(self._list_offsets(topic, self.partitions(topic), OffsetSpec.earliest(), isolation).items()))

    def end_offsets(self, topic: str, isolation: str = "read_uncommitted") -> dict[int, int]:
        """Exact log-end offsets (high watermark; last stable offset for read_committed)."""
        return dict(sorted(self._list_offsets(topic, self.partitions(topic), OffsetSpec.latest(), isolation).items()))

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
