"""One Kafka connection, from which every Kafka client streamscale makes is made.

A connection is the bootstrap servers plus client properties (security, SASL, SSL, timeouts, any
librdkafka property): as OpenMessaging Benchmark's driver file, the user's whole client
configuration in one place. It is built once per command from, lowest precedence first,

    a spec's ``kafka:`` section  <  ``--kafka-config FILE`` ($STREAMSCALE_KAFKA_CONFIG)  <  ``-X key=value``

and the bootstrap from ``--bootstrap-servers``, else ``-X bootstrap.servers``, else the spec, else
$STREAMSCALE_BOOTSTRAP_SERVERS, else the embedded broker. Properties are checked at once: one unknown
to librdkafka, or with a value it refuses, is one line naming it; the few that streamscale sets per
client for its own correctness (group ids, offsets commits, acks and idempotence, transactions,
isolation) are refused with what to use instead, as Spark's Kafka source refuses ``kafka.group.id``.

Every producer, consumer and admin client is made by :meth:`KafkaConnection.producer`,
:meth:`~KafkaConnection.consumer` and :meth:`~KafkaConnection.admin` (a test checks that no other
module constructs one). A client's own settings win over the user's properties where streamscale
sets them (``settings``); ``defaults`` are tuning the user's properties may override. The Spark
source and sink receive the properties as ``kafka.*`` options (:meth:`spark_options`), child
processes through their configuration (pickled, a config file, or an argument).

With $STREAMSCALE_KAFKA_TRACE set to a file, every client made appends one JSON line (process,
kind, the user's properties it got) to it: how a test sees that a property reached every client of
a run, in every process.

librdkafka's own log lines (connection failures, retries, a producer's purge at close) go to a
file, not to the terminal: :func:`kafka_log_path`, like Spark's and Java's output.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, field_validator

from streamscale.errors import ConfigError
from streamscale.specs import StrictModel

BOOTSTRAP_ENV = "STREAMSCALE_BOOTSTRAP_SERVERS"
CONFIG_FILE_ENV = "STREAMSCALE_KAFKA_CONFIG"  # a properties file, as --kafka-config
TRACE_ENV = "STREAMSCALE_KAFKA_TRACE"
LOG_ENV = "STREAMSCALE_KAFKA_LOG"  # librdkafka's log file; "-": stderr

# Properties streamscale sets per client because its results depend on them.
MANAGED = {
    "group.id": "streamscale names its consumer groups per run (commit groups: the SUT's commitGroup)",
    "group.instance.id": "streamscale's consumers are not static group members",
    "enable.auto.commit": "streamscale commits offsets itself, after a batch has been processed",
    "auto.offset.reset": "use startingOffsets (Spark source) or the autoscaler's --start-from",
    "enable.partition.eof": "streamscale's readers set it where they need it",
    "transactional.id": "the reliability spec's semantics exactly-once makes the transactional producer",
    "enable.idempotence": "the reliability spec's semantics choose it (the sink is always idempotent)",
    "acks": "the reliability spec's semantics choose it (the sink always waits for all replicas)",
    "isolation.level": "the reliability spec's semantics choose it; in Spark, the source option kafka.isolation.level",
}


def kafka_log_path() -> Path | None:
    """Where every Kafka client's own log lines go: $STREAMSCALE_KAFKA_LOG, by default
    ``<tmp>/streamscale-logs/kafka-<pid>.log``; None for ``-`` (stderr). The first call fixes the
    default in the environment, so that the processes started afterwards (load generators, Spark's
    Python workers) append to the same file rather than one file each."""
    given = os.environ.get(LOG_ENV)
    if not given:
        given = os.environ[LOG_ENV] = str(Path(tempfile.gettempdir()) / "streamscale-logs" / f"kafka-{os.getpid()}.log")
    return None if given == "-" else Path(given)


@functools.cache
def client_logger() -> logging.Logger:
    """The Python logger every client gets as ``logger``: without one, librdkafka prints its lines
    (``%3|...|FAIL|...``) on the process's stderr, which in the driver is the user's terminal."""
    log = logging.getLogger("streamscale.librdkafka")
    log.propagate = False  # an application's root handlers (the autoscaler's consoles) stay quiet
    log.setLevel(logging.DEBUG)  # what librdkafka sends is what its log_level / debug let through
    path = kafka_log_path()
    handler: logging.Handler
    if path is None:
        handler = logging.StreamHandler(sys.stderr)
    else:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handler = logging.FileHandler(path, delay=True)  # opened by the first line
        except OSError:  # an unwritable log directory must not stop a client
            handler = logging.NullHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s pid %(process)d %(levelname)s %(message)s"))
    log.addHandler(handler)
    return log


def _with_logger(conf: dict) -> dict:
    conf.setdefault("logger", client_logger())
    return conf


def _trace(kind: str, conf: Mapping, user: Iterable[str]) -> None:
    path = os.environ.get(TRACE_ENV)
    if not path:
        return
    line = json.dumps(
        {
            "pid": os.getpid(),
            "argv0": sys.argv[0] if sys.argv else "",
            "kind": kind,
            "properties": {k: str(conf.get(k)) for k in user},
        }
    )
    with open(path, "a") as f:
        f.write(line + "\n")  # one short write in append mode: lines of several processes do not mix


# Client properties whose values are credentials: never written into results (spec copies, reports)
_SECRET_MARKS = (
    "password",
    "secret",
    "jaas",
    "key.pem",
    "ssl_key",
    "keystore.key",
    "user.info",
    "oauthbearer.config",
    "token",
)
MASK = "****"


def is_secret(name: str) -> bool:
    return any(m in name.lower() for m in _SECRET_MARKS)


def masked(props: Mapping) -> dict:
    """The properties with every credential's value replaced by ``MASK``."""
    return {k: (MASK if is_secret(str(k)) else v) for k, v in props.items()}


