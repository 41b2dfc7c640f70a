"""A worker host killed 20 s into a run on a cluster of hosts of their own: the run is invalid naming
the host, the worker is started again, and the point runs once more on two executors (root only).

    .venv/bin/python benchmarks/hosts_fault.py [--out DIR]

Prints each run's verdict, executors and fault, and the execution's exit."""

from __future__ import annotations

import argparse
import csv
import os
import signal
import tempfile
import time
from pathlib import Path

SPEC = {
    "name": "hosts-fault",
    "benchmark": {
        "sut": str(Path(__file__).resolve().parents[1] / "examples" / "jobs" / "totals.py") + ":totals",
        "records": {
            "key": "user",
            "fields": {
                "user": {"type": "string", "gen": "zipf:1000,1.05"},
                "cents": {"type": "long", "gen": "uniform:1,10000"},
                "at": {"type": "timestamp", "gen": "now"},
            },
        },
        "topics": {"partitions": 4},
    },
    "cluster": {"workers": 2, "brokers": 3},
    "execution": {
        "load": {"type": "rate", "values": [2000]},
        "resources": {"type": "executors", "values": [2]},
        "executor_memory": "512m",
        "duration_s": 45,
        "warmup_s": 10,
        "max_duration_s": 45,
        "repetitions": 1,
        "strategy": {"name": "linear"},
        "metric": "demand",
    },
}


class KillAt20s:
    """The live page's hooks: kills worker-2's daemon 20 s into the first run."""

    def __init__(self, hosts_of):
        self.hosts_of, self.experiment, self.killed = hosts_of, {}, None

    def start_experiment(self, **info):
        self.experiment = info

    def add_sample(self, t_s, lag):
        if self.killed is None and self.experiment.get("repetition") == 0 and t_s >= 20:
            hosts = self.hosts_of()
            self.killed = hosts.role("worker")[1]
            os.kill(hosts.spark.worker_procs[2].pid, signal.SIGKILL)
            print(f"killed {self.killed.name} at {self.killed.ip} {t_s:.0f} s into the run", flush=True)

    def end_experiment(self, result):
        pass


def main() -> int:
    from streamscale.benchmark.execution import run_execution
    from streamscale.benchmark.spec import parse_spec
    from streamscale.hosts.cluster import HostsCluster

    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="hosts-fault-")))
    out = ap.parse_args().out
    started: list = []
    start = HostsCluster.start

    def spy(self):
        started.append(self)
        return start(self)

    HostsCluster.start = spy
    t0 = time.monotonic()
    run_execution(parse_spec(SPEC), out, live=KillAt20s(lambda: started[0]))
    for r in csv.DictReader(open(out / "experiments.csv")):
        print(f"{r['exp_id']}: {r['verdict']}, executors {r['executors']}, fault {r['fault'] or 'none'}")
    print(f"{time.monotonic() - t0:.0f} s in all; results in {out}")
    return 0


if __name__ == "__main__":
    from _main import run

    run(main)
