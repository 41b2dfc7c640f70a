"""`streamscale autoscale ...`: consumer-group autoscaling (Landau et al.), offline and live."""

from __future__ import annotations

from pathlib import Path

import typer

from streamscale.cli.app import (
    Bootstrap,
    KafkaConfig,
    KafkaProperty,
    auto_app,
    console,
    kafka_connection,
    metrics_endpoint,
    out,
)
from streamscale.errors import ConfigError


@auto_app.command("evaluate")
def autoscale_evaluate(
    out_dir: Path = typer.Option(Path("results/autoscale-eval"), "--out"),
    partitions: int = typer.Option(32, min=1),
    measurements: int = typer.Option(500, min=2, help="Measurements per delta stream"),
    latency_measurements: int = typer.Option(100, min=2),
    seed: int = typer.Option(0),
):
    """The paper's evaluation: CBS, Rscore, Pareto fronts per delta, latency vs Kafka's assignment."""
    from streamscale.autoscaler.figures import evaluate

    r = evaluate(out_dir, partitions, measurements, latency_measurements, seed=seed, progress=console.print)
    out.print((out_dir / "latency_table.txt").read_text().splitlines()[0])
    for row in r["latency"]:
        if row["algorithm"] in ("MWF", "MBF", "MWFP", "MBFP") or row["algorithm"] in ("kd_16", "kd_27", "kd_32"):
            out.print(
                f"{row['algorithm']:<10} {row['avg_consumers']:>13.2f}  {row['p90_latency_s']:>15.3f}  "
                f"{row['samples_latency_gt0']:>13}"
            )
    for delta, front in r["fronts"].items():
        out.print(f"Pareto front, delta {delta}: {', '.join(front)}")
    out.print(f"wrote {out_dir}/ (algorithms_by_delta.csv, latency_summary.csv, latency_table.txt, fig05-fig12 PNGs)")


def _live_config(state_dir: Path):
    from streamscale.autoscaler.live.protocol import LiveConfig

    return LiveConfig.load(state_dir)


StateDir = typer.Option(Path("autoscaler-state"), "--state-dir", help="Where the group keeps config, logs, sink, CSV")


@auto_app.command("reproduce")
def autoscale_reproduce(
    out_dir: Path = typer.Option(Path("results/autoscale-reproduce"), "--out"),
    spec_file: Path | None = typer.Option(
        None, "--spec", help="YAML spec (default: the paper's parameters, examples/autoscaler/reproduce.yaml)"
    ),
):
    """Landau et al., §VI-C/§VI-E figures over many draws: reproduction.csv, variants, plots, report.html."""
    from rich.table import Table

    from streamscale.autoscaler.reproduce import ReproduceSpec, reproduce
    from streamscale.specs import read_yaml, validate

    spec = (
        validate(ReproduceSpec, read_yaml(spec_file) or {}, str(spec_file), "latency and packing")
        if spec_file
        else ReproduceSpec()
    )
    r = reproduce(spec, out_dir, progress=lambda msg: console.print(msg, highlight=False))
    table = Table(title="Landau et al., §VI: paper vs measured (median over draws, 5-95 %)")
    for col in ("figure", "paper", "measured", "5-95 %", "in spread"):
        table.add_column(col, justify="left" if col == "figure" else "right", overflow="fold")
    for row in r["rows"]:
        unit = {"%": " %", "s": " s"}.get(row["unit"], "")
        table.add_row(
            row["figure"],
            f"{row['paper']:g}{unit}",
            f"{row['measured']:.4g}{unit}",
            f"{row['low']:.4g} to {row['high']:.4g}",
            "yes" if row["in_spread"] else "no",
        )
    out.print(table)
    out.print(
        f"wrote {out_dir}/ (reproduction.csv, reproduction-variants.csv, reproduction.json, "
        "reproduction_*.png, report.html)"
    )


