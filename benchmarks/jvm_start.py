"""JVM start costs with and without the class-data archives ``make install`` writes.

    .venv/bin/python benchmarks/jvm_start.py [--repeat 3]

Alternating runs, each in a fresh process:

* Spark: ``build_session("local[1]")`` and its first trivial job (``spark.range(10).count()``):
  seconds to the session, seconds of the job, and the driver JVM's CPU seconds by then;
* the embedded broker: seconds from ``start()`` to a broker answering (storage format included)
  and the broker JVM's CPU seconds by then.

Each with the archive (``STREAMSCALE_SPARK_CDS`` / ``STREAMSCALE_KAFKA_CDS`` unset) and without
(``=0``); median and min-max over ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from _alternate import alternate

# the measurements run in fresh processes, which import _procstat from this directory
HERE = os.path.dirname(os.path.abspath(__file__))

SPARK = """
import json, time
from _procstat import cpu_seconds
t = time.monotonic()
from streamscale.sparkio.session import build_session
spark = build_session("local[1]", python_source=False)
t1 = time.monotonic()
spark.range(10).count()
t2 = time.monotonic()
# spark-submit execs the driver's JVM: the same process
cpu = cpu_seconds(spark.sparkContext._gateway.proc.pid)
print(json.dumps({"session_s": t1 - t, "first_job_s": t2 - t1, "jvm_cpu_s": cpu}))
spark.stop()
"""

BROKER = """
import json
from _procstat import cpu_seconds
from streamscale.broker import EmbeddedBroker
with EmbeddedBroker() as b:
    print(json.dumps({"start_s": b.started_s, "jvm_cpu_s": cpu_seconds(b.proc.pid)}))
"""


def measure(code: str, env: dict) -> dict:
    path = os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p)
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env, "PYTHONPATH": path},
        timeout=300,
    )
    if out.returncode != 0:
        sys.exit(f"a measurement failed: {out.stderr.strip().splitlines()[-1:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    rows = []
    for what, code, var in (
        ("Spark session", SPARK, "STREAMSCALE_SPARK_CDS"),
        ("broker", BROKER, "STREAMSCALE_KAFKA_CDS"),
    ):
        variants = {"archive": {var: "1"}, "none": {var: "0"}}
        for mode, figures in alternate(args.repeat, variants, lambda env, code=code: measure(code, env), what):
            rows.append((what, mode, figures))
    print(f"{'JVM':<14} {'archive':<8} figures: median (min-max) over {args.repeat} runs, seconds")
    for what, mode, figures in rows:
        print(f"{what:<14} {mode:<8} " + ", ".join(f"{k} {v}" for k, v in figures.items()))


if __name__ == "__main__":
    from _main import run

    run(main)