def parse_properties_text(text: str, source: str) -> dict[str, str]:
    """Kafka client properties as a Java properties file holds them (``key=value`` or
    ``key: value``, ``#`` and ``!`` comments, a trailing backslash continues a line)."""
    props: dict[str, str] = {}
    pending = ""
    for n, raw in enumerate(text.splitlines(), 1):
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut <= 0:
            raise ConfigError(f"{source}:{n}: not a property (key=value): {line!r}")
        props[line[:cut].strip()] = line[cut + 1 :].strip()
    return props


def read_properties_file(path: str | Path) -> dict[str, str]:
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"Kafka client config {path}: {exc.strerror or exc}") from None
    return parse_properties_text(text, str(path))


def parse_assignments(items: Iterable[str], option: str = "-X") -> dict[str, str]:
    """``key=value`` strings (as kcat's -X) to properties."""
    props: dict[str, str] = {}
    for item in items or ():
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{option} {item!r}: use key=value, e.g. {option} security.protocol=SASL_SSL")
        props[key.strip()] = value.strip()
    return props


def check_properties(props: Mapping[str, str]) -> None:
    """Refuse managed properties with what to use instead, and anything librdkafka refuses, naming it."""
    for key in props:
        if key in MANAGED:
            raise ConfigError(f"Kafka property {key!r} is set by streamscale: {MANAGED[key]}")
        if key == "bootstrap.servers":
            raise ConfigError("give bootstrap.servers as the bootstrap (--bootstrap-servers), not as a property")
    check_known(props)


def check_known(props: Mapping[str, str]) -> None:
    """Anything librdkafka refuses (an unknown name, a bad value), as one line naming it."""
    if not props:
        return

    # A producer with no bootstrap servers connects to nothing; librdkafka checks every name and
    # value as it is configured (consumer-only properties are accepted with a warning, dropped here).
    problem = _refusal(tuple(sorted(props.items())))
    if problem is None:
        return
    # name the user's property (librdkafka may name an alias: linger.ms -> queue.buffering.max.ms)
    culprit = next((k for k in props if _refusal(((k, props[k]),)) is not None), None)
    where = f"Kafka client property {culprit!r}" if culprit else "Kafka client properties"
    raise ConfigError(f"{where}: {problem}")


@functools.lru_cache(maxsize=64)
def _refusal(props: tuple[tuple[str, str], ...]) -> str | None:
    """librdkafka's objection to ``props``, or None. Cached: the same properties are checked
    wherever a connection is rebuilt from them (a config's property, every sink writer)."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({**dict(props), "logger": _Silent(), "log_level": 0})
    except KafkaException as exc:
        err = exc.args[0]
        return err.str() if hasattr(err, "str") else str(err)
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


class _Silent:
    """A logger for the throw-away validation client: its complaints about having no broker are noise."""

    def log(self, *args, **kwargs) -> None:
        pass

    debug = info = warning = error = critical = exception = log


# How to reach and authenticate to the cluster: what every kind of client needs (a consumer's
# tuning given to a producer or an admin client would only be warned about and ignored).
_CONNECTION_PREFIXES = ("security.", "sasl.", "ssl.", "client.", "socket.", "broker.", "metadata.", "reconnect.")


def connection_level(props: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The properties of ``props`` that say how to reach the cluster (for any kind of client)."""
    return tuple((k, v) for k, v in props if k.startswith(_CONNECTION_PREFIXES))


