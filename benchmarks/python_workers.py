"""What Spark's Python processes cost a query, with and without streamscale's Spark home.

    .venv/bin/python benchmarks/python_workers.py [--repeat 3] [--queries 3]

Each run in a fresh process: an embedded broker, one ``local[2]`` session, then ``--queries``
short queries that read two records from Kafka and write them back (``warm_up_workers``, what a
run does before its clock starts), timed one by one. The first query starts the Python worker
daemons, planners and the source runner; each later one starts a source runner and workers of
its own. Also: the CPU seconds the machine spent over the run (busy time in /proc/stat; run it
on an otherwise idle machine).

Alternating: ``STREAMSCALE_SPARK_HOME`` unset (workers import the installed pyspark) and ``=0``
(pyspark's own home: workers import pyspark from Spark's zip). Python connector, and Spark's
connector for comparison. Median and min-max over ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

from _alternate import alternate

from streamscale.experiment.cpus import machine_ticks

RUN = """
import json, sys, time, uuid
from streamscale.broker import BrokerAccess, EmbeddedBroker
from streamscale.experiment.sut import warm_up_workers
from streamscale.sparkio.session import build_session
connector, queries = sys.argv[1], int(sys.argv[2])
with EmbeddedBroker() as b, BrokerAccess(b.bootstrap) as access:
    t = time.monotonic()
    spark = build_session("local[2]", python_source=False)
    out = {"session_s": time.monotonic() - t, "query_s": []}
    for _ in range(queries):
        t = time.monotonic()
        warm_up_workers(spark, access, b.bootstrap, uuid.uuid4().hex[:8], connector)
        out["query_s"].append(time.monotonic() - t)
    spark.stop()
print(json.dumps(out))
"""


def busy_s() -> float:
    return machine_ticks()[0] / os.sysconf("SC_CLK_TCK")


def measure(connector: str, queries: int, env: dict) -> dict:
    b0 = busy_s()
    out = subprocess.run(
        [sys.executable, "-c", RUN, connector, str(queries)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )
    if out.returncode != 0:
        sys.exit(f"a measurement failed: {out.stderr.strip().splitlines()[-1:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    q = got.pop("query_s")
    return {**got, "first_query_s": q[0], "later_query_s": statistics.median(q[1:]), "machine_cpu_s": busy_s() - b0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--queries", type=int, default=3, help="queries per session (at least 2)")
    args = ap.parse_args()
    if args.queries < 2 or args.repeat < 1:
        sys.exit("error: --queries must be at least 2 and --repeat at least 1")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.pop("SPARK_HOME", None)  # streamscale's own, or pyspark's (=0): not one set outside
    rows = []
    for connector in ("python", "spark"):
        variants = {"streamscale": {"STREAMSCALE_SPARK_HOME": "1"}, "pyspark": {"STREAMSCALE_SPARK_HOME": "0"}}
        runs = alternate(
            args.repeat, variants, lambda env, c=connector: measure(c, args.queries, env), f"{connector} connector"
        )
        rows.extend((connector, home, figures) for home, figures in runs)
    print(f"{'connector':<10} {'Spark home':<12} figures: median (min-max) over {args.repeat} runs, seconds")
    for connector, home, figures in rows:
        print(f"{connector:<10} {home:<12} " + ", ".join(f"{k} {v}" for k, v in figures.items()))


if __name__ == "__main__":
    from _main import run

    run(main)
