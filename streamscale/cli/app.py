"""The ``streamscale`` command line: the root command, its groups, the options every command shares,
and the entry point that turns streamscale's errors into one line and an exit code.

The commands live in one module per concern (:mod:`.broker`, :mod:`.loadgen`, :mod:`.benchmark`,
:mod:`.autoscale`, :mod:`.reliability`, :mod:`.topology`, :mod:`.doctor`); :mod:`.main` imports them.
"""

from __future__ import annotations

import json
import os
import sys

import typer

from streamscale import terminal
from streamscale.errors import ConfigError, StreamscaleError
from streamscale.processes import sigterm_ends_like_ctrl_c

console = terminal.console(stderr=True)
out = terminal.console()

root = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Benchmark how PySpark Structured Streaming pipelines scale over a Kafka-protocol broker.",
)
broker_app = typer.Typer(no_args_is_help=True, help="The embedded broker (Apache Kafka, KRaft mode, one node).")
topic_app = typer.Typer(no_args_is_help=True, help="Topics on the broker.")
root.add_typer(broker_app, name="broker")
root.add_typer(topic_app, name="topic")
auto_app = typer.Typer(no_args_is_help=True, help="Consumer-group autoscaling by rebalance-aware bin packing.")
root.add_typer(auto_app, name="autoscale")
rel_app = typer.Typer(
    no_args_is_help=True, help="Delivery reliability (TRAK): semantics x faults -> loss and duplicates."
)
root.add_typer(rel_app, name="reliability")
topo_app = typer.Typer(no_args_is_help=True, help="Pipeline topologies: logical plan, optimization, sub-topologies.")
root.add_typer(topo_app, name="topology")
bench_app = typer.Typer(no_args_is_help=True, help="Scalability benchmarks (Theodolite method) from YAML specs.")
root.add_typer(bench_app, name="benchmark")
cluster_app = typer.Typer(
    no_args_is_help=True, help="A Spark and a Kafka cluster on hosts of their own on this machine (root only)."
)
root.add_typer(cluster_app, name="cluster")

BOOTSTRAP_HELP = (
    "Kafka bootstrap servers of an external cluster (default: $STREAMSCALE_BOOTSTRAP_SERVERS, "
    "else the broker started by `streamscale broker start`)"
)
Bootstrap = typer.Option(None, "--bootstrap-servers", "-b", help=BOOTSTRAP_HELP)
# for commands that start an embedded broker when given none
EmbeddedOrBootstrap = typer.Option(
    None,
    "--bootstrap-servers",
    "-b",
    help="External Kafka cluster (default: $STREAMSCALE_BOOTSTRAP_SERVERS, else start an embedded broker)",
)
KafkaProperty = typer.Option(
    None,
    "-X",
    "--kafka-property",
    metavar="KEY=VALUE",
    help="Kafka client property for every client of the command, as kcat's -X (repeatable): "
    "-X security.protocol=SASL_SSL",
)
KafkaConfig = typer.Option(
    None,
    "--kafka-config",
    metavar="FILE",
    envvar="STREAMSCALE_KAFKA_CONFIG",
    help="Kafka client properties file, as Kafka's --command-config (-X wins over it)",
)


Security = typer.Option(
    None,
    "--security",
    help="The embedded Kafka's listeners, over the spec's broker.security: plaintext, or sasl_ssl "
    "(TLS, SCRAM-SHA-512 users, ACLs)",
)


def with_security(spec, security: str | None):
    """``spec`` with ``broker.security`` set from the command line (None: as the spec says)."""
    if security is None:
        return spec
    from streamscale.broker.security import check_mode

    spec.broker = spec.broker.model_copy(update={"security": check_mode(security)})
    return spec


def kafka_connection(bootstrap, properties, config_file, section=None):
    """The command's Kafka connection: -b / -X / --kafka-config / a spec's kafka: section /
    $STREAMSCALE_BOOTSTRAP_SERVERS, else the broker of `streamscale broker start`; checked to answer."""
    from streamscale.broker.connection import build_connection
    from streamscale.broker.daemon import resolve_connection

    bs, props = build_connection(bootstrap, properties or (), config_file, section)
    return resolve_connection(bs, props)


