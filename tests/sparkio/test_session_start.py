"""A Ctrl-C while a Spark session starts leaves no JVM behind."""

import os
import select
import signal
import subprocess
import sys
import time

import pytest

from streamscale.processes import child_pids, command_line

pytestmark = pytest.mark.spark

BUILD = "from streamscale.sparkio.session import build_session; build_session('local[1]'); print('built', flush=True)"


def _jvm_child_of(pid: int, within_s: float) -> int | None:
    """The child of ``pid`` that pyspark launched as its JVM, once it exists (polled: no event
    says a grandchild started)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        found = [k for k in child_pids(pid) if command_line(k)[-1:] == ["pyspark-shell"]]
        if found:
            return found[0]
        time.sleep(0.01)
    return None


def _gone_within(pid: int, timeout_s: float) -> bool:
    """Whether process ``pid`` ends within ``timeout_s`` (waited for on its pidfd, not slept)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout_s)[0])
    finally:
        os.close(fd)


@pytest.mark.parametrize("log", ["file", "-"])  # the JVM's output to its log file, as a run's, or kept on stderr
def test_ctrl_c_while_the_jvm_starts_leaves_no_jvm(tmp_path, log):
    env = {**os.environ, "STREAMSCALE_SPARK_LOG": str(tmp_path / "spark.log") if log == "file" else "-"}
    out = tmp_path / "out.txt"  # files, not pipes: a JVM left behind would hold a pipe open
    with out.open("w") as f, (tmp_path / "err.txt").open("w") as err:
        proc = subprocess.Popen([sys.executable, "-c", BUILD], env=env, stdout=f, stderr=err, start_new_session=True)
    jvm = None
    try:
        jvm = _jvm_child_of(proc.pid, within_s=60)
        assert jvm is not None, "pyspark launched no JVM"
        os.killpg(proc.pid, signal.SIGINT)  # the terminal's Ctrl-C: the whole group (the JVM ignores it)
        proc.wait(60)
        assert "built" not in out.read_text()  # stopped while pyspark waited for its JVM, not after
        assert _gone_within(jvm, 30), f"the JVM {jvm} outlived the stopped session start"
    finally:
        for pid in (proc.pid, jvm):
            if pid:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        proc.wait(10)


def test_a_jvm_pyspark_took_is_stopped_and_forgotten_when_interrupted_before_a_context_ran_on_it(monkeypatch):
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    from streamscale.sparkio.session import build_session

    jvm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "pyspark-shell"])
    try:
        monkeypatch.setattr(SparkContext, "_gateway", type("Gateway", (), {"proc": jvm})())
        monkeypatch.setattr(SparkContext, "_jvm", object())
        monkeypatch.setattr(SparkContext, "_active_spark_context", None)

        def interrupted(self):
            raise KeyboardInterrupt

        monkeypatch.setattr(SparkSession.Builder, "getOrCreate", interrupted)
        with pytest.raises(KeyboardInterrupt):
            build_session("local[1]")
        assert jvm.poll() is not None  # stopped, not left to notice this process's end
        assert SparkContext._gateway is None and SparkContext._jvm is None  # the next session starts another
    finally:
        jvm.kill()
        jvm.wait()
