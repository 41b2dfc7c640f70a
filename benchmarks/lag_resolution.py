"""What a run of a given length can resolve: windows cut from long runs that passed.

    .venv/bin/python benchmarks/lag_resolution.py RESULTS... [--spans 33 60 120] [--warmup 60]

RESULTS: execution directories (`experiments.csv` and `lag/`), or directories holding them (e.g.
`results/demo-truth`, whose tries' `long/` runs are 300 s re-runs of demo ends). Every run there
that passed over its whole length is a load the query kept up with; its lag after each commit,
after ``--warmup`` s, is cut into disjoint windows of each span, and each window's lag trend is
fitted as the runner fits a run's (``streamscale.experiment.slo.fit_periodic`` with the run's
window period). Printed per span: how many windows, how often the window's 95 % interval held the
whole run's trend (coverage), the interval's half-width as a share of the load (median and 90th
percentile), and how many windows alone would have passed, failed or stayed undecided against the
run's own limit (1 % of the load by default). A span whose sustainable windows pass only about half
the time decides a bracket's held end by chance: the highest load whose window happened to pass.
"""

from __future__ import annotations

import argparse
import csv
import math
from pathlib import Path
from statistics import median


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", type=Path, nargs="+")
    ap.add_argument("--spans", type=float, nargs="+", default=[33.0, 60.0, 120.0], help="window lengths, s")
    ap.add_argument("--warmup", type=float, default=60.0, help="seconds of each run left out first")
    args = ap.parse_args()

    runs = [run for root in args.results for run in _passed_runs(root)]
    if not runs:
        raise SystemExit("no run that passed (with its lag/ files) under " + ", ".join(map(str, args.results)))
    loads = sorted({r["load"] for r in runs})
    print(f"{len(runs)} passed runs, loads {loads[0]:,.0f}-{loads[-1]:,.0f} records/s, warm-up {args.warmup:g} s")
    for span in args.spans:
        per_run = [_windows(r, span, args.warmup) for r in runs]
        windows = [w for ws in per_run for w in ws]
        if not windows:
            print(f"{span:g} s: no window fits after the warm-up")
            continue
        halves = sorted(w["half"] for w in windows)
        p90 = halves[min(len(halves) - 1, int(0.9 * len(halves)))]
        share = {v: sum(w["verdict"] == v for w in windows) / len(windows) for v in ("pass", "fail", "undecided")}
        print(
            f"{span:g} s: {len(windows)} windows of {sum(1 for ws in per_run if ws)} runs; the run's trend "
            f"inside the 95 % interval in "
            f"{sum(w['covers'] for w in windows) / len(windows):.0%}; half-width {median(halves):.2f} % of the "
            f"load (90th percentile {p90:.2f} %); alone: pass {share['pass']:.0%}, undecided "
            f"{share['undecided']:.0%}, fail {share['fail']:.0%}"
        )


def _passed_runs(root: Path) -> list[dict]:
    from streamscale.benchmark.results import FILE_NAME, read_results

    found = []
    for table in sorted(root.rglob(FILE_NAME)):
        for r in read_results(table.parent):
            lag = table.parent / "lag" / f"{r.exp_id}-batches.csv"
            if r.verdict != "pass" or not lag.exists():
                continue
            period = r.lag_period_s if math.isfinite(r.lag_period_s) else 0.0
            found.append({"load": r.load, "slope": r.lag_slope, "limit": r.lag_limit, "period": period, "lag": lag})
    return found


def _windows(run: dict, span: float, warmup: float) -> list[dict]:
    from streamscale.experiment.slo import fit_periodic

    with open(run["lag"], newline="") as f:
        points = [(float(r["t_s"]), float(r["lag_after_commit"])) for r in csv.DictReader(f)]
    points = [p for p in points if p[0] >= warmup]
    out = []
    start = warmup
    while points and start + span <= points[-1][0]:
        inside = [p for p in points if start <= p[0] < start + span]
        start += span
        trend = fit_periodic([t for t, _ in inside], [y for _, y in inside], run["period"], "batches")
        if not math.isfinite(trend.high - trend.low):
            continue
        out.append(
            {
                "covers": trend.low <= run["slope"] <= trend.high,
                "half": (trend.high - trend.low) / 2 / run["load"] * 100,
                "verdict": trend.verdict(run["limit"]),
            }
        )
    return out


if __name__ == "__main__":
    from _main import run

    run(main)
