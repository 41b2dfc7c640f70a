"""The ``streamscale`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console

from streamscale.errors import StreamscaleError

console = Console(stderr=True)
out = Console()

_app = typer.Typer(
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Benchmark how PySpark Structured Streaming pipelines scale over a Kafka-protocol broker.",
)
broker_app = typer.Typer(no_args_is_help=True, help="The embedded Kafka-protocol broker (Tansu).")
topic_app = typer.Typer(no_args_is_help=True, help="Topics on the broker.")
_app.add_typer(broker_app, name="broker")
_app.add_typer(topic_app, name="topic")
auto_app = typer.Typer(no_args_is_help=True, help="Consumer-group autoscaling by rebalance-aware bin packing.")
_app.add_typer(auto_app, name="autoscale")
rel_app = typer.Typer(
    no_args_is_help=True, help="Delivery reliability (TRAK): semantics x faults -> loss and duplicates."
)
_app.add_typer(rel_app, name="reliability")
topo_app = typer.Typer(no_args_is_help=True, help="Pipeline topologies: logical plan, optimization, sub-topologies.")
_app.add_typer(topo_app, name="topology")
bench_app = typer.Typer(no_args_is_help=True, help="Scalability benchmarks (Theodolite method) from YAML specs.")
_app.add_typer(bench_app, name="benchmark")

BOOTSTRAP_HELP = (
    "Kafka bootstrap servers of an external cluster (default: $STREAMSCALE_BOOTSTRAP_SERVERS, "
    "else the broker started by `streamscale broker start`)"
)
Bootstrap = typer.Option(None, "--bootstrap-servers", "-b", help=BOOTSTRAP_HELP)


_metrics_port: int | None = None


@_app.callback()
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


def _metrics() -> None:
    from streamscale.observe.metrics import serve

    port = serve(_metrics_port)
    if port is not None:
        console.print(f"metrics: http://127.0.0.1:{port}/metrics", highlight=False)


# -- broker --------------------------------------------------------------------------------
@broker_app.command("start")
def broker_start(port: int = typer.Option(None, help="Port on 127.0.0.1 (default: a free one)")):
    """Start the embedded broker in the background; prints its bootstrap address."""
    from streamscale.broker.embedded import daemon_start

    info = daemon_start(port)
    out.print(f"broker running at [bold]{info.bootstrap}[/] (pid {info.pid}, log {info.log_path})")
    out.print("data is kept in memory only; stop it with `streamscale broker stop`")


@broker_app.command("stop")
def broker_stop():
    """Stop the embedded broker started by `broker start` (its data is lost)."""
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
):
    """Create a topic."""
    from streamscale.broker import BrokerAccess, resolve_bootstrap

    with BrokerAccess(resolve_bootstrap(bootstrap)) as access:
        access.create_topic(name, partitions, exist_ok=exist_ok)
    out.print(f"topic {name}: {partitions} partitions")


@topic_app.command("delete")
def topic_delete(names: list[str], bootstrap: str = Bootstrap):
    """Delete topics (on the embedded broker this frees their memory)."""
    from streamscale.broker import BrokerAccess, resolve_bootstrap

    with BrokerAccess(resolve_bootstrap(bootstrap)) as access:
        access.delete_topics(names, missing_ok=False)
    out.print(f"deleted {', '.join(names)}")


@topic_app.command("list")
def topic_list(bootstrap: str = Bootstrap):
    """List topics with partition counts."""
    from streamscale.broker import BrokerAccess, resolve_bootstrap

    with BrokerAccess(resolve_bootstrap(bootstrap)) as access:
        for name, n in sorted(access.topics().items()):
            out.print(f"{name}\t{n}")


@topic_app.command("offsets")
def topic_offsets(
    name: str,
    group: str = typer.Option(None, help="Also show this group's committed offsets and lag"),
    bootstrap: str = Bootstrap,
):
    """Exact end offsets per partition (and a group's lag)."""
    from streamscale.broker import BrokerAccess, resolve_bootstrap

    with BrokerAccess(resolve_bootstrap(bootstrap)) as access:
        ends = access.end_offsets(name)
        committed = access.committed_offsets(group, name) if group else {}
    for p, e in ends.items():
        line = f"{name}[{p}]\tend={e}"
        if group:
            c = committed.get(p)
            line += f"\tcommitted={c}\tlag={e - (c or 0)}"
        out.print(line)
    out.print(f"total\tend={sum(ends.values())}")


# -- load generator ------------------------------------------------------------------------
@_app.command("generate")
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
    json_out: Path = typer.Option(None, "--json-out", help="Write the run's figures here"),
    bootstrap: str = Bootstrap,
):
    """Simulated power sensors: one ActivePowerRecord per sensor and period, key = sensor id.

    Without --records or --duration it runs until Ctrl-C.
    """
    _metrics()
    import dataclasses

    from streamscale.broker import BrokerAccess, resolve_bootstrap
    from streamscale.loadgen import GeneratorConfig, LoadGenerator

    # options first (a bad value is named at once), then the broker
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
    )
    bs = resolve_bootstrap(bootstrap)
    cfg = dataclasses.replace(cfg, bootstrap=bs)
    if partitions:
        with BrokerAccess(bs) as access:
            access.create_topic(topic, partitions, exist_ok=True)
    mode = "unthrottled" if unthrottled else f"target {cfg.target_rate:,.0f} records/s"
    console.print(
        f"generating into {topic} at {bs}: {sensors:,} sensors, {mode}, {cfg.workers} worker(s)"
        + ("" if records is not None or duration else " — Ctrl-C to stop")
    )

    def show(s: dict) -> None:
        short = (
            ""
            if unthrottled or s["rate"] >= 0.95 * s["target_rate"]
            else f"  [red]below target ({s['behind']:,} behind schedule)[/]"
        )
        console.print(
            f"  {s['elapsed_s']:6.1f} s  {s['rate']:>10,.0f} records/s  "
            f"sent {s['sent']:,}  failed {s['failed']:,}{short}"
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


@_app.command("registry")
def registry_cmd(
    levels: int = typer.Option(2, "--levels", "-l", min=1, help="Nested group levels n"),
    children: int = typer.Option(4, "--children", "-k", min=1, help="Children per group"),
    out_file: Path = typer.Option(Path("sensor-registry.json"), "--out"),
    publish: bool = typer.Option(False, "--publish", help="Also publish it to the broker"),
    topic: str = typer.Option("configuration", "--topic"),
    bootstrap: str = Bootstrap,
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
        from streamscale.broker import resolve_bootstrap

        bs = resolve_bootstrap(bootstrap)
        reg.publish(bs, topic)
        out.print(f"published to topic '{topic}' at {bs}")


@_app.command("doctor")
def doctor():
    """Check what streamscale needs: Java 17+, PySpark, the embedded broker binary."""
    import platform

    from streamscale.broker.embedded import resolve_tansu_binary
    from streamscale.sparkio.session import java_version

    ok = True
    for name, check in [
        ("java", lambda: f"Java {java_version()}"),
        ("pyspark", lambda: __import__("pyspark").__version__),
        ("confluent-kafka", lambda: __import__("confluent_kafka").version()[0]),
        ("tansu", resolve_tansu_binary),
    ]:
        try:
            out.print(f"[green]ok[/]   {name}: {check()}")
        except Exception as exc:  # noqa: BLE001 - report every check
            ok = False
            out.print(f"[red]fail[/] {name}: {exc}")
    out.print(f"python {platform.python_version()} at {sys.executable}")
    if not ok:
        raise typer.Exit(1)


def _parse_params(items: list[str]) -> dict:
    from streamscale.errors import ConfigError

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


@_app.command("run-sut")
def run_sut_cmd(
    uc: str = typer.Argument(..., help="uc1, uc2, uc3 or uc4"),
    sensors: int = typer.Option(
        1000, "--sensors", "-s", min=1, help="Load: sensors x 1 record/s (UC4: from --param levels)"
    ),
    duration: float = typer.Option(60.0, "--duration", "-d", min=1),
    master: str = typer.Option("local[2]", help="Spark master: local[k], spark://..., k8s://..."),
    partitions: int = typer.Option(8, min=1),
    gen_workers: int = typer.Option(1, "--gen-workers", min=1),
    param: list[str] = typer.Option(None, "--param", "-p", help="Pipeline parameter NAME=VALUE (repeatable)"),
    out_dir: Path = typer.Option(None, "--out", help="Write summary.json, lag.csv, batches.csv here"),
    bootstrap: str = typer.Option(
        None,
        "--bootstrap-servers",
        "-b",
        help="External Kafka cluster (default: $STREAMSCALE_BOOTSTRAP_SERVERS, else start an embedded broker)",
    ),
):
    """Run one pipeline against the load generator, printing live rates and lag."""
    _metrics()
    from streamscale.execution.sut import run_sut
    from streamscale.pipelines import make_pipeline

    params = _parse_params(param)
    pipe = make_pipeline(uc, params)
    out.print(pipe.describe())

    def on_batch(b: dict) -> None:
        lat = f"  latency {b['avg_latency_ms'] / 1000:.1f} s" if b.get("avg_latency_ms") is not None else ""
        out.print(
            f"  batch {b['batch_id']:>4}: {b['input_rows']:>8,} rows  in {b['input_rate']:>9,.0f}/s  "
            f"processed {b['processed_rate']:>9,.0f}/s  {b['batch_ms'] / 1000:5.2f} s  "
            f"dropped {b['dropped_late']}{lat}"
        )

    def on_lag(s) -> None:
        if int(s.t_s) % 5 == 0:
            out.print(f"  [{s.t_s:6.1f} s] consumer lag {s.lag:,} records")

    from streamscale.broker.embedded import external_bootstrap

    r = run_sut(
        uc,
        sensors=sensors,
        duration_s=duration,
        master=master,
        params=params,
        partitions=partitions,
        gen_workers=gen_workers,
        bootstrap=external_bootstrap(bootstrap),
        out_dir=out_dir,
        on_batch=on_batch,
        on_lag=on_lag,
    )
    out.print(
        f"\n{uc}: generated {r.generated:,} at {r.generator_rate:,.0f}/s (target {r.target_rate:,.0f}/s"
        f"{'' if r.generator_reached_target else ', NOT reached'}); processed {r.processed_records:,} "
        f"at {r.processed_rate:,.0f}/s; final lag {r.final_lag:,}; dropped late {r.dropped_late:,}; "
        f"malformed {r.malformed:,}{f'; unregistered {r.unregistered:,}' if r.unregistered else ''}; "
        f"shuffle stages {r.shuffle_stages}"
    )
    if out_dir:
        out.print(f"wrote {out_dir}/summary.json, lag.csv, batches.csv")


@bench_app.command("validate")
def bench_validate(spec_file: Path):
    """Check a spec and show what it would run."""
    from streamscale.benchmark.runner import experiment_settings
    from streamscale.benchmark.spec import load_spec

    spec = load_spec(spec_file)
    ex = spec.execution
    out.print(
        f"[green]valid[/]: {spec.name}: {spec.benchmark.sut}, {ex.metric} over load {ex.load.type} "
        f"{[f'{v:g}' for v in ex.load.values]} x {ex.resources.type} {ex.resources.values}, "
        f"{ex.strategy.name} search{' with lower bound' if ex.strategy.lower_bound else ''}, "
        f"{ex.repetitions} repetition(s) of {ex.duration_s:g} s (warm-up {ex.warmup_s:g} s)"
    )
    for load in ex.load.values:
        s = experiment_settings(spec, load, ex.resources.values[0])
        out.print(f"  load {load:g}: {s['sensors']:,} sensors = {s['rate']:,.0f} records/s")


@bench_app.command("run")
def bench_run(
    spec_file: Path,
    out_dir: Path = typer.Option(None, "--out", help="Results directory (default results/<name>)"),
    bootstrap: str = typer.Option(
        None,
        "--bootstrap-servers",
        "-b",
        help="External Kafka cluster (default: $STREAMSCALE_BOOTSTRAP_SERVERS, else an embedded broker)",
    ),
    serve: bool = typer.Option(False, "--serve", help="Live page of the running experiment on loopback"),
    serve_port: int = typer.Option(0, help="Port of the live page (default: a free one)"),
):
    """Run an execution: isolated experiments chosen by the search strategy; resumes if interrupted."""
    _metrics()
    from streamscale.benchmark.runner import run_execution
    from streamscale.benchmark.spec import load_spec

    spec = load_spec(spec_file)
    out_dir = out_dir or Path("results") / spec.name
    live = server = None
    if serve:
        from streamscale.observe.live import LiveServer, LiveState

        live = LiveState()
        server = LiveServer(live, serve_port).start()
        console.print(f"live page: {server.url}", highlight=False)
    try:
        from streamscale.broker.embedded import external_bootstrap

        summary = run_execution(spec, out_dir, external_bootstrap(bootstrap), live=live)
    finally:
        if server is not None:
            server.stop()
    kind = "resource demand" if summary["metric"] == "demand" else "load capacity"
    out.print(
        f"\n[bold]{kind}[/] ({summary['experiments_run']} experiments run, "
        f"{summary['experiments_resumed']} resumed, {summary['invalid_experiments']} invalid):"
    )
    for row in summary["results"]:
        k, v = list(row.values())
        out.print(f"  {k:g} -> {v if v is not None else 'none of the tested amounts'}")
    out.print(f"lag sampler CPU: at most {summary['max_sampler_cpu_pct']}% of one core")
    out.print(f"report: {summary['report']}")
    out.print(
        f"results in {out_dir}/ (experiments.csv, summary.csv, summary.json, "
        f"{'demand' if summary['metric'] == 'demand' else 'capacity'}.png, lag/)"
    )


@auto_app.command("evaluate")
def autoscale_evaluate(
    out_dir: Path = typer.Option(Path("results/autoscale-eval"), "--out"),
    partitions: int = typer.Option(32, min=1),
    measurements: int = typer.Option(500, min=2, help="Measurements per delta stream"),
    latency_measurements: int = typer.Option(100, min=2),
    seed: int = typer.Option(0),
):
    """The seed's evaluation: CBS, Rscore, Pareto fronts per delta, latency vs Kafka's assignment."""
    from streamscale.autoscaler.report import evaluate

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
    """Seed 001 §VI-C/§VI-E figures over many draws: reproduction.csv, variants, plots, report.html."""
    from rich.table import Table

    from streamscale.autoscaler.reproduce import ReproduceSpec, reproduce
    from streamscale.specs import read_yaml, validate

    spec = (
        validate(ReproduceSpec, read_yaml(spec_file) or {}, str(spec_file), "latency and packing")
        if spec_file
        else ReproduceSpec()
    )
    r = reproduce(spec, out_dir, progress=lambda msg: console.print(msg, highlight=False))
    table = Table(title="seed 001 §VI: paper vs measured (median over draws, 5-95 %)")
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
):
    """Monitor + controller: consumers follow the load, written to SQLite exactly once."""
    _metrics()
    from pydantic import ValidationError

    from streamscale.autoscaler.live.protocol import LiveConfig
    from streamscale.autoscaler.live.run import configure_logging, parse_bytes, run_controller, setup
    from streamscale.broker.embedded import resolve_bootstrap
    from streamscale.errors import ConfigError

    configure_logging(verbose)
    try:
        cfg = LiveConfig(
            bootstrap=resolve_bootstrap(bootstrap),
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
    _metrics()
    from streamscale.autoscaler.live.run import configure_logging, run_controller

    configure_logging(verbose)
    run_controller(_live_config(state_dir), duration, keep_consumers=keep_consumers, crash_after=crash_after)


@auto_app.command("monitor")
def autoscale_monitor(
    state_dir: Path = StateDir,
    duration: float = typer.Option(None),
    verbose: bool = typer.Option(False, "--verbose", "-v"),
):
    """Only the monitor: publishes per-partition write speeds to monitor.writeSpeed."""
    _metrics()
    from streamscale.autoscaler.live.run import configure_logging, run_monitor

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
):
    """Send N numbered messages per semantics under each fault; report alpha = L/N and beta = D/N."""
    _metrics()
    from streamscale.reliability.runner import run_spec
    from streamscale.reliability.spec import load_spec

    spec = load_spec(spec_file)
    out_dir = out_dir or Path("results") / spec.name
    from streamscale.broker.embedded import external_bootstrap

    df = run_spec(spec, out_dir, external_bootstrap(bootstrap), progress=console.print)
    out.print(f"{len(df)} trials; results in {out_dir}/ (trials.csv, summary.csv, summary.json, fig*.png)")


@rel_app.command("pipeline")
def reliability_pipeline(
    messages: int = typer.Option(20000, "--messages", "-n", min=100),
    size: int = typer.Option(100, min=16),
    partitions: int = typer.Option(2, min=1),
    kill_at: float = typer.Option(0.3, min=0.01, max=0.99, help="Kill the query when this fraction is written"),
    master: str = typer.Option("local[1]"),
    out_dir: Path = typer.Option(Path("results/reliability-pipeline"), "--out"),
    bootstrap: str = Bootstrap,
):
    """Ids through a Spark pass-through query that is killed (SIGKILL) and restarted from its checkpoint."""
    _metrics()
    from streamscale.broker.embedded import resolve_bootstrap
    from streamscale.reliability.pipeline import run_pipeline_trial

    r = run_pipeline_trial(resolve_bootstrap(bootstrap), out_dir, messages, size, partitions, kill_at, master)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "pipeline.json").write_text(json.dumps(r.row(), indent=2))
    out.print(
        f"N={r.N} M={r.M} M'={r.distinct}: alpha={r.alpha:.6f} (L={r.lost}), beta={r.beta:.6f} (D={r.duplicated}); "
        f"killed with {r.output_at_kill} records written; {out_dir}/pipeline.json"
    )


