"""streamscale's errors: one hierarchy, used everywhere, each kind with its exit code.

The CLI prints any :class:`StreamscaleError` as one line (``error: ...``) and exits with the class's
``exit_code``; anything else is a bug and keeps its traceback. Modules raise the most specific kind
and re-export it where users met it first (``streamscale.broker.access.BrokerUnreachable``, ...).

    StreamscaleError (1)
    ├── ConfigError (2)            a spec, option, file or environment setting is wrong
    │   ├── ResultsError (2)       a results directory that cannot be read or resumed
    │   ├── AuthenticationFailed (2) the broker refused the credentials, or TLS failed
    │   └── AccessDenied (2)       an ACL denies the user an operation on a topic or group
    ├── KafkaError (3)             the Kafka side
    │   ├── BrokerUnreachable (3)  nothing answers at the bootstrap servers
    │   ├── BrokerError (3)        the embedded broker cannot be started, found or stopped
    │   ├── TopicNotFound (3)
    │   ├── UnsupportedByBroker (3) the broker lacks a Kafka API the operation needs
    │   └── KafkaClientError (3)   a client reported an error (fetch, produce, transaction)
    ├── SparkError (4)             the Spark side: Java missing, a query that failed
    │   └── JavaMissing (4)
    ├── WaitTimeout (5)            a condition awaited did not come true in time (also a TimeoutError)
    ├── CapacityError (2)          bin packing: an item larger than a bin (also a ValueError)
    ├── AutoscalerError (6)        the live autoscaler: controller, consumers, fencing
    │   └── FencingError (6)
    ├── ReliabilityError (7)       the reliability tester's fault injection (proxy, netem)
    └── ClusterError (8)           hosts of their own on this machine: cannot be made, found or stopped
"""


class StreamscaleError(Exception):
    """Base class: a problem the user can act on (bad input, bad config, missing service)."""

    exit_code = 1


class ConfigError(StreamscaleError):
    """A spec, option, file or environment setting is wrong."""

    exit_code = 2


class ResultsError(ConfigError):
    """A results directory that cannot be read or resumed (a damaged or foreign experiments.csv)."""


class AuthenticationFailed(ConfigError):
    """The broker refused the client's credentials (SASL), or the TLS handshake failed."""


class AccessDenied(ConfigError):
    """The broker's authorizer denied the user an operation (on a topic, a group, the cluster)."""


class KafkaError(StreamscaleError):
    """The Kafka side: the broker, its topics, a client's error."""

    exit_code = 3


class BrokerUnreachable(KafkaError):
    """No Kafka broker answers at the bootstrap servers."""


class BrokerError(KafkaError):
    """The embedded broker could not be started, found or stopped."""


class TopicNotFound(KafkaError):
    """A topic the operation needs does not exist."""


class UnsupportedByBroker(KafkaError):
    """The broker does not implement a Kafka API that the operation needs."""


class KafkaClientError(KafkaError):
    """A Kafka client reported an error it cannot recover from (fetch, produce, transaction)."""


class SparkError(StreamscaleError):
    """The Spark side: a query that failed, a session that cannot start."""

    exit_code = 4


class SparkDied(SparkError):
    """Spark's JVM (the driver, and in local mode the executors) exited under the command, or a
    query ran out of its memory: e.g. under a load whose batches kept growing."""


class JavaMissing(SparkError):
    """No Java 17+ for Spark."""


class WaitTimeout(StreamscaleError, TimeoutError):
    """A condition awaited did not come true in time."""

    exit_code = 5


class CapacityError(StreamscaleError, ValueError):
    """Bin packing: an item (a partition's write speed) larger than a bin (a consumer's capacity)."""

    exit_code = 2


class AutoscalerError(StreamscaleError):
    """The live autoscaler: controller, consumers, fencing."""

    exit_code = 6


class FencingError(AutoscalerError):
    """A consumer or controller found itself fenced off by a newer one."""


class ReliabilityError(StreamscaleError):
    """The reliability tester could not inject its fault (proxy, netem)."""

    exit_code = 7


class ClusterError(StreamscaleError):
    """A cluster of hosts of their own on this machine (streamscale.hosts) cannot be made, found or
    stopped: no root, no network namespaces, a daemon that did not start."""

    exit_code = 8
