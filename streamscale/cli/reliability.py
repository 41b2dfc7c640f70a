"""`streamscale reliability ...`: delivery reliability under faults (TRAK, after Wu, Shang and Wolter)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from streamscale.cli.app import (
    Bootstrap,
    KafkaConfig,
    KafkaProperty,
    Security,
    console,
    external_kafka,
    kafka_connection,
    metrics_endpoint,
    out,
    rel_app,
    with_security,
)


@rel_app.command("run")
def reliability_run(
    spec_file: Path,
    out_dir: Path = typer.Option(None, "--out", help="Default: results/<name>"),
    bootstrap: str = typer.Option(
        None,
        "--bootstrap-servers",
        "-b",
        help="External cluster (only fault-free trials); default: an embedded broker behind the fault proxy",
    ),
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
    security: str = Security,
):
    """Send N numbered messages per semantics under each fault; report alpha = L/N and beta = D/N."""
    metrics_endpoint()
    from streamscale.reliability.campaign import run_spec
    from streamscale.reliability.spec import load_spec

    spec = with_security(load_spec(spec_file), security)
    from streamscale.broker.clusternet import remove_stale_networks

    remove_stale_networks()  # what a SIGKILLed run that cut a broker off left behind
    out_dir = out_dir or Path("results") / spec.name
    conn, props = external_kafka(bootstrap, kafka_property, kafka_config, spec.kafka.model_dump())
    df = run_spec(spec, out_dir, conn, progress=console.print, properties=props)
    import pandas as pd

    from streamscale.reliability.campaign import summary_lines

    out.print("\nper cell: α and β as mean \\[min–max] over its trials", highlight=False)
    from rich.markup import escape

    for line in summary_lines(pd.read_csv(out_dir / "summary.csv", keep_default_na=False)):
        out.print(f"  {escape(line)}", highlight=False)
    out.print(f"{len(df)} trials; results in {out_dir}/ (trials.csv, summary.csv, summary.json, fig*.png)")


@rel_app.command("pipeline")
def reliability_pipeline(
    messages: int = typer.Option(20000, "--messages", "-n", min=100),
    size: int = typer.Option(100, min=16),
    partitions: int = typer.Option(2, min=1),
    kill_at: float = typer.Option(0.3, min=0.01, max=0.99, help="The fault when this fraction is written"),
    kill: str = typer.Option(
        "query",
        help="query: its processes (SIGKILL), then a restart from its checkpoint; leader: the output "
        "partition's leader (SIGKILL) on an embedded cluster the command starts, the query running on",
    ),
    brokers: int = typer.Option(3, min=2, max=9, help="The embedded cluster's brokers (--kill leader)"),
    master: str = typer.Option("local[1]"),
    connector: str = typer.Option(
        None, help="Kafka connector: spark (Spark's own) or python; default $STREAMSCALE_KAFKA_IMPL, else spark"
    ),
    out_dir: Path = typer.Option(Path("results/reliability-pipeline"), "--out"),
    bootstrap: str = Bootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """Ids through a Spark pass-through query with a fault mid-run: the query killed (SIGKILL) and
    restarted from its checkpoint, or the leader of its output killed on an embedded cluster."""
    metrics_endpoint()
    from contextlib import ExitStack

    from streamscale.errors import ConfigError
    from streamscale.reliability.pipeline import PipelineTrial, run_pipeline_trial

    if kill not in ("query", "leader"):
        raise ConfigError(f"--kill must be query or leader, not {kill!r}")
    with ExitStack() as stack:
        cluster = None
        if kill == "leader":
            from streamscale.broker.cluster import EmbeddedCluster

            if bootstrap:
                raise ConfigError("--kill leader kills a broker of the embedded cluster it starts; leave out -b")
            console.print(f"starting an embedded cluster of {brokers} brokers", highlight=False)
            cluster = stack.enter_context(EmbeddedCluster(brokers, log_dir=out_dir / "broker-logs"))
            conn = kafka_connection(cluster.bootstrap, kafka_property, kafka_config)
        else:
            conn = kafka_connection(bootstrap, kafka_property, kafka_config)
        trial = PipelineTrial(messages, size, partitions, kill_at, master, connector=connector, kill=kill)
        r = run_pipeline_trial(conn, out_dir, trial, cluster=cluster)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "pipeline.json").write_text(json.dumps(r.row(), indent=2))
    what = f"broker {r.killed_node} (the output's leader) killed" if r.killed_node is not None else "query killed"
    out.print(
        f"N={r.N} M={r.M} M'={r.distinct}: alpha={r.alpha:.6f} (L={r.lost}), beta={r.beta:.6f} (D={r.duplicated}; "
        f"Spark's Kafka sink is at-least-once); {what} with {r.output_at_kill} records written, "
        f"{r.query_restarts} restart(s) from the checkpoint; {r.connector} connector; {out_dir}/pipeline.json"
    )


@rel_app.command("netem-check")
def reliability_netem_check():
    """Can this machine inject real packet delay/loss (tc netem between network namespaces)?"""
    from streamscale.reliability.netem import netem_available

    ok, why = netem_available()
    out.print(("netem available: " if ok else "netem NOT available: ") + why)
    raise typer.Exit(0 if ok else 1)
