"""Every command starts by importing the console script's root with all its commands; what a
command needs beyond its options is imported when it runs, so that `--help`, a one-line error
or `broker stop` does not pay for the Kafka client and the spec's models."""

import json
import subprocess
import sys

HEAVY = ["confluent_kafka", "pandas", "pyspark", "matplotlib", "streamscale.benchmark.spec"]


def test_the_command_tree_loads_without_a_command_s_heavy_modules():
    probe = f"import json, sys, streamscale.cli.main; print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
