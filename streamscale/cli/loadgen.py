"""`streamscale generate` and `streamscale registry`: the load generator and UC4's sensor registry."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from streamscale.cli.app import (
    Bootstrap,
    KafkaConfig,
    KafkaProperty,
    console,
    kafka_connection,
    metrics_endpoint,
    out,
    root,
)


# -- load generator ------------------------------------------------------------------------
@root.command("generate")
def generate_cmd(
    topic: str = typer.Option("input", "--topic", "-t"),
    sensors: int = typer.Option(1000, "--sensors", "-s", min=1, help="Simulated sensors (keys)"),
    period: float = typer.Option(1.0, "--period", help="Seconds between two records of one sensor"),
    workers: int = typer.Option(1, "--workers", "-w", min=1, help="Producer processes"),
    records: int = typer.Option(None, "--records", "-n", min=0, help="Stop after N records (finite mode)"),
    duration: float = typer.Option(None, "--duration", "-d", help="Stop after this many seconds"),
    encoding: str = typer.Option("json", help="json or csv"),
    distribution: str = typer.Option("uniform:0,100", help="constant:V | uniform:LO,HI | normal:MEAN,STD"),
    seed: int = typer.Option(42),
    unthrottled: bool = typer.Option(False, "--unthrottled", help="Send as fast as possible"),
    partitions: int = typer.Option(None, "--create-topic", help="Create the topic with this many partitions"),
    replay: Path = typer.Option(
        None, "--replay", help="Send a captured sample's keys, values and headers byte for byte (streamscale capture)"
    ),
    rate: float = typer.Option(None, "--rate", min=1, help="Records/s (with --replay; instead of sensors / period)"),
    key_copies: int = typer.Option(1, "--key-copies", min=1, help="With --replay: disjoint copies of its keys"),
    json_out: Path = typer.Option(None, "--json-out", help="Write the run's figures here"),
    bootstrap: str = Bootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """Simulated power sensors: one ActivePowerRecord per sensor and period, key = sensor id.

    Without --records or --duration it runs until Ctrl-C.
    """
    import dataclasses

    from streamscale.broker import BrokerAccess
    from streamscale.loadgen import GeneratorConfig, LoadGenerator
    from streamscale.loadgen.config import IN_FLIGHT_LIMIT_S, SHORTFALL_TOLERANCE

    # options first (a bad value is named at once), then the broker
    spec = None
    if replay is not None or rate is not None:
        spec, sensors, period = _replay_load(replay, rate, key_copies)
    metrics_endpoint()  # once the input is known to be good: a bad one is its error line alone
    cfg = GeneratorConfig(
        "unresolved",
        topic=topic,
        sensors=sensors,
        period_s=period,
        workers=workers,
        encoding=encoding,
        distribution=distribution,
        seed=seed,
        records=records,
        duration_s=duration,
        throttle=not unthrottled,
        records_spec=spec,
    )
    bs = kafka_connection(bootstrap, kafka_property, kafka_config)
    cfg = dataclasses.replace(cfg, bootstrap=bs)
    if partitions:
        with BrokerAccess(bs) as access:
            access.create_topic(topic, partitions, exist_ok=True)
    mode = "unthrottled" if unthrottled else f"target {cfg.target_rate:,.0f} records/s"
    what = f"{replay} replayed" if replay is not None else f"{sensors:,} sensors"
    console.print(
        f"generating into {topic} at {bs}: {what}, {mode}, {cfg.workers} worker(s)"
        + ("" if records is not None or duration else " — Ctrl-C to stop")
    )

    def show(s: dict) -> None:
        short = (
            ""
            if unthrottled or s["rate"] >= (1 - SHORTFALL_TOLERANCE) * s["target_rate"]
            else f"  [red]below target ({s['behind']:,} behind schedule)[/]"
        )
        if not unthrottled and s["in_flight"] > IN_FLIGHT_LIMIT_S * s["target_rate"]:
            short += f"  [red]the broker is behind ({s['in_flight']:,} records not yet acknowledged)[/]"
        console.print(
            f"  {s['elapsed_s']:6.1f} s  {s['rate']:>10,.0f} records/s  "
            f"sent {s['sent']:,}  delivered {s['delivered']:,}  failed {s['failed']:,}{short}"
        )

    gen = LoadGenerator(cfg, on_second=show)
    result = gen.run()
    summary = result.as_dict()
    summary.pop("per_second")
    console.print(
        f"done: {result.delivered:,} delivered, {result.failed:,} failed in {result.duration_s:.1f} s "
        f"= {result.achieved_rate:,.0f} records/s" + ("" if result.reached_target else "  [red]target NOT reached[/]")
    )
    if result.first_error:
        console.print(f"[red]first delivery error: {result.first_error}[/]")
    if json_out:
        json_out.write_text(json.dumps(result.as_dict(), indent=2))
    if result.failed:
        raise typer.Exit(1)


def _replay_load(replay: Path | None, rate: float | None, key_copies: int):
    """(records spec, sensors, period) of a replay at ``rate`` records/s."""
    from streamscale.errors import ConfigError
    from streamscale.loadgen.recordspec import records_spec

    if replay is None or rate is None:
        raise ConfigError("--replay FILE and --rate N go together: a sample is sent at a rate")
    spec = records_spec({"replay": str(replay.resolve()), "raw": True, "key_copies": key_copies}, "--replay")
    return spec, max(1, round(rate)), 1.0


@root.command("capture")
def capture_cmd(
    topic: str = typer.Argument(..., help="The topic to sample"),
    count: int = typer.Option(10_000, "--count", "-n", min=1, help="Records to keep (from each partition's start)"),
    out_file: Path = typer.Option(Path("sample.parquet"), "--out", help="The Parquet file written"),
    timeout: float = typer.Option(60.0, "--timeout", min=1, help="Seconds to wait for the records"),
    bootstrap: str = Bootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """Keep a sample of a real topic (keys, value bytes, headers, timestamps) to replay as a load."""
    from streamscale.loadgen.raw import capture

    bs = kafka_connection(bootstrap, kafka_property, kafka_config)
    kept = capture(bs, topic, count, out_file, timeout)
    out.print(
        f"captured {kept:,} records of {topic} into {out_file}"
        + ("" if kept == count else f" (the topic held {kept:,})")
    )


@root.command("registry")
def registry_cmd(
    levels: int = typer.Option(2, "--levels", "-l", min=1, help="Nested group levels n"),
    children: int = typer.Option(4, "--children", "-k", min=1, help="Children per group"),
    out_file: Path = typer.Option(Path("sensor-registry.json"), "--out"),
    publish: bool = typer.Option(False, "--publish", help="Also publish it to the broker"),
    topic: str = typer.Option("configuration", "--topic"),
    bootstrap: str = Bootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """UC4's sensor registry: n levels of groups with k children each (k^n sensors s_0 ...)."""
    from streamscale.loadgen import SensorRegistry

    reg = SensorRegistry.build(levels, children)
    reg.write(out_file)
    out.print(
        f"registry: {levels} levels x {children} children = {reg.num_sensors:,} sensors, "
        f"{len(reg.groups()):,} groups -> {out_file}"
    )
    if publish:
        bs = kafka_connection(bootstrap, kafka_property, kafka_config)
        reg.publish(bs, topic)
        out.print(f"published to topic '{topic}' at {bs}")
