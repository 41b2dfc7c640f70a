"""`streamscale run-sut`, `benchmark validate|run`, `report` and `demo`: the scalability benchmark."""

from __future__ import annotations

from pathlib import Path

import typer

from streamscale.cli.app import (
    EmbeddedOrBootstrap,
    KafkaConfig,
    KafkaProperty,
    Security,
    bench_app,
    console,
    external_kafka,
    metrics_endpoint,
    out,
    parse_params,
    root,
    with_security,
)
from streamscale.demo import BUDGET_S
from streamscale.errors import ConfigError


@root.command("run-sut")
def run_sut_cmd(
    uc: str = typer.Argument(
        None, metavar="SUT", help="uc1, uc2, uc3, uc4, or your job: FILE.py:FUNCTION or module:FUNCTION"
    ),
    spec_file: Path = typer.Option(
        None,
        "--spec",
        help="Run a benchmark spec's job (its sut, params, records, decode, sink, py_files, topics' partitions)",
    ),
    topic_prefix: str = typer.Option(
        None, "--topic-prefix", help="Input topic P.input and output topic P.output (created if missing, kept)"
    ),
    sensors: int = typer.Option(
        1000, "--sensors", "-s", min=1, help="Load: sensors x 1 record/s (UC4: from --param levels)"
    ),
    rate: float = typer.Option(None, "--rate", help="Load in records/s (instead of --sensors)"),
    records: Path = typer.Option(None, "--records", help="Records YAML: fields and generators, or replay: FILE"),
    duration: float = typer.Option(60.0, "--duration", "-d", min=1),
    master: str = typer.Option("local[2]", help="Spark master: local[k], spark://..., k8s://..."),
    partitions: int = typer.Option(8, min=1, help="Of the input and output topics (with --spec: the spec's)"),
    gen_workers: int = typer.Option(
        None, "--gen-workers", min=1, help="Generator processes (default: 1, with --spec the spec's loadgen.workers)"
    ),
    param: list[str] = typer.Option(None, "--param", "-p", help="Pipeline parameter NAME=VALUE (repeatable)"),
    trigger: str = typer.Option(
        None, "--trigger", help="processing_time:DURATION (a micro-batch at most that often) or real_time:DURATION"
    ),
    input_topic: str = typer.Option(None, "--input-topic", help="Write the load here (created if missing, kept)"),
    output_topic: str = typer.Option(None, "--output-topic", help="The job's output topic (created if missing, kept)"),
    drain_s: float = typer.Option(
        300.0, "--drain", min=0, help="When the load ends, let the query process the rest of the input for up to S s"
    ),
    out_dir: Path = typer.Option(None, "--out", help="Write summary.json, lag.csv, batches.csv here"),
    bootstrap: str = EmbeddedOrBootstrap,
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
):
    """Run one pipeline or your own job against the load generator, printing live rates and lag."""
    import dataclasses

    from streamscale.experiment.sut import Context, Placement, StopPolicy, Workload, run_sut
    from streamscale.loadgen.inputs import Inputs
    from streamscale.loadgen.recordspec import load_records
    from streamscale.pipelines import jobref, make_pipeline, realtime
    from streamscale.sparkio.address import driver_conf

    params = parse_params(param)
    if topic_prefix is not None:
        if input_topic or output_topic:
            raise ConfigError("--topic-prefix names both topics: leave out --input-topic and --output-topic")
        input_topic, output_topic = f"{topic_prefix}.input", f"{topic_prefix}.output"
    if spec_file is not None:
        if uc is not None or records is not None:
            raise ConfigError("--spec names the job and its records: leave out SUT and --records")
        if rate is None:
            raise ConfigError("a spec's job is loaded by rate: give --rate N")
        workload = _spec_workload(spec_file, params, rate, out_dir)
        if topic_prefix is not None and isinstance(workload.records, Inputs):
            input_topic = topic_prefix  # several inputs: each reads PREFIX.NAME
    elif uc is None:
        raise ConfigError("name the SUT (uc1-uc4 or FILE.py:FUNCTION), or give --spec FILE")
    else:
        workload = Workload(
            jobref.resolve(uc) if jobref.is_job(uc) else uc,
            params,
            sensors=sensors,
            rate=rate,
            records=load_records(records) if records is not None else None,
            partitions=partitions,
        )
    over = {"gen_workers": gen_workers} if gen_workers is not None else {}
    if trigger is not None:
        over["params"] = {**workload.params, "trigger": trigger}
    workload = dataclasses.replace(workload, **over)
    pipe = make_pipeline(workload.uc, workload.params, records=workload.records, job=workload.job)
    placement = Placement(master, driver_conf(master))  # a cluster's executors reach the driver off loopback
    realtime.check_run(pipe, master, placement.spark_conf, workload.partitions)  # before any load
    metrics_endpoint()  # once the input is known to be good: a bad one is its error line alone
    out.print(pipe.describe())
    workload = dataclasses.replace(workload, pipeline=pipe)  # the run runs the pipeline described

    def on_batch(b: dict) -> None:
        lat = f"  latency {b['avg_latency_ms'] / 1000:.1f} s" if b.get("avg_latency_ms") is not None else ""
        out.print(
            f"  batch {b['batch_id']:>4}: {b['input_rows']:>8,} rows  in {b['input_rate']:>9,.0f}/s  "
            f"processed {b['processed_rate']:>9,.0f}/s  {b['batch_ms'] / 1000:5.2f} s  "
            # Spark's connector: late records are counted when the run ends (pipelines.replay)
            f"{'dropped ' + str(b['dropped_late']) if b.get('late_counted', True) else 'dropped: at the end'}{lat}"
        )

    def on_lag(s) -> None:
        if int(s.t_s) % 5 == 0:
            out.print(f"  [{s.t_s:6.1f} s] consumer lag {s.lag:,} records")

    conn, props = external_kafka(bootstrap, kafka_property, kafka_config)
    context = Context(
        bootstrap=conn,
        properties=props,
        topics=(input_topic, output_topic),
        out_dir=out_dir,
        on_batch=on_batch,
        on_lag=on_lag,
    )
    r = run_sut(workload, placement, StopPolicy(duration, drain_s=drain_s), context)
    left = f"; [red]{r.undrained:,} input records not processed within {drain_s:g} s[/]" if r.undrained else ""
    out.print(
        f"\n{r.uc}: generated {r.generated:,} at {r.generator_rate:,.0f}/s (target {r.target_rate:,.0f}/s"
        f"{'' if r.generator_reached_target else ', NOT reached'}); processed {r.processed_records:,} "
        f"at {r.processed_rate:,.0f}/s with the {r.connector} connector; final lag {r.final_lag:,}; "
        f"dropped late {f'{r.dropped_late:,}' if r.late_counted else 'not counted (see the log)'}; "
        f"malformed {r.malformed:,}{f'; unregistered {r.unregistered:,}' if r.unregistered else ''}; "
        f"shuffle stages {r.shuffle_stages}{left}"
    )
    if r.processing_ms:
        at = "at the output topic" if r.latency_at == "output" else "to their batch's commit"
        pcts = ", ".join(f"{k} {v:,.0f} ms" for k, v in r.processing_ms.items())
        out.print(f"processing latency ({at}): {pcts}")
    if input_topic or output_topic:
        out.print(f"topics kept: input {r.input_topic}" + (f", output {output_topic}" if output_topic else ""))
    if out_dir:
        out.print(f"wrote {out_dir}/summary.json, lag.csv, batches.csv")


