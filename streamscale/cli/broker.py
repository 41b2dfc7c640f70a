"""`streamscale broker` and `streamscale topic`: the embedded broker and the topics on a broker."""

from __future__ import annotations

from pathlib import Path

import typer

from streamscale.cli.app import Bootstrap, KafkaConfig, KafkaProperty, broker_app, kafka_connection, out, topic_app
from streamscale.errors import ConfigError


# -- broker --------------------------------------------------------------------------------
@broker_app.command("start")
def broker_start(
    port: int = typer.Option(None, help="Port on 127.0.0.1 (default: a free one; one broker only)"),
    brokers: int = typer.Option(
        1, "--brokers", min=1, max=9, help="Nodes: above 1, an embedded cluster (each node broker and controller)"
    ),
    data_dir: Path = typer.Option(
        None, "--data-dir", help="Keep the storage here (default: a temporary directory removed on stop)"
    ),
    security: str = typer.Option(
        "plaintext",
        "--security",
        help="plaintext, or sasl_ssl: TLS (a CA made at start), SCRAM-SHA-512 users, ACLs on; "
        "prints a client properties file for --kafka-config and kcat -F",
    ),
):
    """Start the embedded broker (Apache Kafka), or a cluster of several, in the background; prints
    the bootstrap address."""
    from streamscale.broker import daemon
    from streamscale.broker.clusternet import remove_stale_networks

    remove_stale_networks()  # what a SIGKILLed run that cut a broker off left behind

    if brokers > 1:
        if port is not None:
            raise ConfigError("--port: a cluster's nodes take free ports; leave out --port")
        info = daemon.cluster_start(brokers, data_dir, security)
        pids = ", ".join(str(p) for p in info.pids)
        out.print(f"cluster of {brokers} brokers running at [bold]{info.bootstrap}[/] (pids {pids})")
        out.print(f"logs in {daemon.state_dir() / 'logs'}")
    else:
        info = daemon.daemon_start(port, data_dir, security)
        out.print(f"broker running at [bold]{info.bootstrap}[/] (pid {info.pid}, log {info.log_path})")
    if info.client_config:
        out.print(
            f"SASL_SSL (SCRAM-SHA-512, user streamscale; user guest has no ACLs); client properties in "
            f"{info.client_config} (streamscale commands use them; --kafka-config FILE, kcat -F FILE)"
        )
    kept = "removed when it stops" if info.temporary else "kept"
    out.print(f"data in {info.data_dir} ({kept}); stop it with `streamscale broker stop`")


@broker_app.command("stop")
def broker_stop():
    """Stop the embedded broker or cluster started by `broker start` (its data is removed unless
    --data-dir kept it)."""
    from streamscale.broker import daemon

    info = daemon.daemon_stop()
    cluster = daemon.cluster_stop()
    if info is not None:
        out.print(f"stopped broker at {info.bootstrap} (pid {info.pid})")
    if cluster is not None:
        out.print(f"stopped cluster at {cluster.bootstrap} (pids {', '.join(str(p) for p in cluster.pids)})")
    if info is None and cluster is None:
        out.print("no broker running")


@broker_app.command("status")
def broker_status():
    """Is the embedded broker (or cluster) running? For a cluster: which nodes are up, and per
    partition its leader, replicas and in-sync replicas. Exit code 0 if running, 1 if not."""
    from streamscale.broker import daemon
    from streamscale.broker.access import BrokerAccess

    info = daemon.daemon_status()
    if info is not None:
        with BrokerAccess(info.bootstrap, daemon.daemon_client_properties(info)) as access:
            topics = access.topics()
        secured = f", {info.security.upper()} (client properties {info.client_config})" if info.client_config else ""
        out.print(
            f"broker running at {info.bootstrap} (pid {info.pid}), {len(topics)} topics{secured}, log {info.log_path}"
        )
        return
    cluster = daemon.cluster_status()
    if cluster is None:
        out.print("no broker running")
        raise typer.Exit(1)
    _cluster_status(cluster)