def external_kafka(bootstrap, properties, config_file, section=None):
    """For commands that start an embedded broker when given none: (the connection, or None for
    the embedded broker; the user's properties, which apply to the embedded broker's clients too)."""
    from streamscale.broker.connection import build_connection
    from streamscale.broker.daemon import external_connection

    bs, props = build_connection(bootstrap, properties or (), config_file, section)
    return external_connection(bs, props), props


_metrics_port: int | None = None


@root.callback()
def _main(
    metrics_port: int = typer.Option(
        None,
        "--metrics-port",
        envvar="STREAMSCALE_METRICS_PORT",
        help="Prometheus /metrics on 127.0.0.1 while work runs (default 9464, a free port if taken; -1: off)",
    ),
):
    """Benchmark how PySpark Structured Streaming pipelines scale over a Kafka-protocol broker."""
    global _metrics_port
    _metrics_port = metrics_port


def metrics_endpoint() -> None:
    from streamscale.observe.prometheus import serve

    port = serve(_metrics_port)
    if port is not None:
        console.print(f"metrics: http://127.0.0.1:{port}/metrics", highlight=False)


def parse_params(items: list[str]) -> dict:
    params = {}
    for item in items or []:
        if "=" not in item:
            raise ConfigError(f"--param '{item}': use NAME=VALUE, e.g. window_s=60")
        k, v = item.split("=", 1)
        try:
            params[k.strip()] = json.loads(v)
        except ValueError:
            params[k.strip()] = v
    return params


def register(typer_app: typer.Typer, name: str) -> None:
    """Later concerns add their command groups here."""
    root.add_typer(typer_app, name=name)


def route_logs() -> None:
    """Other libraries' log records and warnings go to the Spark log file, not the terminal: py4j
    logs through the root logger, whose first record would otherwise give it a handler on stderr
    (a gateway that fails while its JVM ends printed "ERROR:root:Exception while sending command."
    and a traceback). streamscale's own warnings stay on stderr, as the message alone, as Python
    prints them without a handler. A root logger that has handlers already (an embedding
    program's, pytest's) is left as it is."""
    import logging

    from streamscale.sparkio.logpath import spark_log_on_stderr, spark_log_path

    top = logging.getLogger()
    if top.handlers or spark_log_on_stderr():
        return

    def ours(record: logging.LogRecord) -> bool:
        return record.name == "streamscale" or record.name.startswith("streamscale.")

    class Appended(logging.FileHandler):
        """The file and its folder made at its first record (appending, as the JVM does)."""

        def _open(self):
            os.makedirs(os.path.dirname(self.baseFilename), exist_ok=True)
            return super()._open()

    library = Appended(spark_log_path(), delay=True)
    library.addFilter(lambda r: not ours(r))
    library.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    own = logging.StreamHandler(sys.stderr)
    own.setLevel(logging.WARNING)
    own.addFilter(ours)
    top.addHandler(library)
    top.addHandler(own)
    # pyspark's warnings too (e.g. "Unable to cleanly shutdown Spark JVM process" after a JVM that
    # SIGTERM ended): through the "py.warnings" logger, into the file
    logging.captureWarnings(True)


def app() -> None:
    """Entry point: streamscale's errors become one clear line and their kind's exit code
    (:mod:`streamscale.errors`), never a traceback."""
    sigterm_ends_like_ctrl_c()
    route_logs()
    try:
        root()
    except KeyboardInterrupt:
        _interrupted()
    except Exception as exc:
        _stopped(exc)
        if not isinstance(exc, StreamscaleError):
            raise
        console.print(f"[red]error:[/] {exc}", highlight=False)
        sys.exit(exc.exit_code)


def _stopped(exc: BaseException) -> None:
    """Exit as the stop did where ``exc`` was raised while a Ctrl-C or a SIGTERM was ending the
    command: a SIGTERM sent to the whole process group also ends the Spark JVM, and a clean-up
    step that then fails on it (a query stopped on a dead JVM) replaces the stop by its error."""
    seen, at = set(), exc.__context__
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if isinstance(at, KeyboardInterrupt):
            _interrupted()
        if isinstance(at, SystemExit):
            sys.exit(at.code)
        at = at.__context__


def _interrupted() -> None:
    """Ctrl-C's end: one word, exit 130."""
    console.print("interrupted")
    sys.exit(130)
