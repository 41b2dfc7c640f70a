"""Apache Kafka as one local process: where its jars are, its settings, its command lines.

``make install`` copies a pinned Apache Kafka release and its dependencies from Maven Central
(``jvm/kafka/pom.xml``, ``mvn dependency:copy-dependencies``) into ``<venv>/share/streamscale/kafka``
(or ``$STREAMSCALE_KAFKA_LIBS``). Nothing is fetched at run time: the tarball's ``bin/`` scripts only
build ``java -cp libs/* kafka.Kafka server.properties``, which is what :func:`server_command` does.

The server runs in KRaft mode as broker and controller at once (``process.roles=broker,controller``,
one node id, a controller listener beside the client one), on storage formatted by Kafka's own
``StorageTool`` before its first start. :data:`SINGLE_NODE_SETTINGS` holds every setting that suits
one small machine, in one place.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

from streamscale.errors import BrokerError
from streamscale.processes import die_with_parent

KAFKA_LIBS_ENV = "STREAMSCALE_KAFKA_LIBS"
HEAP_ENV = "STREAMSCALE_BROKER_HEAP"
DEFAULT_HEAP = "1g"
NODE_ID = 1

# One node: every internal topic with one replica, no wait for more group members before the first
# rebalance, and no topic created by a metadata request (a typo in a topic name is an error, not a
# new one-partition topic). Fewer partitions for the internal topics than Kafka's 50: each is a
# log and a coordinator to load, and this broker serves a few groups at a time.
SINGLE_NODE_SETTINGS: dict[str, str] = {
    "process.roles": "broker,controller",
    "node.id": str(NODE_ID),
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "auto.create.topics.enable": "false",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "min.insync.replicas": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "num.network.threads": "2",
    "num.io.threads": "4",
    "log.retention.hours": "-1",  # a benchmark's input stays until its topic is deleted
}

# Kafka's log to stdout, which the parent sends to the log file: one writer, never the terminal
_LOG4J2 = """\
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.statechange.name = state.change.logger
logger.statechange.level = WARN
"""


def kafka_libs() -> Path:
    """The folder with Apache Kafka's jars (one clear error when the install has not put them there)."""
    env = os.environ.get(KAFKA_LIBS_ENV)
    libs = Path(env) if env else Path(sys.prefix) / "share" / "streamscale" / "kafka"
    if not any(libs.glob("kafka_2.13-*.jar")):
        where = f"${KAFKA_LIBS_ENV} ({libs})" if env else str(libs)
        raise BrokerError(
            f"Apache Kafka's jars are not in {where}: run `make install` (it fetches them with Maven), "
            "or pass --bootstrap-servers HOST:PORT for an external Kafka cluster"
        )
    return libs


def kafka_version(libs: Path | None = None) -> str:
    jars = sorted((libs or kafka_libs()).glob("kafka_2.13-*.jar"))
    return jars[-1].name[len("kafka_2.13-") : -len(".jar")] if jars else "unknown"


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise BrokerError(
            "the embedded Kafka broker needs Java 17+: install it (e.g. apt-get install openjdk-17-jre-headless) "
            "or set JAVA_HOME"
        )
    return java


def heap() -> str:
    value = os.environ.get(HEAP_ENV, DEFAULT_HEAP).strip()
    if not value or not value[:-1].isdigit() or value[-1].lower() not in "kmg":
        raise BrokerError(f"${HEAP_ENV} must be a Java heap size such as 512m or 1g, not {value!r}")
    return value