def _spec_workload(spec_file: Path, params: dict, rate: float, out_dir):
    """The workload of a spec's job at ``rate`` records/s, from its plan (resolved once): its sut,
    params (``-p`` over them), records or inputs, sink, generators' settings and partitions."""
    from streamscale.benchmark.plan import resolve
    from streamscale.benchmark.spec import load_spec

    plan = resolve(load_spec(spec_file))
    sut, spec_params = plan.spec.sut_of(""), plan.spec.benchmark.params
    return plan.workload(sut, {**spec_params, **params}, 1, rate, str(out_dir / "sink") if out_dir else None)


@bench_app.command("reference")
def bench_reference():
    """Print every spec field and pipeline parameter with its type, default, unit and meaning (Markdown)."""
    from streamscale.benchmark.reference import reference_markdown

    print(reference_markdown(), end="")


@bench_app.command("validate")
def bench_validate(spec_file: Path):
    """Check a spec and show what it would run."""
    from streamscale.benchmark.plan import resolve
    from streamscale.benchmark.spec import load_spec
    from streamscale.loadgen.inputs import Inputs
    from streamscale.pipelines.trigger import parse_trigger

    spec = load_spec(spec_file)
    ex, plan = spec.execution, resolve(spec)
    plan.check()  # every load value builds its pipeline, before the spec is called valid
    out.print(
        f"[green]valid[/]: {spec.name}: {spec.benchmark.sut}, {ex.metric} over load {ex.load.type} "
        f"{[f'{v:g}' for v in ex.load.values]} x {ex.resources.type} {ex.resources.values}, "
        f"{ex.strategy.name} search{' with lower bound' if ex.strategy.lower_bound else ''}, "
        f"{ex.repetitions} repetition(s) of {ex.duration_s:g} s (warm-up {ex.warmup_s:g} s), each going on "
        f"up to {ex.longest_s:g} s while undecided"
    )
    if spec.cluster is not None:
        from streamscale.hosts.cluster import why_not

        c, why = spec.cluster, why_not()
        out.print(
            f"  on a Spark master, {c.workers} workers of {c.worker_cores} core(s) and {c.brokers} Kafka brokers, each "
            "on a host of its own here (the cluster `streamscale cluster start` left running, else one started "
            "for the run)" + (f"; [yellow]not here[/]: {why}" if why else "")
        )
    if plan.probed:
        out.print(
            "  each resource amount's search starts from a drain probe: the rate at which the job reads a "
            "backlog of its own records there (strategy.probe: false starts from load.values)"
        )
    if plan.ends_rejudged:
        out.print(
            f"  the search's runs judge the lag trend at {ex.search_threshold:.2%} of the load; the bracket's "
            f"ends then run under the SLO's {ex.slos.lag_trend_threshold:.2%}"
        )
    if spec.execution.configs:
        out.print(f"  configurations searched in turn: {', '.join(spec.execution.configs)}")
        for name in spec.execution.configs:
            given = plan.point(ex.load.values[0], ex.resources.values[0], name).params.get("trigger")
            if given is not None:
                out.print(f"  {name}: trigger {parse_trigger(given)}")
    feed = spec.benchmark.feed()
    for load in ex.load.values:
        point = plan.point(load, ex.resources.values[0])
        keys = "" if point.load_rate is not None else f"{point.sensors:,} sensors = "
        split = ""
        if isinstance(feed, Inputs):
            split = " (" + ", ".join(f"{i.name} {i.rate(point.rate):,.0f}" for i in feed) + ")"
        out.print(f"  load {load:g}: {keys}{point.rate:,.0f} records/s{split}")


