"""Per-partition log sizes from the brokers' DescribeLogDirs (what Landau et al.'s monitor reads).

confluent-kafka's AdminClient has no DescribeLogDirs (librdkafka does not implement it, up to
2.16), so this one call goes through kafka-python's admin client, which does. The connection's
librdkafka-style properties are translated to kafka-python's arguments; a property it has no
equivalent for (OAUTHBEARER, Kerberos, a PKCS#12 keystore, ...) makes the sizes unavailable with
a one-line reason instead of connecting with the wrong credentials. A cluster may also refuse the
call (it needs DESCRIBE on the cluster resource): that too raises :class:`LogDirsUnavailable`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

from streamscale.broker.connection import KafkaConnection, client_logger

# librdkafka property -> kafka-python KafkaAdminClient argument
_ARGUMENTS = {
    "client.id": "client_id",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
}


class LogDirsUnavailable(Exception):
    """The sizes cannot be asked for on this cluster; the message says why, in one line."""


def admin_arguments(conn: KafkaConnection) -> dict:
    """kafka-python's arguments for this connection (or :class:`LogDirsUnavailable`)."""
    args: dict = {"bootstrap_servers": conn.bootstrap.split(","), "request_timeout_ms": 10_000}
    for name, value in conn.properties:
        if name in _ARGUMENTS:
            args[_ARGUMENTS[name]] = value.upper() if "mechanism" in name or name == "security.protocol" else value
        elif name == "ssl.endpoint.identification.algorithm":
            args["ssl_check_hostname"] = value.lower() == "https"
        elif name.startswith(("sasl.", "ssl.", "security.")):
            raise LogDirsUnavailable(f"the DescribeLogDirs client has no equivalent of the property {name}")
        # anything else tunes librdkafka's reading and writing: kafka-python's defaults serve one call
    return args


def quiet_kafka_python() -> None:
    """kafka-python logs under "kafka": to the Kafka clients' log file, never the terminal."""
    log = logging.getLogger("kafka")
    if not log.handlers:
        for handler in client_logger().handlers:
            log.addHandler(handler)
        log.propagate = False
        log.setLevel(logging.WARNING)


class LogDirSizes:
    """Bytes each partition's log holds (its leader's replica), asked of every broker at once."""

    def __init__(self, conn: KafkaConnection | str):
        self.conn = KafkaConnection.of(conn)
        self._admin = None

    def _client(self):
        if self._admin is None:
            from kafka import KafkaAdminClient

            quiet_kafka_python()
            try:
                self._admin = KafkaAdminClient(**admin_arguments(self.conn))
            except LogDirsUnavailable:
                raise
            except Exception as exc:  # noqa: BLE001 - any failure to connect: the caller falls back
                raise LogDirsUnavailable(f"could not connect for DescribeLogDirs: {exc}") from None
        return self._admin

    def sizes(self, partitions: Mapping[str, Iterable[int]]) -> dict[tuple[str, int], int]:
        """{(topic, partition): bytes} for the given partitions of each topic; a partition with
        replicas on several brokers counts the largest (the leader's log is never behind its
        followers'). A partition missing from the answer makes the answer unavailable: Kafka
        answers a client without DESCRIBE on the cluster with no log directories, not an error."""
        wanted = {t: set(ps) for t, ps in partitions.items()}
        try:
            answers = self._client().describe_log_dirs(list(wanted))
        except LogDirsUnavailable:
            raise
        except Exception as exc:  # noqa: BLE001 - refused or unsupported: the caller falls back
            raise LogDirsUnavailable(f"DescribeLogDirs failed: {exc}") from None
        got = collect_sizes(answers, set(wanted))
        missing = sorted(f"{t}-{p}" for t, ps in wanted.items() for p in ps if (t, p) not in got)
        if missing:
            raise LogDirsUnavailable(
                f"the DescribeLogDirs answer lacks {', '.join(missing[:3])}{' …' if len(missing) > 3 else ''} "
                "(is DESCRIBE on the cluster allowed?)"
            )
        return got

    def close(self) -> None:
        if self._admin is not None:
            self._admin.close()
            self._admin = None


def collect_sizes(answers: list[Mapping], wanted: set[str]) -> dict[tuple[str, int], int]:
    """The sizes in kafka-python's answer: ``[{"broker": id, "log_dirs": [{"error_code",
    "log_dir", "topics": [{"name", "partitions": [{"partition_index", "partition_size",
    "is_future_key", ...}]}]}]}]``."""
    out: dict[tuple[str, int], int] = {}
    for broker in answers:
        for log_dir in broker["log_dirs"]:
            if log_dir.get("error_code"):
                raise LogDirsUnavailable(
                    f"broker {broker.get('broker')} answered DescribeLogDirs with error code "
                    f"{log_dir['error_code']} for {log_dir.get('log_dir', 'a log directory')}"
                )
            for topic in log_dir.get("topics", []):
                if topic["name"] not in wanted:
                    continue
                for part in topic["partitions"]:
                    if part.get("is_future_key"):
                        continue  # a replica being moved between directories: not the live log
                    key = (topic["name"], int(part["partition_index"]))
                    out[key] = max(out.get(key, 0), int(part["partition_size"]))
    return out