def server_properties(
    data_dir: Path, host: str, port: int, controller_port: int, advertised: str, extra: dict | None = None
) -> str:
    props = {
        **SINGLE_NODE_SETTINGS,
        "log.dirs": str(data_dir / "logs"),
        "metadata.log.dir": str(data_dir / "metadata"),
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{advertised}",
        "controller.quorum.voters": f"{NODE_ID}@{host}:{controller_port}",
        **(extra or {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def cluster_settings(nodes: int) -> dict[str, str]:
    """What a cluster of ``nodes`` combined broker-and-controller nodes runs with: internal topics
    replicated as a production cluster's (3 replicas, 2 in sync, or what fewer nodes allow), no
    unclean leader election unless a topic asks for it, and failure detection in seconds, not in
    Kafka's 9 s session and 30 s replica lag: a killed broker is fenced after 3 s, a follower that
    stopped fetching leaves the ISR after 5 s."""
    rf, isr = str(min(3, nodes)), str(min(2, nodes))
    return {
        **SINGLE_NODE_SETTINGS,
        "default.replication.factor": rf,
        "min.insync.replicas": "1",  # a topic's own setting decides (streamscale topic create)
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": rf,
        "share.coordinator.state.topic.min.isr": isr,
        "unclean.leader.election.enable": "false",
        "num.io.threads": "2",
        "broker.heartbeat.interval.ms": "500",
        "broker.session.timeout.ms": "3000",
        "replica.lag.time.max.ms": "5000",
        "controller.quorum.election.timeout.ms": "1000",
        "controller.quorum.fetch.timeout.ms": "2000",
    }


def node_properties(
    node_id: int,
    nodes: int,
    data_dir: Path,
    host: str,
    port: int,
    controller_port: int,
    voters: str,
    extra: dict | None = None,
) -> str:
    """server.properties of node ``node_id`` of a cluster whose controller quorum is ``voters``
    (``id@host:port,...``, every node)."""
    props = {
        **cluster_settings(nodes),
        "node.id": str(node_id),
        "log.dirs": str(data_dir / "logs"),
        "metadata.log.dir": str(data_dir / "metadata"),
        "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{port}",
        "controller.quorum.voters": voters,
        **(extra or {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


def new_cluster_id() -> str:
    """A random cluster id as Kafka writes one (URL-safe base64 of a UUID), never starting with
    "-": the storage tool would read ``-t -xyz`` as an option and refuse to format (1 start in 64;
    Kafka's own Uuid.randomUuid draws again for the same reason)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


# Java's class-data archive of a broker's classes, written by `make install` beside the jars it
# was made from (python -m streamscale.broker.classdata): a broker then started in 4.1 s and 5.6
# CPU-s instead of 7.0 s and 9.7 (2 CPUs, 2026-11-26), and the storage format in 1.2 CPU-s, not 1.9.
# A JVM that finds it does not fit (another JDK) writes one warning line to the broker's log and
# starts without it. STREAMSCALE_KAFKA_CDS=0 turns it off.
CLASS_DATA_FILE = "streamscale-broker.jsa"
CLASS_DATA_DUMP_ENV = "STREAMSCALE_KAFKA_CDS_DUMP"


def _class_data(libs: Path, dump: str | None = None) -> list[str]:
    if dump:
        return [f"-XX:ArchiveClassesAtExit={dump}", "-Xlog:disable", "-Xlog:all=off"]
    jsa = libs / CLASS_DATA_FILE
    if os.environ.get("STREAMSCALE_KAFKA_CDS", "1") == "0" or not jsa.is_file():
        return []
    return [f"-XX:SharedArchiveFile={jsa}", "-Xlog:disable", "-Xlog:all=warning:stderr"]


def names_collector(java_options: str) -> bool:
    """Whether JVM options choose a garbage collector: a JVM given two stops at once ("Multiple
    garbage collectors selected")."""
    return re.search(r"-XX:\+Use(Serial|Parallel|G1|Z|Shenandoah|Epsilon)GC\b", java_options) is not None


def _collector() -> list[str]:
    """G1 with short pauses, unless the java launcher's own options (``JDK_JAVA_OPTIONS``,
    ``JAVA_TOOL_OPTIONS``) already choose a collector."""
    given = f"{os.environ.get('JDK_JAVA_OPTIONS', '')} {os.environ.get('JAVA_TOOL_OPTIONS', '')}"
    return [] if names_collector(given) else ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20"]


def _jvm(java: str, libs: Path, log4j: Path, heap_size: str, short_lived: bool = False) -> list[str]:
    # A tool that runs for a second gains nothing from the optimizing compiler: without it the
    # formatting JVM uses ~40 % less CPU (1.2 s against 2.0 s), which every broker start pays.
    jit = ["-XX:TieredStopAtLevel=1"] if short_lived else []
    return [
        java,
        *jit,
        *_class_data(libs, dump=None if short_lived else os.environ.get(CLASS_DATA_DUMP_ENV)),
        f"-Xmx{heap_size}",
        "-Xms256m",
        *_collector(),
        "-XX:+ExitOnOutOfMemoryError",
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        str(libs / "*"),
    ]


def write_config(data_dir: Path, properties: str) -> tuple[Path, Path]:
    """server.properties and the log4j2 configuration in ``data_dir`` -> their paths."""
    data_dir.mkdir(parents=True, exist_ok=True)
    props, log4j = data_dir / "server.properties", data_dir / "log4j2.properties"
    props.write_text(properties)
    log4j.write_text(_LOG4J2)
    return props, log4j


def is_formatted(data_dir: Path) -> bool:
    return (data_dir / "metadata" / "meta.properties").exists()


def format_storage(
    data_dir: Path,
    props: Path,
    log4j: Path,
    log,
    prefix: list[str] | None = None,
    cluster_id: str | None = None,
    extra_args: list[str] | None = None,
) -> None:
    """Kafka's StorageTool: formatted storage (once; a kept directory is reused) for ``cluster_id``
    (every node of a cluster the same; default a new one); ``extra_args`` e.g. SCRAM users."""
    cluster_id = cluster_id or new_cluster_id()
    cmd = [
        *(prefix or []),
        *_jvm(java_binary(), kafka_libs(), log4j, "256m", short_lived=True),
        "kafka.tools.StorageTool",
        "format",
        "--ignore-formatted",
        "-t",
        cluster_id,
        "-c",
        str(props),
        *(extra_args or []),
    ]
    # dies with this process like the server (a SIGKILLed parent leaves no formatting JVM behind)
    done = subprocess.run(
        cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=120, preexec_fn=die_with_parent
    )
    if done.returncode != 0 or not is_formatted(data_dir):
        raise BrokerError(f"Kafka could not format its storage in {data_dir} (exit code {done.returncode})")


def server_command(
    props: Path, log4j: Path, prefix: list[str] | None = None, heap_size: str | None = None
) -> list[str]:
    return [*(prefix or []), *_jvm(java_binary(), kafka_libs(), log4j, heap_size or heap()), "kafka.Kafka", str(props)]


def is_server_cmdline(cmdline: list[str], props: str) -> bool:
    """Whether a process's command line is a Kafka server started with ``props``."""
    return "kafka.Kafka" in cmdline and props in cmdline