@auto_app.command("run")
def autoscale_run(
    topics: list[str] = typer.Option(..., "--topic", "-t", help="Source topic (repeatable)"),
    consumer_capacity: str = typer.Option(
        ..., "--consumer-capacity", help="C̄, bytes/s one consumer can read (e.g. 2.3MB)"
    ),
    algorithm: str = typer.Option("MWF", help="MWF, MBF, MWFP, MBFP, NFD, FFD, BFD, WFD"),
    state_dir: Path = StateDir,
    group: str = typer.Option("streamscale-autoscaler", help="Consumer group id (offsets)"),
    batch_size: str = typer.Option("5MB", help="Bytes a consumer gathers per cycle"),
    wait_time: float = typer.Option(1.0, "--wait-time", help="wait_time_secs of a consumer cycle"),
    window: float = typer.Option(30.0, help="Monitor's sliding window, s"),
    interval: float = typer.Option(30.0, help="One measurement/iteration every this many s"),
    sample_interval: float = typer.Option(1.0, help="Offset sampling period, s"),
    max_consumers: int = typer.Option(32, min=1),
    start_from: str = typer.Option("earliest", help="Where never-read partitions start"),
    duration: float = typer.Option(None, help="Stop after this many seconds (default: until Ctrl-C)"),
    keep_consumers: bool = typer.Option(False, help="Leave consumers running on exit"),
    controller_lease: float = typer.Option(
        30.0,
        "--controller-lease",
        min=0.5,
        help="Consumers stop this many s after the controller is gone for good (killed outright)",
    ),
    no_monitor: bool = typer.Option(False, "--no-monitor", help="Monitor runs elsewhere"),
    crash_after: str = typer.Option(None, hidden=True),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
    bootstrap: str = Bootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """Monitor + controller: consumers follow the load, written to SQLite exactly once."""
    metrics_endpoint()
    from pydantic import ValidationError

    from streamscale.autoscaler.live.launch import configure_logging, parse_bytes, run_controller, setup
    from streamscale.autoscaler.live.protocol import LiveConfig

    configure_logging(verbose)
    conn = kafka_connection(bootstrap, kafka_property, kafka_config)
    try:
        cfg = LiveConfig(
            bootstrap=conn.bootstrap,
            kafka_properties=dict(conn.properties),
            topics=topics,
            group=group,
            state_dir=state_dir,
            consumer_capacity=parse_bytes(consumer_capacity),
            algorithm=algorithm,
            batch_size=int(parse_bytes(batch_size)),
            wait_time_secs=wait_time,
            window_secs=window,
            publish_interval_secs=interval,
            sample_interval_secs=sample_interval,
            max_consumers=max_consumers,
            start_from=start_from,
            controller_lease_secs=controller_lease,
        )
    except ValidationError as exc:
        raise ConfigError("; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())) from exc
    setup(cfg)
    out.print(
        f"autoscaling {', '.join(topics)} with {algorithm}: bin capacity C = {cfg.bin_capacity:,.0f} B/s "
        f"(5/6 of C̄); state in {state_dir}/ (iterations.csv, logs/, sink.sqlite)"
    )

    def show(it, ctl):
        if it.reason:
            out.print(
                f"{it.reason}: {it.consumers_before} -> {it.consumers_after} consumers, {it.moved} moved, "
                f"Rscore {it.rscore:.2f}, reassigned in {it.reassign_ms:.0f} ms"
            )

    run_controller(
        cfg,
        duration,
        with_monitor=not no_monitor,
        keep_consumers=keep_consumers,
        crash_after=crash_after,
        on_iteration=show,
    )


@auto_app.command("controller")
def autoscale_controller(
    state_dir: Path = StateDir,
    duration: float = typer.Option(None),
    keep_consumers: bool = typer.Option(False),
    crash_after: str = typer.Option(None, hidden=True),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
):
    """Only the controller, for a group set up by `autoscale run` (recovers its view of the group)."""
    metrics_endpoint()
    from streamscale.autoscaler.live.launch import configure_logging, run_controller

    configure_logging(verbose)
    run_controller(_live_config(state_dir), duration, keep_consumers=keep_consumers, crash_after=crash_after)


@auto_app.command("monitor")
def autoscale_monitor(
    state_dir: Path = StateDir,
    duration: float = typer.Option(None),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
):
    """Only the monitor: publishes per-partition write speeds to monitor.writeSpeed."""
    metrics_endpoint()
    from streamscale.autoscaler.live.launch import configure_logging, run_monitor

    configure_logging(verbose)
    run_monitor(_live_config(state_dir), duration)


@auto_app.command("status")
def autoscale_status(state_dir: Path = StateDir):
    """Consumers running, their partitions, and records in the sink."""
    from streamscale.autoscaler.live.backend import LocalProcessBackend
    from streamscale.autoscaler.live.sink import SQLiteSink

    cfg = _live_config(state_dir)
    running = set(LocalProcessBackend(cfg.state_dir).running())
    sink = SQLiteSink(cfg.sink)
    try:
        for c, st in sorted(sink.states().items()):
            if c in running or st.assignment:
                out.print(
                    f"consumer {c}: {'running' if c in running else 'NOT running'}, "
                    f"partitions {', '.join(st.assignment) or '-'}"
                )
        for t in cfg.topics:
            out.print(f"{t}: {len(sink.rows(t)):,} records in {cfg.sink}")
    finally:
        sink.close()


@auto_app.command("stop")
def autoscale_stop(state_dir: Path = StateDir):
    """Stop every consumer process of the group (by the process ids it recorded)."""
    from streamscale.autoscaler.live.backend import LocalProcessBackend

    stopped = LocalProcessBackend(_live_config(state_dir).state_dir).delete_all()
    out.print(f"stopped consumers {stopped}" if stopped else "no consumers running")
