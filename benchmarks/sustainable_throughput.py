"""Sustainable throughput per UC: the highest generated rate at which the consumer lag does not grow.

    .venv/bin/python benchmarks/sustainable_throughput.py --uc uc1 --master 'local[2]' \
        --rates 10000,20000,30000,40000 [--duration 60] [--warmup 20]

For each rate (ascending, stopping at the first failure) one isolated run of `run_sut`: fresh
broker topics, the load generator at that rate, the pipeline on the given master; the lag trend is
the least-squares slope of the lag samples after the warm-up, and the rate is sustained if the slope
is at most 1 % of the rate (Henning and Hasselbring, §5.3) and the generator reached its target.
"""

from __future__ import annotations

import argparse
import json

from streamscale.broker import EmbeddedBroker
from streamscale.experiment.slo import lag_slo_holds, lag_trend
from streamscale.experiment.sut import run_sut


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--uc", default="uc1")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument(
        "--rates",
        default="5000,10000,20000,30000,40000",
        help="records/s to try (uc4: nested-group levels n, 4^n sensors)",
    )
    ap.add_argument("--duration", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=20.0)
    ap.add_argument("--params", default="{}", help="pipeline parameters as JSON")
    ap.add_argument("--gen-workers", type=int, default=1)
    ap.add_argument("--partitions", type=int, default=4)
    args = ap.parse_args()
    params = json.loads(args.params)
    if args.uc == "uc1":
        params.setdefault("sink", "none")
    best = None
    with EmbeddedBroker() as broker:
        for rate in [int(r) for r in args.rates.split(",")]:
            if args.uc == "uc4":
                params["levels"] = rate
            r = run_sut(
                args.uc,
                sensors=rate,
                duration_s=args.duration,
                master=args.master,
                params=params,
                bootstrap=broker.bootstrap,
                gen_workers=args.gen_workers,
                partitions=args.partitions,
            )
            rate = int(r.target_rate)
            slope = lag_trend([s.t_s for s in r.lag], [s.lag for s in r.lag], args.warmup)
            ok = lag_slo_holds(slope, r.target_rate) and r.generator_reached_target
            print(
                f"{args.uc} {args.master} rate {rate:>7,}/s: lag slope {slope:>9,.1f} records/s "
                f"(limit {0.01 * r.target_rate:,.0f}), generator {r.generator_rate:,.0f}/s, "
                f"dropped {r.dropped_late}, final lag {r.final_lag:,} -> {'sustained' if ok else 'NOT sustained'}",
                flush=True,
            )
            if not ok:
                break
            best = rate
    print(
        f"RESULT {args.uc} {args.master}: sustainable throughput {best or 0:,} records/s "
        f"(the highest rate tried that held; 0: none held)"
    )


if __name__ == "__main__":
    from _main import run

    run(main)
