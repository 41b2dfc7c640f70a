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

``--confirm``: after a UC's search, each resource amount's held end and failed end run again with
the same spec and only Theodolite's run lengths (300 s, ``--confirm-warmup`` 60 s, no early stop,
one run each, under ``<out>/<uc>/confirm-<n>``). An end holds when the long run at the held end
passes and the one at the failed end fails (an upper end the search left undecided claims no
failure; a long run passing there says only that the capacity lies higher). Printed per amount,
with Spark's CPU-seconds per million records at the held end and their range over its runs. Where
a long run contradicts an end, or passes an upper end the search left undecided, long runs decide
the bracket anew (at most ``--confirm-runs`` more, default 3, each under
``<out>/<uc>/confirm-<n>-<load>``): the held end walks down the loads the search held until one
passes, the upper end is the lowest load above it whose long run did not pass (where every one
passed, a load ``--resolution`` higher, and so on), and their middle is run until they lie within
``--resolution``; the answer printed is that bracket, said to be decided by long runs. Each UC's
``confirmed.json`` holds both answers.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import time
from pathlib import Path

from streamscale.benchmark.bracket import between
from streamscale.benchmark.confirm import end_holds, long_spec, refine
from streamscale.benchmark.execution import run_execution
from streamscale.benchmark.results import read_results
from streamscale.benchmark.spec import parse_spec
from streamscale.broker import EmbeddedBroker
from streamscale.broker.cluster import EmbeddedCluster
from streamscale.experiment.standalone import StandaloneCluster

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


def confirm_spec(spec: dict, resources: int, loads: list[float], seconds: float, warmup: float) -> dict:
    """``spec`` (a UC's search) re-checking ``loads`` on ``resources``: every run whole, ``seconds``
    long after ``warmup``, once."""
    return long_spec(spec, resources, loads, seconds, warmup, f"{spec['name']}-confirm-{resources}")


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
        help="after each search, re-run every bracket end whole for SECONDS (default 300)",
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
    answers, confirmed = {}, {}
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
            if args.confirm is not None:
                confirmed[uc] = confirm(raw, summary["answer"]["brackets"], out / uc, broker, args)
    unit = "executor" if args.standalone else "core"
    print(f"\nUC: capacity per {unit} count (runs: load x {unit}s: verdict, lag trend [95 %] / limit, median batch)")
    for uc, (summary, rows, secs, ran) in answers.items():
        resumed = f", {len(rows) - ran} of them read from {out / uc}" if ran < len(rows) else ""
        runs = f"{len(rows)} run{'' if len(rows) == 1 else 's'}"
        print(f"{uc}: {summary['answer']['sentence']} ({runs}{resumed}, {ran} run in {secs / 60:.0f} min)")
        print_runs(rows)
        for line in confirmed.get(uc, []):
            print(f"  {line}")


def confirm(raw: dict, brackets: list[dict], out: Path, broker, args) -> list[str]:
    """Each bracket's decided ends run again whole (``--confirm`` s); one line per amount (two where
    long runs decide its bracket anew: an end contradicted, or an undecided upper end that passed)."""
    lines, answers = [], []
    for b in brackets:
        ends = [e for e in (b["held"], b["failed"]) if e is not None]
        if not ends:
            continue
        n = int(b["resources"])
        rows = _long_runs(raw, n, [float(e) for e in ends], out / f"confirm-{n}", broker, args)
        held = rows.get(float(b["held"])) if b["held"] is not None else None
        failed = rows.get(float(b["failed"])) if b["failed"] is not None else None
        ok = end_holds(b, held and held.verdict, failed and failed.verdict)
        per_m, spread = b.get("cpu_s_per_million"), b.get("cpu_s_per_million_range")
        cpu = "—" if per_m is None else f"{per_m:.3g} [{spread[0]:.3g}, {spread[1]:.3g}]"
        runs = "; ".join(
            f"{r.load:,.0f}: {r.verdict.upper()} {r.lag_slope:,.0f} [{r.lag_low:,.0f}, {r.lag_high:,.0f}] / "
            f"{r.lag_limit:,.0f}, processing p95 {r.processing_p95_ms:,.0f} ms, delivered {r.delivered_rate:,.0f}/s"
            for r in (held, failed)
            if r is not None
        )
        width = "" if b.get("width") is None else f" ({b['width']:.0%} apart)"
        upper = "undecided" if b.get("failed_undecided") else "failed"
        # an upper end the search left undecided that passed its long run: confirmed (it claimed no
        # failure), but the capacity lies above it, so long runs go on up to a failed end
        higher = ok and failed is not None and b.get("failed_undecided") and failed.verdict == "pass"
        said = "confirmed; the capacity lies above the upper end" if higher else "confirmed" if ok else "NOT confirmed"
        line = (
            f"{n} x: held {_load(b['held'])} / {upper} {_load(b['failed'])}{width}, CPU-s per million held {cpu}; "
            f"over {args.confirm:g} s: {runs} -> {said}"
        )
        print(f"{out.name}: {line}", flush=True)
        lines.append(line)
        entry = {"resources": n, "search": {k: b.get(k) for k in ("held", "failed", "failed_undecided", "width")}}
        entry |= {"confirmed": ok, "long": {f"{r.load:g}": r.verdict for r in (held, failed) if r is not None}}
        if not ok or higher:
            first = {float(k): v for k, v in entry["long"].items()}
            entry["refined"] = refine(
                b,
                functools.partial(_long_run, raw, n, out=out, broker=broker, args=args),
                first,
                args.resolution,
                args.confirm_runs,
                between,
            )
            line = f"{n} x: decided by long runs: {_refined(entry['refined'])}"
            print(f"{out.name}: {line}", flush=True)
            lines.append(line)
            entry["refined"]["long"] = {f"{x:g}": v for x, v in entry["refined"]["long"].items()}
        answers.append(entry)
    (out / "confirmed.json").write_text(json.dumps(answers, indent=2, default=str))
    return lines


def _long_runs(raw: dict, n: int, loads: list[float], where: Path, broker, args) -> dict:
    """``loads`` on ``n`` run whole (``--confirm`` s) into ``where``: their results by load."""
    spec = parse_spec(confirm_spec(raw, n, loads, args.confirm, args.confirm_warmup))
    run_execution(spec, where, broker.bootstrap, broker_pids=broker.pids())
    return {float(r.load): r for r in read_results(where)}


def _long_run(raw: dict, n: int, load: float, out: Path, broker, args) -> str:
    """One more long run of ``load`` on ``n`` (its own directory: an execution keeps its spec)."""
    (r,) = _long_runs(raw, n, [load], out / f"confirm-{n}-{load:g}", broker, args).values()
    print(
        f"  {r.load:,.0f} x {n} over {args.confirm:g} s: {r.verdict.upper()}, "
        f"{r.cpu_s_per_million:.3g} CPU-s per million records",
        flush=True,
    )
    return r.verdict


def _refined(r: dict) -> str:
    """A bracket long runs decided, in words."""
    upper = "undecided" if r["failed_undecided"] else "failed"
    width = "" if r["width"] is None else f" ({r['width']:.0%} apart)"
    runs = ", ".join(f"{x:,.0f}: {v.upper()}" for x, v in r["long"].items())
    return f"held {_load(r['held'])} / {upper} {_load(r['failed'])}{width}; long runs: {runs}"


def _load(x) -> str:
    return "none" if x is None else f"{float(x):,.0f}"


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
