"""`streamscale broker` and `streamscale topic`: the embedded broker and the topics on a broker."""

from __future__ import annotations

from pathlib import Path

import typer

from streamscale.cli.app import Bootstrap, KafkaConfig, KafkaProperty, broker_app, kafka_connection, out, topic_app


# -- broker --------------------------------------------------------------------------------
@broker_app.command("start")
def broker_start(
    port: int = typer.Option(None, help="Port on 127.0.0.1 (default: a free one)"),
    data_dir: Path = typer.Option(
        None, "--data-dir", help="Keep the broker's storage here (default: a temporary directory removed on stop)"
    ),
):
    """Start the embedded broker (Apache Kafka) in the background; prints its bootstrap address."""
    from streamscale.broker.embedded import daemon_start

    info = daemon_start(port, data_dir)
    out.print(f"broker running at [bold]{info.bootstrap}[/] (pid {info.pid}, log {info.log_path})")
    kept = "removed when it stops" if info.temporary else "kept"
    out.print(f"data in {info.data_dir} ({kept}); stop it with `streamscale broker stop`")


@broker_app.command("stop")
def broker_stop():
    """Stop the embedded broker started by `broker start` (its data is removed unless --data-dir kept it)."""
    from streamscale.broker.embedded import daemon_stop

    info = daemon_stop()
    out.print("no broker running" if info is None else f"stopped broker at {info.bootstrap} (pid {info.pid})")


@broker_app.command("status")
def broker_status():
    """Is the embedded broker running? Exit code 0 if so, 1 if not."""
    from streamscale.broker.access import BrokerAccess
    from streamscale.broker.embedded import daemon_status

    info = daemon_status()
    if info is None:
        out.print("no broker running")
        raise typer.Exit(1)
    with BrokerAccess(info.bootstrap) as access:
        topics = access.topics()
    out.print(f"broker running at {info.bootstrap} (pid {info.pid}), {len(topics)} topics, log {info.log_path}")


# -- topics --------------------------------------------------------------------------------
@topic_app.command("create")
def topic_create(
    name: str,
    partitions: int = typer.Option(8, "--partitions", "-p", min=1),
    exist_ok: bool = typer.Option(False, "--exist-ok"),
    bootstrap: str = Bootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """Create a topic."""
    from streamscale.broker import BrokerAccess

    with BrokerAccess(kafka_connection(bootstrap, kafka_property, kafka_config)) as access:
        access.create_topic(name, partitions, exist_ok=exist_ok)
    out.print(f"topic {name}: {partitions} partitions")


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
