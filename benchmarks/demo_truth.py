"""Does the demo's answer hold over long runs? The demo, then its 1-core ends re-run for 300 s.

    .venv/bin/python benchmarks/demo_truth.py [--tries 3] [--budget 240] [--long 300] [--warmup 60]
        [--out results/demo-truth]

Each try runs the scaling demo as `streamscale demo --budget` does (a probe and a bracket on 1
and on 2 cores within its time budget), then runs its 1-core held end and failed end again with the same spec and only
Theodolite's run lengths: ``--long`` seconds, ``--warmup`` s warm-up, no early stop (every look
off), one run each, the held end first. The demo's answer holds when the long run at its held end
passes and the one at its failed end fails (an upper end the demo said was undecided claims no
failure: a long run may pass there; as ``capacity.py --confirm`` judges). Printed per try: the demo's time, its 1-core
and 2-core brackets and how far apart their ends are, Spark's CPU-seconds per million records at
the held end, and the long runs' verdicts with their lag trends; what the demo's 1-core runs
could resolve (each run's lag interval and trend as a share of its load, against the 1 % limit:
a run passes only where its interval's upper edge lies below the limit) and the held end as a
share of the probe's figure; then the held ends' spread over the tries (max / min), the median
interval over the tries' 1-core runs, and how many tries held (a try without a 1-core held end
did not).
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from statistics import median


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tries", type=int, default=3)
    ap.add_argument("--budget", type=float, default=None, help="the demo's time budget, s (default: the demo's)")
    ap.add_argument("--long", type=float, default=300.0, help="seconds of each long run")
    ap.add_argument("--warmup", type=float, default=60.0, help="warm-up of each long run, s")
    ap.add_argument("--out", type=Path, default=Path("results/demo-truth"))
    args = ap.parse_args()

    from streamscale.benchmark.confirm import end_holds, long_spec
    from streamscale.benchmark.execution import run_execution
    from streamscale.benchmark.results import read_results
    from streamscale.benchmark.spec import parse_spec
    from streamscale.broker import EmbeddedBroker
    from streamscale.demo import run_scaling_demo

    held_ends, holds, halves = [], 0, []
    for i in range(1, args.tries + 1):
        out = args.out / f"try-{i}"
        # the long runs of an earlier try here checked an earlier demo (whose results the new one
        # replaces): the execution would refuse their directory after this try's demo
        shutil.rmtree(out / "long", ignore_errors=True)
        t0 = time.monotonic()
        summary = run_scaling_demo(out / "demo", budget_s=args.budget)
        demo_s = time.monotonic() - t0
        brackets = {b["resources"]: b for b in summary["answer"]["brackets"]}
        one = brackets[1]
        for res, b in sorted(brackets.items()):
            width = "—" if b.get("width") is None else f"{b['width']:.0%}"
            per_m = b.get("cpu_s_per_million")
            print(
                f"try {i}: demo {demo_s:.0f} s; {res} core(s) held {b['held']}"
                f"{' (as fewer did; not run)' if b.get('held_assumed') else ''}, "
                f"{'undecided' if b.get('failed_undecided') else 'failed'} {b['failed']} "
                f"({width} apart{', out of time' if b.get('out_of_time') else ''}); "
                f"CPU-s per million at the held end: {'—' if per_m is None else f'{per_m:.3g}'}",
                flush=True,
            )
        halves += _resolution(i, out / "demo", one, summary)
        if one["held"] is None:
            print(f"try {i}: no 1-core held end to check", flush=True)
            continue
        held_ends.append(float(one["held"]))
        demo = _demo_spec_of(out / "demo")
        # a held end without a failed one above it (the budget ended the search) is checked alone
        ends = [e for e in (one["held"], one["failed"]) if e is not None]
        spec = parse_spec(long_spec(demo, 1, ends, args.long, args.warmup, demo["name"] + "-long"))
        with EmbeddedBroker(log_dir=out / "long" / "logs") as broker:
            run_execution(spec, out / "long", broker.connection, broker_pids=broker.pids())
        rows = {float(r.load): r for r in read_results(out / "long")}
        held_run = rows[float(one["held"])]
        failed_run = rows[float(one["failed"])] if one["failed"] is not None else None
        # an upper end the demo left undecided claims no failure: a long run passing there says
        # the truth lies higher, which the answer did not deny
        ok = end_holds(one, held_run.verdict, failed_run.verdict if failed_run is not None else None)
        holds += ok
        for what, r in (("held end", held_run), ("failed end", failed_run)):
            if r is None:
                continue
            print(
                f"try {i}: {what} {r.load:,.0f} over {args.long:g} s: {r.verdict.upper()}, lag trend "
                f"{r.lag_slope:,.0f}/s [{r.lag_low:,.0f}, {r.lag_high:,.0f}] (limit {r.lag_limit:,.0f}), "
                f"processing p95 {r.processing_p95_ms:,.0f} ms, delivered {r.delivered_rate:,.0f}/s",
                flush=True,
            )
        print(f"try {i}: the demo's 1-core answer {'holds' if ok else 'does NOT hold'} over long runs", flush=True)
    # a try whose demo held nothing on 1 core gave no answer to hold: it counts against the demo,
    # not out of the tally
    spread = f" (max / min {max(held_ends) / min(held_ends):.2f})" if held_ends else ""
    missing = args.tries - len(held_ends)
    print(
        f"1-core held ends: {', '.join(f'{h:,.0f}' for h in held_ends) or 'none'}{spread}; held over long runs "
        f"in {holds} of {args.tries} tries" + (f" ({missing} without a 1-core held end)" if missing else "")
    )
    if halves:
        passed = [h for v, h in halves if v == "pass"]
        print(
            f"1-core runs' lag intervals: median +-{median(h for _, h in halves):.2f} % of the load over "
            f"{len(halves)} runs" + (f", +-{median(passed):.2f} % over the {len(passed)} that passed" if passed else "")
        )


def _resolution(i: int, demo: Path, one: dict, summary: dict) -> list[tuple[str, float]]:
    """Print what the try's 1-core runs could resolve; return their intervals' half-widths in % of
    the load with each run's verdict (a run without a finite interval is left out)."""
    import math

    from streamscale.benchmark.results import read_results

    runs = [r for r in read_results(demo) if int(r.resources) == 1 and r.load]
    halves, parts = [], []
    for r in sorted(runs, key=lambda r: float(r.load)):
        half = (r.lag_high - r.lag_low) / 2 / r.load * 100
        if not math.isfinite(half):
            continue
        halves.append((r.verdict, half))
        parts.append(f"{r.load:,.0f} {r.verdict} {r.lag_slope / r.load * 100:+.2f} +-{half:.2f}")
    probe = next((p["records_per_s"] for p in summary.get("probes", []) if p.get("resources") == 1), None)
    share = f"; held end at {float(one['held']) / probe:.0%} of the probe's {probe:,}" if probe and one["held"] else ""
    print(f"try {i}: 1-core lag trends, % of the load (limit 1 %): {'; '.join(parts) or 'none'}{share}", flush=True)
    return halves


def _demo_spec_of(results: Path) -> dict:
    import yaml

    return yaml.safe_load((results / "spec.yaml").read_text())


if __name__ == "__main__":
    from _main import run

    run(main)
