"""A normal stop of a command: SIGTERM to its whole process group, as `timeout` and service
managers send it, reaches the Spark JVM too; the command still ends as Ctrl-C ends it."""

import os
import signal
import subprocess
import sys
import time

import pytest

from tests.cli.helpers import EXE


@pytest.mark.spark
def test_sigterm_to_the_process_group_mid_run_ends_it_with_143_and_no_traceback(state, broker, tmp_path):
    env = {**os.environ, **state, "STREAMSCALE_METRICS_PORT": "-1", "STREAMSCALE_SPARK_LOG": str(tmp_path / "s.log")}
    p = subprocess.Popen(
        [EXE, "run-sut", "uc1", "-p", "sink=none", "-d", "120", "--partitions", "2", "-b", broker.bootstrap],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,  # a process group of its own: the command, its JVM, its workers
    )
    try:
        for line in p.stdout:  # the first micro-batch that read records: the query runs
            if line.lstrip().startswith("batch") and " 0 rows" not in line:
                break
        else:
            pytest.fail(f"run-sut ended before a batch: {p.stderr.read()[-2000:]}")
        os.killpg(p.pid, signal.SIGTERM)
        t0 = time.monotonic()
        out, err = p.communicate(timeout=120)
        took = time.monotonic() - t0
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()
    assert p.returncode == 128 + signal.SIGTERM, (out + err)[-3000:]
    assert "Traceback" not in out + err and "ERROR" not in err, (out + err)[-3000:]
    assert took < 60, took
    print(f"stopped in {took:.1f} s", file=sys.stderr)


def test_other_libraries_log_records_go_to_the_log_file_and_streamscales_warnings_to_stderr(tmp_path):
    # py4j logs through the root logger (logging.exception): without a handler there, its first
    # record gave the root logger one on stderr, "ERROR:root:..." and a traceback on the terminal
    log = tmp_path / "logs" / "spark.log"  # its folder made at the first record
    code = (
        "import logging\n"
        "from streamscale.cli.app import route_logs\n"
        "route_logs()\n"
        "try:\n"
        "    raise ConnectionResetError(104, 'Connection reset by peer')\n"
        "except OSError:\n"
        "    logging.exception('Exception while sending command.')\n"
        "logging.getLogger('py4j.clientserver').warning('a library warning')\n"
        "logging.getLogger('streamscale.pipelines.run').warning('late records of uc1 not counted')\n"
        "logging.getLogger('streamscale.pipelines.run').info('not shown')\n"
        "import warnings\n"
        "warnings.warn('Unable to cleanly shutdown Spark JVM process.', RuntimeWarning)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "STREAMSCALE_SPARK_LOG": str(log)},
        timeout=60,
    )
    assert (r.returncode, r.stdout, r.stderr) == (0, "", "late records of uc1 not counted\n")
    written = log.read_text()
    assert "ERROR Exception while sending command." in written and "ConnectionResetError" in written
    assert "py4j.clientserver WARNING a library warning" in written and "late records" not in written
    assert "py.warnings WARNING" in written and "Unable to cleanly shutdown" in written


@pytest.mark.parametrize(
    "raised, expected",
    [
        # a SIGTERM, then a clean-up step failing on the JVM the same SIGTERM ended
        ('SparkError("Spark\'s JVM exited (code 143)")', (143, "")),
        ("RuntimeError('py4j: SparkSession does not exist in the JVM')", (143, "")),
        (None, (4, "error: a query failed\n")),  # no stop: the error is the command's own
    ],
)
def test_an_error_raised_while_a_sigterm_ends_the_command_ends_it_as_the_sigterm_does(raised, expected):
    body = (
        f"    try:\n        raise SystemExit(143)\n    finally:\n        raise {raised}\n"
        if raised
        else "    raise SparkError('a query failed')\n"
    )
    r = _app_running(body)
    assert (r.returncode, r.stderr) == expected, r.stderr


@pytest.mark.parametrize(
    "body",
    [
        "    raise KeyboardInterrupt\n",
        # Ctrl-C, then a clean-up step failing on the JVM it ended
        "    try:\n        raise KeyboardInterrupt\n    finally:\n        raise SparkError('Spark JVM gone')\n",
    ],
)
def test_ctrl_c_ends_the_command_with_one_word_and_130_whatever_its_clean_up_raised(body):
    r = _app_running(body)
    assert (r.returncode, r.stderr) == (130, "interrupted\n"), r.stderr


def _app_running(body: str) -> subprocess.CompletedProcess:
    """The CLI's entry point run in a fresh interpreter with ``body`` as its command (SparkError
    in scope): its exit status and what it printed."""
    code = (
        "import streamscale.cli.app as cli\n"
        "from streamscale.errors import SparkError\n"
        f"def root():\n{body}"
        "cli.root = root\n"
        "cli.app()\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
