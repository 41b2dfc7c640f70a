"""Load capacity of UC1-UC4 per resource amount, as brackets: the highest load each core (or
executor) count held and the lowest it failed, searched until they lie within 15 % of each other.

    .venv/bin/python benchmarks/capacity.py [--uc uc1 uc2 uc3 uc4] [--standalone] [--brokers 3]
        [--duration S] [--warmup S] [--repetitions 1] [--resolution 0.15] [--out results/capacity]
        [--loads L ...] [--resources N ...] [--every-run] [--confirm [300]] [--confirm-warmup 60]
        [--generators 1]

One benchmark execution per UC with the defaults (``metric: capacity``, ``strategy: bracket``):
the UC's own parameters (no cap per batch), the default SLOs (lag trend 1 % of the load, p95
processing latency 8 trigger intervals, dropped records 1 %), runs that stop once their lag trend
is decided (sequential testing) and last at most ``--duration`` (UC1 60 s, UC2-UC4 150 s: two
whole window periods after the warm-up), one run per point. Resources ``cores: [1, 2]`` (Spark
confined to that many of the machine's CPUs, ``local[n]``) or, with ``--standalone``,
``executors: [1, 2]`` of one core each on a standalone cluster of two one-core workers started
from pyspark's jars. The search starts at the UC's first load below on the fewest resources, and
each amount above where the one below failed. UC4's load counts sensors in groups of 4 (the last
group partly filled), so its search narrows as the others' do. 8
partitions, 1 generator process on the same machine (``--generators``: more, each a CPU's worth
at most, which Spark then shares); a load the generator cannot reach ends the search upwards
(the run says so). ``--brokers 3``: on an embedded cluster of three nodes, the
topics with three replicas, two in sync (the generator's acks=all waits for both). Results
(experiments.csv, capacity.png, report.html) per UC under ``--out``; a table at the end.

To re-check points rather than search: ``--loads`` (one UC) the loads, ``--resources`` the
resource amounts, and ``--every-run`` runs every load x resource point ``--repetitions`` times,
with no early stop (``metric: demand``, full search), so a point's agreement is seen whole.

``--confirm [SECONDS]``: the product's confirmation (``benchmark run --confirm``, the spec's
``strategy.confirm``): after each amount's search its held and failed ends run again for SECONDS
(default 300) after ``--confirm-warmup`` (60 s), no early stop; where a long run contradicts an end,
at most ``--confirm-runs`` more long runs (default 3) decide the bracket anew. experiments.csv says
which run confirmed which end; the answer says the ends were decided by long runs.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import time
from pathlib import Path

from streamscale.benchmark.execution import run_execution
from streamscale.benchmark.results import read_results
from streamscale.benchmark.spec import parse_spec
from streamscale.broker import EmbeddedBroker
from streamscale.broker.cluster import EmbeddedCluster
from streamscale.hosts.spark import StandaloneCluster

# (pipeline parameters, loads: the first tried and the highest the search may try, longest run
# seconds, warm-up seconds). UC2 and UC4 close 60 s windows: their runs may last two whole window
# periods after the warm-up, so that the lag trend fits the jump of every window close out
# (experiment.slo).
SETTINGS = {
    "uc1": ({"sink": "none"}, {"type": "sensors", "values": [40_000, 400_000]}, 60, 20),
    "uc2": ({"window_s": 60, "lateness_s": 5}, {"type": "sensors", "values": [40_000, 400_000]}, 150, 30),
    "uc3": ({}, {"type": "sensors", "values": [10_000, 400_000]}, 150, 30),
    # UC4's load as any number of sensors, in groups of 4 (the last level partly filled): its
    # bracket narrows as finely as the others', where Henning and Hasselbring's 4^n sensors step by 4x
    "uc4": ({"window_s": 60, "lateness_s": 5, "children": 4}, {"type": "sensors", "values": [4_096, 262_144]}, 150, 30),
}


def spec_for(uc: str, args, master: str | None) -> dict:
    params, load, duration, warmup = SETTINGS[uc]
    execution = {
        "load": load,
        "resources": {"type": "executors" if master else "cores", "values": list(args.resources)},
        "duration_s": args.duration or duration,
        "warmup_s": args.warmup or warmup,
        "repetitions": args.repetitions,
        "strategy": {"name": "bracket", "resolution": args.resolution},
        "metric": "capacity",
    }
    if args.confirm is not None:
        execution["strategy"].update(
            confirm=True, confirm_s=args.confirm, confirm_warmup_s=args.confirm_warmup, confirm_runs=args.confirm_runs
        )
    if args.loads:
        execution.update(
            load={**load, "values": list(args.loads)},
            strategy={"name": "full", "lower_bound": False},
            metric="demand",
        )
    if args.every_run:  # every run whole too: no sequential stop inside a run
        execution.update(stop_at_majority=False, extra_repetitions=0, min_duration_s=None)
    if master:
        execution.update(master=master, executor_cores=1, executor_memory="2g")
    topics = {"partitions": 8}
    if args.brokers > 1:
        topics.update(replication_factor=min(3, args.brokers), min_insync_replicas=min(2, args.brokers))
    return {
        "name": f"capacity-{uc}{'-standalone' if master else ''}",
        "benchmark": {"sut": uc, "params": params, "topics": topics, "loadgen": {"workers": args.generators}},
        "execution": execution,
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uc", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--standalone", action="store_true", help="executors of a 2-worker standalone cluster")
    ap.add_argument("--brokers", type=int, default=1, help="an embedded cluster of this many nodes (default 1)")
    ap.add_argument("--duration", type=float, help="run seconds (default per UC: 60 for UC1, 150 for the others)")
    ap.add_argument("--warmup", type=float, help="warm-up seconds (default per UC: 20 for UC1, 30 for the others)")
    ap.add_argument("--repetitions", type=int, default=1)
    ap.add_argument(
        "--generators", type=int, default=1, help="load generator processes (default 1; more reach higher loads)"
    )
    ap.add_argument("--resolution", type=float, default=0.15, help="failed / held - 1 to reach (default 0.15)")
    ap.add_argument("--out", type=Path, default=Path("results/capacity"))
    ap.add_argument("--loads", type=float, nargs="+", help="these loads, every one (one --uc only), not a search")
    ap.add_argument("--resources", type=int, nargs="+", default=[1, 2], help="cores (or executors); default 1 2")
    ap.add_argument(
        "--every-run",
        action="store_true",
        help="every point --repetitions times, every run whole: no early stop, no added runs",
    )
    ap.add_argument(
        "--confirm",
        type=float,
        nargs="?",
        const=300.0,
        metavar="SECONDS",
        help="decide every bracket end by a run of SECONDS (default 300): benchmark run --confirm",
    )
    ap.add_argument("--confirm-warmup", type=float, default=60.0, help="warm-up of each confirming run, s (default 60)")
    ap.add_argument("--confirm-runs", type=int, default=3, help="long runs to re-decide a bracket with (default 3)")
    args = ap.parse_args(argv)
    if args.loads and len(args.uc) != 1:
        ap.error("--loads needs exactly one --uc (each UC has its own load type)")
    if args.confirm is not None and (args.loads or not args.confirm_warmup < args.confirm):
        ap.error("--confirm re-checks a search's ends (not --loads), and its runs outlast --confirm-warmup")
    if not 1 <= args.generators <= 256:  # before a broker starts: the spec would refuse it only then
        ap.error("--generators is a number of processes from 1 to 256")
    return args


def main() -> None:
    args = parse_args()
    out = args.out / ("standalone" if args.standalone else "local")
    if args.brokers > 1:
        out = out.with_name(f"{out.name}-{args.brokers}brokers")
    answers = {}
    with contextlib.ExitStack() as stack:
        master = None
        if args.standalone:
            c = stack.enter_context(
                StandaloneCluster(workers=2, cores_per_worker=1, memory_per_worker="2g", log_dir=out / "cluster")
            )
            master = c.master_url
        if args.brokers > 1:
            broker = stack.enter_context(EmbeddedCluster(args.brokers, log_dir=out / "broker"))
        else:
            broker = stack.enter_context(EmbeddedBroker(log_dir=out / "broker"))
        print(f"{master or 'local[n]'}; broker {broker.bootstrap}", flush=True)
        for uc in args.uc:
            t0 = time.monotonic()
            raw = spec_for(uc, args, master)
            before = len(read_results(out / uc))  # a resumed directory's runs cost no time now
            summary = run_execution(parse_spec(raw), out / uc, broker.bootstrap, broker_pids=broker.pids())
            rows = read_results(out / uc)
            answers[uc] = (summary, rows, time.monotonic() - t0, len(rows) - before)
            print(f"{uc}: {summary['answer']['sentence']} ({answers[uc][2]:.0f} s)", flush=True)
    unit = "executor" if args.standalone else "core"
    print(f"\nUC: capacity per {unit} count (runs: load x {unit}s: verdict, lag trend [95 %] / limit, median batch)")
    for uc, (summary, rows, secs, ran) in answers.items():
        resumed = f", {len(rows) - ran} of them read from {out / uc}" if ran < len(rows) else ""
        runs = f"{len(rows)} run{'' if len(rows) == 1 else 's'}"
        print(f"{uc}: {summary['answer']['sentence']} ({runs}{resumed}, {ran} run in {secs / 60:.0f} min)")
        print_runs(rows)


def print_runs(rows) -> None:
    """One line per run: verdict, lag trend [95 %] / limit, p95 processing latency, median batch,
    the run's length, p95 output latency (UCs that write windows), generator, what Spark had."""
    for r in rows:
        output = f"output p95 {r.latency_p95_ms:,.0f} ms, " if math.isfinite(r.latency_p95_ms or math.nan) else ""
        processing = f"processing p95 {r.processing_p95_ms:,.0f} ms, " if math.isfinite(r.processing_p95_ms) else ""
        print(
            f"  {r.load:>8,.0f} x {r.resources}: {r.verdict.upper()} {r.lag_slope:>9,.0f} "
            f"[{r.lag_low:,.0f}, {r.lag_high:,.0f}] / {r.lag_limit:,.0f}, {processing}"
            f"batch {r.median_batch_ms:,.0f} ms, "
            f"{r.ran_s:.0f} s, {output}generator {r.generator_rate:,.0f}/s of {r.target_rate:,.0f} "
            f"({r.generator_cpu_pct:.0f} % of a CPU), Spark {r.spark_cpu_pct / 100:.1f} CPUs, machine "
            f"{r.machine_cpu_pct:.0f} % busy{' (speed moved %.0f %%)' % (100 * r.drift) if r.drifted else ''}"
        )


if __name__ == "__main__":
    from _main import run

    run(main)