@bench_app.command("run")
def bench_run(
    spec_file: Path,
    out_dir: Path = typer.Option(None, "--out", help="Results directory (default results/<name>)"),
    bootstrap: str = EmbeddedOrBootstrap,
    serve: bool = typer.Option(False, "--serve", help="Live page of the running experiment on loopback"),
    serve_port: int = typer.Option(0, help="Port of the live page (default: a free one)"),
    kafka_property: list[str] = KafkaProperty,
    kafka_config: Path = KafkaConfig,
    security: str = Security,
    confirm: bool = typer.Option(
        False, "--confirm", help="Decide each bracket end by a long run (strategy.confirm_s, default 300 s)"
    ),
):
    """Run an execution: isolated experiments chosen by the search strategy; resumes if interrupted."""
    from streamscale.benchmark.execution import run_execution
    from streamscale.benchmark.plan import resolve
    from streamscale.benchmark.spec import load_spec, with_confirm

    spec = with_security(load_spec(spec_file), security)
    if confirm:
        spec = with_confirm(spec)
    plan = resolve(spec)  # once: everything downstream runs this plan
    plan.check()  # a load value its pipeline refuses is the one line, before anything starts
    metrics_endpoint()
    out_dir = out_dir or Path("results") / spec.name
    conn, props = external_kafka(bootstrap, kafka_property, kafka_config, spec.kafka_section())
    live = server = None
    if serve:
        from streamscale.observe.live import LiveServer, LiveState

        live = LiveState()
        server = LiveServer(live, serve_port).start()
        console.print(f"live page: {server.url}", highlight=False)
    try:
        summary = run_execution(plan, out_dir, conn, live=live, properties=props)
    finally:
        if server is not None:
            server.stop()
    kind = "resource demand" if summary["metric"] == "demand" else "load capacity"
    out.print(
        f"\n[bold]{kind}[/] ({summary['experiments_run']} experiments run, "
        f"{summary['experiments_resumed']} resumed, {summary['invalid_experiments']} invalid):"
    )
    for row in summary["results"]:
        row = dict(row)
        which = f"{row.pop('config')}: " if "config" in row else ""
        k, v = list(row.values())[:2]
        out.print(f"  {which}{_figure(k)} -> {_figure(v) if v is not None else 'none of the tested amounts'}")
    out.print(summary["answer"]["sentence"] + ".", highlight=False)
    out.print(f"lag sampler CPU: at most {summary['max_sampler_cpu_pct']}% of one core")
    out.print(f"report: {summary['report']}")
    out.print(
        f"results in {out_dir}/ (experiments.csv, summary.csv, summary.json, "
        f"{'demand' if summary['metric'] == 'demand' else 'capacity'}.png, lag/)"
    )