def _cluster_status(cluster) -> None:
    from streamscale.broker.access import BrokerAccess
    from streamscale.broker.connection import KafkaConnection
    from streamscale.broker.daemon import daemon_client_properties

    alive = {n["id"] for n in cluster.alive()}
    secured = ""
    if cluster.client_config:
        secured = f", {cluster.security.upper()} (client properties {cluster.client_config})"
    out.print(f"cluster at {cluster.bootstrap}: {len(alive)} of {len(cluster.nodes)} brokers up{secured}")
    for n in cluster.nodes:
        state = "up" if n["id"] in alive else "down"
        out.print(f"  broker {n['id']}\t{n['address']}\tpid {n['pid']}\t{state}\tlog {n['log_path']}")
    live = ",".join(n["address"] for n in cluster.nodes if n["id"] in alive)
    with BrokerAccess(KafkaConnection.of(live, daemon_client_properties(cluster))) as access:
        layout = access.partition_layout()
    for topic, parts in sorted(layout.items()):
        for p, (leader, replicas, isr) in sorted(parts.items()):
            lead = "none" if leader < 0 else str(leader)
            out.print(f"{topic}[{p}]\tleader {lead}\treplicas {replicas}\tin sync {isr}")


# -- topics --------------------------------------------------------------------------------
@topic_app.command("create")
def topic_create(
    name: str,
    partitions: int = typer.Option(8, "--partitions", "-p", min=1),
    replication_factor: int = typer.Option(1, "--replication-factor", "-r", min=1, help="Replicas of each partition"),
    min_insync_replicas: int = typer.Option(
        None, "--min-insync-replicas", min=1, help="Replicas that must have a record before acks=all is answered"
    ),
    exist_ok: bool = typer.Option(False, "--exist-ok"),
    bootstrap: str = Bootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """Create a topic."""
    from streamscale.broker import BrokerAccess

    if min_insync_replicas is not None and min_insync_replicas > replication_factor:
        raise ConfigError(f"--min-insync-replicas cannot exceed the replication factor ({replication_factor})")
    config = {} if min_insync_replicas is None else {"min.insync.replicas": str(min_insync_replicas)}
    with BrokerAccess(kafka_connection(bootstrap, kafka_property, kafka_config)) as access:
        access.create_topic(name, partitions, replication_factor, config, exist_ok=exist_ok)
    isr = f", min.insync.replicas {min_insync_replicas}" if min_insync_replicas is not None else ""
    out.print(f"topic {name}: {partitions} partitions, replication factor {replication_factor}{isr}")


@topic_app.command("delete")
def topic_delete(
    names: list[str],
    bootstrap: str = Bootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """Delete topics."""
    from streamscale.broker import BrokerAccess

    with BrokerAccess(kafka_connection(bootstrap, kafka_property, kafka_config)) as access:
        access.delete_topics(names, missing_ok=False)
    out.print(f"deleted {', '.join(names)}")


@topic_app.command("list")
def topic_list(bootstrap: str = Bootstrap, kafka_property: list[str] = KafkaProperty, kafka_config: Path = KafkaConfig):
    """List topics with partition counts."""
    from streamscale.broker import BrokerAccess

    with BrokerAccess(kafka_connection(bootstrap, kafka_property, kafka_config)) as access:
        for name, n in sorted(access.topics().items()):
            out.print(f"{name}\t{n}")


@topic_app.command("offsets")
def topic_offsets(
    name: str,
    group: str = typer.Option(None, help="Also show this group's committed offsets and lag"),
    bootstrap: str = Bootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """Exact end offsets per partition (and a group's lag)."""
    from streamscale.broker import BrokerAccess

    with BrokerAccess(kafka_connection(bootstrap, kafka_property, kafka_config)) as access:
        ends = access.end_offsets(name)
        committed = access.committed_offsets(group, name) if group else {}
    for p, e in ends.items():
        line = f"{name}[{p}]\tend={e}"
        if group:
            c = committed.get(p)
            line += f"\tcommitted={c}\tlag={e - (c or 0)}"
        out.print(line)
    out.print(f"total\tend={sum(ends.values())}")