@rel_app.command("netem-check")
def reliability_netem_check():
    """Can this machine inject real packet delay/loss (tc netem between network namespaces)?"""
    from streamscale.reliability.netem import netem_available

    ok, why = netem_available()
    out.print(("netem available: " if ok else "netem NOT available: ") + why)
    raise typer.Exit(0 if ok else 1)


@topo_app.command("describe")
def topology_describe(
    name: str = typer.Argument(..., help="uc1, uc2, uc3, uc4 or blog (the seed's example)"),
    optimize: bool | None = typer.Option(
        None,
        "--optimize/--no-optimize",
        help="Merge repartitions (seed 004) always / never; default: where it pays on Spark",
    ),
    out_dir: Path = typer.Option(Path("results/topology"), "--out"),
    params: list[str] = typer.Option([], "--param", "-p", help="Pipeline parameter KEY=VALUE"),
):
    """Print sub-topologies like Kafka Streams' Topology#describe() and write DOT and PNG graphs."""
    from streamscale.pipelines.plans import plan_for
    from streamscale.topology.physical import describe, physical_plan, render_png, to_dot

    if name.lower() not in ("uc1", "uc2", "uc3", "uc4", "blog"):
        raise StreamscaleError(f"unknown topology '{name}': choose uc1, uc2, uc3, uc4 or blog")
    phys = physical_plan(plan_for(name.lower(), **_parse_params(params)), optimize)
    text = describe(phys)
    out.print(text, markup=False, highlight=False)
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = out_dir / f"{name.lower()}-{'optimized' if phys.optimized else 'unoptimized'}"
    stem.with_suffix(".txt").write_text(text + "\n")
    stem.with_suffix(".dot").write_text(to_dot(phys))
    render_png(phys, stem.with_suffix(".png"))
    out.print(
        f"{len(phys.subtopologies)} sub-topologies, {len(phys.repartitions)} repartition topics; "
        f"wrote {stem}.txt, .dot, .png"
    )


@_app.command("report")
def report_cmd(results_dir: Path):
    """Write RESULTS_DIR/report.html: one self-contained page for a benchmark execution."""
    from streamscale.observe.report import write_report

    out.print(f"wrote {write_report(results_dir)}")


@_app.command("demo")
def demo_cmd(
    seconds: float = typer.Option(10.0, help="Source demo: how long the streaming query runs"),
    sensors: int = typer.Option(10000, help="Source demo: simulated sensors (records/s)"),
    out_dir: Path = typer.Option(Path("demo-results"), "--out"),
    master: str = typer.Option("local[2]", help="Source demo: Spark master"),
    source: bool = typer.Option(False, help="First show the PySpark Kafka source under load"),
    execution: bool = typer.Option(True, help="Run the scaling demo (probe + UC2 benchmark)"),
):
    """A Spark job's (UC2's) resource demand found rising with its load on this machine (~3 min), with report."""
    from streamscale.demo import run_demo

    run_demo(seconds=seconds, sensors=sensors, out_dir=out_dir, master=master, execution=execution, source=source)


def register(typer_app: typer.Typer, name: str) -> None:
    """Later concerns add their command groups here."""
    _app.add_typer(typer_app, name=name)


def app() -> None:
    """Entry point: user errors become one clear line and exit code 2, never a traceback."""
    try:
        _app()
    except StreamscaleError as exc:
        console.print(f"[red]error:[/] {exc}")
        sys.exit(2)
    except KeyboardInterrupt:
        console.print("interrupted")
        sys.exit(130)


if __name__ == "__main__":
    app()