@bench_app.command("check")
def bench_check(
    results_dir: Path = typer.Argument(..., metavar="RESULTS", help="The new results folder (of `benchmark run`)"),
    baseline: Path = typer.Option(..., "--baseline", metavar="BASELINE", help="The results folder to compare with"),
    tolerance: float = typer.Option(
        0.0,
        "--tolerance",
        min=0,
        max=99,
        metavar="PCT",
        help="Forgive a failure up to PCT % below the baseline's held end",
    ),
    junit: Path = typer.Option(None, "--junit", metavar="FILE", help="Also write the comparison as JUnit XML"),
):
    """Gate for CI: exit 1 when an entry (configuration x resources) lost capacity against BASELINE, else 0."""
    from streamscale.benchmark.gate import compare, junit_xml, read_folder

    cmp = compare(read_folder(baseline), read_folder(results_dir), tolerance / 100)
    label = lambda e: e.label(cmp.resource_type)  # noqa: E731 - one short formatter
    for which, entries in (("the baseline", cmp.only_baseline), (str(results_dir), cmp.only_new)):
        if entries:
            out.print(f"note: only in {which}, not compared: {', '.join(map(label, entries))}", highlight=False)
    if junit is not None:
        junit.write_text(junit_xml(cmp))
    for r in cmp.regressions:
        out.print(f"regression: {label(r.entry)}: {r.reason}", highlight=False)
    n = len(cmp.compared)
    if cmp.regressions:
        out.print(f"{len(cmp.regressions)} of {n} entries lost capacity against {baseline}", highlight=False)
        raise typer.Exit(1)
    out.print(f"no capacity fell: {n} entr{'y' if n == 1 else 'ies'} compared with {baseline}", highlight=False)


def _figure(x) -> str:
    """A load or an amount as a person reads it: 2,000, not 2000.0."""
    from streamscale.benchmark.units import approx

    return approx(float(x)) if isinstance(x, int | float) else str(x)


@root.command("report")
def report_cmd(results_dir: Path):
    """Write RESULTS_DIR/report.html: one self-contained page for a benchmark execution."""
    from streamscale.benchmark.report import write_report

    out.print(f"wrote {write_report(results_dir)}")


@root.command("demo")
def demo_cmd(
    seconds: float = typer.Option(10.0, help="Source demo: how long the streaming query runs"),
    sensors: int = typer.Option(10000, help="Source demo: simulated sensors (records/s)"),
    out_dir: Path = typer.Option(Path("demo-results"), "--out"),
    master: str = typer.Option(
        "local[2]", help="The source demo's Spark master (with --source); the scaling demo runs on this machine's cores"
    ),
    source: bool = typer.Option(False, help="First show the PySpark Kafka source under load"),
    execution: bool = typer.Option(True, help="Run the scaling demo (probe + UC2 benchmark)"),
    connector: str = typer.Option(
        None, help="Kafka connector: spark (Spark's own) or python; default $STREAMSCALE_KAFKA_IMPL, else spark"
    ),
    security: str = typer.Option(
        "plaintext", "--security", help="The embedded broker's: plaintext, or sasl_ssl (TLS, SCRAM users, ACLs)"
    ),
    budget: float = typer.Option(
        BUDGET_S,
        "--budget",
        help="Seconds the demo plans its probe and runs into (at least 90; from ~600: runs of 125 s, more decided)",
    ),
):
    """A Spark job's (UC2's) resource demand found rising with its load on this machine (~4 min), with report."""
    from streamscale.demo import SourceDemo, run_demo

    if budget < 90:
        raise typer.BadParameter("at least 90 s: the probe and a run of each core count", param_hint="--budget")

    run_demo(
        out_dir,
        SourceDemo(seconds, sensors, master) if source or not execution else None,
        execution=execution,
        connector=connector,
        security=security,
        budget_s=budget,
    )
