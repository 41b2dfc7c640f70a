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


def test_routing_other_libraries_logs_at_start_up_loads_none_of_them_either():
    # app() routes log records before any command runs: where they go is known without the session
    probe = (
        "import json, sys, streamscale.cli.main\n"
        "from streamscale.cli.app import route_logs\n"
        "route_logs()\n"
        f"print(json.dumps([m for m in {HEAVY + ['streamscale.sparkio.session']!r} if m in sys.modules]))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == []
