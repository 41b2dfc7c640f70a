"""What a newcomer sees: the demo's steps print streamscale's own lines, never Spark's or Java's."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

EXE = str(Path(sys.executable).parent / "streamscale")


def test_demo_steps_print_no_traceback_error_or_java_frame(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "STREAMSCALE_STATE_DIR": str(tmp_path), "STREAMSCALE_BOOTSTRAP_SERVERS": "",
           "STREAMSCALE_SPARK_LOG": str(tmp_path / "spark.log"), "TMPDIR": str(tmp)}
    env.pop("STREAMSCALE_SPARK_LOG_LEVEL", None)
    r = subprocess.run([EXE, "demo", "--seconds", "4", "--no-execution", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    both = r.stdout + r.stderr
    assert "Traceback" not in both
    assert " ERROR " not in both and " WARN " not in both
    assert not re.search(r"^\s+at [a-z]+\.[\w.$]+\(", both, re.M)  # a Java stack frame
    assert "records/s processed" in r.stdout
    assert str(tmp_path / "spark.log") in r.stdout  # where Spark's own output went, said once
    assert "WARN" in (tmp_path / "spark.log").read_text()  # it did go there
    assert not list(tmp.glob("streamscale-*"))  # no checkpoint or other directory of ours left behind
