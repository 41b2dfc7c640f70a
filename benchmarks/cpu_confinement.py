"""What a second CPU buys each UC: the demo's capacity probe, repeated, with Spark confined to 1 and
to 2 CPUs (streamscale.experiment.cpus) and, for comparison, unconfined ``local[1]``/``local[2]``.

    .venv/bin/python benchmarks/cpu_confinement.py [--ucs uc1,uc2] [--repeat 3] [--records 300000]

Per UC: one backlog of generated records on the embedded broker, drained by the UC's pipeline on
1 and 2 cores in alternation (``availableNow``, batches of a third of the backlog, Python workers
warm, the first core count of each round also warms the JVM). Printed: records/s per core count
(median and range of the repeats) and the ratio 2 cores / 1 core.
"""

from __future__ import annotations

import argparse
import statistics

PARAMS = {"uc1": {"sink": "none"}, "uc2": {"emit": "final"}, "uc3": {"emit": "final"}}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ucs", default="uc1,uc2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--records", type=int, default=300_000)
    args = ap.parse_args()
    from streamscale.benchmark.probe import ProbeLoad, probe_capacity
    from streamscale.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        for uc in args.ucs.split(","):
            for confine in (True, False):
                rates: dict[int, list[float]] = {1: [], 2: []}
                for _ in range(args.repeat):
                    for p in probe_capacity(
                        broker.bootstrap,
                        [2, 1],
                        uc,
                        PARAMS.get(uc, {}),
                        ProbeLoad(records=args.records, batch_records=args.records // 3, confine=confine),
                    ):
                        rates[p.cores].append(p.rate)
                med = {k: statistics.median(v) for k, v in rates.items()}
                label = "confined to k CPUs" if confine else "local[k] only"
                print(
                    f"{uc} {label:>19}: "
                    + "; ".join(
                        f"{k} core{'s' if k > 1 else ''} {med[k]:,.0f} records/s ({min(v):,.0f}-{max(v):,.0f})"
                        for k, v in rates.items()
                    )
                    + f"; 2/1 = {med[2] / med[1]:.2f}",
                    flush=True,
                )


if __name__ == "__main__":
    from _main import run

    run(main)