@dataclass(frozen=True)
class KafkaConnection:
    """Bootstrap servers and the user's client properties (validated; see the module notes)."""

    bootstrap: str
    properties: tuple[tuple[str, str], ...] = ()

    def __str__(self) -> str:  # messages name the cluster by its bootstrap servers
        return self.bootstrap

    # -- building ------------------------------------------------------------------------
    @classmethod
    def of(cls, target: KafkaConnection | str, properties: Mapping[str, str] | None = None) -> KafkaConnection:
        """A connection from a connection or a bootstrap string (the older APIs take strings)."""
        if isinstance(target, KafkaConnection):
            return target if not properties else target.with_properties(properties)
        if not isinstance(target, str) or not target.strip():
            raise ConfigError(f"Kafka bootstrap servers must be HOST:PORT[,HOST:PORT...], not {target!r}")
        props = dict(properties or {})
        check_properties(props)
        return cls(target.strip(), tuple(sorted(props.items())))

    def with_properties(self, more: Mapping[str, str]) -> KafkaConnection:
        props = {**dict(self.properties), **dict(more)}
        check_properties(props)
        return KafkaConnection(self.bootstrap, tuple(sorted(props.items())))

    # -- clients -------------------------------------------------------------------------
    def config(self, settings: Mapping | None = None, *, defaults: Mapping | None = None) -> dict:
        """librdkafka configuration: ``defaults`` < the user's properties < ``settings``."""
        return {
            **dict(defaults or {}),
            "bootstrap.servers": self.bootstrap,
            **dict(self.properties),
            **dict(settings or {}),
        }

    def producer(self, settings: Mapping | None = None, *, defaults: Mapping | None = None):
        from confluent_kafka import Producer

        conf = self.config(settings, defaults=defaults)
        _trace("producer", conf, dict(self.properties))
        return Producer(_with_logger(conf))

    def consumer(self, settings: Mapping | None = None, *, defaults: Mapping | None = None):
        from confluent_kafka import Consumer

        conf = self.config(settings, defaults=defaults)
        _trace("consumer", conf, dict(self.properties))
        return Consumer(_with_logger(conf))

    def admin(self, settings: Mapping | None = None, *, defaults: Mapping | None = None):
        from confluent_kafka.admin import AdminClient

        conf = self.config(settings, defaults=defaults)
        _trace("admin", conf, dict(self.properties))
        return AdminClient(_with_logger(conf))

    def reader_settings(self, group: str, **extra) -> dict:
        """Settings of a consumer that reads in short cycles or bounded ranges.

        librdkafka pauses a full prefetch queue for fetch.queue.backoff.ms (1 s by default): kept
        low. fetch.wait.max.ms stays at its default (500 ms): Kafka answers a fetch as soon as
        records are there, and a shorter wait only makes an idle reader ask more often (one reader
        at 5 ms cost the embedded broker ~50 % of a CPU on an idle topic, at 500 ms nothing
        measurable). Offsets are never auto-committed and reading never creates a topic."""
        return {
            "group.id": group,
            "enable.auto.commit": False,
            "allow.auto.create.topics": False,
            "fetch.queue.backoff.ms": 5,
            **extra,
        }

    def spark_options(self, java: bool = False) -> dict[str, str]:
        """The Spark Kafka source's and sink's options: librdkafka's names for streamscale's
        connector, Java's (``java``, translated: :mod:`.javaprops`) for Spark's own."""
        props: Iterable[tuple[str, str]] = self.properties
        if java:
            from streamscale.broker.javaprops import java_properties

            props = java_properties(self.properties).items()
        return {"kafka.bootstrap.servers": self.bootstrap, **{f"kafka.{k}": v for k, v in props}}


def build_connection(
    bootstrap: str | None = None,
    assignments: Iterable[str] = (),
    config_file: str | Path | None = None,
    section: Mapping | None = None,
    use_env: bool = True,
) -> tuple[str | None, dict[str, str]]:
    """The bootstrap (None: none given, the caller decides: daemon or embedded broker) and the
    properties of a command: spec section < config file (or $STREAMSCALE_KAFKA_CONFIG) < -X."""
    section = dict(section or {})
    props: dict[str, str] = {k: str(v) for k, v in (section.get("properties") or {}).items()}
    if section.get("config_file"):
        props.update(read_properties_file(section["config_file"]))
    config_file = config_file or (os.environ.get(CONFIG_FILE_ENV) if use_env else None) or None
    if config_file:
        props.update(read_properties_file(config_file))
    props.update(parse_assignments(assignments))
    bs_prop = props.pop("bootstrap.servers", None)
    env_bs = os.environ.get(BOOTSTRAP_ENV) if use_env else None
    chosen = bootstrap or bs_prop or section.get("bootstrap_servers") or env_bs or None
    check_properties(props)
    return chosen, props


class KafkaSection(StrictModel):
    """A spec's ``kafka:`` section: the cluster and the client properties of every client of the run.

    ``properties`` as Kafka property names (``security.protocol: SASL_SSL``); ``config_file`` a
    properties file as ``--kafka-config`` reads (relative to where the command runs)."""

    bootstrap_servers: str | None = None
    properties: dict[str, str | int | float | bool] = Field(default_factory=dict)
    config_file: Path | None = None

    @field_validator("properties")
    @classmethod
    def _known(cls, v):
        props = {k: str(x).lower() if isinstance(x, bool) else str(x) for k, x in v.items()}
        if "bootstrap.servers" in props:
            raise ValueError("give the cluster as kafka.bootstrap_servers, not as a property")
        try:
            check_properties(props)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return props


def close_clients(consumers, producer) -> None:
    """On a process's way out: close its consumers (a failure to close is no news then) and give
    its producer 5 s to deliver what it holds."""
    for c in consumers:
        try:
            c.close()
        except Exception:  # noqa: BLE001 - closing on the way out
            pass
    producer.flush(5)
