"""Resource demand of UC1-UC4 on a Spark standalone cluster of 2 one-core workers.

    .venv/bin/python benchmarks/standalone_demand.py [--uc uc1 uc2 uc3 uc4] [--duration 60]
        [--warmup 20] [--repetitions 3] [--out results/standalone]

Starts a standalone cluster on loopback from pyspark's own jars (master + 2 workers with 1 core
each; streamscale.hosts.spark) and the embedded broker, then runs one benchmark
execution per UC with ``resources: {type: executors, values: [1, 2]}`` (1-core executors on that
master), two loads per UC (half of the local[2] verdict target, and the target), the linear
search with lower bound, 3 repetitions per point (majority; ``stop_at_majority``), lag SLO 1 % of
the load. The driver, the broker and the generator share the machine's 2 CPUs with the executors.
Results (experiments.csv, report.html, demand.png) per UC under ``--out``; a table at the end.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from capacity import print_runs  # benchmarks/ is the script's directory: on sys.path

from streamscale.benchmark.execution import run_execution
from streamscale.benchmark.results import read_results
from streamscale.benchmark.spec import parse_spec
from streamscale.broker import EmbeddedBroker
from streamscale.hosts.spark import StandaloneCluster

# (pipeline parameters, loads): the local[2] verdict targets and half of each
SETTINGS = {
    "uc1": ({"sink": "none"}, {"type": "sensors", "values": [30_000, 60_000]}),
    "uc2": ({"window_s": 60, "lateness_s": 5}, {"type": "sensors", "values": [10_000, 20_000]}),
    "uc3": ({}, {"type": "sensors", "values": [5_000, 10_000]}),
    # 10^3 and 10^4 sensors in groups of 10
    "uc4": ({"window_s": 60, "lateness_s": 5, "children": 10}, {"type": "nested_groups", "values": [3, 4]}),
}


def spec_for(uc: str, master: str, args) -> dict:
    params, load = SETTINGS[uc]
    return {
        "name": f"standalone-{uc}",
        "benchmark": {"sut": uc, "params": params, "topics": {"partitions": 8}, "loadgen": {"workers": 1}},
        "execution": {
            "master": master,
            "load": load,
            "resources": {"type": "executors", "values": [1, 2]},
            "executor_cores": 1,
            "executor_memory": "2g",
            "duration_s": args.duration,
            "warmup_s": args.warmup,
            "repetitions": args.repetitions,
            "strategy": {"name": "linear", "lower_bound": True},
            "slos": {"lag_trend_threshold": 0.01},
            "metric": "demand",
        },
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uc", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("results/standalone"))
    args = ap.parse_args()
    answers = {}
    with (
        StandaloneCluster(workers=2, cores_per_worker=1, memory_per_worker="2g", log_dir=args.out / "cluster") as c,
        EmbeddedBroker(log_dir=args.out / "broker") as broker,
    ):
        print(f"standalone cluster {c.master_url}: 2 workers x 1 core; broker {broker.bootstrap}", flush=True)
        for uc in args.uc:
            t0 = time.monotonic()
            spec = parse_spec(spec_for(uc, c.master_url, args))
            summary = run_execution(spec, args.out / uc, broker.bootstrap)
            answers[uc] = (summary, read_results(args.out / uc), time.monotonic() - t0)
            print(f"{uc}: {summary['answer']['sentence']} ({answers[uc][2]:.0f} s)", flush=True)
    print(
        "\nUC, load -> executors (verdicts per run: load x executors: lag trend / limit, median batch, generator CPU)"
    )
    for uc, (summary, rows, _) in answers.items():
        print(f"{uc}: {summary['answer']['sentence']}")
        print_runs(rows)


if __name__ == "__main__":
    from _main import run

    run(main)
