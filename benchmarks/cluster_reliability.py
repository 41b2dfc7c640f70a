"""Reliability on an embedded three-broker cluster: how long the cluster takes to start, and what
each producer setting loses across the faults of examples/reliability/cluster-faults.yaml (leader
and controller killed, rolling restart, leader isolated) and cluster-unclean.yaml (a stale
follower elected with and without unclean leader election).

    .venv/bin/python benchmarks/cluster_reliability.py [--starts 5] [--repetitions 3]
        [--messages 100000] [--out results/cluster-reliability] [--only faults|unclean]

Prints the start times (median and range), then per producer x fault: trials, records,
acknowledged loss (total and the most in one trial), unacknowledged loss, duplicates, the
producer's longest stretch without an acknowledgment and the time to recover (medians), and the
whole trial's time (median, max). Network namespaces (the isolated leader, the stale follower)
need root. Results per spec (trials.csv, summary.csv) under --out.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from streamscale.broker.cluster import EmbeddedCluster
from streamscale.reliability.campaign import run_spec
from streamscale.reliability.spec import load_spec

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "reliability"


def start_times(n: int, log_dir: Path) -> list[float]:
    times = []
    for _ in range(n):
        with EmbeddedCluster(3, log_dir=log_dir) as c:
            times.append(c.started_s)
    return times


def table(df) -> None:
    keys = ["semantics", "fault", "min_insync_replicas", "unclean_election"]
    print(
        f"  {'producer':<28} {'fault':<24} {'ISR':>3} {'uncl':>4} {'trials':>6} {'records':>9} "
        f"{'acked lost':>10} {'max':>7} {'unacked':>7} {'dup':>6} {'stall s':>7} {'recov s':>7} {'trial s':>13}"
    )
    for key, g in df.groupby(keys, sort=False):
        producer, fault, isr, unclean = key
        print(
            f"  {producer:<28} {fault:<24} {isr:>3} {'on' if unclean else 'off':>4} {len(g):>6} {g['N'].sum():>9,} "
            f"{g['acked_but_lost'].sum():>10,} {g['acked_but_lost'].max():>7,} {g['unacked_lost'].sum():>7,} "
            f"{g['duplicated'].sum():>6,} {g['stall_s'].median():>7.1f} {g['recovery_s'].median():>7.1f} "
            f"{g['trial_s'].median():>6.1f} ({g['trial_s'].max():.1f})",
            flush=True,
        )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--starts", type=int, default=5)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=Path("results/cluster-reliability"))
    ap.add_argument("--only", choices=["faults", "unclean"])
    args = ap.parse_args()
    if args.starts:
        with tempfile.TemporaryDirectory() as logs:
            times = start_times(args.starts, Path(logs))
        print(
            f"cluster start (3 nodes, ready with a group coordinator), {len(times)} starts: median "
            f"{statistics.median(times):.1f} s, {min(times):.1f}-{max(times):.1f} s",
            flush=True,
        )
    names = {"faults": "cluster-faults", "unclean": "cluster-unclean"}
    for key, name in names.items():
        if args.only and args.only != key:
            continue
        spec = load_spec(EXAMPLES / f"{name}.yaml").model_copy(
            update={"repetitions": args.repetitions, "messages": args.messages}
        )
        df = run_spec(spec, args.out / name, progress=lambda line: print("  " + line, flush=True))
        print(
            f"\n{name}: {spec.messages:,} records per trial at {spec.rate:,.0f}/s, replication factor "
            f"{spec.replication_factor()}"
        )
        table(df)


if __name__ == "__main__":
    from _main import run

    run(main)
