"""Whether counting each batch's records per 50 ms of Kafka timestamps in 1,024 histogram bins
(``streamscale.pipelines.progress.CREATED_BINS``) instead of 128 slows a query.

    .venv/bin/python benchmarks/created_bins.py [--uc uc4] [--load 83000] [--cores 1]
        [--duration 120] [--warmup 30] [--repeat 2]

The two variants alternate run by run in one process, one Spark session and one embedded broker,
so that the machine's drift falls on both alike. Each run is judged as a benchmark's (the run
whole, no early stop). Prints per variant the median batch time and the processing p95 after the
warm-up, median (min-max) over the runs.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _alternate import alternate
from _main import run
from capacity import SETTINGS

import streamscale.pipelines.base as base
from streamscale.benchmark.experiment_runner import ExperimentRunner
from streamscale.benchmark.spec import parse_spec
from streamscale.broker import EmbeddedBroker


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--uc", default="uc4", choices=sorted(SETTINGS))
    ap.add_argument("--load", type=float, default=83_000)
    ap.add_argument("--cores", type=int, default=1)
    ap.add_argument("--duration", type=float, default=120)
    ap.add_argument("--warmup", type=float, default=30)
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    params = SETTINGS[args.uc][0]
    spec = parse_spec(
        {
            "name": "created-bins",
            "benchmark": {"sut": args.uc, "params": params, "topics": {"partitions": 8}},
            "execution": {
                "load": {"type": "sensors", "values": [args.load]},
                "resources": {"type": "cores", "values": [args.cores]},
                "duration_s": args.duration,
                "warmup_s": args.warmup,
                "min_duration_s": None,
                "reuse_spark": True,
            },
        }
    )
    with tempfile.TemporaryDirectory() as tmp, EmbeddedBroker(log_dir=Path(tmp) / "broker") as broker:
        runner = ExperimentRunner(spec, Path(tmp), broker.bootstrap, broker_pids=broker.pids())
        n = 0

        def measure(env: dict) -> dict:
            nonlocal n
            base.CREATED_BINS = env["bins"]  # read as each run's query is built
            r = runner(args.load, args.cores, n)
            n += 1
            return {"median batch ms": r.median_batch_ms, "processing p95 ms": r.processing_p95_ms}

        try:
            rows = alternate(args.repeat, {"128 bins": {"bins": 128}, "1,024 bins": {"bins": 1024}}, measure, "run")
        finally:
            runner.close()
    print(f"{args.uc} at {args.load:,.0f} records/s on {args.cores} core(s), {args.duration:g} s runs:")
    for name, figures in rows:
        print(f"  {name}: " + ", ".join(f"{k} {v}" for k, v in figures.items()))


if __name__ == "__main__":
    run(main)
